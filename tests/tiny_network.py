"""The tests' network: "tiny-random", three random convolutions (stride 8, 32 channels) whose
features mean nothing but are made in milliseconds, the same on every machine (seed 0). Most
service, CLI and window tests index and search with it.

It is not part of the product: tests/conftest.py names this file in $HEATSEARCH_BACKBONES, which
the registry (app/core/features/registry.py) imports when it is imported, in the test process and
in every process the tests start (the CLI, the model export's child)."""
from __future__ import annotations

import os
from pathlib import Path

from app.core.features.registry import BackboneSpec, register


def _build(_path: Path):
    import torch  # only when the network is built: the default engines run its ONNX export
    from torch import nn

    g = torch.Generator().manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU()
    )
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return net.eval()


register(BackboneSpec("tiny-random", 32, 8, "tiny random-init CNN (tests only; meaningless features)",
                      lambda _f: Path(os.devnull), _build, offline=True, label="Tiny test network (meaningless)",
                      cost=0.05, setup=1.0, fixed_digest="seed0", listed=False))
