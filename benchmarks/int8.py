"""int8 post-training quantisation of a backbone with OpenVINO's own tool (NNCF) for
benchmarks/policies.py --exp int8: one model calibrated on a fixed sample of the shared photos,
used for every library of the table. The app's own (app/core/features/quantise.py) tunes each
library's model on that library's first photos, in a child process.

    Int8Engine(calibration_paths, size)   # quantise EfficientNet-Lite2 on those photos, run it

Run alone, it quantises the model on shared photos and compares it with the exact engine on
others (the cosine of each photo's feature map, and the CNN's speed):

    python benchmarks/int8.py [--calibration 60] [--photos 60] [--backbone efficientnet-lite0]
    python benchmarks/int8.py --smoke      # a check that it runs: 4 calibration photos, 4 compared
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"

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


def main() -> None:
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.engine import EngineChoice
    from app.core.features.extractor import Extractor

    ap = argparse.ArgumentParser()
    ap.add_argument("--calibration", type=int, default=60, help="photos the model is calibrated on")
    ap.add_argument("--photos", type=int, default=60, help="other photos the two engines are compared on")
    ap.add_argument("--backbone", default=DEFAULT_BACKBONE)
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "--calibration 4 --photos 4")
    a = ap.parse_args()
    if a.smoke:
        a.calibration = a.photos = 4
    files = sorted((SHARED / "ukbench").glob("*.jpg")) + sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
    rng = np.random.default_rng(0)
    picked = [files[i] for i in rng.choice(len(files), a.calibration + a.photos, replace=False)]
    calibration, photos = [str(p) for p in picked[: a.calibration]], picked[a.calibration:]
    size = DEFAULT_MAX_SIDE
    t = time.perf_counter()
    q = Int8Engine(calibration, size, a.backbone)
    made = time.perf_counter() - t
    exact = Extractor.create(load_backbone(a.backbone), EngineChoice("openvino"), size, models_dir(), log=lambda m: None)
    arrays = [exact.prepare_path(p).array for p in photos]
    cos, times = [], {"exact": 0.0, "int8": 0.0}
    for x in arrays:
        t = time.perf_counter()
        fx = exact.engine.run(x[None])[0].ravel()
        times["exact"] += time.perf_counter() - t
        t = time.perf_counter()
        fq = q.run(x[None])[0].ravel()
        times["int8"] += time.perf_counter() - t
        cos.append(float(fx @ fq / max(np.linalg.norm(fx) * np.linalg.norm(fq), 1e-12)))
    rate = {k: len(arrays) / v for k, v in times.items()}
    print(f"{a.backbone} at {size} px quantised to int8 on {a.calibration} photos in {made:.0f} s; on {len(arrays)} others, "
          f"feature maps' cosine to exact: mean {np.mean(cos):.4f}, lowest {np.min(cos):.4f}; CNN alone: exact "
          f"{rate['exact']:.1f} photos/s, int8 {rate['int8']:.1f} photos/s ({rate['int8'] / rate['exact']:.2f}x)")


if __name__ == "__main__":
    main()
