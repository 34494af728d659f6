"""The filters and the relevance cut-off: dates, folders, what they hide and what the grid says then."""
import os
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QTimer

from tests.conftest import write_photo
from tests.gui.conftest import answer_file_dialog, index_folder, make_window
from tests.gui.helpers import search


def test_the_grid_keys_stay_on_what_the_cutoff_shows(qtbot, window, photo_dir):
    """Trial 28: with "3 shown of 100", End in the grid went to #100 (hidden: the preview showed it
    at 0.00) and Return then opened a viewer that said "Loading…" for ever, its arrows dead."""
    index_folder(qtbot, window, photo_dir)
    res = search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    scores = [h.score for h in res.hits]
    window.results.cutoff.setValue(int(scores[len(scores) // 2] * 100 + 1))
    view = window.results_view
    shown = sum(not view.isRowHidden(r) for r in range(len(scores)))
    assert 0 < shown < len(scores)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(0)).center())
    for key in (Qt.Key_End, Qt.Key_PageDown, Qt.Key_Down, Qt.Key_Right):
        qtbot.keyClick(view, key)
        assert view.currentIndex().row() == shown - 1, (key, view.currentIndex().row(), shown)
    assert f"#{shown} " in window.preview.caption.text()
    qtbot.keyClick(view, Qt.Key_Return)
    qtbot.waitUntil(lambda: getattr(window, "_viewer", None) is not None and window._viewer.isVisible(), timeout=5000)
    viewer = window._viewer
    assert f"#{shown} of {shown}" in viewer.caption.text()
    qtbot.keyClick(viewer.scroll, Qt.Key_Left)
    assert f"#{shown - 1} of {shown}" in viewer.caption.text()


def test_the_date_filter_opens_at_its_day_offers_every_year_and_reads_a_reversed_range(qtbot, window, tmp_path):
    """The trial: both calendars opened at today's month whatever the field held; the quick list
    stopped 12 years back (photos from 2005 had no entry); a range typed the other way round gave
    "No results"; subfolders were not set under their folder in the folder list."""
    import time as _time
    from datetime import date

    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.gui.results_pane import DEPTH_ROLE

    d = tmp_path / "lib"
    for i, year in enumerate((2005, 2012, 2024)):
        p = write_photo(d / "trip" / "day" / f"p{i}.png", i, size=(120, 90))
        t = _time.mktime((year, 6, 1, 12, 0, 0, 0, 0, -1))
        os.utime(p, (t, t))
    index_folder(qtbot, window, d)
    search(qtbot, window, d / "trip" / "day" / "p0.png")
    qtbot.mouseClick(window.results.filter_btn, Qt.LeftButton)
    when = window.results.when
    assert "2005" in [when.itemText(i) for i in range(when.count())]
    # only the years that hold photos (the trial: 2006-2014 offered, each giving "No results")
    years = lambda: [when.itemText(i) for i in range(when.count()) if when.itemText(i).isdigit()]  # noqa: E731
    qtbot.waitUntil(lambda: "2008" not in years(), timeout=10000)
    assert years() == [str(y) for y in (2024, 2012, 2005) if y < date.today().year - 1]  # recent years are quick ranges
    when.setCurrentIndex(when.findText("Custom range…"))
    after = window.results.after
    assert after.date() == date(2005, 6, 1)
    pages = []

    def look():  # the calendar's page while its menu is open, then close it as a person would (Esc)
        pages.append((after.calendar.yearShown(), after.calendar.monthShown()))
        after.pick.menu().close()

    QTimer.singleShot(300, look)
    qtbot.mouseClick(after.pick, Qt.LeftButton)
    qtbot.waitUntil(lambda: bool(pages), timeout=5000)
    assert pages[0] == (2005, 6)
    # a range typed the other way round reads as the range meant
    for field, text in ((window.results.after.edit, "2013-01-01"), (window.results.before.edit, "2004-01-01")):
        field.setFocus()
        qtbot.keyClick(field, Qt.Key_A, Qt.ControlModifier)
        qtbot.keyClicks(field, text)
        qtbot.keyClick(field, Qt.Key_Return)
    qtbot.waitUntil(lambda: sorted(Path(h.path).name for h in window.results_model.hits) == ["p0.png", "p1.png"],
                    timeout=20000)
    assert (window.results.after.edit.text(), window.results.before.edit.text()) == ("2004-01-01", "2013-01-01")
    # the subfolders are drawn under their folder, deeper ones further in
    folder = window.results.folder
    qtbot.waitUntil(lambda: folder.findData(str((d / "trip" / "day").resolve())) > 0, timeout=10000)
    delegate, view = folder.itemDelegate(), folder.view()
    lefts = {}
    for i in range(folder.count()):
        opt = QStyleOptionViewItem()
        opt.rect = view.visualRect(folder.model().index(i, 0))
        delegate.initStyleOption(opt, folder.model().index(i, 0))
        lefts[folder.itemText(i)] = (opt.rect.left(), folder.itemData(i, DEPTH_ROLE) or 0)
    assert lefts["trip"][0] > lefts["All folders"][0] and lefts["day"][0] > lefts["trip"][0], lefts
    # each by its own name under its parent (trial 16: "trip/day" under "trip"), so typing it picks it
    folder.setFocus()
    qtbot.keyClicks(folder, "day")
    assert folder.currentData() == str((d / "trip" / "day").resolve()), folder.currentText()
    # the library folder too, by its name as the Library pane lists it (it read its whole path)
    assert folder.itemText(1) == "lib" and folder.itemData(1, Qt.ToolTipRole) == str(d.resolve())


def test_the_relevance_cut_off_is_remembered(qtbot, tiny_home):
    """Trial 6: the cut-off was back to "off" at every start."""
    win = make_window(qtbot, tiny_home)
    slider = win.results.cutoff
    qtbot.mouseClick(slider, Qt.LeftButton, pos=QPoint(2, slider.height() // 2))  # focus, at its start
    for _ in range(3):
        qtbot.keyClick(slider, Qt.Key_PageUp)
    assert slider.value() == 30
    win.close()
    again = make_window(qtbot, tiny_home)
    try:
        assert again.results.cutoff.value() == 30 and again.results.cutoff_label.text() == "min 0.30"
        assert again.results.min_score == 0.30
    finally:
        again.close()


def test_a_custom_date_range_leaves_the_choice_of_time_readable_at_the_smallest_window(qtbot, window, photo_dir):
    """The trial: at 960 px the two day fields beside the choice of time clipped it ("Custom ra");
    the number of results read "Show 1" for "Show 100" (seen in a real window)."""
    index_folder(qtbot, window, photo_dir)
    window.resize(window.minimumSize())
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    qtbot.mouseClick(window.results.filter_btn, Qt.LeftButton)
    when = window.results.when
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        when.setFocus()
        for _ in range(when.count()):  # down the list with the keyboard, to its last entry
            qtbot.keyClick(when, Qt.Key_Down)
    assert when.currentText() == "Custom range…"
    qtbot.waitUntil(lambda: window.results.before.isVisible(), timeout=5000)
    assert window.width() <= 980
    assert when.width() >= when.sizeHint().width(), (when.width(), when.sizeHint().width())
    for field in (window.results.after, window.results.before, window.results.count):  # "Show 100" read "Show 1"
        assert field.width() >= field.sizeHint().width(), field


def test_the_folder_filter_keeps_and_gains_subfolders_while_it_is_open(qtbot, window, tmp_path):
    """The trial: with the filter open, adding a folder left only the library folders in the list
    (every subfolder gone) until the filter was closed and opened again."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_photo(a / "trip" / "p0.png", 1, size=(120, 90))
    write_photo(a / "home" / "p1.png", 2, size=(120, 90))
    write_photo(b / "2019" / "p2.png", 3, size=(120, 90))
    index_folder(qtbot, window, a)
    search(qtbot, window, a / "trip" / "p0.png")
    qtbot.mouseClick(window.results.filter_btn, Qt.LeftButton)
    folder = window.results.folder
    qtbot.waitUntil(lambda: folder.findData(str((a / "trip").resolve())) > 0, timeout=10000)
    index_folder(qtbot, window, b)
    want = [str(p.resolve()) for p in (a / "trip", a / "home", b / "2019")]
    qtbot.waitUntil(lambda: all(folder.findData(p) > 0 for p in want), timeout=10000)


def test_the_preview_forgets_a_result_the_cutoff_hides(qtbot, window, photo_dir):
    """Trial 12: the preview kept showing the selected result after the cut-off hid it."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    view, hits = window.results_view, window.results_model.hits
    last = len(hits) - 1
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(last)).center())
    assert Path(hits[last].path).name in window.preview.caption.text()
    window.results.cutoff.setFocus()
    while not view.isRowHidden(last):  # the cut-off raised with the keys until it hides that result
        qtbot.keyClick(window.results.cutoff, Qt.Key_PageUp)
    assert window.preview.hit is None and window.preview.caption.text() == ""


def test_the_cutoff_keeps_every_result_that_reads_at_it(qtbot, window, photo_dir):
    """Trial 13: results that read "1.00" in the grid vanished at "min 1.00", and one that read
    "0.99" at "min 0.99": the cut-off compared the unrounded relevance with the number it shows."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    view, hits = window.results_view, window.results_model.hits
    shown = [float(window.results_view.itemDelegate().caption(h, view.font(), 200)[1]) for h in hits]
    rounded_up = [(row, s) for row, (h, s) in enumerate(zip(hits, shown)) if 0 < s and h.score < s]
    assert rounded_up, [(h.score, s) for h, s in zip(hits, shown)]
    row, reads = rounded_up[-1]
    window.results.cutoff.setFocus()
    qtbot.keyClick(window.results.cutoff, Qt.Key_Home)
    for _ in range(round(reads * 100)):  # the cut-off set with the keys to what that result reads
        qtbot.keyClick(window.results.cutoff, Qt.Key_Right)
    assert window.results.cutoff_label.text() == f"min {reads:.2f}"
    assert not view.isRowHidden(row)
    assert all(view.isRowHidden(r) == (s < reads) for r, s in enumerate(shown))


def test_a_grid_emptied_by_the_cutoff_says_so_in_the_grid(qtbot, window, photo_dir, tmp_path, monkeypatch):
    """Trial 13: a cut-off of 0.99 remembered from before the restart left the next search's grid
    empty, said only in the small line beside the slider. The grid itself says it now."""
    index_folder(qtbot, window, photo_dir)
    window.results.cutoff.setFocus()
    qtbot.keyClick(window.results.cutoff, Qt.Key_End)  # as high as it goes
    write_photo(tmp_path / "outside.png", 77, size=(160, 120))  # not in the library: no own photo at 1.00
    search(qtbot, window, tmp_path / "outside.png")
    view = window.results_view
    n = len(window.results_model.hits)
    assert n and all(view.isRowHidden(r) for r in range(n))
    blank = view.viewport().grab().toImage()
    assert view.empty_note.startswith("No result reads 1.00 or more") and f"the {n} nearest photos" in view.empty_note, \
        view.empty_note
    middle = blank.copy(0, blank.height() // 2 - 30, blank.width(), 60)
    assert len({middle.pixel(x, y) for x in range(0, middle.width(), 2) for y in range(0, 60, 2)}) > 2  # words drawn
    qtbot.keyClick(window.results.cutoff, Qt.Key_Home)
    assert view.empty_note == "" and not view.isRowHidden(0)
    # emptied again, then a photo that cannot be read is opened: the last search stays, its words
    # with it (a review: they once stayed over the empty grid of the photo that could not be read)
    qtbot.keyClick(window.results.cutoff, Qt.Key_End)
    assert view.empty_note
    note, hits = view.empty_note, list(window.results_model.hits)
    (tmp_path / "broken.jpg").write_bytes(b"not a photo")
    answer_file_dialog(qtbot, tmp_path / "broken.jpg")
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(window.query.open_btn, Qt.LeftButton)
    assert window.results_model.hits == hits and view.empty_note == note, (window.status_label.text(), view.empty_note)
    assert window.status_label.text().startswith("Cannot read broken.jpg: ")


def test_an_empty_grid_under_a_filter_blames_the_filter_not_the_library(qtbot, window, tmp_path):
    """Trial 30: with Taken: 2023 on a landmark box, the empty grid said "the library may hold
    nothing like this" of a library holding 48 photos of it, all outside the filter."""
    root = tmp_path / "lib"
    for i in range(4):
        write_photo(root / ("a" if i < 2 else "b") / f"k{i:02d}.png", i, size=(120, 90))
    index_folder(qtbot, window, root)
    search(qtbot, window, root / "a" / "k01.png")
    slider = window.results.cutoff
    slider.setFocus()
    qtbot.keyClick(slider, Qt.Key_End)  # the highest cut-off: only the photo itself reads 1
    qtbot.mouseClick(window.results.filter_btn, Qt.LeftButton)
    folder = window.results.folder
    qtbot.waitUntil(lambda: folder.findData(str((root / "b").resolve())) > 0, timeout=10000)
    folder.setFocus()
    qtbot.keyClicks(folder, "b")
    qtbot.waitUntil(lambda: window.results_view.empty_note != "" and window.search.last_request.filters.active, timeout=10000)
    assert "the photos the filter keeps may hold nothing like this" in window.results_view.empty_note
