"""Time per photo of each network the app offers, on OpenVINO (the CPU path users run), at the
default 512 px; the registry's `cost` (re-index estimates) is each time over the default's, and its
`setup` the seconds a first use takes to export and compile the model (re-index estimates where the
model was never set up here).
VGG16 and ResNet50 run with random weights: their time does not depend on the weights.

    python benchmarks/backbone_speed.py
    python benchmarks/backbone_speed.py --smoke     # a check that it runs: the default and ResNet50 (a
                                                    # weights file), 2 timed passes each
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image

from app.core.features.engine import EngineChoice, create_engine
from app.core.features.extractor import Extractor
from app.core.features.registry import DEFAULT_BACKBONE, load_backbone


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): the "
                                                           "default and ResNet50 (a weights file), 2 timed passes each")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(Path(tmp), smoke=a.smoke)


def measure(d: Path, smoke: bool = False) -> None:
    resnet = torchvision.models.resnet50()
    resnet(torch.randn(2, 3, 64, 64))  # a training step's statistics: an untrained file is refused (speed is the same)
    torch.save(resnet.state_dict(), d / "resnet50.pth")
    networks = [(DEFAULT_BACKBONE, None), ("resnet50", d / "resnet50.pth")]
    if not smoke:
        torch.save(torchvision.models.vgg16().state_dict(), d / "vgg16.pth")
        networks[1:1] = [("efficientnet-lite0", None)]
        networks += [("vgg16", d / "vgg16.pth")]
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (480, 640, 3), np.uint8)).save(d / "p.jpg")
    ms = {}
    passes = 2 if smoke else 10
    for name, weights in networks:
        bb = load_backbone(name, str(weights) if weights else None)
        t = time.perf_counter()  # a fresh models folder: exported and compiled, as on a first use
        ex = Extractor(bb, create_engine(bb, EngineChoice("openvino", "cpu"), d, log=lambda m: None), 512)
        setup = time.perf_counter() - t
        photo = ex.prepare_path(d / "p.jpg")
        for _ in range(1 if smoke else 2):
            ex.feature_maps([photo])
        t = time.perf_counter()
        for _ in range(passes):
            ex.feature_maps([photo])
        ms[name] = (time.perf_counter() - t) / passes * 1000
        print(f"{name:20s} {ms[name]:6.0f} ms/photo   cost {ms[name] / ms[DEFAULT_BACKBONE]:.2f} "
              f"(registry: {bb.spec.cost})   set-up {setup:4.0f} s (registry: {bb.spec.setup})", flush=True)


if __name__ == "__main__":
    main()
