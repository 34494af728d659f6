"""Event-loop stall while indexing, and time from drop to first results, in the real window.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_stall.py --folder ../shared/data/ukbench [--limit 120]

Prints the longest gap between 10 ms timer ticks on the GUI thread during indexing (a stall over
100 ms is visible), percentiles of the gaps, and the drop-to-results time of a photo (CNN on CPU
included: the dropped photo is not in the library).
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default=str(Path(__file__).resolve().parents[2] / "shared/data/ukbench"))
    ap.add_argument("--limit", type=int, default=120, help="index only the first N photos (copied to a temp folder)")
    a = ap.parse_args()
    from PySide6.QtCore import QEventLoop, QMimeData, QPointF, Qt, QTimer, QUrl
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QApplication

    from app.core.library import Library
    from app.gui.main_window import MainWindow

    tmp = Path(tempfile.mkdtemp(prefix="hs-stall-"))
    photos = sorted(Path(a.folder).glob("*.jpg"))
    src = tmp / "photos"
    src.mkdir()
    for p in photos[: a.limit]:
        shutil.copy(p, src / p.name)
    query = photos[a.limit] if len(photos) > a.limit else photos[-1]
    app = QApplication(sys.argv[:1])
    win = MainWindow(Library(tmp / "home"))
    win.resize(1400, 880)
    win.show()

    def wait(signal):
        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(1_800_000, loop.quit)
        loop.exec()

    t0 = time.time()
    win.add_folder(str(src))
    wait(win.indexingFinished)
    gaps = np.array(win.stall.gaps[5:], dtype=float)  # skip the window's first paints
    print(f"indexed {win.lib.status()['indexed']} photos in {time.time() - t0:.1f} s with the window open")
    print(f"GUI event loop while indexing: longest stall {gaps.max():.0f} ms; gap p50 {np.percentile(gaps, 50):.0f} ms, "
          f"p99 {np.percentile(gaps, 99):.0f} ms; {int((gaps > 100).sum())} gaps over 100 ms out of {len(gaps)}")
    for label in ("first drop (model already loaded by indexing)", "second drop (another photo)"):
        md = QMimeData()
        md.setUrls([QUrl.fromLocalFile(str(query))])
        ev = QDropEvent(QPointF(50, 50), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
        t = time.perf_counter()
        win.query_view.dropEvent(ev)
        wait(win.searchFinished)
        app.processEvents()
        print(f"drop to first results, {label}: {1000 * (time.perf_counter() - t):.0f} ms "
              f"({win.results_model.rowCount()} results, CNN on {win.lib.extractor().device})")
        query = photos[-2]
    win.close()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
