"""Time per photo of each network the app offers, on OpenVINO (the CPU path users run), at the
default 512 px; the registry's `cost` (re-index estimates) is each time over the default's, and its
`setup` the seconds a first use takes to export and compile the model (re-index estimates where the
model was never set up here).
VGG16 and ResNet50 run with random weights: their time does not depend on the weights.

    python benchmarks/backbone_speed.py
"""
from __future__ import annotations

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
    with tempfile.TemporaryDirectory() as tmp:
        measure(Path(tmp))


def measure(d: Path) -> None:
    resnet = torchvision.models.resnet50()
    resnet(torch.randn(2, 3, 64, 64))  # a training step's statistics: an untrained file is refused (speed is the same)
    torch.save(resnet.state_dict(), d / "resnet50.pth")
    torch.save(torchvision.models.vgg16().state_dict(), d / "vgg16.pth")
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (480, 640, 3), np.uint8)).save(d / "p.jpg")
    ms = {}
    for name, weights in [(DEFAULT_BACKBONE, None), ("efficientnet-lite0", None),
                          ("resnet50", d / "resnet50.pth"), ("vgg16", d / "vgg16.pth")]:
        bb = load_backbone(name, str(weights) if weights else None)
        t = time.perf_counter()  # a fresh models folder: exported and compiled, as on a first use
        ex = Extractor(bb, create_engine(bb, EngineChoice("openvino", "cpu"), d, log=lambda m: None), 512)
        setup = time.perf_counter() - t
        photo = ex.prepare_path(d / "p.jpg")
        for _ in range(2):
            ex.feature_maps([photo])
        t = time.perf_counter()
        for _ in range(10):
            ex.feature_maps([photo])
        ms[name] = (time.perf_counter() - t) / 10 * 1000
        print(f"{name:20s} {ms[name]:6.0f} ms/photo   cost {ms[name] / ms[DEFAULT_BACKBONE]:.2f} "
              f"(registry: {bb.spec.cost})   set-up {setup:4.0f} s (registry: {bb.spec.setup})", flush=True)


if __name__ == "__main__":
    main()
