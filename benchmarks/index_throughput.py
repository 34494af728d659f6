"""Indexing throughput against the backbone's own forward throughput, in the same run.

    python benchmarks/index_throughput.py --folder ../shared/data/paris250/jpg --limit 120

(1) the whole pipeline (scan, decode pool, CNN, HeW, SQLite, hnswlib) through `index_library`;
(2) the same backbone on the same photos already decoded and resized (tensors in memory), same
batch size. Ratio (1)/(2) is what the pipeline costs beyond the CNN (target >= 0.85).
Also prints the catalog + index bytes per indexed image.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from app.core.config import Settings
from app.core.features.registry import DEFAULT_BACKBONE
from app.core.library import Library
from app.core.pipeline.indexer import index_library


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default=str(Path(__file__).resolve().parents[2] / "shared/data/paris250/jpg"))
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--backbone", default=DEFAULT_BACKBONE)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hs-throughput-"))
    src = tmp / "photos"
    src.mkdir()
    for p in sorted(Path(a.folder).glob("*.jpg"))[: a.limit]:
        shutil.copy(p, src / p.name)
    settings = Settings(backbone=a.backbone)
    lib = Library(tmp / "home", settings)
    lib.add_folder(src)
    ex = lib.extractor()
    # warm-up: one forward so both measurements start with a loaded, initialised model
    photos = sorted(src.glob("*.jpg"))
    ex.forward([ex.prepare_path(photos[0]).tensor])
    t = time.perf_counter()
    last = None
    for last in index_library(lib):
        pass
    pipeline = time.perf_counter() - t
    n = lib.status()["indexed"]
    tensors = [ex.prepare_path(p).tensor for p in photos]
    bs = settings.batch_size
    t = time.perf_counter()
    for s in range(0, len(tensors), bs):
        ex.forward(tensors[s: s + bs])
    cnn = time.perf_counter() - t
    lib.close()
    size = sum(f.stat().st_size for f in (tmp / "home").iterdir() if f.is_file())
    print(f"{n} photos ({a.folder}), {a.backbone} on {ex.device} with {torch.get_num_threads()} threads, batch {bs}:")
    print(f"  indexing pipeline {n / pipeline:.2f} photos/s ({pipeline:.1f} s, phase {last.phase}); "
          f"CNN forward alone on pre-decoded tensors {len(tensors) / cnn:.2f} photos/s ({cnn:.1f} s)")
    print(f"  ratio pipeline / CNN = {(n / pipeline) / (len(tensors) / cnn):.2f}")
    print(f"  catalog + index on disk: {size / n:.0f} bytes per indexed photo ({size / 2**20:.1f} MiB for {n})")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
