"""pytest-qt tests that drive the real widgets (offscreen)."""
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage
from PySide6.QtWidgets import QFileDialog

from app.core.imageio import open_oriented
from app.gui.results import ResultsModel
from app.core.pipeline.search import Hit
from tests.conftest import write_photo
from tests.gui.conftest import index_folder


def drop_files(widget, paths):
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    ev = QDropEvent(QPointF(widget.width() / 2, widget.height() / 2), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
    widget.dropEvent(ev)
    return ev


def test_empty_state_then_add_folder_with_the_button(qtbot, window, photo_dir, monkeypatch):
    assert window.stack.currentIndex() == 0  # empty state, not a blank grid
    assert window.empty_add_btn.isVisible()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(photo_dir)))
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.empty_add_btn, Qt.LeftButton)
    assert blocker.args[0].phase == "done"
    qtbot.waitUntil(lambda: window.index_job is None)
    assert window.stack.currentIndex() == 1
    assert window.folder_list.count() == 1
    assert "12 indexed" in window.folder_list.item(0).text()
    assert "12 photos indexed" in window.status_label.text()


def test_drop_a_photo_and_get_results(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    q = photo_dir / "scene1" / "img2.jpg"
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        drop_files(window.query_view, [q])
    res = blocker.args[0]
    assert res is not None and len(res.hits) == 12
    assert window.results_model.rowCount() == 12
    assert window.query_path == str(q.resolve())
    # thumbnails arrive in the background and the delegate paints them
    qtbot.waitUntil(lambda: window.thumbs.get(res.hits[0].path) is not None, timeout=10000)


def test_drop_a_folder_adds_it(qtbot, window, photo_dir):
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        drop_files(window, [photo_dir])
    qtbot.waitUntil(lambda: window.index_job is None)
    assert window.lib.status()["indexed"] == 12


@pytest.mark.parametrize("orientation", [None, 6])
def test_drawn_box_is_sent_in_original_image_pixels(qtbot, window, photo_dir, tmp_path, orientation):
    index_folder(qtbot, window, photo_dir)
    q = write_photo(tmp_path / "q" / "query.jpg", 42, size=(200, 120), exif_orientation=orientation)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(q))
    _, oriented = open_oriented(q)
    view = window.query_view
    assert (view.image.width(), view.image.height()) == oriented  # the view shows what the core sees
    want = (20, 30, 90, 100) if orientation else (40, 20, 150, 90)
    r, s = view.image_rect(), view.scale()
    p1 = QPoint(round(r.x() + want[0] * s), round(r.y() + want[1] * s))
    p2 = QPoint(round(r.x() + want[2] * s), round(r.y() + want[3] * s))
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        qtbot.mousePress(view, Qt.LeftButton, pos=p1)
        qtbot.mouseMove(view, QPoint((p1.x() + p2.x()) // 2, (p1.y() + p2.y()) // 2))
        qtbot.mouseMove(view, p2)
        qtbot.mouseRelease(view, Qt.LeftButton, pos=p2)
    res = blocker.args[0]
    box = window.last_request.box
    assert res.box == box and res.hits
    tol = 1.5 / s + 1
    assert all(abs(a - b) <= tol for a, b in zip(box, want)), (box, want)
    # the overlay of a box query covers the box only
    assert view.weights_box == box
    # Esc clears the box and searches the whole photo again
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.keyClick(view, Qt.Key_Escape)
    assert window.last_request.box is None and view.box is None


def test_box_can_be_moved_by_dragging_inside(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(photo_dir / "scene0" / "img0.jpg"))
    view = window.query_view
    view.set_box((10, 10, 40, 40))
    r, s = view.image_rect(), view.scale()
    inside = QPoint(round(r.x() + 25 * s), round(r.y() + 25 * s))
    moved = QPoint(round(r.x() + 45 * s), round(r.y() + 35 * s))
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mousePress(view, Qt.LeftButton, pos=inside)
        qtbot.mouseMove(view, moved)
        qtbot.mouseRelease(view, Qt.LeftButton, pos=moved)
    x1, y1, x2, y2 = window.last_request.box
    assert abs(x1 - 30) <= 2 and abs(y1 - 20) <= 2 and abs((x2 - x1) - 30) <= 1 and abs((y2 - y1) - 30) <= 1


def test_stale_results_never_replace_newer(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(photo_dir / "scene2" / "img0.jpg"))
    current = list(window.results_model.hits)
    stale = window.last_result
    window.run_search()  # a newer request is now the latest
    stale_copy = type(stale)(stale.request_id, stale.hits[:1], None, stale.query_size, None, False, {})
    window._on_result(stale_copy)
    assert [h.path for h in window.results_model.hits] == [h.path for h in current]
    qtbot.waitSignal(window.searchFinished, timeout=30000).wait()


def test_results_model_passes_modeltester(qtmodeltester):
    m = ResultsModel()
    m.set_hits([Hit(i, f"/p/{i}.jpg", 1 - i / 10, i + 1) for i in range(5)])
    qtmodeltester.check(m)
    assert m.rowCount() == 5 and m.data(m.index(2), Qt.UserRole + 3) == 3


def test_overlay_toggle_changes_painted_pixels(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(photo_dir / "scene3" / "img1.jpg"))
    assert window.query_view.weights is not None
    on = window.query_view.grab().toImage()
    qtbot.mouseClick(window.overlay_check, Qt.LeftButton)
    assert not window.overlay_check.isChecked()
    off = window.query_view.grab().toImage()
    a = np.asarray(on.convertToFormat(QImage.Format_RGB888).constBits()).copy()
    b = np.asarray(off.convertToFormat(QImage.Format_RGB888).constBits()).copy()
    assert (a != b).mean() > 0.2


def test_pause_resume_and_cancel(qtbot, window, tmp_path, monkeypatch):
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    d = tmp_path / "many"
    for i in range(60):
        write_photo(d / f"p{i:02d}.png", i, size=(200, 150))
    seen = []
    window.add_folder(str(d))
    job = window.index_job
    job.progressed.connect(lambda p: seen.append(p.done))
    qtbot.waitUntil(lambda: any(n > 0 for n in seen), timeout=30000)
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    assert window.pause_btn.text() == "Resume" and job.control.paused
    qtbot.wait(300)
    frozen = len(seen)
    qtbot.wait(500)
    assert len(seen) <= frozen + 1  # at most the batch in flight finishes
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    assert not job.control.paused
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.cancel_btn, Qt.LeftButton)
    assert blocker.args[0].phase in ("cancelled", "done")
    qtbot.waitUntil(lambda: window.index_job is None)
    assert window.lib.status()["indexed"] <= 60


def test_delete_key_never_deletes_photos(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(photo_dir / "scene0" / "img1.jpg"))
    window.results_view.setFocus()
    window.results_view.setCurrentIndex(window.results_model.index(0))
    files = sorted(p for p in Path(photo_dir).rglob("*.jpg"))
    qtbot.keyClick(window.results_view, Qt.Key_Delete)
    assert sorted(p for p in Path(photo_dir).rglob("*.jpg")) == files
    assert "never deletes" in window.status_label.text()


def test_settings_change_asks_then_reindexes_and_missing_weights_are_refused(qtbot, window, photo_dir, monkeypatch):
    from dataclasses import replace

    from PySide6.QtWidgets import QMessageBox

    index_folder(qtbot, window, photo_dir)
    asked, warned = [], []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or QMessageBox.No))
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: warned.append(a[2])))
    old_space = window.lib.space().id
    # declined: nothing changes
    assert not window.apply_settings(replace(window.lib.settings, max_side=96))
    assert asked and "indexed again" in asked[0] and window.lib.space().id == old_space
    # a model without its weights file: refused with the file named, library untouched
    assert not window.apply_settings(replace(window.lib.settings, backbone="vgg16"))
    assert warned and "vgg16-397923af.pth" in warned[0] and window.lib.settings.backbone == "tiny-random"
    # accepted: new descriptor space, re-indexed in the background
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Yes))
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        assert window.apply_settings(replace(window.lib.settings, max_side=96))
    qtbot.waitUntil(lambda: window.index_job is None)
    assert window.lib.space().id != old_space and window.lib.status()["indexed"] == 12
    assert (window.lib.home / "settings.json").read_text().count('"max_side": 96') == 1
