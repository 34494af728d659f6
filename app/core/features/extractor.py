"""Local-feature extraction: preprocessing (numpy) and an inference engine, in same-shape groups.

Frames: see preprocess.py. The engine decides where the CNN runs (engine.py); this module needs
no PyTorch unless the engine is PyTorch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from .engine import Engine, EngineChoice, create_engine
from .preprocess import FeatureMap, Prepared, load_prepared, prepare
from .registry import Backbone

DEFAULT_MAX_SIDE = 1024


class Extractor:
    """A backbone, the engine that runs it, and the input size: images -> FeatureMaps.
    box_side: a box's crop sees the photo's own pixels until its longer side reaches box_side
    (preprocess.crop_scale; 0: the crop keeps the whole photo's scale)."""

    def __init__(self, backbone: Backbone, engine: Engine, max_side: int = DEFAULT_MAX_SIDE, box_side: int = 0):
        self.backbone = backbone
        self.engine = engine
        self.max_side = int(max_side)
        self.box_side = int(box_side)

    @classmethod
    def create(cls, backbone: Backbone, choice: EngineChoice, max_side: int, models_dir: Path,
               log: Callable[[str], None] = print, quantised: bytes | None = None, box_side: int = 0) -> "Extractor":
        """models_dir: exported models and engine caches (config.models_dir); quantised: a
        library's int8 model (features/quantise.py), which then runs the backbone."""
        return cls(backbone, create_engine(backbone, choice, models_dir, log, quantised), max_side, box_side)

    @property
    def stride(self) -> int:
        return self.backbone.spec.stride

    @property
    def channels(self) -> int:
        return self.backbone.spec.channels

    def prepare_path(self, path, box=None) -> Prepared:
        return load_prepared(path, self.max_side, self.backbone.mean, self.backbone.std, box, self.box_side)

    def prepare_image(self, img: Image.Image, box=None) -> Prepared:
        return prepare(img, img.size, self.max_side, self.backbone.mean, self.backbone.std, box, self.box_side)

    def forward(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Feature maps (C, h, w) float32 >= 0 for a list of (3, h, w) inputs, in input order.

        Inputs of equal shape run together, at most `engine.max_batch` per call (1 on the CPU)."""
        out: list[np.ndarray | None] = [None] * len(arrays)
        groups: dict[tuple, list[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(tuple(a.shape), []).append(i)
        step = max(1, self.engine.max_batch)
        for group in groups.values():
            for s in range(0, len(group), step):
                idx = group[s: s + step]
                y = self.engine.run(np.stack([arrays[i] for i in idx]))
                for j, i in enumerate(idx):
                    out[i] = y[j]
        return out  # type: ignore[return-value]

    def feature_maps(self, prepared: list[Prepared]) -> list[FeatureMap]:
        maps = self.forward([p.array for p in prepared])
        return [FeatureMap(np.ascontiguousarray(m.transpose(1, 2, 0)), p.scale, p.offset, p.orig_size, self.stride)
                for m, p in zip(maps, prepared)]
