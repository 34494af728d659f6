"""Resident memory of the library service through switches of model: newcomer trial 23 read 1.9 GB
after Balanced -> Fastest -> Balanced -> ResNet50 (a weights file it named) in the window.

    python benchmarks/switch_memory.py [--photos 40]
    python benchmarks/switch_memory.py --smoke      # a check that it runs: 4 photos, Lite2 -> Lite0 -> Lite2

A fresh library of UKBench photos is indexed with each model in turn, and a photo it does not hold
is searched after each (the model runs for it); VmRSS after each step. The ResNet50 file is made in
a child process (torchvision's network after one training step: an untrained one is refused), so
that PyTorch is not in this process unless the app put it there.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=40)
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): --photos 4, "
                                                           "no ResNet50 (its export alone takes 20 s)")
    a = ap.parse_args()
    if a.smoke:
        a.photos = 4
    from app.core.catalog.records import Filters
    from app.core.config import PRESETS, Settings
    from app.core.library.service import LibraryService
    from app.core.pipeline.search import SearchRequest, Searcher

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        photos = d / "photos"
        photos.mkdir()
        for p in sorted((SHARED / "ukbench").glob("*.jpg"))[: a.photos]:
            (photos / p.name).symlink_to(p)
        queries = iter(sorted((SHARED / "ukbench").glob("*.jpg"))[a.photos:])
        weights = d / "resnet50.pth"
        if not a.smoke:
            subprocess.run([sys.executable, "-c", "import sys, torch, torchvision; n = torchvision.models.resnet50(); "
                            "n(torch.randn(2, 3, 64, 64)); torch.save(n.state_dict(), sys.argv[1])", str(weights)], check=True)
        print(f"start: {rss_mb():.0f} MB resident")
        svc = LibraryService(d / "home", Settings())
        svc.wait_ready()
        searcher = Searcher(svc)

        def preset(name):
            return {k: v for k, v in PRESETS[name].items() if k != "help"}

        steps = [("Balanced (Lite2)", None), ("Fastest (Lite0)", replace(svc.settings, **preset("speed"), preset="speed")),
                 ("Balanced again", replace(svc.settings, **preset("balanced"), preset="balanced")),
                 ("ResNet50 (a named file)", replace(svc.settings, backbone="resnet50", weights=str(weights), preset="custom")),
                 ("Balanced again", replace(svc.settings, **preset("balanced"), preset="balanced"))]
        if a.smoke:
            steps = steps[:3]
        for name, settings in steps:
            t = time.perf_counter()
            if settings is not None:
                svc.run(svc.apply_settings(settings), timeout=900)
            svc.run(svc.index([photos]), timeout=900)
            searcher.search(SearchRequest(path=str(next(queries)), top=20, filters=Filters()))
            print(f"{name:26s} {rss_mb():6.0f} MB resident, PyTorch loaded: {'torch' in sys.modules}, "
                  f"{time.perf_counter() - t:.0f} s", flush=True)
        svc.close()


if __name__ == "__main__":
    main()
