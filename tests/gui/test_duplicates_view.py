"""Duplicates in the window: the Duplicates view, its list and its export, and One per duplicate in the grid."""
import os
import re
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QPoint, Qt

from tests.conftest import write_photo
from tests.gui.conftest import answer_file_dialog, index_folder, make_window
from tests.gui.helpers import open_viewer, search, shown_whole


def test_export_list_writes_the_file_the_person_chose(qtbot, window, tmp_path, monkeypatch):
    """(2) The Export list… button writes the list (its clicked(bool) passed False as the target)."""
    from tests.gui.test_features import library_with_copies

    d = library_with_copies(tmp_path)
    index_folder(qtbot, window, d)
    window.dup_action.trigger()
    dlg = window._dups
    dlg.slider.setValue(100)
    qtbot.waitUntil(lambda: bool(dlg.groups) and dlg.shown == dlg.runner.n, timeout=20000)
    target = tmp_path / "list.csv"
    answer_file_dialog(qtbot, target)
    qtbot.mouseClick(dlg.export_btn, Qt.LeftButton)
    assert target.exists() and "p0-copy.png" in target.read_text()
    # the dialog's words in the list (trial 10: "turned" for a mirrored copy, no reason)
    import csv
    rows = list(csv.DictReader(target.open()))
    assert {r["reason"] for r in rows if r["path"].endswith("p0-copy.png")} == {"the same file (identical bytes)"}
    assert any(r["reason"].startswith("the same photo rotated") for r in rows if r["path"].endswith("p1-turned.png"))
    assert dlg.done_note.text() == "Saved 2 groups to list.csv"  # the person sees that it was written
    # (trial 11) a name typed without an extension gets the chosen format's
    offered = []
    answer_file_dialog(qtbot, tmp_path / "dups1", offered, file_type="J")
    qtbot.mouseClick(dlg.export_btn, Qt.LeftButton)
    assert (tmp_path / "dups1.json").exists() and not (tmp_path / "dups1").exists()
    # (trial 12) the dialog opens where the last list went, not in the home folder
    assert offered == [str(tmp_path / "duplicates.csv")], offered
    answer_file_dialog(qtbot, tmp_path / "no" / "x.csv")
    qtbot.mouseClick(dlg.export_btn, Qt.LeftButton)  # a folder that does not exist: one line, no traceback
    assert dlg.done_note.text() == "Could not save the list: No such file or directory"
    # (trial 11) the buttons act only where there is something to act on
    dlg.tree.setCurrentItem(None)
    assert not dlg.reveal_btn.isEnabled() and not dlg.similar_btn.isEnabled() and not dlg.copy_btn.isEnabled()
    qtbot.mouseClick(dlg.tree.viewport(), Qt.LeftButton, pos=dlg.tree.visualItemRect(dlg.tree.topLevelItem(0).child(1)).center())
    assert dlg.reveal_btn.isEnabled() and dlg.similar_btn.isEnabled() and dlg.copy_btn.isEnabled()
    # the slider moved with the keys: other groups, the old note goes, the least alike copy is named
    shown = dlg.shown
    dlg.slider.setFocus()
    qtbot.keyClick(dlg.slider, Qt.Key_PageDown)
    qtbot.waitUntil(lambda: dlg.shown > shown and dlg.shown == dlg.runner.n, timeout=20000)
    assert dlg.done_note.text() == "" and re.search(r"; (the least alike copy found: \d\.\d\d|every copy found is the "
                                                    r"same picture)\)", dlg.summary.text()), dlg.summary.text()
    headers = [dlg.tree.headerItem().text(i) for i in range(dlg.tree.columnCount())]
    assert "Folder" in headers  # (10) which folder each copy is in
    # a group's title has the whole row (the trial: "(3 ph…" cut in the Photo column, even at 1920 px)
    top = dlg.tree.topLevelItem(0)
    assert dlg.tree.visualRect(dlg.tree.indexFromItem(top, 0)).width() > dlg.tree.columnWidth(0), top.text(0)
    # every reason is read whole at the dialog's own size (trial 6: cut, the full text in a tooltip)
    reasons = [top.child(i) for top in map(dlg.tree.topLevelItem, range(dlg.tree.topLevelItemCount()))
               for i in range(top.childCount())]
    assert reasons and all(shown_whole(dlg.tree, item, 3) for item in reasons), [r.text(3) for r in reasons]
    dlg.close()


def test_one_per_duplicate_hides_re_encoded_and_resized_copies_too(qtbot, window, tmp_path):
    d = tmp_path / "lib"
    for i in range(8):
        write_photo(d / f"p{i}.png", i, size=(320, 240))
    src = Image.open(d / "p0.png").convert("RGB")
    src.save(d / "p0-web.jpg", quality=60)
    src.resize((160, 120), Image.LANCZOS).save(d / "p0-small.png")
    src.transpose(Image.Transpose.ROTATE_90).save(d / "p0-turned.png")
    index_folder(qtbot, window, d)
    search(qtbot, window, d / "p0.png")
    copies = {"p0.png", "p0-web.jpg", "p0-small.png", "p0-turned.png"}
    names = [Path(h.path).name for h in window.results_model.hits]
    assert copies <= set(names) and len(names) == 11
    box = window.results.hide_dups
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(box, Qt.LeftButton, pos=QPoint(8, box.height() // 2))
    names = [Path(h.path).name for h in window.results_model.hits]
    assert box.isChecked() and names[0] == "p0.png"
    assert not (copies - {"p0.png"}) & set(names), names  # the copies are hidden
    assert {f"p{i}.png" for i in range(1, 8)} <= set(names)  # and the other photos are not


def test_one_per_duplicate_shows_the_original_at_the_place_of_its_best_copy(qtbot, window, tmp_path):
    """The trial: One per duplicate kept whichever copy ranked first (a small web copy), not the
    photo Duplicates keeps (the original: most pixels). Trial 6: it showed a 3x enlargement of
    the original (most pixels), which Duplicates never keeps."""
    d = tmp_path / "lib"
    for i in range(8):
        write_photo(d / f"p{i}.png", i, size=(320, 240))
    os.utime(d / "p0.png", (1.6e9, 1.6e9))  # the original is older than the copies made from it
    src = Image.open(d / "p0.png").convert("RGB")
    bright = Image.eval(src, lambda v: min(255, int(v * 1.15)))
    bright.resize((240, 180), Image.LANCZOS).save(d / "p0-small.png")  # a brightened, smaller copy
    src.transpose(Image.Transpose.FLIP_LEFT_RIGHT).resize((960, 720), Image.BICUBIC).save(d / "p0-big.jpg", quality=92)
    query = tmp_path / "query.jpg"  # outside the library: nothing is pinned first
    bright.save(query, quality=90)
    index_folder(qtbot, window, d)
    search(qtbot, window, query)
    assert Path(window.results_model.hits[0].path).name == "p0-small.png"  # the best match is the small copy
    box = window.results.hide_dups
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(box, Qt.LeftButton, pos=QPoint(8, box.height() // 2))
    names = [Path(h.path).name for h in window.results_model.hits]
    assert names[0] == "p0.png" and "p0-small.png" not in names and "p0-big.jpg" not in names, names
    # trial 6: nothing told that the tile stood for hidden copies; its tooltip and the viewer say so
    first = window.results_model.hits[0]
    assert sorted(Path(p).name for p in first.hidden_copies) == ["p0-big.jpg", "p0-small.png"]
    assert not any(h.hidden_copies for h in window.results_model.hits[1:])
    tip = window.results_model.data(window.results_model.index(0), Qt.ToolTipRole)
    assert "also stands for 2 copies" in tip and "p0-small.png" in tip, tip
    viewer = open_viewer(qtbot, window, row=0)
    assert "(and 2 copies, One per duplicate)" in viewer.caption.text()
    # trial 9: the count line read as if the cut-off hid them
    assert window.results.info.text().startswith("8 results (+2 copies in a tile);"), window.results.info.text()
    # trial 32: "100 results (+3 copies in 3 tiles); no other close match (best…" was cut at 1366 px
    assert "(best" not in window.results.info.text(), window.results.info.text()
    # trial 25: "47 shown (+1 copy) of 100; the cut-off hides 53" read as 101 photos
    slider = window.results.cutoff
    slider.setFocus()
    while window.results_view.isRowHidden(0) or not any(
            window.results_view.isRowHidden(r) for r in range(window.results_model.rowCount())):
        qtbot.keyClick(slider, Qt.Key_Right)
        assert slider.value() < slider.maximum(), window.results.info.text()
    shown = sum(not window.results_view.isRowHidden(r) for r in range(window.results_model.rowCount()))
    assert re.match(rf"{shown} shown of 8 \(\+2 copies in a tile\); the cut-off hides {8 - shown}",
                    window.results.info.text()), window.results.info.text()
    assert "2 copies are folded into their photo's tile" in window.results.info.toolTip()


def test_a_selected_copy_folded_into_its_original_by_a_redone_search_keeps_that_tile_selected(qtbot, window, tmp_path):
    """Review of trial 27's fix: with One per duplicate, the selected photo (a small copy) became a
    copy folded into its original's tile once the original was added; the selection went."""
    a, b = tmp_path / "a", tmp_path / "b"
    for i in range(1, 6):
        write_photo(a / f"p{i}.png", i, size=(320, 240))
    write_photo(b / "p0.png", 0, size=(320, 240))
    os.utime(b / "p0.png", (1.6e9, 1.6e9))  # the original, older than its copy
    src = Image.open(b / "p0.png").convert("RGB")
    src.resize((240, 180), Image.LANCZOS).save(a / "p0-small.png")
    query = tmp_path / "query.jpg"
    src.save(query, quality=90)
    index_folder(qtbot, window, a)
    search(qtbot, window, query)
    box = window.results.hide_dups
    if not box.isChecked():  # its search waited for (else, a moment later, it redid the list under the selection)
        with qtbot.waitSignal(window.searchFinished, timeout=30000):
            qtbot.mouseClick(box, Qt.LeftButton, pos=QPoint(8, box.height() // 2))
    view = window.results_view
    row = next(r for r, h in enumerate(window.results_model.hits) if Path(h.path).name == "p0-small.png")
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(row)).center())
    assert Path(window.preview.hit.path).name == "p0-small.png"
    with qtbot.waitSignal(window.searchFinished, timeout=30000):  # searched again by the window
        window.add_folder(str(b))
    first = window.results_model.hits[0]
    assert Path(first.path).name == "p0.png" and [Path(p).name for p in first.hidden_copies] == ["p0-small.png"]
    assert view.currentIndex().row() == 0 and Path(window.preview.hit.path).name == "p0.png"


def test_duplicates_shows_a_long_name_on_the_lines_of_its_row(qtbot, window, tmp_path):
    """Trial 32: a long name was cut to one line in Duplicates ("Summer holiday i…inal edit
    v3.jpg") beside a thumbnail with room for three. It wraps: its cell's text spans more than one
    line of the font."""
    from tests.gui.test_features import library_with_copies

    d = library_with_copies(tmp_path)
    long_name = "Summer holiday in Paris with the whole family - Moulin Rouge at night final edit v3.png"
    (d / "b" / "p0-copy.png").rename(d / "b" / long_name)
    index_folder(qtbot, window, d)
    window.dup_action.trigger()
    dlg = window._dups
    qtbot.waitUntil(lambda: bool(dlg.groups) and dlg.shown == dlg.runner.n, timeout=20000)
    tree = dlg.tree
    item = next(g.child(i) for g in (tree.topLevelItem(k) for k in range(tree.topLevelItemCount()))
                for i in range(g.childCount()) if g.child(i).text(0) == long_name)
    tree.scrollToItem(item)
    qtbot.wait(100)
    rect = tree.visualItemRect(item)
    rect.setLeft(rect.left() + tree.iconSize().width() + 8)  # the name, right of its thumbnail
    rect.setRight(tree.header().sectionViewportPosition(1) - 1)
    cell = tree.viewport().grab(rect).toImage()
    ink = [y for y in range(cell.height()) if any(cell.pixelColor(x, y).lightness() < 110 for x in range(cell.width()))]
    assert ink and ink[-1] - ink[0] > 1.5 * tree.fontMetrics().height(), (ink[:1], ink[-1:], tree.fontMetrics().height())
    dlg.close()


def test_one_per_duplicate_is_remembered(qtbot, tiny_home):
    """The second trial: One per duplicate was off again at every start (the overlay is remembered)."""
    win = make_window(qtbot, tiny_home)
    box = win.results.hide_dups
    qtbot.mouseClick(box, Qt.LeftButton, pos=QPoint(8, box.height() // 2))
    assert box.isChecked()
    win.close()
    again = make_window(qtbot, tiny_home)
    try:
        assert again.results.hide_dups.isChecked()
    finally:
        again.close()


def test_the_duplicates_settings_are_remembered(qtbot, tiny_home):
    """Trial 29: the Duplicates slider was back at 0.92 (and Include crops on) at every start."""
    win = make_window(qtbot, tiny_home)
    win.dup_action.trigger()
    dlg = win._dups
    qtbot.mouseClick(dlg.slider, Qt.LeftButton, pos=QPoint(dlg.slider.width() - 2, dlg.slider.height() // 2))
    for _ in range(3):
        qtbot.keyClick(dlg.slider, Qt.Key_Left)
    assert dlg.slider.value() == 96 and dlg.value.text() == "0.96"
    qtbot.mouseClick(dlg.crops, Qt.LeftButton, pos=QPoint(8, dlg.crops.height() // 2))
    assert not dlg.crops.isChecked()
    dlg.close()
    win.close()
    again = make_window(qtbot, tiny_home)
    try:
        again.dup_action.trigger()
        dlg = again._dups
        assert dlg.slider.value() == 96 and dlg.value.text() == "0.96" and not dlg.crops.isChecked()
        dlg.close()
    finally:
        again.close()


def test_the_summary_names_the_least_alike_crop_as_the_list_does(qtbot, window, tmp_path):
    """The summary said "the least alike copy found: 0.99" while the exported list gave a crop at
    0.958: a crop's figure (its window's) is said apart, the one the list and the file give."""
    import csv

    from tests.conftest import shared_photos

    src = Image.open(shared_photos("ukbench", 1)[0]).convert("RGB")
    d = tmp_path / "lib"
    d.mkdir()
    src.save(d / "photo.jpg", quality=92)
    w, h = src.size
    src.crop((int(w * 0.1), int(h * 0.12), int(w * 0.78), int(h * 0.8))).save(d / "photo-crop.jpg", quality=92)
    src.resize((w // 2, h // 2), Image.LANCZOS).save(d / "photo-half.jpg", quality=92)
    for i in range(4):
        write_photo(d / f"other{i}.png", 70 + i, size=(320, 240))
    index_folder(qtbot, window, d)
    window.dup_action.trigger()  # View -> Duplicates…
    dlg = window._dups
    qtbot.waitUntil(lambda: dlg.shown == dlg.runner.n and dlg.shown > 0, timeout=30000)
    rows = list(csv.DictReader(open(dlg.export(str(tmp_path / "dups.csv")))))
    crops = [float(r["similarity"]) for r in rows if r["relation"] == "crop"]
    assert crops, rows
    assert f"the least alike crop: {min(crops):.2f}" in dlg.summary.text(), dlg.summary.text()
