"""The built-in viewer, driven as a person does: paging, zoom, keys, its buttons and where it opens."""

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from tests.conftest import write_photo
from tests.gui.conftest import answer_file_dialog, index_folder
from tests.gui.helpers import open_viewer, search, searched_library, viewer_on_a_new_photo, wheel


def test_the_viewers_arrows_page_while_the_picture_has_the_focus(qtbot, window, photo_dir):
    """(1) Left/Right page through the results, +/- zoom and H shows the overlay, with the key
    presses going where a person's go: to the picture (the scroll area took the arrows)."""
    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    viewer = open_viewer(qtbot, window)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    viewer.scroll.setFocus()
    for widget in (viewer.scroll, viewer.scroll.viewport()):
        before = viewer.row
        qtbot.keyClick(widget, Qt.Key_Right)
        assert viewer.row == before + 1 and viewer.hit.path == res.hits[before + 1].path
    qtbot.keyClick(viewer.scroll, Qt.Key_Left)
    assert viewer.row == 1
    qtbot.keyClick(viewer.scroll, Qt.Key_Plus)
    assert not viewer.fit and "%" in viewer.caption.text()
    viewer.resize(420, 320)  # a small window: the zoomed photo scrolls
    qtbot.keyClick(viewer.scroll, Qt.Key_F)  # fitted to it
    from app.gui.viewer import VIEWER_LOAD
    qtbot.waitUntil(lambda: viewer.loader.get(viewer.hit.path, VIEWER_LOAD) is not None, timeout=10000)
    assert viewer.fit
    qtbot.keyClick(viewer.scroll, Qt.Key_Plus)  # about the middle of what is shown (trial 10: the top-left corner)
    def centred():
        bars = [b for b in (viewer.scroll.horizontalScrollBar(), viewer.scroll.verticalScrollBar()) if b.maximum() > 0]
        return bars and all(abs(b.value() - b.maximum() / 2) <= 0.1 * b.maximum() + 2 for b in bars)

    qtbot.waitUntil(centred, timeout=3000)  # the bars' ranges follow a layout pass
    qtbot.keyClick(viewer.scroll, Qt.Key_H)
    assert viewer.heat_check.isChecked() and viewer.heat_check.text() == "Heat overlay"
    qtbot.keyClick(viewer.scroll, Qt.Key_Minus)
    assert not viewer.fit
    qtbot.keyClick(viewer.scroll, Qt.Key_Escape)
    qtbot.waitUntil(lambda: not viewer.isVisible(), timeout=5000)
    # closed, its photos leave the image cache (trial 27: 100 MB stayed after the viewer closed), and a
    # thumbnail of its photo loaded for the grid does not bring it back (review: it decoded it again)
    assert viewer.loader.get(viewer.hit.path, VIEWER_LOAD) is None
    with qtbot.waitSignal(window.loader.loaded, timeout=10000):
        window.loader.request(viewer.hit.path, QSize(77, 55))
    qtbot.wait(300)
    assert viewer.loader.get(viewer.hit.path, VIEWER_LOAD) is None and viewer.picture.shown_size().isEmpty()
    # (trial 19) opened again, the photo is fitted, not at the zoom it was closed at
    viewer = open_viewer(qtbot, window, 2)
    assert viewer.fit, viewer.caption.text()
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    assert " · fitted " in viewer.caption.text(), viewer.caption.text()
    viewer.close()


def test_the_viewers_buttons_take_tab_and_draw_a_box_here_searches_a_box(qtbot, window, photo_dir):
    """(trial 4) The viewer's buttons could not be reached with Tab; "Draw a box here" ran a plain
    search of the whole photo; H in the viewer left the window's overlay as it was; Esc did not
    close the viewer once the window had been clicked."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    viewer = open_viewer(qtbot, window)
    viewer.activateWindow()
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    heat = window.heat_action.isChecked()
    qtbot.keyClick(viewer.scroll, Qt.Key_H)  # one overlay for the app: the window follows the viewer
    assert viewer.heat_check.isChecked() != heat and window.heat_action.isChecked() != heat
    qtbot.waitUntil(lambda: viewer.focusWidget() is not None, timeout=5000)
    reached = []
    for _ in range(9):
        if viewer.focusWidget() is viewer.box_btn:
            break
        qtbot.keyClick(viewer.focusWidget(), Qt.Key_Tab)
        reached.append(viewer.focusWidget())
    assert viewer.focusWidget() is viewer.box_btn, reached
    assert viewer.next_btn in reached and viewer.search_btn in reached
    before = viewer.row
    qtbot.keyClick(viewer.box_btn, Qt.Key_Right)  # the arrows still page through the results
    assert viewer.row == before + 1 and viewer.focusWidget() is viewer.box_btn
    path = viewer.hit.path
    row = viewer.row
    qtbot.keyClick(viewer.scroll, Qt.Key_Return)  # Enter on the picture presses no button ("Previous" was the default)
    assert viewer.row == row and viewer.isVisible()
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.keyClick(viewer.box_btn, Qt.Key_Return)
    assert not viewer.isVisible() and window.search.query_path == path
    w, h = window.query_view.orig_size
    box = window.search.last_request.box
    assert box is not None and box == pytest.approx((w / 4, h / 4, 3 * w / 4, 3 * h / 4), abs=1)
    # the viewer again; the window clicked (the viewer stays above it); Esc closes the viewer
    viewer = open_viewer(qtbot, window)
    view = window.results_view
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(0)).center())
    window.activateWindow()  # the window manager's part of the click (offscreen has none)
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(view, Qt.Key_Escape)
    assert not viewer.isVisible() and window.query_view.box is not None  # the box stays: Esc was the viewer's


def test_the_viewer_pages_through_what_the_cutoff_shows(qtbot, window, photo_dir):
    """The trial: with 45 of 100 results shown, the viewer's arrows went on to "#46 of 100 ·
    relevance 0.08", photos the cut-off hides."""
    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    scores = [h.score for h in res.hits]
    window.results.cutoff.setValue(int(scores[len(scores) // 2] * 100 + 1))
    shown = sum(not window.results_view.isRowHidden(r) for r in range(len(scores)))
    assert 0 < shown < len(scores)
    viewer = open_viewer(qtbot, window)
    seen = []
    for _ in range(shown + 1):
        seen.append(viewer.hit.path)
        qtbot.keyClick(viewer.scroll, Qt.Key_Right)
    # through the shown ones; past the last it stays there and says so (trial 6: it went round
    # to the first, which looked like keys that did nothing)
    assert len(set(seen)) == shown and seen[-1] == seen[-2]
    assert f"#{shown} of {shown} · the last result" in viewer.caption.text()
    # (trial 13) the Next button too says there is no next one
    assert not viewer.next_btn.isEnabled() and viewer.prev_btn.isEnabled()
    qtbot.keyClick(viewer.scroll, Qt.Key_Left)
    assert viewer.hit.path == seen[-3] and "the last result" not in viewer.caption.text()
    assert viewer.next_btn.isEnabled()
    # Space on Next onto the last result: the focus goes to Previous, not on to the next button
    # (a review: it landed on "Actual size", and the next Space changed the zoom)
    viewer.activateWindow()
    viewer.next_btn.setFocus()
    qtbot.waitUntil(viewer.next_btn.hasFocus, timeout=5000)
    qtbot.keyClick(viewer.next_btn, Qt.Key_Space)
    assert not viewer.next_btn.isEnabled() and viewer.focusWidget() is viewer.prev_btn, viewer.focusWidget()


def test_a_long_name_is_cut_in_its_middle_not_off_the_screen(qtbot, window, tmp_path):
    """Trial 28: a 217-character file name made the viewer 1,869 px wide on a 1,366 px screen (its
    last buttons off the edge) and ran off the preview pane's edge with no "…"."""
    root = tmp_path / "lib"
    long = "a_really_long_file_name_" + "from_my_camera_" * 12 + "edit_v2.png"
    for i in range(4):
        write_photo(root / f"k{i}.png", i, size=(120, 90))
    write_photo(root / long, 1, size=(120, 90))
    index_folder(qtbot, window, root)
    search(qtbot, window, root / long)
    viewer = open_viewer(qtbot, window, row=0)
    assert long in viewer.caption.text()
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=5000)
    room = window.screen().availableGeometry()  # it opens on most of the screen, the name does not widen it
    assert viewer.width() <= max(room.width() - 40, viewer.minimumSizeHint().width()), (viewer.width(), room)
    seen = viewer.caption.shown_text()
    assert "…" in seen and seen.startswith("#1 of") and seen.endswith("edit_v2.png"), seen
    qtbot.keyClick(viewer.scroll, Qt.Key_Escape)
    name_line = window.preview.caption.shown_text().split("\n")[1]
    assert "…" in name_line and name_line.endswith("edit_v2.png"), name_line
    assert window.preview.caption.fontMetrics().horizontalAdvance(name_line) <= window.preview.caption.width()


def test_the_viewer_zooms_with_the_plain_wheel_and_takes_ctrl_h(qtbot, window, photo_dir):
    """The trial: a plain wheel did nothing in the viewer (only Ctrl+wheel zoomed), and Ctrl+H (the
    overlay's shortcut in the main window) did nothing there."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    viewer = open_viewer(qtbot, window)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    fitted = viewer.picture.shown_size().width()
    wheel(viewer.scroll.viewport(), 1)
    assert not viewer.fit and viewer.picture.shown_size().width() > fitted
    zoomed = viewer.picture.shown_size().width()
    wheel(viewer.scroll.viewport(), -2)
    assert viewer.picture.shown_size().width() < zoomed
    heat = viewer.heat_check.isChecked()
    before = viewer.picture.grab().toImage()
    qtbot.keyClick(viewer.scroll, Qt.Key_H, Qt.ControlModifier)
    assert viewer.heat_check.isChecked() != heat
    # the overlay is drawn (the trial: ticked, nothing drawn), once its grid is made
    qtbot.waitUntil(lambda: viewer.picture.grab().toImage() != before, timeout=10000)
    viewer.close()


def test_the_viewer_zooms_about_the_mouse(qtbot, window, tmp_path):
    """The trial: the wheel zoomed about the photo's top, not about the pointer."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QWheelEvent

    d = tmp_path / "lib"
    for i in range(3):
        write_photo(d / f"p{i}.png", i, size=(1600, 1200))
    index_folder(qtbot, window, d)
    search(qtbot, window, d / "p0.png")
    viewer = open_viewer(qtbot, window)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    vp = viewer.scroll.viewport()
    at = QPoint(vp.width() * 3 // 4, vp.height() * 3 // 4)  # the lower right of the photo

    def under(point):  # which part of the photo is under the mouse: fractions of its width and height
        pic = viewer.picture
        q, size = pic.mapFrom(vp, point), pic.shown_size()
        return (q.x() - (pic.width() - size.width()) / 2) / size.width(), (q.y() - (pic.height() - size.height()) / 2) / size.height()

    for _ in range(2):
        qtbot.keyClick(viewer.scroll, Qt.Key_Plus)  # larger than the window first: room to scroll both ways
    before, width = under(at), viewer.picture.shown_size().width()
    for _ in range(3):
        ev = QWheelEvent(QPointF(at), QPointF(vp.mapToGlobal(at)), QPoint(0, 0), QPoint(0, 120), Qt.NoButton,
                         Qt.NoModifier, Qt.NoScrollPhase, False)
        QApplication.sendEvent(vp, ev)
    after = under(at)
    assert viewer.picture.shown_size().width() > 1.9 * width
    assert abs(after[0] - before[0]) < 0.01 and abs(after[1] - before[1]) < 0.01, (before, after)
    viewer.close()


def test_a_viewer_closed_by_the_cutoff_is_not_said_again_by_a_later_search(qtbot, window, photo_dir, monkeypatch):
    """The viewer's closing is said once: a cut-off that hides its photo says it then, and the next
    search does not say it again."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    viewer = open_viewer(qtbot, window)
    qtbot.keyClick(viewer.scroll, Qt.Key_Right)  # #2: below the query photo
    assert viewer.hit.score < 1.0
    window.activateWindow()
    qtbot.mouseClick(window.results.cutoff, Qt.LeftButton, pos=QPoint(window.results.cutoff.width() - 2, 5))
    qtbot.keyClick(window.results.cutoff, Qt.Key_End)  # the cut-off at its top: only the query photo stays
    assert not viewer.isVisible() and "the viewer closed" in window.status_label.text()
    answer_file_dialog(qtbot, photo_dir / "scene0" / "img0.jpg")
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(window.query.open_btn, Qt.LeftButton)
    assert window.status_label.text().startswith("Search took") and "viewer" not in window.status_label.text()


def test_the_viewer_says_its_zoom_when_fitted_too(qtbot, window, tmp_path):
    """Trial 30: fitted to the window the viewer said no zoom (only after a wheel or +)."""
    root = searched_library(qtbot, window, tmp_path / "lib", 3)
    viewer = viewer_on_a_new_photo(qtbot, window, root / "big.png", (2400, 1800))
    fitted = viewer.picture.shown_size().width() / 2400
    assert fitted < 0.5 and f" · fitted {fitted:.0%} · " in viewer.caption.text(), (fitted, viewer.caption.text())
    qtbot.keyClick(viewer.scroll, Qt.Key_F)
    assert " · 100% · " in viewer.caption.text(), viewer.caption.text()
    viewer.close()


def test_the_viewer_zooms_far_holding_no_more_than_the_photo(qtbot, window, tmp_path):
    """Zoomed in, the viewer held the photo scaled whole: 8x of a 12 MP photo is a 3.2 GB picture,
    made twice over (benchmarks/gui_memory.py). It draws the part on screen from the photo."""
    from app.gui.viewer import MAX_ZOOM, VIEWER_LOAD

    root = searched_library(qtbot, window, tmp_path / "lib", 2)
    write_photo(root / "big.png", 9, size=(2400, 1800))
    window.set_query_path(str(root / "big.png"))
    qtbot.waitUntil(lambda: window.search.last_result is not None and window.search.last_result.request_id == window.search.last_request.id
                    and window.results_model.rowCount() == 3, timeout=30000)
    viewer = open_viewer(qtbot, window, row=0)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    qtbot.keyClick(viewer.scroll, Qt.Key_H)
    for _ in range(30):
        qtbot.keyClick(viewer.scroll, Qt.Key_Plus)
    assert viewer.zoom == MAX_ZOOM and viewer.picture.shown_size() == QSize(2400 * 16, 1800 * 16)
    loaded = viewer.loader.get(viewer.hit.path, VIEWER_LOAD)
    assert viewer.picture.base.width() <= loaded.width() and viewer.picture.base.height() <= loaded.height()
    # what is on screen is the photo, drawn: the middle of the window shows the middle of the photo
    # (compared with the overlay off: it tints the photo)
    photo = loaded.pixelColor(1200, 900)
    qtbot.keyClick(viewer.scroll, Qt.Key_H)
    qtbot.wait(100)
    seen = viewer.scroll.viewport().grab().toImage()
    middle = seen.pixelColor(seen.width() // 2, seen.height() // 2)
    assert max(abs(middle.red() - photo.red()), abs(middle.green() - photo.green()), abs(middle.blue() - photo.blue())) < 40, \
        (middle.getRgb(), photo.getRgb())
    viewer.close()


def test_actual_size_shows_a_large_photos_own_pixels(qtbot, window, tmp_path):
    """Trial 32: a photo larger than 4096 px was shown from its 4096-px copy, and its zoom was of
    that copy: a 6144x3000 photo read "fitted 23%" drawn at 16 %, and at *Actual size* ("100%")
    two thirds of its pixels showed, each stretched. The zoom is of the photo's own pixels, and
    at actual size its own pixels are drawn one for one."""
    root = searched_library(qtbot, window, tmp_path / "lib", 2)
    viewer = viewer_on_a_new_photo(qtbot, window, root / "huge.jpg", (6000, 2400))
    fitted = viewer.picture.shown_size().width() / 6000
    assert f" · fitted {fitted:.0%} · " in viewer.caption.text(), (fitted, viewer.caption.text())
    reads = []
    viewer.whole.loaded.connect(reads.append)
    qtbot.keyClick(viewer.scroll, Qt.Key_F)
    assert " · 100%" in viewer.caption.text(), viewer.caption.text()
    qtbot.keyClick(viewer.scroll, Qt.Key_Plus)  # drawn again while it is read: read once (a review: read
    qtbot.keyClick(viewer.scroll, Qt.Key_Minus)  # again for each redraw, two whole photos held at once)
    qtbot.waitUntil(lambda: viewer.picture.base is not None and viewer.picture.base.size() == QSize(6000, 2400), timeout=20000)
    qtbot.wait(1500)
    assert len(reads) == 1, reads
    assert viewer.picture.shown_size() == QSize(6000, 2400) and " · 100% · " in viewer.caption.text(), viewer.caption.text()
    # about the middle of the photo, as it was fitted (not its top-left corner, the sky)
    bars = viewer.scroll.horizontalScrollBar(), viewer.scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: all(b.maximum() > 0 and abs(b.value() - b.maximum() / 2) <= 0.05 * b.maximum() for b in bars),
                    timeout=3000)
    # what is on screen, one for one: a patch of the window is the same patch of the file
    bars[0].setValue(3000)
    bars[1].setValue(1000)
    qtbot.wait(100)
    seen = viewer.scroll.viewport().grab().toImage().convertToFormat(QImage.Format_RGB888)
    at = viewer.picture.mapFrom(viewer.scroll.viewport(), QPoint(0, 0))
    screen = np.frombuffer(seen.constBits(), np.uint8).reshape(seen.height(), seen.bytesPerLine())[:, :seen.width() * 3]
    screen = screen.reshape(seen.height(), seen.width(), 3)[:64, :64].astype(int)
    with Image.open(root / "huge.jpg") as im:
        photo = np.asarray(im.convert("RGB").crop((at.x(), at.y(), at.x() + 64, at.y() + 64))).astype(int)
    assert np.abs(screen - photo).mean() < 6, np.abs(screen - photo).mean()
    viewer.close()
    assert viewer.whole.get(viewer.hit.path) is None  # let go with the viewer


def test_the_viewer_opens_on_most_of_the_screen_and_inside_it(qtbot, window, tmp_path):
    """Trial 32: the viewer opened at 1000x700 whatever the screen (a small window in the middle
    of a 1920x1080 one), and wider than a screen narrower than 1000 px."""
    searched_library(qtbot, window, tmp_path / "lib", 2)
    viewer = open_viewer(qtbot, window)
    room = window.screen().availableGeometry()
    assert viewer.width() >= min(0.7 * room.width(), room.width() - 40) and viewer.height() >= min(0.75 * room.height(), 700)
    least = viewer.minimumSizeHint()  # its buttons in a row (the window's own minimum is 960x620)
    assert viewer.width() <= max(room.width(), least.width()) and viewer.height() <= room.height(), (viewer.size(), room)
    viewer.close()
