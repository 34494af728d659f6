"""Indexing real photos on a local Ray cluster against one process, in the same run: photos/s of
the whole run (scan, the mean's sample, CNN, HeW, commits) with 1 and 2 Ray workers and without
Ray, and Ray's start-up time. The default model (EfficientNet-Lite2, 512 px, the fastest exact CPU
engine), a fresh library each time.

    python benchmarks/ray_throughput.py --limit 240          # UKBench + Paris photos from ../shared
    python benchmarks/ray_throughput.py --folder ~/Pictures --limit 500 --url postgresql://...
    python benchmarks/ray_throughput.py --smoke --address HOST:PORT    # a check that it runs: 6 photos
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def photos(a) -> Path:
    """A folder of `limit` real photos (links to the shared ones, or the given folder's)."""
    src = [Path(a.folder)] if a.folder else [SHARED / "ukbench", SHARED / "paris250" / "jpg"]
    files = [p for d in src for p in sorted(d.rglob("*.jpg"))]
    step = max(1, len(files) // a.limit)
    out = Path(tempfile.mkdtemp(prefix="hs-ray-photos-"))
    for p in files[::step][: a.limit]:
        (out / p.name).symlink_to(p)
    return out


def run(folder: Path, ray: str | None, workers: int | None, url: str | None) -> tuple[float, float, int]:
    """(seconds for the whole run, Ray's start-up seconds, photos indexed). A PostgreSQL library
    (`url`) is left without the photos again, for the next run."""
    from app.core.config import Settings
    from app.core.library.service import LibraryService

    home = Path(tempfile.mkdtemp(prefix="hs-ray-home-"))
    settings = Settings()
    settings.save(home)
    svc = LibraryService(home, settings, library=url)
    svc.wait_ready(600)
    startup = []
    svc.subscribe(lambda ev: ev.kind == "log" and "connected in" in str(ev.data)
                  and startup.append(float(str(ev.data).split("connected in ")[1].split()[0])))
    svc.run(svc.index(), timeout=600)  # a new library's space is made by its first (here empty) indexing run
    svc.extractor(svc.writer.target.row.info)  # the model exported and loaded outside the timing (workers load their own)
    t = time.time()
    prog = svc.run(svc.index([folder], ray=ray, workers=workers), timeout=7200)
    wall = time.time() - t
    n = svc.stats()["indexed"]
    if url:
        svc.run(svc.forget(folder), timeout=600)
    svc.close()
    shutil.rmtree(home, ignore_errors=True)
    assert prog.phase == "done", prog
    return wall, (startup[-1] if startup else 0.0), n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=240)
    ap.add_argument("--folder")
    ap.add_argument("--url", help="a PostgreSQL library (default: SQLite in a temp folder)")
    ap.add_argument("--address", default="auto", help="the Ray cluster (default: a running one, else one started here)")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): --limit 6")
    a = ap.parse_args()
    if a.smoke:
        a.limit = 6
    folder = photos(a)
    rows = []
    for label, ray, workers in (("one process (no Ray)", None, None), ("Ray, 1 worker", a.address, 1),
                                ("Ray, 2 workers", a.address, 2)):
        wall, startup, n = run(folder, ray, workers, a.url)
        rows.append((label, n / wall, wall, startup))
        print(f"{label}: {n} photos in {wall:.1f} s = {n / wall:.2f} photos/s"
              + (f" (Ray start-up {startup:.1f} s of it)" if ray else ""), flush=True)
    base = rows[0][1]
    for label, rate, _, _ in rows[1:]:
        print(f"  {label}: {rate / base:.2f}x one process", flush=True)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
