"""The GUI never waits on long work: event-loop stalls with a 20,000-photo library through indexing,
a whitening refit, forgetting half the library and a settings change; and drop-to-results time.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_stall.py [--synthetic 20000] [--real 60]
    QT_QPA_PLATFORM=offscreen python benchmarks/gui_stall.py --smoke    # a check that it runs: 300 and 3

The synthetic photos are catalog rows with random descriptors (no CNN; empty files on disk so the
scan finds them unchanged); `--real` photos from the shared Paris set are indexed for real with
the default model while the window is open. The stall is the longest gap between 10 ms timer
ticks on the GUI thread (over 100 ms is visible to a user).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


class StallMonitor:
    """The longest gap between 10 ms timer ticks: the GUI thread's worst stall."""

    def __init__(self, parent):
        from PySide6.QtCore import QElapsedTimer, QTimer

        self.timer = QTimer(parent)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.clock = QElapsedTimer()
        self.gaps: list[float] = []

    def start(self):
        self.gaps = []
        self.clock.start()
        self.timer.start()

    def stop(self):
        self.timer.stop()

    def _tick(self):
        self.gaps.append(float(self.clock.restart()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=20_000)
    ap.add_argument("--real", type=int, default=60)
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "--synthetic 300 --real 3")
    a = ap.parse_args()
    if a.smoke:
        a.synthetic, a.real = 300, 3
    from PySide6.QtCore import QEventLoop, QMimeData, QPointF, Qt, QTimer, QUrl
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QApplication

    from app.core.catalog.records import Record
    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.gui.main_window import MainWindow

    tmp = Path(tempfile.mkdtemp(prefix="hs-stall-"))
    home = tmp / "home"
    settings = Settings()
    settings.save(home)
    svc = LibraryService(home, settings)
    svc.wait_ready()
    svc.run(svc.index())  # a new library's space is made by its first (here empty) indexing run
    # the synthetic part of the library: two folders of empty files, rows with random descriptors,
    # committed through the library's own writer (as indexing would)
    rng = np.random.default_rng(0)
    c = svc.writer.space.info.channels
    t = time.time()
    for half in ("synthetic-a", "synthetic-b"):
        d = tmp / half
        d.mkdir()
        names = [d / f"{i:06d}.jpg" for i in range(a.synthetic // 2)]
        for p in names:
            p.touch()

        def fill(cmd, names=names, d=d):
            fid = svc.writer.add_folder(d).id
            recs = []
            for p in names:
                raw = rng.random(c, dtype=np.float32)
                recs.append(Record(str(p), fid, 0, p.stat().st_mtime_ns, f"{rng.integers(1 << 62):x}", width=4000,
                                   height=3000, raw=raw / np.linalg.norm(raw), grid=np.ones((12, 16), np.float16)))
            for i in range(0, len(recs), 1000):
                svc.writer.commit_batch(recs[i: i + 1000], {}, set())

        svc.run(svc.submit("synthetic", fill, writes=True))
    if svc.writer.mu is None:
        svc.run(svc.submit("mu", lambda cmd: svc.writer.set_mu(np.full(c, 0.5), 0), writes=True))
    svc.run(svc.rebuild())
    svc.run(svc.submit("stats", lambda cmd: svc._publish_stats()))
    print(f"synthetic library of {svc.stats()['indexed']} photos made in {time.time() - t:.0f} s")
    real = tmp / "real"
    real.mkdir()
    for p in sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[: a.real]:
        shutil.copy(p, real / p.name)
    query = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[-1]

    app = QApplication(sys.argv[:1])  # noqa: F841 - must exist for the window
    win = MainWindow(svc)
    win.stall = StallMonitor(win)
    win.resize(1366, 768)
    win.show()

    def wait(signal, ms=1_800_000):
        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    def idle():
        while svc.running is not None or not svc._queue.empty() or win.indexing.index_cmd is not None:
            loop = QEventLoop()
            QTimer.singleShot(50, loop.quit)
            loop.exec()

    def report(label):
        gaps = np.array(win.stall.gaps[3:] if len(win.stall.gaps) > 3 else win.stall.gaps, dtype=float)
        if not len(gaps):  # a small library's step can be over before the first tick
            print(f"{label}: over before the first 10 ms tick", flush=True)
            return
        print(f"{label}: longest GUI stall {gaps.max():.0f} ms; gap p50 {np.percentile(gaps, 50):.0f} ms, "
              f"p99 {np.percentile(gaps, 99):.0f} ms; {int((gaps > 100).sum())} of {len(gaps)} gaps over 100 ms", flush=True)

    idle()
    win.stall.start()
    t = time.time()
    win.add_folder(str(real))
    wait(win.indexingFinished)
    idle()
    report(f"indexing {a.real} real photos beside {a.synthetic:,} ({time.time() - t:.0f} s)")
    win.stall.start()
    t = time.time()
    svc.refit(force=True)
    idle()
    report(f"whitening refit at {svc.stats()['indexed']:,} photos (D = {svc.snapshot().whitening.dim}, {time.time() - t:.0f} s)")
    for label in ("drop of a new photo (CNN on the CPU)", "the same photo again (cached map)"):
        md = QMimeData()
        md.setUrls([QUrl.fromLocalFile(str(query))])
        ev = QDropEvent(QPointF(50, 50), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
        t = time.perf_counter()
        win.query_view.dropEvent(ev)
        wait(win.searchFinished, 60_000)
        print(f"drop to results, {label}: {1000 * (time.perf_counter() - t):.0f} ms ({win.results_model.rowCount()} results)")
    win.stall.start()
    t = time.time()
    win.lib.remove_folder(str(tmp / "synthetic-a"))
    idle()
    report(f"forgetting {a.synthetic // 2:,} photos ({time.time() - t:.0f} s)")
    win.stall.start()
    t = time.time()
    from dataclasses import replace

    win.apply_settings(replace(svc.settings, dim=256), confirm=False)
    idle()
    report(f"a settings change (D = 256: refit) ({time.time() - t:.0f} s)")
    win.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
