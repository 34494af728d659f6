"""GUI entry point, and `--screenshot OUT.png`: render the main window offscreen after a search."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parse(argv):
    p = argparse.ArgumentParser(prog="heatsearch", description="HeatSearch desktop app (run a subcommand for the CLI)")
    p.add_argument("--home", help="data folder")
    p.add_argument("--screenshot", metavar="OUT.png", help="render the window (offscreen) after the search, save, exit")
    p.add_argument("--query", help="photo to search with on start")
    p.add_argument("--box", help="x1,y1,x2,y2 in pixels of the query photo")
    p.add_argument("--index", action="append", default=[], metavar="FOLDER", help="add a folder (and index it) on start")
    p.add_argument("--size", default="1400x880", help="window size for --screenshot")
    return p.parse_args(argv)


def resource_path(name: str) -> Path:
    """A file of resources/: next to the package in a checkout, under _MEIPASS in a bundle."""
    base = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parents[2]))
    return base / "resources" / name


def main(argv=None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.screenshot and not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from ..core.config import home_dir
    from ..core.errors import HeatSearchError
    from ..core.library import Library
    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("HeatSearch")
    icon = resource_path("heatsearch-256.png")
    if icon.exists():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    from ..core.config import Settings
    from .main_window import check_weights

    home = home_dir(a.home)
    settings = Settings.load(home)
    try:
        check_weights(settings)
    except HeatSearchError as e:  # e.g. VGG16 chosen, then its weights file removed
        QMessageBox.warning(None, "HeatSearch", f"{e}\n\nHeatSearch starts with the default model instead.")
        settings = Settings(**{**settings.__dict__, "backbone": Settings().backbone, "weights": ""})
        settings.save(home)
    try:
        lib = Library(home, settings)
    except HeatSearchError as e:
        QMessageBox.critical(None, "HeatSearch", str(e))
        return 1
    win = MainWindow(lib)
    if a.screenshot:
        w, h = (int(v) for v in a.size.split("x"))
        win.resize(w, h)
    win.show()

    def wait(signal, ms=600_000):
        loop = QEventLoop()
        signal.connect(loop.quit)
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    for folder in a.index:
        win.add_folder(folder)
    if a.index and win.index_job is not None:
        wait(win.indexingFinished)
    if a.query:
        box = tuple(float(v) for v in a.box.split(",")) if a.box else None
        win.set_query_path(a.query)
        if box:
            win.query_view.set_box(box)
            win.run_search()
        wait(win.searchFinished, 120_000)
        if win.results_model.rowCount():
            win.results_view.setCurrentIndex(win.results_model.index(0))
    if a.screenshot:
        # let visible thumbnails arrive, then grab
        for _ in range(50):
            app.processEvents()
            hits = win.results_model.hits[:12]
            if all(win.thumbs.get(h.path) is not None for h in hits):
                break
            QTimer.singleShot(100, lambda: None)
            loop = QEventLoop()
            QTimer.singleShot(100, loop.quit)
            loop.exec()
        app.processEvents()
        win.results_view.viewport().repaint()
        ok = win.grab().save(a.screenshot)
        win.close()
        print(f"screenshot {'written to' if ok else 'FAILED:'} {a.screenshot}")
        return 0 if ok else 1
    return app.exec()
