"""Run as a program by tests/gui/test_quit.py: the real app's window on a small library, its dialogs
used as a person uses them (key presses and clicks), then File -> Quit; the interpreter then exits
normally (where the crash at quit happened: finalization)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(home: str, photos: str, quick_quit: bool = False, from_viewer: bool = False) -> int:
    """quick_quit: quit while the duplicates view is still grouping (as with a large library: the
    grouping is made to take 6 s here). from_viewer: Ctrl+Q pressed in the viewer's window."""
    from PySide6.QtCore import QTimer, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QDialog

    from app.gui import app as gui_app

    def drive():
        win = next(w for w in QApplication.topLevelWidgets() if type(w).__name__ == "MainWindow")

        def step(fn, ms=300):
            steps.append((fn, ms))

        def later():
            if not steps:
                return
            fn, ms = steps.pop(0)
            if os.environ.get("HS_DRIVER_DEBUG"):
                print("step", len(steps), flush=True)
            fn()
            QTimer.singleShot(ms, later)

        steps = []
        if quick_quit:
            import time

            from app.core import duplicates

            real = duplicates.find_duplicates
            duplicates.find_duplicates = lambda *a, **k: time.sleep(6) or real(*a, **k)
            import app.gui.duplicates_view as dv

            dv.find_duplicates = duplicates.find_duplicates
            step(lambda: win.dup_action.trigger(), 500)
            step(lambda: next(a for a in win.findChildren(type(win.dup_action)) if a.text().replace("&", "") == "Quit").trigger(), 300)
            QTimer.singleShot(0, later)
            return
        if from_viewer:
            step(lambda: win.set_query_path(str(Path(photos) / "p01.png")), 1500)
            step(lambda: QTest.mouseClick(win.results_view.viewport(), Qt.LeftButton,
                                          pos=win.results_view.visualRect(win.results_model.index(0)).center()), 200)
            step(lambda: QTest.keyClick(win.results_view, Qt.Key_Return), 800)
            step(lambda: win._viewer.activateWindow(), 500)  # as a click on it would (X11 without a window manager)
            step(lambda: QTest.keyClick(win._viewer.scroll, Qt.Key_Q, Qt.ControlModifier), 300)
            QTimer.singleShot(0, later)
            return
        step(lambda: win.set_query_path(str(Path(photos) / "p01.png")), 1500)
        step(lambda: QTest.mouseClick(win.results_view.viewport(), Qt.LeftButton,
                                      pos=win.results_view.visualRect(win.results_model.index(0)).center()), 200)
        step(lambda: QTest.keyClick(win.results_view, Qt.Key_Return), 800)  # Enter opens the viewer
        step(lambda: QTest.keyClick(win._viewer.scroll, Qt.Key_Right), 300)
        step(lambda: QTest.keyClick(win._viewer, Qt.Key_Escape), 300)
        step(lambda: win.dup_action.trigger(), 1500)  # the duplicates view
        step(lambda: win._dups.close(), 300)
        step(lambda: QTimer.singleShot(400, lambda: [d.reject() for d in QApplication.topLevelWidgets()
                                                     if isinstance(d, QDialog) and d.isVisible()]) or win.open_settings(), 800)
        step(lambda: QTest.mouseClick(win.log_btn, Qt.LeftButton), 500)
        step(lambda: win._log_dialog.close(), 300)
        step(lambda: next(a for a in win.findChildren(type(win.dup_action)) if a.text().replace("&", "") == "Quit").trigger(), 300)
        QTimer.singleShot(0, later)

    app = QApplication(sys.argv[:1])  # noqa: F841 - the app main() uses; its timers need it first
    QTimer.singleShot(2500, drive)
    return gui_app.main(["--home", home])


if __name__ == "__main__":
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.exit(main(sys.argv[1], sys.argv[2], "--quick-quit" in sys.argv, "--from-viewer" in sys.argv))
