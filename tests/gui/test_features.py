"""pytest-qt tests of the duplicates view, the filter bar, hiding exact duplicates, Find similar
from the duplicates view, and thumbnails of HEIC and RAW photos."""
import csv
import json
import os
import time
from datetime import date
from pathlib import Path

from PIL import Image
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QStyleOptionViewItem

from app.gui.workers import read_qimage
from tests.conftest import write_photo
from tests.gui.conftest import index_folder
from tests.rawfile import write_dng


def library_with_copies(tmp_path):
    d = tmp_path / "lib"
    for i in range(8):
        write_photo(d / "a" / f"p{i}.png", i, size=(160, 120))
    for i in range(4):
        write_photo(d / "b" / f"q{i}.png", 40 + i, size=(160, 120))
    (d / "b" / "p0-copy.png").write_bytes((d / "a" / "p0.png").read_bytes())
    Image.open(d / "a" / "p1.png").transpose(Image.Transpose.ROTATE_90).save(d / "b" / "p1-turned.png")
    return d


def test_duplicates_view_groups_exports_and_finds_similar(qtbot, window, tmp_path):
    d = library_with_copies(tmp_path)
    (d / "b" / "p0-link.png").symlink_to(d / "a" / "p0.png")
    Image.open(d / "a" / "p1.png").resize((120, 90), Image.LANCZOS).save(d / "b" / "p1-small.png")
    index_folder(qtbot, window, d)
    before = {p: p.read_bytes() for p in d.rglob("*.png")}
    window.dup_action.trigger()  # View -> Duplicates…
    dlg = window._dups
    qtbot.waitUntil(lambda: dlg.shown == dlg.runner.n and dlg.shown > 0, timeout=20000)
    groups = {frozenset(Path(m.path).name for m in g.members): g.kind for g in dlg.groups}
    assert groups == {frozenset({"p0.png", "p0-copy.png", "p0-link.png"}): "exact",
                      frozenset({"p1.png", "p1-turned.png", "p1-small.png"}): "turned"}
    # a group's title names each kind of copy it holds (trial 27: "resized copies" over an identical file too)
    titles = [dlg.tree.topLevelItem(k).text(0) for k in range(dlg.tree.topLevelItemCount())]
    assert "turned or mirrored copies and resized copies (3 photos)" in " ".join(titles), titles
    # the slider to its strictest with the keyboard: the same photo turned still has the same pixels
    dlg.slider.setFocus()
    shown = dlg.shown
    qtbot.keyClick(dlg.slider, Qt.Key_End)
    qtbot.waitUntil(lambda: dlg.shown > shown and dlg.shown == dlg.runner.n, timeout=20000)
    assert dlg.value.text() == "0.99" and len(dlg.groups) == 2
    # a link frees nothing: counted apart (trial 23: "3 could go" counted links)
    assert dlg.summary.text().startswith("2 groups, 6 photos: 3 could go (and 1 link, which frees no space) if"), \
        dlg.summary.text()
    # the line wraps: it does not set the dialog's width (it pushed the dialog past a 1366 px screen's edge)
    assert dlg.minimumSizeHint().width() < 900, dlg.minimumSizeHint()
    # (trial 25: "copies found down to 1.00 alike" read as confusing; trial 27: "the same pixels" was said
    # of a copy at three quarters of the size)
    assert "; every copy found is the same picture)." in dlg.summary.text(), dlg.summary.text()
    assert dlg.tree.topLevelItemCount() == len(dlg.groups)
    out = dlg.export(str(tmp_path / "dups.csv"))
    rows = list(csv.DictReader(open(out)))
    assert {r["path"].split("/")[-1] for r in rows} >= {"p0.png", "p0-copy.png", "p1.png", "p1-turned.png"}
    assert sum(r["keep"] == "yes" for r in rows) == len(dlg.groups)
    dlg.export(str(tmp_path / "dups.json"))
    assert json.load(open(tmp_path / "dups.json"))["groups"]
    # a name too long for its column is cut in its middle, as the view paints it: its start and its
    # extension stay (trial 20: cut at the start); a folder is cut at its start (its end says which)
    first = dlg.tree.topLevelItem(0).child(0)
    for column, mode in ((0, Qt.ElideMiddle), (2, Qt.ElideLeft)):
        opt, idx = QStyleOptionViewItem(), dlg.tree.indexFromItem(first, column)
        dlg.tree.initViewItemOption(opt)
        dlg.tree.itemDelegateForIndex(idx).initStyleOption(opt, idx)
        assert opt.textElideMode == mode
    # Find similar from the duplicates view
    dlg.tree.setCurrentItem(first)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.mouseClick(dlg.similar_btn, Qt.LeftButton)
    assert window.search.query_path == first.data(0, Qt.UserRole)
    assert not dlg.isVisible()  # the results are not hidden behind the dialog
    window.dup_action.trigger()  # and View -> Duplicates brings the groups back as they were
    assert dlg.isVisible() and dlg.tree.topLevelItemCount() == len(dlg.groups) == 2
    assert {p: p.read_bytes() for p in d.rglob("*.png")} == before  # nothing deleted or changed
    dlg.close()


def choose(qtbot, combo, text):
    """Pick the combo box item starting with `text` as a person does with the keyboard: the arrow
    keys, from the item shown to that one."""
    target = combo.findText(text, Qt.MatchStartsWith)
    assert target >= 0, (text, [combo.itemText(i) for i in range(combo.count())])
    combo.setFocus()
    key = Qt.Key_Down if target > combo.currentIndex() else Qt.Key_Up
    for _ in range(abs(target - combo.currentIndex())):
        qtbot.keyClick(combo, key)
    assert combo.currentIndex() == target


def test_filters_restrict_results_to_a_folder_and_dates(qtbot, window, tmp_path):
    """(20.6, 20.7) The folder filter offers the folders under the library folder; the time filter
    offers the library's own years and a typed custom range that opens at the library's dates."""
    d = library_with_copies(tmp_path)
    old = time.mktime((2015, 6, 1, 12, 0, 0, 0, 0, -1))
    for p in (d / "b").glob("*.png"):
        os.utime(p, (old, old))  # no EXIF date: the file's date counts
    index_folder(qtbot, window, d)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(d / "a" / "p2.png"))
    assert window.results_model.rowCount() == 14
    qtbot.mouseClick(window.results.filter_btn, Qt.LeftButton)
    assert window.results.filter_bar.isVisible()
    folder = window.results.folder
    qtbot.waitUntil(lambda: folder.findData(str((d / "b").resolve())) > 0, timeout=10000)  # the subfolders arrive
    entries = [folder.itemText(i).strip() for i in range(folder.count())]
    assert entries[0] == "All folders" and "a" in entries and "b" in entries
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        choose(qtbot, folder, "b")  # folder b, under the library folder
    hits = window.results_model.hits
    assert hits and all(h.path.startswith(str((d / "b").resolve())) for h in hits) and len(hits) == 6
    # the library's own years are offered; the custom range opens at the library's first and last dates
    when = window.results.when
    years = [when.itemText(i) for i in range(when.count())]
    assert "2015" in years and "Custom range…" in years
    assert f"This year ({date.today().year})" in years  # trial 15: which year "This year" is
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        choose(qtbot, folder, "All")
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        choose(qtbot, when, "2015")
    assert len(window.results_model.hits) == 6
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        choose(qtbot, when, "Custom")
    assert window.results.after.isVisible() and window.results.after.date() == date(2015, 6, 1)
    # a day typed into the "to" field reads as typed (no "any" in front of the digits)
    to = window.results.before.edit
    to.setFocus()
    qtbot.keyClick(to, Qt.Key_A, Qt.ControlModifier)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.keyClicks(to, "2015-12-31")
        qtbot.keyClick(to, Qt.Key_Return)
    assert to.text() == "2015-12-31" and len(window.results_model.hits) == 6
    qtbot.keyClick(to, Qt.Key_A, Qt.ControlModifier)
    qtbot.keyClicks(to, "31/12/2015")
    qtbot.keyClick(to, Qt.Key_Return)
    assert "not a day" in to.toolTip() and len(window.results_model.hits) == 6  # said, and nothing changed
    qtbot.keyClick(to, Qt.Key_A, Qt.ControlModifier)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        qtbot.keyClicks(to, "2015-12-31")
        qtbot.keyClick(to, Qt.Key_Return)
    # the library grows (an older photo added): the range in use stays as typed (trial 16: it was
    # set back to the library's first and last dates)
    e = tmp_path / "older"
    e.mkdir()
    write_photo(e / "x.png", seed=99)
    older = time.mktime((2010, 3, 1, 12, 0, 0, 0, 0, -1))
    os.utime(e / "x.png", (older, older))
    index_folder(qtbot, window, e)
    qtbot.waitUntil(lambda: window._taken_range is not None and window._taken_range[0] < old, timeout=10000)
    assert window.results.after.date() == date(2015, 6, 1) and to.text() == "2015-12-31"
    qtbot.mouseClick(window.results.clear_filters, Qt.LeftButton)
    qtbot.waitUntil(lambda: window.results_model.rowCount() == 15, timeout=30000)  # the older photo too


def test_hiding_duplicates_keeps_one_of_each(qtbot, window, tmp_path):
    d = library_with_copies(tmp_path)
    index_folder(qtbot, window, d)
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.set_query_path(str(d / "a" / "p0.png"))
    names = [Path(h.path).name for h in window.results_model.hits]
    assert "p0.png" in names and "p0-copy.png" in names
    with qtbot.waitSignal(window.searchFinished, timeout=30000):
        window.results.hide_dups.setChecked(True)
    names = [Path(h.path).name for h in window.results_model.hits]
    assert ("p0.png" in names) != ("p0-copy.png" in names)
    assert ("p1.png" in names) != ("p1-turned.png" in names) and len(names) == 12  # a rotated copy is one too


def test_heic_and_raw_thumbnails_use_the_core_decoders(tmp_path):
    src = Image.open(write_photo(tmp_path / "s.png", 3, size=(320, 240))).convert("RGB")
    src.save(tmp_path / "phone.heic", quality=85)
    write_dng(tmp_path / "cam.dng", src)
    for name in ("phone.heic", "cam.dng"):
        img, err = read_qimage(str(tmp_path / name), QSize(128, 128))
        assert not img.isNull(), err
        assert max(img.width(), img.height()) <= 128 and abs(img.width() / img.height() - 4 / 3) < 0.05
