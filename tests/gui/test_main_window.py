"""pytest-qt tests that drive the real widgets (offscreen; again under Xvfb in CI)."""
import re
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QGuiApplication, QImage, QKeySequence
from PySide6.QtWidgets import QMessageBox

from app.core.imageio import open_oriented
from app.core.pipeline.search import Hit
from app.gui.results import ResultsModel
from tests.conftest import write_photo
from tests.gui.conftest import add_and_pause, answer_file_dialog, index_folder, make_window, wait_idle, when_modal
from tests.gui.helpers import search


def drop_files(widget, paths):
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    ev = QDropEvent(QPointF(widget.width() / 2, widget.height() / 2), Qt.CopyAction, md, Qt.LeftButton, Qt.NoModifier)
    widget.dropEvent(ev)
    return ev


def test_empty_state_then_add_folder_with_the_button(qtbot, window, photo_dir, monkeypatch):
    assert window.stack.currentIndex() == 0  # empty state, not a blank grid
    assert window.empty_add_btn.isVisible()
    answer_file_dialog(qtbot, photo_dir)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.empty_add_btn, Qt.LeftButton)
    assert blocker.args[0].phase == "done"
    wait_idle(qtbot, window)
    assert window.stack.currentIndex() == 1
    assert window.library.folder_list.count() == 1
    assert "12 photos" in window.library.folder_list.item(0).text()
    assert "12 photos searchable" in window.index_label.text()


def test_drop_a_photo_and_get_results(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    q = photo_dir / "scene1" / "img2.jpg"
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        drop_files(window.query_view, [q])
    res = blocker.args[0]
    assert res is not None and len(res.hits) == 12
    assert window.results_model.rowCount() == 12
    assert window.search.query_path == str(q.resolve())
    # the right answers first: the photo itself, then the other views of scene 1
    assert res.hits[0].path == str(q.resolve()) and {Path(h.path).parent.name for h in res.hits[:3]} == {"scene1"}
    # thumbnails arrive in the background and the delegate paints them; file names are shown
    from app.gui.results import THUMB_LOAD

    qtbot.waitUntil(lambda: window.loader.get(res.hits[0].path, THUMB_LOAD) is not None, timeout=10000)
    assert window.results_model.data(window.results_model.index(0)).endswith("img2.jpg")
    assert "12 results" in window.results.info.text()


def test_drop_a_folder_adds_it(qtbot, window, photo_dir):
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        drop_files(window, [photo_dir])
    wait_idle(qtbot, window)
    assert window.svc.stats()["indexed"] == 12


@pytest.mark.parametrize("orientation", [None, 6])
def test_drawn_box_is_sent_in_original_image_pixels(qtbot, window, photo_dir, tmp_path, orientation):
    index_folder(qtbot, window, photo_dir)
    q = write_photo(tmp_path / "q" / "query.jpg", 42, size=(200, 120), exif_orientation=orientation)
    search(qtbot, window, q)
    qtbot.waitUntil(lambda: window.query_view.image is not None, timeout=10000)
    _, oriented = open_oriented(q)
    view = window.query_view
    assert view.orig_size == oriented  # the view shows what the core sees
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
    box = window.search.last_request.box
    assert res.box == box and res.hits
    tol = 1.5 / s + 1
    assert all(abs(a - b) <= tol for a, b in zip(box, want)), (box, want)
    # the overlay of a box query (refined on release: the crop's own pass) covers the box as drawn
    # (the map's cells stuck out of it by up to half a cell: the trial saw the heat 6-12 px off)
    wx1, wy1, wx2, wy2 = view.weights_box
    assert all(abs(a - b) <= 1 for a, b in zip((wx1, wy1, wx2, wy2), box)), ((wx1, wy1, wx2, wy2), box)
    # Esc clears the box and searches the whole photo again
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.keyClick(view, Qt.Key_Escape)
    assert window.search.last_request.box is None and view.box is None


def test_box_can_be_moved_by_dragging_inside(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene0" / "img0.jpg")
    qtbot.waitUntil(lambda: window.query_view.image is not None, timeout=10000)
    view = window.query_view
    view.set_box((10, 10, 40, 40))
    r, s = view.image_rect(), view.scale()
    inside = QPoint(round(r.x() + 25 * s), round(r.y() + 25 * s))
    moved = QPoint(round(r.x() + 45 * s), round(r.y() + 35 * s))
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mousePress(view, Qt.LeftButton, pos=inside)
        qtbot.mouseMove(view, moved)
        qtbot.mouseRelease(view, Qt.LeftButton, pos=moved)
    x1, y1, x2, y2 = window.search.last_request.box
    assert abs(x1 - 30) <= 2 and abs(y1 - 20) <= 2 and abs((x2 - x1) - 30) <= 1 and abs((y2 - y1) - 30) <= 1


def test_stale_results_never_replace_newer(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene2" / "img0.jpg")
    current = list(window.results_model.hits)
    stale = window.search.last_result
    window.run_search()  # a newer request is now the latest
    stale_copy = type(stale)(stale.request_id, stale.hits[:1], None, stale.query_size, None, False, {})
    window._on_result(stale_copy)
    assert [h.path for h in window.results_model.hits] == [h.path for h in current]
    qtbot.waitSignal(window.searchFinished, timeout=30000).wait()


def test_results_model_passes_modeltester(qtmodeltester):
    m = ResultsModel()
    m.set_hits([Hit(i, f"/p/{i}.jpg", 1 - i / 10, i + 1) for i in range(5)])
    qtmodeltester.check(m)
    assert m.rowCount() == 5 and m.data(m.index(2)).startswith("#3 2.jpg")


def grab_rgb(widget) -> np.ndarray:
    img = widget.grab().toImage().convertToFormat(QImage.Format_RGB888)
    return np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, : img.width() * 3].copy()


def test_overlay_is_off_by_default_toggles_everywhere_and_is_remembered(qtbot, window, photo_dir, tiny_home):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene3" / "img1.jpg")
    qtbot.waitUntil(lambda: window.query_view.image is not None, timeout=10000)
    assert not window.heat_action.isChecked() and not window.query.legend.isVisible()
    window.results_view.setCurrentIndex(window.results_model.index(1))
    qtbot.waitUntil(lambda: window.preview.picture.pixmap() is not None and not window.preview.picture.pixmap().isNull(), timeout=10000)
    qtbot.wait(300)  # the grid's thumbnails
    views = (window.query_view, window.results_view.viewport(), window.preview.picture)
    off = [grab_rgb(w) for w in views]
    window.heat_action.trigger()  # View -> Heat overlay
    assert window.heat_action.isChecked() and window.query.legend.isVisible() and window.delegate.show_heat
    qtbot.wait(100)
    on = [grab_rgb(w) for w in views]
    # the query, the results' own heat grids in the grid and the preview (the trial: on the query only)
    assert [round(float((a != b).mean()), 2) > 0.05 for a, b in zip(on, off)] == [True, True, True], \
        [round(float((a != b).mean()), 3) for a, b in zip(on, off)]
    window.close()
    again = make_window(qtbot, tiny_home)
    assert again.heat_action.isChecked()  # the overlay state survives a restart
    again.shutdown()


def test_pause_keeps_the_count_resume_and_cancel(qtbot, window, tmp_path, monkeypatch):
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    seen = add_and_pause(qtbot, window, tmp_path / "many", 60)
    assert window.pause_btn.text() == "Resume"
    qtbot.wait(400)
    frozen = len(seen)
    qtbot.wait(500)
    assert len(seen) <= frozen + 1  # at most the photo in flight finishes
    text = window.index_label.text()
    assert "paused" in text and "of 60" in text  # the count stays visible while paused
    pane = window.library.folder_list
    assert ", paused" in pane.item(0).text() and "of 60 indexed" in pane.item(0).text()  # the pane says so too
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.pause_btn, Qt.LeftButton)  # Resume: it goes on to the end
        assert window.pause_btn.text() == "Pause"
        assert "paused" not in pane.item(0).text()
    assert blocker.args[0].phase == "done" and window.svc.stats()["indexed"] == 60
    wait_idle(qtbot, window)
    # Cancel (here while paused, so that it is never too late): the run stops, what was done stays
    more = tmp_path / "more"
    for i in range(40):
        write_photo(more / f"m{i:02d}.png", 200 + i, size=(200, 150))
    seen.clear()
    window.add_folder(str(more))
    qtbot.waitUntil(lambda: any(n > 0 for n in seen), timeout=30000)
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.cancel_btn, Qt.LeftButton)
    assert blocker.args[0].phase == "cancelled"
    wait_idle(qtbot, window)
    assert 60 < window.svc.stats()["indexed"] < 100


def test_indexing_progress_never_overwrites_the_search_status(qtbot, window, photo_dir, tmp_path):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene0" / "img1.jpg")
    status = window.status_label.text()
    assert "Search took" in status
    more = tmp_path / "more"
    for i in range(8):
        write_photo(more / f"m{i}.png", 300 + i, size=(120, 90))
    seen = []
    window.bridge.event.connect(lambda ev: seen.append(window.status_label.text()))
    index_folder(qtbot, window, more)
    # the results are searched again once the library has changed: the search status, never the run's
    qtbot.waitUntil(lambda: window.status_label.text().startswith("Search took"), timeout=10000)
    assert all(t == status or t in ("Searching…",) or t.startswith("Search took") for t in seen), set(seen)
    assert "searchable" in window.index_label.text()


def test_delete_key_never_deletes_photos(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene0" / "img1.jpg")
    window.results_view.setFocus()
    window.results_view.setCurrentIndex(window.results_model.index(0))
    files = sorted(p for p in Path(photo_dir).rglob("*.jpg"))
    qtbot.keyClick(window.results_view, Qt.Key_Delete)
    assert sorted(p for p in Path(photo_dir).rglob("*.jpg")) == files
    assert "never deletes" in window.status_label.text()


def test_settings_change_asks_with_count_and_time_then_reindexes(qtbot, window, photo_dir, monkeypatch):
    from dataclasses import replace

    index_folder(qtbot, window, photo_dir)
    asked, warned = [], []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or QMessageBox.No))
    monkeypatch.setattr(QMessageBox, "warning", staticmethod(lambda *a, **k: warned.append(a[2])))
    old_space = window.svc.snapshot().space.id
    # declined: nothing changes
    assert not window.apply_settings(replace(window.svc.settings, max_side=96))
    assert asked and "12 photos" in asked[0] and ("second" in asked[0] or "minute" in asked[0])
    assert window.svc.snapshot().space.id == old_space
    # a model without its weights file: refused, naming the field to use
    assert not window.apply_settings(replace(window.svc.settings, backbone="vgg16"))
    assert warned and warned[0].startswith("Photo analyser:") and "Analyser's file" in warned[0]
    assert window.svc.settings.backbone == "tiny-random"
    # accepted: new descriptor space, re-indexed in the background
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Yes))
    seen = []
    window.bridge.event.connect(lambda ev: ev.kind == "progress" and seen.append(ev.data.done))
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        assert window.apply_settings(replace(window.svc.settings, max_side=96))
        qtbot.waitUntil(lambda: bool(seen), timeout=30000)  # paused at its start: 12 tiny photos take a blink
        qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
        # the pane says the photos are described again, not "0 of 12 indexed" (trial 5: "looks wiped")
        pane = window.library.folder_list
        qtbot.waitUntil(lambda: "of 12 described again, paused" in pane.item(0).text(), timeout=10000)
        qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    wait_idle(qtbot, window)
    assert window.svc.snapshot().space.id != old_space and window.svc.stats()["indexed"] == 12
    assert (window.svc.home / "settings.json").read_text().count('"max_side": 96') == 1


def test_the_re_index_question_counts_the_8_bit_tuning(qtbot, window, photo_dir, monkeypatch):
    """"443 photos, about 16 seconds" was asked before an 8-bit re-index that took 52 s, 28 s of
    them tuning the model first: the estimate counts the tuning."""
    from dataclasses import replace

    index_folder(qtbot, window, photo_dir)
    asked = []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or QMessageBox.No))
    window.apply_settings(replace(window.svc.settings, precision="int8"))
    assert asked and "12 photos" in asked[0]
    secs = re.search(r"about (\d+) second", asked[0])
    # the tiny network describes 12 photos in well under a second; the tuning's start alone (its
    # imports) takes ~6 s, then its photos at half the model's pace
    assert secs and int(secs.group(1)) >= 6, asked[0]


def test_new_settings_for_a_library_without_photos_ask_nothing(qtbot, window, monkeypatch):
    """(real window, issue 21) "indexed again (0 photos, about 1 second)" was asked of an empty library."""
    from dataclasses import replace

    asked = []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or QMessageBox.No))
    assert window.apply_settings(replace(window.svc.settings, max_side=96))
    qtbot.waitUntil(lambda: window.svc.settings.max_side == 96, timeout=10000)
    assert asked == []


def test_scores_shown_follow_the_rank_and_the_cutoff_says_what_it_hides(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img0.jpg")
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)
    cut = int(scores[len(scores) // 2] * 100 + 1)  # a cut-off that hides the lower half or so
    window.results.cutoff.setValue(cut)
    hidden = sum(window.results_view.isRowHidden(r) for r in range(len(scores)))
    assert hidden == sum(s < cut / 100 for s in scores) and 0 < hidden < len(scores)
    assert f"{len(scores) - hidden} shown of {len(scores)}" in window.results.info.text()


def test_remove_asks_first_and_runs_off_the_gui_thread(qtbot, window, photo_dir, monkeypatch):
    # an empty library has nothing to remove or rescan (trial 5: both active)
    assert not window.library.remove_btn.isEnabled() and not window.library.reindex_btn.isEnabled()
    index_folder(qtbot, window, photo_dir)
    assert window.library.remove_btn.isEnabled() and window.library.reindex_btn.isEnabled()
    window.library.folder_list.setCurrentRow(0)
    asked = []

    def answer(key):
        def use(dlg):
            asked.append(dlg.text())
            qtbot.keySequence(dlg, key) if isinstance(key, QKeySequence) else qtbot.keyClick(dlg, key)
        when_modal(use)

    for key in (Qt.Key_Escape, Qt.Key_Return):  # (trial 21: a mis-click and Enter forgot 150 photos)
        answer(key)
        qtbot.mouseClick(window.library.remove_btn, Qt.LeftButton)
        qtbot.wait(300)
        assert window.svc.stats()["indexed"] == 12  # cancelled: nothing forgotten
    answer(QKeySequence("Alt+R"))  # the button's own key
    qtbot.mouseClick(window.library.remove_btn, Qt.LeftButton)
    assert "12 photos" in asked[0] and "stay on disk" in asked[0]
    qtbot.waitUntil(lambda: window.svc.stats()["images"] == 0, timeout=20000)
    assert sorted(p.name for p in photo_dir.rglob("*.jpg"))  # the photos are all still there
    qtbot.waitUntil(lambda: not window.library.remove_btn.isEnabled(), timeout=10000)


def test_a_query_that_cannot_be_decoded_says_so(qtbot, window, photo_dir, tmp_path):
    """The first query: the pane says why, no results; after a search, the last search stays
    (tests/gui/test_search_view.py::test_a_query_photo_that_cannot_be_read_keeps_the_last_search)."""
    index_folder(qtbot, window, photo_dir)
    bad = tmp_path / "broken.jpg"
    bad.write_bytes((photo_dir / "scene0" / "img1.jpg").read_bytes()[:200])
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        window.set_query_path(str(bad))
    assert blocker.args[0] is None
    assert window.results_model.rowCount() == 0
    assert "broken.jpg" in window.query_view.message or "cannot read" in window.query_view.message.lower()
    search(qtbot, window, photo_dir / "scene0" / "img1.jpg")
    assert window.results_model.rowCount() == 12
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        window.set_query_path(str(bad))
    assert blocker.args[0] is None and window.results_model.rowCount() == 12
    assert window.status_label.text().startswith("Cannot read broken.jpg: ")


def test_paste_accepts_a_copied_path(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    q = photo_dir / "scene2" / "img2.jpg"
    QGuiApplication.clipboard().setText(str(q))
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.paste_query()
    assert window.search.query_path == str(q)


def test_paste_reads_the_clipboard_once(qtbot, window, photo_dir):
    """A clipboard whose owner goes away between two reads (`xclip -loops 1`) answers the first
    and then nothing: Paste showed a traceback (IndexError) and did nothing. It reads once now."""
    from PySide6.QtCore import QMimeData

    index_folder(qtbot, window, photo_dir)
    q = photo_dir / "scene3" / "img1.jpg"

    class Vanishing(QMimeData):
        reads = 0

        def text(self):  # the owner answers once, then is gone
            Vanishing.reads += 1
            return str(q) if Vanishing.reads == 1 else ""

    md = Vanishing()
    md.setText(str(q))
    QGuiApplication.clipboard().setMimeData(md)
    try:
        assert QGuiApplication.clipboard().mimeData() is md
        with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
            qtbot.mouseClick(window.query.paste_btn, Qt.LeftButton)
        assert blocker.args[0] is not None and window.search.query_path == str(q)
    finally:
        # Qt owns the clipboard's data: a Python subclass left there is called while the
        # interpreter finalizes (an abort at exit)
        QGuiApplication.clipboard().clear()


def test_the_built_in_viewer_pages_through_results_and_searches(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    window.results_view.setFocus()
    window.results_view.setCurrentIndex(window.results_model.index(0))
    qtbot.keyClick(window.results_view, Qt.Key_Return)
    viewer = window._viewer
    qtbot.waitUntil(lambda: viewer.isVisible(), timeout=5000)
    assert viewer.hit.path == res.hits[0].path
    qtbot.keyClick(viewer, Qt.Key_Right)
    assert viewer.hit.path == res.hits[1].path and window.results_view.currentIndex().row() == 1
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    target = res.hits[1].path
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(viewer.search_btn, Qt.LeftButton)
    assert window.search.query_path == target and not viewer.isVisible()


def test_open_elsewhere_says_so_when_the_system_cannot(qtbot, window, photo_dir, monkeypatch):
    from PySide6.QtGui import QDesktopServices

    from app.gui import viewer as viewer_mod

    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    told = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: False))
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: told.append(a[2])))
    assert not viewer_mod.open_externally(window, res.hits[0].path)
    assert told and "No photo viewer" in told[0]


def test_preview_follows_the_selection_and_a_new_search_clears_it(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    window.results_view.setCurrentIndex(window.results_model.index(2))
    assert window.preview.hit is window.results_model.hits[2]
    search(qtbot, window, photo_dir / "scene3" / "img0.jpg")
    assert window.preview.hit is None and "Select a result" in window.preview.picture.text()


def test_grid_columns_follow_the_width(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    window.library_dock.hide()
    window.preview_dock.hide()
    window.resize(1600, 900)
    qtbot.wait(100)
    wide = window.results_view.columns()
    window.resize(1000, 650)
    qtbot.wait(100)
    narrow = window.results_view.columns()
    assert wide >= 4 and narrow < wide
    cell = window.delegate.cell
    assert cell.height() < cell.width() + 50  # cells fit landscape thumbnails, not tall strips


def test_the_view_menu_brings_closed_panes_back(qtbot, window):
    window.library_dock.close()
    assert not window.library_dock.isVisible()
    window.library_dock.toggleViewAction().trigger()
    assert window.library_dock.isVisible()
    texts = [a.text() for a in window.menuBar().actions()[1].menu().actions()]
    assert {"Library pane", "Preview pane", "Heat overlay"} <= {t.replace("&", "") for t in texts}


def test_the_window_fits_a_small_laptop_screen(qtbot, window, photo_dir):
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    window.results.cutoff.setValue(25)
    hint = window.minimumSizeHint()
    assert window.minimumWidth() <= 1000 and window.minimumHeight() <= 650
    assert hint.width() <= 1000 and hint.height() <= 650, hint
    # and nothing is squeezed at the window's own minimum (the trial: at 960 px the arrows of
    # "Show 100" lay over "Relevance" when the heat legend's words grew)
    assert hint.width() <= window.minimumWidth(), (hint, window.minimumSize())
    window.resize(1000, 650)
    qtbot.wait(50)
    assert window.width() <= 1000 and window.height() <= 650
    for w in (window.log_btn, window.results.filter_btn, window.query.clear_box_btn):
        assert w.isVisible() and w.visibleRegion().boundingRect().width() >= w.width() - 2, w.text()


def test_every_control_has_a_tooltip(qtbot, window):
    from PySide6.QtWidgets import QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox

    window.stack.setCurrentIndex(1)
    found = [w for cls in (QAbstractButton, QAbstractSlider, QAbstractSpinBox, QComboBox) for w in window.findChildren(cls)]
    controls = [w for w in found
                if w.isVisibleTo(window) and not w.inherits("QDockWidget") and w.parent() is not None
                and not w.objectName().startswith("qt_") and w.metaObject().className() != "QToolButton"]
    missing = [w.text() if hasattr(w, "text") else type(w).__name__ for w in controls if not w.toolTip()]
    assert not missing, missing


def test_the_engine_choice_is_persisted_and_shown(qtbot, window, photo_dir, monkeypatch):
    """Settings: the engine in plain words; the choice is saved and the status says what runs."""
    from app.gui.settings_dialog import ENGINE_WORDS, SettingsDialog

    dlg = SettingsDialog(window.svc.settings, window)
    items = [dlg.engine.itemText(i) for i in range(dlg.engine.count())]
    assert items[0] == ENGINE_WORDS["auto"] and ENGINE_WORDS["openvino"] in items
    dlg.engine.setCurrentIndex(dlg.engine.findData("onnxruntime"))
    new = dlg.result_settings()
    assert new.engine == "onnxruntime"
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        window.apply_settings(new, confirm=False)
        window.add_folder(str(photo_dir))
    qtbot.waitUntil(lambda: "ONNX Runtime" in window.index_label.text() or
                    '"engine": "onnxruntime"' in (window.svc.home / "settings.json").read_text(), timeout=30000)
    assert '"engine": "onnxruntime"' in (window.svc.home / "settings.json").read_text()
    assert window.svc.extractor().engine.label.startswith("ONNX Runtime")


def test_the_window_manager_is_told_a_small_minimum_size(qtbot, window):
    """Under a real X11 server (make test-x11): WM_NORMAL_HINTS carries a minimum that fits 1366x768."""
    import shutil
    import subprocess

    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.platformName() != "xcb" or not shutil.which("xprop"):
        pytest.skip("needs an X11 server and xprop (make test-x11)")
    qtbot.wait(200)
    out = subprocess.run(["xprop", "-id", str(int(window.winId())), "WM_NORMAL_HINTS"], capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if "minimum size" in x)
    w, h = (int(v) for v in line.split(":")[1].split(" by "))
    assert w <= 1000 and h <= 650, line


def test_a_window_closed_at_once_after_it_opened_starts_nothing(qtbot, tiny_home, photo_dir):
    """A CI run: a window shut down within half a second of opening a library with folders had its
    start's rescan fire afterwards ("the library is closed", an exception in the event loop)."""
    first = make_window(qtbot, tiny_home)
    index_folder(qtbot, first, photo_dir)
    first.shutdown()
    again = make_window(qtbot, tiny_home)
    again.shutdown()
    qtbot.wait(800)  # past the rescan's timer: pytest-qt fails the test on an exception in the loop


def test_a_box_started_just_beside_the_photo_starts_at_its_edge(qtbot, window, photo_dir, tmp_path):
    """Trial 9: a drag that began a few pixels outside the photo drew nothing."""
    index_folder(qtbot, window, photo_dir)
    q = write_photo(tmp_path / "q" / "query.jpg", 42, size=(200, 120))
    search(qtbot, window, q)
    qtbot.waitUntil(lambda: window.query_view.image is not None, timeout=10000)
    view = window.query_view
    r, s = view.image_rect(), view.scale()
    p1 = QPoint(round(r.x()) - 8, round(r.y()) - 8)  # beside the top-left corner
    p2 = QPoint(round(r.x() + 100 * s), round(r.y() + 60 * s))
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mousePress(view, Qt.LeftButton, pos=p1)
        qtbot.mouseMove(view, QPoint((p1.x() + p2.x()) // 2, (p1.y() + p2.y()) // 2))
        qtbot.mouseMove(view, p2)
        qtbot.mouseRelease(view, Qt.LeftButton, pos=p2)
    box = window.search.last_request.box
    assert box is not None and box[0] <= 1.5 / s + 1 and box[1] <= 1.5 / s + 1, box
    assert abs(box[2] - 100) <= 1.5 / s + 1 and abs(box[3] - 60) <= 1.5 / s + 1, box
