"""GUI fixtures: offscreen Qt, a window on a tiny random CNN, and a check that no worker outlives a test."""
import atexit
import os
import shutil
import tempfile
import threading

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Qt keeps its own file dialog's state in ~/.config/QtProject.conf: the tests' dialogs use a
# folder of their own, never the person's (removed at exit: one was left in /tmp per run)
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="heatsearch-qt-config-")
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], True)

from app.core.config import Settings  # noqa: E402
from app.core.library.service import LibraryService  # noqa: E402


def tiny_settings(**kw) -> Settings:
    return Settings(**{"backbone": "tiny-random", "max_side": 128, "batch_size": 4, "top": 20, "engine": "torch", **kw})


@pytest.fixture
def tiny_home(tmp_path):
    home = tmp_path / "gui-home"
    tiny_settings().save(home)
    return home


def make_window(qtbot, home, library: str | None = None, settings=None):
    """A window on the library in `home` (or at the URL `library`), shown at 1300x800."""
    from app.gui.main_window import MainWindow

    svc = LibraryService(home, settings, library=library)
    svc.wait_ready(60)
    win = MainWindow(svc)
    qtbot.addWidget(win)
    win.resize(1300, 800)
    win.show()
    qtbot.waitExposed(win)
    return win


@pytest.fixture
def window(qtbot, tiny_home):
    before = {t.name for t in threading.enumerate()}
    win = make_window(qtbot, tiny_home)
    yield win
    bridge = win.bridge
    win.shutdown()
    assert bridge is None or not bridge.worker.is_alive()
    assert win.loader.pool.activeThreadCount() == 0
    leftover = [t for t in threading.enumerate() if t.name.startswith("heatsearch") and t.name not in before and t.is_alive()]
    assert not leftover, f"worker threads outlived the test: {leftover}"


def wait_idle(qtbot, win, timeout=60000):
    """Until no indexing job runs or is queued for this window."""
    qtbot.waitUntil(lambda: win.indexing.index_cmd is None and win.svc.running is None and win.svc._queue.empty()
                    and not win.indexing.again, timeout=timeout)


def index_folder(qtbot, win, folder, timeout=60000):
    wait_idle(qtbot, win, timeout)
    with qtbot.waitSignal(win.indexingFinished, timeout=timeout) as blocker:
        win.add_folder(str(folder))
    wait_idle(qtbot, win, timeout)
    return blocker.args[0]


def add_and_pause(qtbot, win, folder, n: int) -> list:
    """`n` photos written into `folder`, added, and paused with the Pause button once the first
    are done. Returns the live list of progress counts seen."""
    from PySide6.QtCore import Qt

    from tests.conftest import write_photo

    for i in range(n):
        write_photo(folder / f"p{i:02d}.png", i, size=(200, 150))
    seen = []
    win.bridge.event.connect(lambda ev: ev.kind == "progress" and seen.append(ev.data.done))
    win.add_folder(str(folder))
    qtbot.waitUntil(lambda: any(k > 0 for k in seen), timeout=30000)
    qtbot.mouseClick(win.pause_btn, Qt.LeftButton)
    return seen


def when_modal(use):
    """Call use(dialog) once a modal dialog is open (an action's dialog blocks its caller): the
    person's clicks and keys on it. Looks again every 100 ms on a loaded machine. Returns a
    function that stops looking (for a dialog that may not open: else it answers a later one)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    tries = [200]  # 20 s: a dialog that never opens is not answered in a later test

    def look():
        if tries[0] <= 0:
            return
        dlg = QApplication.activeModalWidget()
        if dlg is None:
            tries[0] -= 1
            if tries[0] > 0:
                QTimer.singleShot(100, look)
            return
        use(dlg)

    QTimer.singleShot(300, look)
    return lambda: tries.__setitem__(0, 0)


def answer_file_dialog(qtbot, path, seen: list | None = None, file_type: str = "") -> None:
    """When the next file dialog opens (Qt's own: the offscreen platform has no other), answer it
    as a person does: `file_type`'s first letters typed in its type list, `path` typed as the file
    name and Return; an empty `path`: Escape. seen: gets where it opened (its folder, joined with
    the name it offered, if any)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QComboBox, QLineEdit

    def use(dlg):
        edit = dlg.findChild(QLineEdit, "fileNameEdit")
        if seen is not None:
            where = dlg.directory().absolutePath()
            seen.append(os.path.join(where, edit.text()) if edit.text() else where)
        if file_type:
            combo = dlg.findChild(QComboBox, "fileTypeCombo")
            combo.setFocus()
            qtbot.keyClicks(combo, file_type)
        if not path:
            qtbot.keyClick(dlg, Qt.Key_Escape)
            return
        edit.setFocus()
        edit.clear()
        qtbot.keyClicks(edit, str(path))
        qtbot.keyClick(edit, Qt.Key_Return)
        if dlg.isVisible():  # the first Return took the name completer's choice (X11 under load): as a person, again
            qtbot.keyClick(edit, Qt.Key_Return)

    when_modal(use)
