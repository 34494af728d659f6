"""int8 post-training quantisation of a backbone with OpenVINO's own tool (NNCF) for
benchmarks/policies.py --exp int8: one model calibrated on a fixed sample of the shared photos,
used for every library of the table. The app's own (app/core/features/quantise.py) tunes each
library's model on that library's first photos, in a child process.

    Int8Engine(calibration_paths, size)   # quantise EfficientNet-Lite2 on those photos, run it
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.config import models_dir  # noqa: E402
from app.core.features.engine import Engine  # noqa: E402
from app.core.features.registry import DEFAULT_BACKBONE, load_backbone  # noqa: E402


class Int8Engine(Engine):
    """EfficientNet's OpenVINO model quantised to int8 by NNCF (post-training, calibrated on
    `calibration` photos: ones the library holds), run like the app's OpenVINO engine."""

    name, precision = "openvino", "int8"

    def __init__(self, calibration: list[str], size: int, backbone: str = DEFAULT_BACKBONE, out: Path | None = None):
        import nncf
        import openvino as ov

        from app.core.features.engine import openvino_model, threads
        from app.core.features.preprocess import load_prepared

        bb = load_backbone(backbone)
        core = ov.Core()
        xml = out / f"{bb.name}-int8-{len(calibration)}.xml" if out else None
        if xml is not None and xml.exists():
            model = core.read_model(str(xml))
        else:
            model = core.read_model(str(openvino_model(bb, models_dir(), log=lambda m: None)))
            arrays = [load_prepared(p, size, bb.mean, bb.std).array[None] for p in calibration]
            model = nncf.quantize(model, nncf.Dataset(arrays), subset_size=len(arrays), fast_bias_correction=True)
            if xml is not None:
                xml.parent.mkdir(parents=True, exist_ok=True)
                ov.save_model(model, str(xml))
        self.compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": str(threads()),
                                                          "PERFORMANCE_HINT": "LATENCY"})  # as the app's QuantisedEngine
        self.request = self.compiled.create_infer_request()

    def run(self, x: np.ndarray) -> np.ndarray:
        y = np.array(self.request.infer({0: np.ascontiguousarray(x, np.float32)})[0], dtype=np.float32, copy=True)
        return np.maximum(y, 0, out=y)
