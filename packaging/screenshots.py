"""The README's screenshots, taken from a real X11 window (Xvfb + openbox), driven with real mouse
clicks and key presses: a box search, the filter bar, the viewer, the duplicates view and a
stopped indexing run, each at the screen size given.

    Xvfb :99 -screen 0 1366x768x24 & DISPLAY=:99 openbox &
    DISPLAY=:99 python packaging/screenshots.py --size 1366x768 --out /tmp/shots [--home /tmp/hs-shots]

The library is the shared UKBench and Paris photos (research data: indexed in --home, never copied).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1366x768")
    ap.add_argument("--out", default="/tmp/shots")
    ap.add_argument("--home", default=None, help="a data folder to keep between runs (indexed once)")
    a = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(a.home or tempfile.mkdtemp(prefix="hs-shots-"))
    photos = [SHARED / "paris250" / "jpg", SHARED / "ukbench"]
    if not (home / "catalog.sqlite").exists():
        subprocess.run([sys.executable, "-m", "app", "index", *map(str, photos), "--home", str(home)], check=True,
                       stdout=subprocess.DEVNULL)
    extra = Path(tempfile.mkdtemp(prefix="trip-"))  # a folder the run below stops in (a short name, as a person's)
    for p in sorted((SHARED / "distractors").rglob("*.jpg"))[:120]:
        (extra / p.name).symlink_to(p)

    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from app.core.library.service import LibraryService
    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    svc = LibraryService(home)
    svc.wait_ready(120)
    win = MainWindow(svc)
    win.showMaximized()
    size = a.size

    def settle(ms=1500):
        QTest.qWait(ms)

    def shoot(name):
        settle()
        subprocess.run(["import", "-window", "root", str(out / f"{name}-{size}.png")], check=True)
        print(out / f"{name}-{size}.png", flush=True)

    def until(cond, ms=60_000):
        import time

        t = time.time()
        while not cond() and time.time() - t < ms / 1000:
            app.processEvents()
            time.sleep(0.05)  # releases the GIL for the worker threads (QTest.qWait holds it while it waits)
        return time.time() - t

    def wait_for(signal, ms=120_000):
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    settle(3000)
    # a box on a Paris photo, as a person draws it
    query = SHARED / "paris250" / "jpg" / "paris_eiffel_000266.jpg"
    if not query.exists():
        query = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[0]
    win.set_query_path(str(query))
    wait_for(win.searchFinished)
    view = win.query_view
    r = view.image_rect()
    p1 = QPoint(int(r.left() + r.width() * 0.3), int(r.top() + r.height() * 0.15))
    p2 = QPoint(int(r.left() + r.width() * 0.7), int(r.top() + r.height() * 0.85))
    QTest.mousePress(view, Qt.LeftButton, Qt.NoModifier, p1)
    QTest.mouseMove(view, p2)
    QTest.mouseRelease(view, Qt.LeftButton, Qt.NoModifier, p2)
    wait_for(win.searchFinished)
    if not win.heat_action.isChecked():
        win.heat_action.trigger()  # the heat overlay on the query and the results, as View > Heat overlay
    hits = lambda: win.results_model.hits[:12]  # noqa: E731
    waited = until(lambda: all(win._heat_of(h) is not None or win.bridge.matches.made(h) for h in hits()))
    print(f"box search: the results' heat overlays made after {waited:.2f} s", flush=True)
    shoot("box-search")
    win.heat_action.trigger()
    # the filter bar, its time choices open
    QTest.mouseClick(win.results.filter_btn, Qt.LeftButton)
    settle(800)
    shoot("filters")
    QTest.mouseClick(win.results.filter_btn, Qt.LeftButton)
    # the viewer on the first result
    v = win.results_view
    QTest.mouseClick(v.viewport(), Qt.LeftButton, Qt.NoModifier, v.visualRect(win.results_model.index(0)).center())
    QTest.keyClick(v, Qt.Key_Return)
    shown = lambda: win._viewer.picture.pixmap() is not None and not win._viewer.picture.pixmap().isNull()  # noqa: E731
    print(f"viewer: the photo shown after {until(shown):.2f} s", flush=True)
    QTest.keyClick(win._viewer.picture, Qt.Key_Right)
    print(f"viewer: the next photo shown after {until(shown):.2f} s", flush=True)
    shoot("viewer")
    win._viewer.close()
    # duplicates
    win.dup_action.trigger()
    print(f"duplicates: groups shown after {until(lambda: win._dups.tree.topLevelItemCount() > 0, 120_000):.1f} s", flush=True)
    if win._dups.tree.topLevelItemCount():
        win._dups.tree.expandItem(win._dups.tree.topLevelItem(0))
    shoot("duplicates")
    win._dups.close()
    # a run stopped half-way: the library pane says what is left and offers Resume
    win.add_folder(str(extra))
    until(lambda: win.last_progress is not None and win.last_progress.done >= 20, 120_000)
    QTest.mouseClick(win.cancel_btn, Qt.LeftButton)
    wait_for(win.indexingFinished)
    shoot("library-stopped")
    win.svc.run(win.svc.forget(str(extra)), timeout=120)  # the next run starts from the same library
    win.shutdown()
    shutil.rmtree(extra, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
