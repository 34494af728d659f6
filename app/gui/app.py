"""GUI entry point, and `--screenshot OUT.png`: render the main window after the search, save, exit."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parse(argv):
    p = argparse.ArgumentParser(prog="heatsearch", description="HeatSearch desktop app (run a subcommand for the CLI)")
    p.add_argument("--home", help="data folder")
    p.add_argument("--library", metavar="URL", help="open a shared library (postgresql://...) instead of this computer's")
    p.add_argument("--screenshot", metavar="OUT.png", help="render the window (offscreen) after the search, save, exit")
    p.add_argument("--query", help="photo to search with on start")
    p.add_argument("--box", help="x1,y1,x2,y2 in pixels of the query photo")
    p.add_argument("--index", action="append", default=[], metavar="FOLDER", help="add a folder (and index it) on start")
    p.add_argument("--size", default="1366x768", help="window size for --screenshot")
    p.add_argument("--heat", action="store_true", help="turn the heat overlay on (for --screenshot)")
    p.add_argument("--select", type=int, default=1, help="result to select for the preview (--screenshot)")
    return p.parse_args(argv)


def resource_path(name: str) -> Path:
    """A file of resources/: next to the package in a checkout, under _MEIPASS in a bundle."""
    base = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parents[2]))
    return base / "resources" / name


def answer_dialogs(app) -> list[str]:
    """For --screenshot (offscreen: nobody can answer a dialog, which would wait for ever): every
    message box the window opens is answered at once and its words said on stderr in one line
    ("heatsearch: no engine can run ..."); the run then ends with status 1. Returns the lines said."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    said: list[str] = []

    def look() -> None:
        box = app.activeModalWidget()
        if isinstance(box, QMessageBox) and box.isVisible():
            line = " ".join(box.text().split()) or box.windowTitle()
            said.append(line)
            print(f"heatsearch: {line}", file=sys.stderr, flush=True)
            box.reject()

    timer = QTimer(app)
    timer.timeout.connect(look)
    timer.start(100)
    return said


def main(argv=None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.library:
        from ..core.library.service import url_has_password

        if url_has_password(a.library):  # as the command line says it: seen by every user in `ps`
            print("heatsearch: the password in this URL is visible to other users of this computer (ps); save it once "
                  "with `heatsearch server login URL` (or File > Open shared library…) and leave it out of the URL",
                  file=sys.stderr)
    if a.screenshot and not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication, QMessageBox

    from ..core.config import check_home, home_dir
    from ..core.errors import HeatSearchError
    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("HeatSearch")
    icon = resource_path("heatsearch-256.png")
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    from PySide6.QtCore import QSettings

    from .opener import open_library

    try:
        home = check_home(home_dir(a.home))
        library = a.library or QSettings(str(home / "window.ini"), QSettings.IniFormat).value("library", "") or None
        svc, problems = open_library(home, library)
    except HeatSearchError as e:
        if a.screenshot:
            print(f"heatsearch: {e}", file=sys.stderr)
        else:
            QMessageBox.critical(None, "HeatSearch", str(e))
        return 1
    win = MainWindow(svc, problems)
    said = answer_dialogs(app) if a.screenshot else []
    warming = svc.warm_model()  # the first search then finds the model loaded
    if warming is not None and a.screenshot:
        warming.join(120)  # the screenshot shows a search as a user meets it, after the warm-up
    if a.screenshot:
        w, h = (int(v) for v in a.size.split("x"))
        win.resize(w, h)
        win.heat_action.setChecked(a.heat)
        win.show()
    elif win.wants_maximized:
        win.showMaximized()
    else:
        win.show()

    def wait(signal, ms=600_000):
        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    for folder in a.index:
        win.add_folder(folder)
    if a.index:
        wait(win.indexingFinished)

        while win.indexing.running:
            wait(win.indexingFinished, 60_000)
    if a.query and not said:  # (a run that failed: its line is what the screenshot shows)
        box = tuple(float(v) for v in a.box.split(",")) if a.box else None
        win.set_query_path(a.query)
        if box:
            win.query_view.set_box(box)
            win.run_search()
        wait(win.searchFinished, 120_000)
        if win.results_model.rowCount():
            win.results_view.setCurrentIndex(win.results_model.index(max(0, min(a.select, win.results_model.rowCount()) - 1)))
    if a.screenshot:
        # let the query photo, the visible thumbnails and the preview arrive, then grab
        for _ in range(300):
            app.processEvents()
            hits = win.results_model.hits[:12]
            from .results import THUMB_LOAD

            ready = all(win.loader.get(h.path, THUMB_LOAD) is not None for h in hits)
            if a.heat:  # and their heat overlays, made in the background
                ready = ready and all(win.bridge.matches.made(h) for h in hits if win._heat_of(h) is None)
            if ready and (not a.query or said or win.query_view.image is not None):
                break
            loop = QEventLoop()
            QTimer.singleShot(100, loop.quit)
            loop.exec()
        for _ in range(5):
            app.processEvents()
        win.results_view.viewport().repaint()
        ok = win.grab().save(a.screenshot)
        win.close()
        print(f"screenshot {'written to' if ok else 'FAILED:'} {a.screenshot}")
        return 0 if ok and not said else 1
    rc = app.exec()
    # The window closed the library in order (every commit done, the vector files saved, worker
    # threads stopped): leave without the interpreter's finalization, where PySide6 objects and
    # daemon threads torn down in an arbitrary order made quitting crash now and then
    # ("Fatal Python error: none_dealloc ... finalizing").
    win.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
