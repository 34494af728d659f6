"""GUI fixtures: offscreen Qt, a window on a tiny random CNN, and a check that no worker outlives a test."""
import os
import threading

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.core.config import Settings  # noqa: E402
from app.core.library import Library  # noqa: E402


@pytest.fixture
def tiny_home(tmp_path):
    home = tmp_path / "gui-home"
    Settings(backbone="tiny-random", max_side=128, batch_size=4, top=20).save(home)
    return home


@pytest.fixture
def window(qtbot, tiny_home):
    from app.gui.main_window import MainWindow

    before = {t.name for t in threading.enumerate()}
    win = MainWindow(Library(tiny_home))
    qtbot.addWidget(win)
    win.resize(1300, 800)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.shutdown()
    assert win.index_job is None or not win.index_job.isRunning()
    assert not win.search_thread.isRunning()
    assert win.thumbs.pool.activeThreadCount() == 0
    leftover = [t for t in threading.enumerate() if t.name.startswith("heatsearch") and t.name not in before and t.is_alive()]
    assert not leftover, f"worker threads outlived the test: {leftover}"
    win.lib.close()


def index_folder(qtbot, win, folder, timeout=60000):
    with qtbot.waitSignal(win.indexingFinished, timeout=timeout) as blocker:
        win.add_folder(str(folder))
    qtbot.waitUntil(lambda: win.index_job is None, timeout=10000)
    return blocker.args[0]
