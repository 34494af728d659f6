"""Resident memory of the desktop app while it indexes a fresh library and shows a search: the
first release reached 2.8 GB indexing 120 photos.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_memory.py [--photos 120]
    QT_QPA_PLATFORM=offscreen python benchmarks/gui_memory.py --smoke   # a check that it runs: 6 photos,
                                                                        # 3 steps in the viewer, 2 more searches

A window on an empty data folder; the Paris photos (1024 px) are added as a folder and indexed with
the default model and engine; then one photo is searched and the grid's thumbnails load; the
viewer opens on the first result, steps through 40 with the Right key, zooms in as far as it goes
with the overlay on, and closes; 10 more photos are searched; last a 24 MP photo (a Paris photo
enlarged, added to the folder) is searched and shown at actual size, read whole. VmRSS is sampled every 50 ms on the GUI thread; the peak (VmHWM) is the kernel's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def status_mb(field: str) -> float:
    """A VmRSS/VmHWM line of /proc/self/status, in MB."""
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=int, default=120)
    ap.add_argument("--steps", type=int, default=40, help="photos stepped through in the viewer")
    ap.add_argument("--distractors", type=int, default=0,
                    help="also this many of the shared distractor photos, and --ukbench N of UKBench's (a library of "
                         "thousands: --photos 250 --distractors 1853 --ukbench 600 is 2,703 photos)")
    ap.add_argument("--ukbench", type=int, default=0)
    ap.add_argument("--searches", type=int, default=10, help="searches after the viewer closes")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "--photos 6 --steps 3 --searches 2, a quarter of the waits")
    a = ap.parse_args()
    if a.smoke:
        a.photos, a.steps, a.searches = 6, 3, 2
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.gui.main_window import MainWindow

    tmp = Path(tempfile.mkdtemp(prefix="hs-mem-"))
    photos = tmp / "Photos"
    photos.mkdir()
    for p in sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[: a.photos]:
        shutil.copy(p, photos / p.name)
    for name, n, pattern in (("distractors", a.distractors, "**/*.jpg"), ("ukbench", a.ukbench, "*.jpg")):
        if n:
            (photos / name).mkdir()
            for i, p in enumerate(sorted((SHARED / name).glob(pattern))[:n]):
                shutil.copy(p, photos / name / f"{i:05d}-{p.name}")
    app = QApplication(sys.argv[:1])  # noqa: F841 - must exist for the window
    home = tmp / "home"
    Settings().save(home)
    svc = LibraryService(home, Settings())
    svc.wait_ready()
    win = MainWindow(svc)
    win.resize(1366, 768)
    win.show()
    samples = []
    tick = QTimer()
    tick.timeout.connect(lambda: samples.append(status_mb("VmRSS")))
    tick.start(50)

    def wait(signal, ms=1_800_000):
        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    def settle(ms, scaled=True):  # --smoke waits a quarter as long for things to settle
        loop = QEventLoop()
        QTimer.singleShot(int(ms * (0.25 if a.smoke and scaled else 1)), loop.quit)
        loop.exec()

    settle(500)
    print(f"window shown, empty library: {status_mb('VmRSS'):.0f} MB", flush=True)
    t = time.time()
    win.add_folder(str(photos))
    wait(win.indexingFinished)
    during = max(samples)
    print(f"indexing {svc.stats()['indexed']} photos ({time.time() - t:.0f} s, {svc.extractor().engine.label}): "
          f"resident at most {during:.0f} MB (sampled), {status_mb('VmRSS'):.0f} MB after", flush=True)
    wait_search = win.searchFinished
    win.set_query_path(str(sorted(photos.glob("*.jpg"))[0]))
    wait(wait_search, 60_000)
    settle(3000)  # the grid's thumbnails load
    print(f"after a search with {win.results_model.rowCount()} results and their thumbnails: "
          f"{status_mb('VmRSS'):.0f} MB; thumbnail cache {win.loader.cached_bytes / 2**20:.0f} MB; "
          f"peak of the process (VmHWM) {status_mb('VmHWM'):.0f} MB", flush=True)
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    win.results_view.setFocus()
    win.results_view.setCurrentIndex(win.results_model.index(0))
    QTest.keyClick(win.results_view, Qt.Key_Return)
    settle(1000)
    for _ in range(a.steps):
        QTest.keyClick(win._viewer, Qt.Key_Right)
        settle(300)
    stepped = status_mb("VmRSS")
    # zoomed in as far as it goes (+ 20 times), the heat overlay on: the photo is drawn part by part
    # (it was held zoomed whole: 8x of a 1024 px photo is 200 MB, of a 12 MP one 3.2 GB)
    QTest.keyClick(win._viewer, Qt.Key_H)
    del samples[:]
    for _ in range(20):
        QTest.keyClick(win._viewer, Qt.Key_Plus)
        settle(100)
    settle(500)
    zoom = win._viewer.zoom
    zoomed = max(samples + [status_mb("VmRSS")])
    win._viewer.close()
    settle(500)
    print(f"the viewer after {a.steps} photos: {stepped:.0f} MB; zoomed in to {zoom:.0%} with the overlay: "
          f"{zoomed:.0f} MB at most (sampled); closed: {status_mb('VmRSS'):.0f} MB", flush=True)
    for q in sorted(photos.glob("*.jpg"))[1: 1 + a.searches]:
        win.set_query_path(str(q))
        wait(win.searchFinished, 60_000)
        settle(800)
    print(f"{a.searches} more searches: {status_mb('VmRSS'):.0f} MB; thumbnail cache {win.loader.cached_bytes / 2**20:.0f} MB",
          flush=True)
    # a photo larger than the viewer's 4096-px copy, at actual size: its own pixels, read whole
    from PIL import Image

    big = photos / "zz_big_24mp.jpg"
    with Image.open(sorted(photos.glob("*.jpg"))[0]) as im:
        im.convert("RGB").resize((6000, 4000), Image.BICUBIC).save(big, quality=90)
    win.indexing.rescan()
    wait(win.indexingFinished)
    win.set_query_path(str(big))
    wait(win.searchFinished, 60_000)
    settle(1500)
    row = next(i for i, h in enumerate(win.results_model.hits) if h.path == str(big))
    win.results_view.setFocus()
    win.results_view.setCurrentIndex(win.results_model.index(row))
    QTest.keyClick(win.results_view, Qt.Key_Return)
    settle(2000)
    fitted = status_mb("VmRSS")
    del samples[:]
    QTest.keyClick(win._viewer, Qt.Key_F)
    for _ in range(100):  # until the whole photo is drawn
        settle(100, scaled=False)
        if win._viewer.picture.base is not None and win._viewer.picture.base.width() == 6000:
            break
    settle(500)
    actual = max(samples + [status_mb("VmRSS")])
    whole = win._viewer.picture.base is not None and win._viewer.picture.base.width() == 6000
    win._viewer.close()
    settle(500)
    print(f"a 24 MP photo in the viewer: fitted {fitted:.0f} MB; at actual size "
          f"({'its 6000x4000 pixels' if whole else 'NOT read whole'}): {actual:.0f} MB at most (sampled); "
          f"closed: {status_mb('VmRSS'):.0f} MB", flush=True)
    win.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
