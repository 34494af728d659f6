"""Local-feature extraction: preprocessing (ALGORITHM.md section 1), device choice, batches.

Frames: a box is (x1, y1, x2, y2) in original-image pixels after EXIF orientation. The model sees
the image scaled by `scale` = min(1, max_side / longer side) (never upscaled); a crop keeps that
same scale, so a region has the size it has in the full image.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from ..imageio import clip_box, open_oriented
from .registry import Backbone

DEFAULT_MAX_SIDE = 1024


def select_device(preference: str = "auto") -> torch.device:
    """'auto' picks CUDA, then MPS, then CPU; 'cpu', 'cuda', 'cuda:1', 'mps' are taken as given."""
    if preference and preference != "auto":
        return torch.device(preference)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@dataclass
class Prepared:
    """One image ready for the CNN.

    tensor: (3, h, w) float32, normalised. scale: model pixels per original pixel.
    offset: (x0, y0) original pixel at the tensor's top-left (non-zero for crops).
    orig_size: (w, h) of the oriented original photo.
    """

    tensor: torch.Tensor
    scale: float
    offset: tuple[int, int]
    orig_size: tuple[int, int]


@dataclass
class FeatureMap:
    """Local features of one image. features: (H, W, C) float32 >= 0; geometry as in Prepared."""

    features: np.ndarray
    scale: float
    offset: tuple[int, int]
    orig_size: tuple[int, int]
    stride: int

    def cell_centres(self) -> tuple[np.ndarray, np.ndarray]:
        """(xs (W,), ys (H,)): centre of each cell's receptive field in original-image pixels."""
        h, w = self.features.shape[:2]
        xs = ((np.arange(w) + 0.5) * self.stride) / self.scale + self.offset[0]
        ys = ((np.arange(h) + 0.5) * self.stride) / self.scale + self.offset[1]
        return xs, ys

    def box_mask(self, box) -> np.ndarray:
        """(H, W) bool: the cells whose centres fall inside `box` (original pixels); never empty
        (a box smaller than a cell selects the cell nearest its centre)."""
        x1, y1, x2, y2 = box
        xs, ys = self.cell_centres()
        mask = ((xs >= x1) & (xs < x2))[None, :] & ((ys >= y1) & (ys < y2))[:, None]
        if not mask.any():
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            mask[np.abs(ys - cy).argmin(), np.abs(xs - cx).argmin()] = True
        return mask


def scale_for(orig_size: tuple[int, int], max_side: int) -> float:
    return min(1.0, max_side / max(orig_size))


def prepare(img: Image.Image, orig_size: tuple[int, int], max_side: int, mean, std,
            box=None) -> Prepared:
    """Resize (and crop `box`) an oriented RGB image for the model.

    `img` may be a reduced decode of the original (JPEG draft): its own size over `orig_size`
    gives the factor. The result has longer side round(max_side) for a full image (or its own size
    when smaller), and the crop keeps the full image's scale (ALGORITHM.md section 1).
    """
    s = scale_for(orig_size, max_side)
    r = img.size[0] / orig_size[0]  # decoded pixels per original pixel
    offset = (0, 0)
    if box is not None:
        x1, y1, x2, y2 = clip_box(box, orig_size)
        offset = (x1, y1)
        img = img.crop((round(x1 * r), round(y1 * r), max(round(x2 * r), round(x1 * r) + 1), max(round(y2 * r), round(y1 * r) + 1)))
        target = (max(1, round((x2 - x1) * s)), max(1, round((y2 - y1) * s)))
    else:
        target = (max(1, round(orig_size[0] * s)), max(1, round(orig_size[1] * s)))
    if img.size != target:
        img = img.resize(target, Image.BILINEAR, reducing_gap=3.0)
    arr = torch.from_numpy(np.asarray(img, dtype=np.uint8).copy()).permute(2, 0, 1).float().div_(255.0)
    m = torch.tensor(mean, dtype=torch.float32)[:, None, None]
    sd = torch.tensor(std, dtype=torch.float32)[:, None, None]
    return Prepared((arr - m) / sd, s, offset, tuple(orig_size))


def load_prepared(path: str | os.PathLike, max_side: int, mean, std, box=None) -> Prepared:
    """Decode a photo (JPEG draft-decoded when much larger than needed) and prepare it."""
    img, orig = open_oriented(path, draft_side=max_side)
    return prepare(img, orig, max_side, mean, std, box)


class Extractor:
    """Runs a backbone on prepared images: eval + inference mode, same-shape batches, fp16 on CUDA."""

    def __init__(self, backbone: Backbone, device: str = "auto", max_side: int = DEFAULT_MAX_SIDE,
                 half: bool | None = None):
        self.backbone = backbone
        self.device = select_device(device)
        self.max_side = int(max_side)
        self.half = (self.device.type == "cuda") if half is None else half
        self.max_batch = 16  # accelerators: one batch per same-shape group, at most this many
        self.module = backbone.module.to(self.device).eval()
        # HeW in float64 on the CPU (exact); float32 + Cholesky on accelerators (MPS has no float64).
        self.hew_dtype = torch.float64 if self.device.type == "cpu" else torch.float32

    @property
    def stride(self) -> int:
        return self.backbone.spec.stride

    def prepare_path(self, path, box=None) -> Prepared:
        return load_prepared(path, self.max_side, self.backbone.mean, self.backbone.std, box)

    def prepare_image(self, img: Image.Image, box=None) -> Prepared:
        return prepare(img, img.size, self.max_side, self.backbone.mean, self.backbone.std, box)

    @torch.inference_mode()
    def forward(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Feature maps (C, H, W), float32 on self.device, for a list of (3, h, w) inputs.

        Inputs of equal shape run as one batch (landscape and portrait photos form two groups)."""
        out: list[torch.Tensor | None] = [None] * len(tensors)
        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault(tuple(t.shape), []).append(i)
        # On the CPU one photo per call: measured with Lite2 at 1024x768 on 2 cores, a batch of 8
        # costs 1.6x the time per photo of single calls (cache-bound convolutions).
        step = 1 if self.device.type == "cpu" else self.max_batch
        for group in groups.values():
            for s in range(0, len(group), step):
                idx = group[s: s + step]
                x = torch.stack([tensors[i] for i in idx]).to(self.device, non_blocking=True)
                with torch.autocast(self.device.type, dtype=torch.float16, enabled=self.half):
                    y = self.module(x)
                y = y.float().clamp_min_(0)  # fp16 can leave -0.0 and tiny negatives
                for j, i in enumerate(idx):
                    out[i] = y[j]
        return out  # type: ignore[return-value]

    def feature_maps(self, prepared: list[Prepared]) -> list[FeatureMap]:
        maps = self.forward([p.tensor for p in prepared])
        return [FeatureMap(m.permute(1, 2, 0).cpu().numpy(), p.scale, p.offset, p.orig_size, self.stride)
                for m, p in zip(maps, prepared)]
