"""Indexing as the window shows it: adding and removing folders, progress, pause, stop and resume, folders that go, the log."""
import re
import time
from pathlib import Path

from PIL import Image
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QListWidget, QMessageBox

from app.gui.results import HitRole, shown_score
from tests.conftest import write_photo
from tests.gui.conftest import add_and_pause, answer_file_dialog, index_folder, make_window, wait_idle, when_modal
from tests.gui.helpers import add_watching, menu_action, open_viewer, remove_folder, search, wheel


def test_remove_takes_the_photos_out_of_the_grid_at_once_and_says_when_it_is_done(qtbot, window, tmp_path, monkeypatch):
    """(8) After Remove, the folder's photos leave the grid and the viewer at once, and the status
    says it is done (it said "Removing…" for half a minute and kept them on screen)."""
    root = tmp_path / "lib"
    for i in range(6):
        write_photo(root / "keep" / f"k{i}.png", i, size=(120, 90))
        write_photo(root / "drop" / f"d{i}.png", 50 + i, size=(120, 90))
    (root / "drop" / "broken.jpg").write_bytes(b"not a photo")  # skipped: not one of its photos
    index_folder(qtbot, window, root / "keep")
    index_folder(qtbot, window, root / "drop")
    search(qtbot, window, root / "keep" / "k1.png")
    assert any("/drop/" in h.path for h in window.results_model.hits)
    viewer = open_viewer(qtbot, window)
    while "/drop/" not in viewer.hit.path:  # the viewer on a photo of the folder to remove
        qtbot.keyClick(viewer.scroll, Qt.Key_Right)
    remove_folder(qtbot, window, "drop", key=Qt.Key_Escape)  # changed their mind: nothing happens
    assert window.library.folder_list.count() == 2 and any("/drop/" in h.path for h in window.results_model.hits)
    # Return removes (trial 16: it chose Cancel, the default of "Yes | Cancel")
    asked = remove_folder(qtbot, window, "drop")
    # in plain words (trial 9: "Forget …/more (104 of 500 indexed (stopped))?")
    assert asked.startswith(f"Forget {root / 'drop'}?\nIn the library: 6 photos · 1 skipped.\n"), asked
    assert not any("/drop/" in h.path for h in window.results_model.hits)
    # its photo gone, the viewer closes and says why (trial 6: it showed another photo, unsaid),
    # also once the library's new results came (trial 8: their words took the place of it)
    assert not viewer.isVisible() and "is no longer among the results" in window.status_label.text()
    qtbot.waitUntil(lambda: window.index_label.text().startswith("Removed drop"), timeout=20000)
    assert "6 photos forgotten, 1 unreadable file; the files stay on disk" in window.index_label.text()
    assert window.library.folder_list.count() == 1
    # and the results are searched again in the library as it is now (the trial: "18 results" with
    # the old scores stayed until the person searched again)
    qtbot.waitUntil(lambda: window.search.last_result.generation == window.svc.snapshot().generation, timeout=20000)
    assert sorted(Path(h.path).name for h in window.results_model.hits) == sorted(f"k{i}.png" for i in range(6))
    assert "is no longer among the results" in window.status_label.text()
    # (trial 19) a photo of the removed folder, searched again: its results say none is a match
    search(qtbot, window, root / "drop" / "d0.png")
    best = max(shown_score(h.score) for h in window.results_model.hits)
    assert best < 0.5 and window.results.info.text() == f"6 results; no close match (best {best:.2f})"
    # with the cut-off hiding some, the grid shows the best: the line is as short as it can be (trial 23:
    # "2 shown of 100; the cut-off hides 98; no other close match (…" at 1366 px)
    scores = sorted(shown_score(h.score) for h in window.results_model.hits)
    window.results.cutoff.setFocus()
    for _ in range(100):
        if sum(s >= window.results.min_score for s in scores) < 6:
            break
        qtbot.keyClick(window.results.cutoff, Qt.Key_Right)
    shown = sum(s >= window.results.min_score for s in scores)
    assert shown, scores
    assert window.results.info.text() == f"{shown} shown of 6; the cut-off hides {6 - shown}; no close match"


def test_a_stopped_run_says_what_is_left_and_resume_finishes_it(qtbot, window, tmp_path, monkeypatch):
    """(9) Stopped with photos left: the pane says "<folder> · stopped / N of M indexed" and offers Resume
    (k left), which indexes the rest; counts read "1 photo", not "1 photos"."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    add_and_pause(qtbot, window, tmp_path / "many", 40)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.cancel_btn, Qt.LeftButton)
    done = window.svc.stats()["indexed"]
    item = window.library.folder_list.item(0).text()
    assert item.endswith(" ·\u00a0stopped\n" f"{done} of 40 indexed"), item
    assert window.library.resume_btn.isVisible() and window.library.resume_btn.text() == f"Resume ({40 - done} left)"
    statuses = []
    window.bridge.event.connect(lambda ev: statuses.append(window.index_label.text()))
    with qtbot.waitSignal(window.indexingFinished, timeout=60000) as blocker:
        qtbot.mouseClick(window.library.resume_btn, Qt.LeftButton)
    # the resumed run counts over the library, as the pane does ("56 of 147" stood beside "160 of 251")
    totals = {int(m[2]) for t in statuses if (m := re.search(r"Indexing (\d+) of (\d+)", t))}
    assert totals == {40}, statuses
    assert blocker.args[0].phase == "done" and window.svc.stats()["indexed"] == 40
    wait_idle(qtbot, window)
    assert not window.library.resume_btn.isVisible() and "40 photos" in window.library.folder_list.item(0).text()
    one = tmp_path / "one"
    write_photo(one / "solo.png", 99, size=(120, 90))
    index_folder(qtbot, window, one)
    texts = [window.library.folder_list.item(i).text() for i in range(window.library.folder_list.count())]
    assert any(t.endswith("1 photo") for t in texts), texts


def test_a_watcher_run_stopped_counts_like_a_full_one_and_offers_resume(qtbot, window, tmp_path, monkeypatch):
    """(trial 4) Photos copied into a subfolder start a run of that subfolder only (the watcher's):
    the pane read "10 photos" during it and, once cancelled, the status said "Resume: Library
    pane" where the pane offered no Resume."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    d = tmp_path / "photos"
    for i in range(10):
        write_photo(d / f"a{i}.png", 100 + i, size=(160, 120))
    index_folder(qtbot, window, d)
    seen = []
    window.bridge.event.connect(lambda ev: ev.kind == "progress" and ev.data.done and seen.append(ev.data.done))
    for i in range(40):
        write_photo(d / "card" / f"b{i:02d}.png", 200 + i, size=(200, 150))
    qtbot.waitUntil(lambda: bool(seen), timeout=30000)  # the watcher started a run of "card"
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    qtbot.waitUntil(lambda: re.search(r"\d+ of 50 indexed", window.library.folder_list.item(0).text()) is not None,
                    timeout=10000)
    qtbot.waitUntil(lambda: re.search(r"Indexing \d+ of 50", window.index_label.text()) is not None, timeout=10000)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.cancel_btn, Qt.LeftButton)
    done = window.svc.stats()["indexed"]
    assert done < 50 and "Resume: Library pane" in window.index_label.text()
    assert window.library.folder_list.item(0).text().endswith(f"stopped\n{done} of 50 indexed")
    resume = window.library.resume_btn
    assert resume.isVisible() and resume.text() == f"Resume ({50 - done} left)"
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(resume, Qt.LeftButton)
    wait_idle(qtbot, window)
    assert window.svc.stats()["indexed"] == 50 and not resume.isVisible()


def test_the_status_line_and_the_library_pane_count_the_same_photos_while_indexing(qtbot, window, tmp_path,
                                                                                   monkeypatch):
    """The trial: "48 of 603 indexed" in the Library pane beside "Indexing 96 of 603" in the status
    line (the pane's count is refreshed at most every 1.5 s, the status line's on every batch)."""
    monkeypatch.setattr("app.core.library.service.STATS_EVERY", 0.05)  # counts published during a short run
    d = tmp_path / "many"
    for i in range(400):
        write_photo(d / f"p{i:03d}.png", i, size=(96, 72))
    seen = []
    # connected after the window's own slot: called once the window has shown the event
    window.bridge.event.connect(lambda ev: seen.append((window.library.folder_list.item(0).text()
                                                        if window.library.folder_list.count() else "",
                                                        window.index_label.text())))
    with qtbot.waitSignal(window.indexingFinished, timeout=120000):
        window.add_folder(str(d))
    pairs = []
    for pane, status in seen:
        a, b = re.search(r"(\d+) of (\d+) indexed", pane), re.search(r"Indexing (\d+) of (\d+)", status)
        if a and b:
            pairs.append((int(a[1]), int(b[1])))
    assert len([x for x, _ in pairs if 0 < x < 400]) >= 2 and all(x == y for x, y in pairs), pairs
    assert "Indexing done: 400 photos searchable" in window.index_label.text()


def test_results_shown_while_the_library_changes_are_searched_again_when_indexing_ends(qtbot, window, tmp_path):
    """The trial: a search made during indexing kept its partial list (and scores) until the person
    searched again. When a run that changed the library ends, the shown results are refreshed."""
    a, b = tmp_path / "a", tmp_path / "b"
    for i in range(6):
        write_photo(a / f"a{i}.png", i, size=(160, 120))
    write_photo(b / "twin.png", 50, size=(160, 120))
    query = tmp_path / "query.jpg"
    Image.open(b / "twin.png").convert("RGB").save(query, quality=85)
    index_folder(qtbot, window, a)
    search(qtbot, window, query)
    assert not any("twin" in h.path for h in window.results_model.hits)
    view = window.results_view
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(1)).center())
    chosen = window.preview.hit.path
    with qtbot.waitSignal(window.searchFinished, timeout=30000):  # nobody searches again by hand
        window.add_folder(str(b))
    assert Path(window.results_model.hits[0].path).name == "twin.png"
    # the photo the person had selected stays selected and previewed (trial 27: cleared by a search redone)
    assert view.currentIndex().data(HitRole).path == chosen and window.preview.hit.path == chosen
    search(qtbot, window, tmp_path / "a" / "a3.png")  # another query: nothing stays selected
    assert not view.currentIndex().isValid() and window.preview.hit is None


def test_after_a_restart_remove_offers_no_folder_nobody_chose(qtbot, tiny_home, photo_dir):
    """Trial 22: after a restart the first folder row was already current (the list makes its
    first row current when it takes the keyboard's focus), so Remove would offer to forget a
    folder nobody chose. Now Remove asks for a choice; a clicked row is asked about."""
    win = make_window(qtbot, tiny_home)
    index_folder(qtbot, win, photo_dir)
    win.close()
    again = make_window(qtbot, tiny_home)
    try:
        lst = again.library.folder_list
        qtbot.waitUntil(lambda: lst.count() == 1, timeout=10000)
        again.activateWindow()  # (a real X11 window takes the keyboard's focus only when active)
        qtbot.waitUntil(lambda: QApplication.activeWindow() is again, timeout=5000)
        lst.setFocus(Qt.TabFocusReason)  # where Tab puts the keyboard's focus
        qtbot.waitUntil(lambda: lst.currentItem() is not None, timeout=3000)  # Qt's doing: current, not chosen
        said = []
        when_modal(lambda dlg: (said.append(dlg.text()), dlg.reject()))
        qtbot.mouseClick(again.library.remove_btn, Qt.LeftButton)
        assert said == ["Select a folder in the list first (click it, or Space on it)."], said
        lst.setFocus(Qt.TabFocusReason)
        qtbot.keyClick(lst, Qt.Key_Space)  # chosen by the keyboard
        when_modal(lambda dlg: (said.append(dlg.text()), qtbot.keyClick(dlg, Qt.Key_Escape)))
        qtbot.mouseClick(again.library.remove_btn, Qt.LeftButton)
        assert said[1].startswith(f"Forget {photo_dir}?"), said
        asked = remove_folder(qtbot, again, photo_dir.name, key=Qt.Key_Escape)  # clicked, then Escape
        assert asked.startswith(f"Forget {photo_dir}?"), asked
        assert again.svc.stats()["indexed"] == 12
    finally:
        again.close()


def test_the_library_pane_tells_one_folder_from_the_next(qtbot, window, tmp_path):
    """Trial 32: each folder's name and count were two lines like any other, so that 4 folders read
    as a list of 8 items. Each folder is a band of its own colour, the next one's differs."""
    for name in ("one", "two"):
        write_photo(tmp_path / name / "a.png", len(name), size=(120, 90))
        index_folder(qtbot, window, tmp_path / name)
    lst = window.library.folder_list
    qtbot.waitUntil(lambda: lst.count() == 2, timeout=10000)
    assert not lst.selectedItems()  # (a selected folder's band would differ anyway)
    seen = lst.viewport().grab().toImage()
    first, second = (lst.visualItemRect(lst.item(i)) for i in range(2))
    assert first.height() >= 2 * lst.fontMetrics().height()  # name and count: two lines
    # sampled right of the words, at each band's middle
    a, b = (seen.pixelColor(r.right() - 3, r.center().y()) for r in (first, second))
    assert a != b, (a.name(), b.name())
    assert seen.pixelColor(first.right() - 3, first.top() + 2) == a  # one colour down the band


def test_a_rescan_of_changed_photos_counts_them_once(qtbot, window, tmp_path):
    """Review: the status total was the library's count plus the run's tasks, and changed photos
    (already counted as indexed) are tasks too: 20 photos, 3 edited, read "Indexing 20 of 23"."""
    d = tmp_path / "lib"
    for i in range(20):
        write_photo(d / f"p{i:02d}.png", i, size=(160, 120))
    index_folder(qtbot, window, d)
    for i in range(3):
        write_photo(d / f"p{i:02d}.png", 100 + i, size=(160, 120))  # edited in place
    statuses = []
    window.bridge.event.connect(lambda ev: statuses.append(window.index_label.text()))
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.library.reindex_btn, Qt.LeftButton)
    totals = {int(m[2]) for t in statuses if (m := re.search(r"Indexing (\d+) of (\d+)", t))}
    assert totals == {20}, statuses
    # and a Rescan with nothing to do says so (the trial: the screen did not change at all)
    before = window.index_label.text()
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.library.reindex_btn, Qt.LeftButton)
    assert window.index_label.text() != before and "no new or changed photos" in window.index_label.text()


def test_a_skipped_photo_is_not_left_to_do_and_the_bar_shows_the_count_the_text_says(qtbot, window, tmp_path,
                                                                                     monkeypatch):
    """The trial: a finished folder with one unreadable file read "442 of 443 indexed · 1 skipped"
    while another folder indexed, and the bar stood at 5 % beside "Indexing 754 of 1343"."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    first = tmp_path / "first"
    for i in range(10):
        write_photo(first / f"a{i}.png", i, size=(120, 90))
    (first / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a photo")
    index_folder(qtbot, window, first)
    add_and_pause(qtbot, window, tmp_path / "second", 60)
    qtbot.waitUntil(lambda: window.library.folder_list.count() == 2, timeout=10000)
    texts = {window.library.folder_list.item(i).text().split("\n")[0]: window.library.folder_list.item(i).text()
             for i in range(2)}
    assert "of" not in texts["first"] and "10 photos ·\u00a01\u00a0skipped" in texts["first"], texts  # (kept whole)
    status = re.search(r"Indexing (\d+) of (\d+)", window.index_label.text())
    assert status and int(status[2]) == 70, window.index_label.text()
    assert (window.progress.value(), window.progress.maximum()) == (int(status[1]), 70)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.pause_btn, Qt.LeftButton)


def test_after_remove_the_results_are_shown_from_their_top(qtbot, window, tmp_path, monkeypatch):
    """The trial: after Remove the grid was searched again but stayed scrolled at #10."""
    root = tmp_path / "lib"
    for i in range(40):
        write_photo(root / "keep" / f"k{i:02d}.png", i, size=(120, 90))
    for i in range(4):
        write_photo(root / "drop" / f"d{i}.png", 80 + i, size=(120, 90))
    index_folder(qtbot, window, root / "keep")
    index_folder(qtbot, window, root / "drop")
    search(qtbot, window, root / "keep" / "k01.png")
    bar = window.results_view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=5000)
    wheel(window.results_view.viewport(), -6)  # the person scrolls down the results
    assert bar.value() > 0
    remove_folder(qtbot, window, "drop")
    qtbot.waitUntil(lambda: window.search.last_result.generation == window.svc.snapshot().generation, timeout=20000)
    qtbot.waitUntil(lambda: bar.value() == 0, timeout=5000)


def test_adding_a_folder_already_in_the_library_says_so_and_a_parent_takes_in_its_folders(qtbot, window, tmp_path,
                                                                                        monkeypatch):
    """Trial 6: Add… of a subfolder of a library folder did nothing, unsaid; Add… of the parent of
    library folders listed it with "0 photos" above them."""
    root = tmp_path / "photos"
    for sub, base in (("a", 0), ("b", 20)):
        for i in range(3):
            write_photo(root / sub / "inner" / f"p{i}.png", base + i, size=(96, 72))
    index_folder(qtbot, window, root / "a")
    index_folder(qtbot, window, root / "b")
    answer_file_dialog(qtbot, root / "a" / "inner")
    qtbot.mouseClick(window.library.add_btn, Qt.LeftButton)
    assert "is already in the library (inside" in window.status_label.text()
    assert window.library.folder_list.count() == 2
    answer_file_dialog(qtbot, root)
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.library.add_btn, Qt.LeftButton)
    wait_idle(qtbot, window)
    items = [window.library.folder_list.item(i).text() for i in range(window.library.folder_list.count())]
    assert len(items) == 1 and "6 photos" in items[0], items
    assert "now holds the library folders a, b" in window.status_label.text()
    # a subfolder forgotten by the command line is added back (not "already in the library")
    window.svc.run(window.svc.forget(root / "b" / "inner"))
    answer_file_dialog(qtbot, root / "b" / "inner")
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.library.add_btn, Qt.LeftButton)
    wait_idle(qtbot, window)
    assert window.svc.stats()["indexed"] == 6


def test_indexing_is_paused_resumed_and_stopped_from_the_keyboard(qtbot, window, tmp_path):
    """Trial 10: Pause, Resume and Cancel (buttons in the status bar) had no key. File > Pause
    indexing (Alt+F, U) pauses and resumes, File > Stop indexing (Alt+F, T) stops, File > Rescan
    folders (Alt+F, R) starts a run; Pause and Stop are greyed while nothing indexes."""
    from tests.conftest import write_photo

    def file_menu(letter):
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
        qtbot.keyClick(window, Qt.Key_F, Qt.AltModifier)
        qtbot.waitUntil(lambda: QApplication.activePopupWidget() is not None, timeout=3000)
        qtbot.keyClick(QApplication.activePopupWidget(), letter)

    pause, stop = menu_action(window, "Pause indexing"), menu_action(window, "Stop indexing")
    assert not pause.isEnabled() and not stop.isEnabled()
    d = tmp_path / "lib"
    for i in range(40):
        write_photo(d / f"p{i:02d}.png", i, size=(200, 150))
    seen = add_watching(window, d)
    qtbot.waitUntil(lambda: bool(seen) and pause.isEnabled(), timeout=30000)
    file_menu(Qt.Key_U)
    qtbot.waitUntil(lambda: window.svc.running is not None and window.svc.running.control.paused, timeout=5000)
    assert window.pause_btn.text() == "Resume" and pause.text().replace("&", "") == "Resume indexing"
    file_menu(Qt.Key_U)
    assert not window.svc.running.control.paused and window.pause_btn.text() == "Pause"
    file_menu(Qt.Key_U)  # paused again at once: 40 small photos are done in a second
    assert window.svc.running.control.paused
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        file_menu(Qt.Key_T)
    assert window.svc.stats()["indexed"] < 40  # stopped before the end
    # (trial 11) stopped with photos left, "Resume indexing" was greyed beside the pane's Resume:
    # it resumes the run (Alt+F, U); Stop is greyed
    assert pause.isEnabled() and pause.text().replace("&", "") == "Resume indexing" and not stop.isEnabled()
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        file_menu(Qt.Key_U)
    assert window.svc.stats()["indexed"] == 40
    assert not pause.isEnabled() and not stop.isEnabled()
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):  # Rescan from the keyboard too
        file_menu(Qt.Key_R)


def test_a_folder_deleted_while_it_is_indexed_is_found_gone(qtbot, window, tmp_path, monkeypatch):
    """Trial 11: a folder deleted while it was indexed stayed "168 photos" and searchable until a
    Rescan by hand (it was never watched: the watch list is made when a run ends, and then it was
    gone); after Forget missing photos the status bar still said "168 missing"."""
    import shutil

    keep = tmp_path / "keep"
    for i in range(4):
        write_photo(keep / f"k{i}.png", 200 + i, size=(120, 90))
    index_folder(qtbot, window, keep)
    d = tmp_path / "vanish"
    for i in range(120):
        write_photo(d / f"v{i:03d}.png", i, size=(160, 120))
    (d / "a-broken.jpg").write_bytes(b"not a photo")
    paused = []

    def pause(ev):  # the person presses Pause part-way, deletes the folder, and resumes
        if ev.kind == "progress" and ev.data.done >= 10 and ev.data.failed >= 1 and not paused:
            paused.append(ev.data.done)
            qtbot.mouseClick(window.pause_btn, Qt.LeftButton)

    window.bridge.event.connect(pause)
    add_watching(window, d)
    qtbot.waitUntil(lambda: bool(paused) and window.svc.running.control.paused, timeout=60000)
    shutil.rmtree(d)
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    qtbot.waitUntil(lambda: any(f["path"] == str(d) and f.get("state") == "missing"
                                for f in window.svc.stats().get("folders", [])), timeout=60000)
    wait_idle(qtbot, window)
    asked = []

    def answer(dlg):
        asked.append(dlg.text())
        qtbot.mouseClick(dlg.button(QMessageBox.Yes), Qt.LeftButton)

    qtbot.waitUntil(window.library.missing_btn.isVisible, timeout=10000)
    when_modal(answer)
    qtbot.mouseClick(window.library.missing_btn, Qt.LeftButton)
    qtbot.waitUntil(lambda: window.index_label.text().startswith("Forgot "), timeout=20000)
    assert window.svc.stats().get("missing", 0) == window.svc.stats().get("failed", 0) == 0
    # (trial 13) what it forgot is what it asked about: "26 photos" asked, "Forgot 41 missing photos" said
    m = re.match(r"(\d+) photos? (?:is|are) marked missing because their folder vanished"
                 r"(?:, and (\d+) files? in it (?:was|were) skipped \(could not be read\))?\.", asked[0])
    # (trial 16) the one broken file is skipped; the photos that went before they were read are
    # missing with the rest, not "skipped (could not be read)"
    assert m and m[2] == "1" and int(m[1]) >= paused[0] - 1, (asked, paused)
    n, failed = int(m[1]), int(m[2])
    assert window.index_label.text() == (f"Forgot {n} missing photo{'s' * (n != 1)} and "
                                         f"{failed} skipped file{'s' * (failed != 1)}"), window.index_label.text()
    # (trial 13) the gone folder, emptied, says what is left to do rather than "0 photos"
    item = window.library.folder_list.item(1)
    assert item.text() == "vanish  (missing: the folder is gone)\nnothing left of it · Remove takes it off the list", item.text()
    # (trial 12) removed, a folder that is gone is not said to keep its files on disk
    asked = remove_folder(qtbot, window, "vanish")
    # (trial 17) not said to keep its photos on disk "exactly as they are"
    assert asked.endswith("The folder is gone from the disk; HeatSearch forgets what it knew of it."), asked
    qtbot.waitUntil(lambda: window.index_label.text().startswith("Removed vanish"), timeout=20000)
    assert window.index_label.text().endswith("its folder is gone"), window.index_label.text()


def test_an_empty_folder_says_it_holds_no_photos(qtbot, window, tmp_path):
    """Trial 11: a folder without photos read "0 photos" in the Library pane, with no hint why."""
    d = tmp_path / "empty"
    d.mkdir()
    (d / "notes.txt").write_text("not a photo")
    index_folder(qtbot, window, d)
    qtbot.waitUntil(lambda: window.library.folder_list.count() == 1, timeout=10000)
    assert window.library.folder_list.item(0).text() == "empty\nno photos found in it"


def test_the_log_shows_each_reason_in_full(qtbot, window, tmp_path):
    """Trial 24: the Log cut its lines at the window's width ("…(an incomplete copy or dow")."""
    d = tmp_path / "photos"
    write_photo(d / "good.png", 1, size=(120, 90))
    data = (write_photo(tmp_path / "src.jpg", 2, size=(400, 300))).read_bytes()
    (d / "a_rather_long_name_for_a_photo_copied_from_an_old_phone_that_stopped_half_way.jpg").write_bytes(data[:600])
    index_folder(qtbot, window, d)
    qtbot.mouseClick(window.log_btn, Qt.LeftButton)
    lst = window._log_dialog.findChild(QListWidget)
    qtbot.waitUntil(lambda: lst.isVisible() and lst.item(0).text() != "Reading…", timeout=5000)  # read off the GUI thread
    item = lst.item(0)
    assert "the file ends early (an incomplete copy or download)" in item.text(), item.text()
    rect = lst.visualItemRect(item)
    assert rect.right() <= lst.viewport().width() and rect.height() > 2 * lst.fontMetrics().height(), rect
    window._log_dialog.close()


def test_a_pause_while_indexing_prepares_says_paused(qtbot, window, tmp_path, monkeypatch):
    """Trial 27: paused (File > Pause indexing) while the run prepared, the line went on
    "Preparing to index…" and nothing said it was paused."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 40)  # a long first sample
    for i in range(40):
        write_photo(tmp_path / "lib" / f"p{i:02d}.png", i, size=(640, 480))
    window.add_folder(str(tmp_path / "lib"))
    qtbot.waitUntil(lambda: window.index_label.text().startswith("Preparing to index"), timeout=30000)
    qtbot.mouseClick(window.pause_btn, Qt.LeftButton)
    said = window.index_label.text()
    # stopped once the model is loaded; the first sample goes on to its end, and says so (review)
    assert said == "Paused: preparing to index 40 photos…" or said == (
        "Preparing to index 40 photos: describing a first sample of them… (pausing once this step ends)") or \
        re.match(r"Indexing \d+ of 40, paused", said), said
    qtbot.waitUntil(lambda: window.index_label.text().startswith("Paused:") or ", paused" in window.index_label.text(),
                    timeout=30000)
    held = window.svc.stats()["indexed"]
    qtbot.wait(1500)
    assert window.svc.stats()["indexed"] == held < 40  # paused indeed
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        qtbot.mouseClick(window.pause_btn, Qt.LeftButton)  # Resume
    assert window.index_label.text() == "Indexing done: 40 photos searchable", window.index_label.text()


def test_two_folders_of_the_same_name_read_apart_in_the_library_pane(qtbot, window, tmp_path):
    """Trial 13: the Library pane names a folder by its last part only, so two folders called
    "Misc" looked alike; now each says which folder it is in."""
    for parent in ("home", "trip"):
        for i in range(2):
            write_photo(tmp_path / parent / "Misc" / f"{parent}{i}.png", 300 + i + len(parent), size=(120, 90))
        index_folder(qtbot, window, tmp_path / parent / "Misc")
    items = [window.library.folder_list.item(i).text().splitlines()[0] for i in range(window.library.folder_list.count())]
    assert sorted(items) == ["Misc (in home)", "Misc (in trip)"], items


def test_the_time_left_stays_readable_in_the_smallest_window(qtbot, window, tmp_path, monkeypatch):
    """Trial 13: at 960 px the status bar read "Indexing 738 of 2335 (158.5 photos/…": the empty
    search status kept its share of the bar and the time left came last, cut off. (The tiny network
    describes ~120 photos a second here: each is held 30 ms, so that the counts published during
    the run show photos left to do.)"""
    from app.core.pipeline import indexer

    forward = indexer.LocalProducer._forward
    monkeypatch.setattr(indexer.LocalProducer, "_forward", lambda self, d: (time.sleep(0.03), forward(self, d))[1])
    window.resize(window.minimumSize())
    d = tmp_path / "many"
    for i in range(150):
        write_photo(d / f"p{i:03d}.png", i, size=(160, 120))
    shown = []
    window.bridge.event.connect(lambda ev: shown.append((window.index_label.text(), window.index_label.shown_text())))
    with qtbot.waitSignal(window.indexingFinished, timeout=120000):
        window.add_folder(str(d))
    assert window.width() <= 980
    with_time = [(text, seen) for text, seen in shown if "left" in text]
    assert with_time, shown
    assert all("left" in seen for _, seen in with_time), with_time


def test_a_subfolder_deleted_while_it_is_indexed_is_found_gone(qtbot, window, tmp_path):
    """Trial 14: a subfolder deleted while its folder was indexed: 20 of its files skipped as
    unreadable, the ones indexed before it went stayed searchable (a deleted photo first at 1.00)
    and the folder read "100 photos · 20 skipped" until a Rescan by hand. Trial 16: its files were
    then split into "missing" and "skipped"; none was unreadable."""
    import shutil

    d = tmp_path / "scratch"
    for i in range(10):
        write_photo(d / f"k{i}.png", 300 + i, size=(120, 90))
    for i in range(120):
        write_photo(d / "deleteme" / f"v{i:03d}.png", i, size=(160, 120))
    seen = add_watching(window, d)
    qtbot.waitUntil(lambda: any(n >= 20 for n in seen), timeout=60000)
    shutil.rmtree(d / "deleteme")
    qtbot.waitUntil(lambda: window.indexing.index_cmd is None, timeout=60000)  # the run ends
    # with no Rescan asked: what was indexed of the subfolder is found missing, nothing skipped
    qtbot.waitUntil(lambda: window.svc.stats().get("missing", 0) > 0, timeout=60000)
    wait_idle(qtbot, window)
    st = window.svc.stats()
    assert st.get("indexed", 0) == 10 and st.get("failed", 0) == 0, st
    assert "skipped" not in window.library.folder_list.item(0).text(), window.library.folder_list.item(0).text()


def test_the_time_left_and_the_rate_agree_with_the_count_shown(qtbot, window):
    """"312 of 2722, about 19 min left at 3.2 photos/s" is 12.5 min at that rate: the line's three
    figures come from one pace now, so the time left is what remains at the rate it names. The
    bar beside it carries no text of its own (a "49%" overlapped its fill)."""
    from app.core.library.service import Event
    from app.core.pipeline.indexer import Progress

    stats = {"folders": [{"id": 1, "path": "/photos", "state": "ok", "images": 2722, "indexed": 312, "failed": 0,
                          "missing": 0}], "images": 2722, "indexed": 312, "failed": 0, "missing": 0}
    window.lib.event.emit(Event("started", 7, "index"))
    # the run's own figures: the whole run's average 3.2/s, its last minute 2.1/s (slower)
    prog = Progress("indexing", done=300, total=2710, rate=3.2, pace=2.1, eta_s=(2710 - 300) / 2.1,
                    folder_totals={1: 2722}, modelled=300, model_rate=3.2)
    window.lib.event.emit(Event("progress", 7, prog))
    window.lib.show_stats(stats)
    text = window.index_label.text()
    m = re.search(r"Indexing (\d+) of (\d+), about (\d+) min left at ([\d.]+) photos/s", text)
    assert m, text
    done, total, minutes, rate = int(m[1]), int(m[2]), int(m[3]), float(m[4])
    assert (done, total) == (312, 2722)
    assert abs((total - done) / rate / 60 - minutes) <= 0.5, text
    assert not window.progress.isTextVisible()
    window.indexing.index_cmd = None


def test_a_run_that_fails_says_so_once_and_again_when_asked(qtbot, window, photo_dir, monkeypatch):
    """A failure is said in a dialog once the run's bar and buttons are gone; the same failure of
    the runs that follow by themselves (a watcher's, the next start's) stays in the status line
    only, and a Rescan the person asks for says it again."""
    from app.core.errors import EngineError
    from PySide6.QtWidgets import QMessageBox

    index_folder(qtbot, window, photo_dir)
    said = []

    def warning(*a, **k):
        said.append((a[2], window.progress.isVisible(), window.pause_btn.isVisible()))
        return QMessageBox.Ok

    monkeypatch.setattr(QMessageBox, "warning", staticmethod(warning))
    monkeypatch.setattr(type(window.svc), "extractor",
                        lambda *a, **k: (_ for _ in ()).throw(EngineError("no engine can run this model here")))
    for n in range(3):  # new photos each time: the run needs the model
        write_photo(photo_dir / "scene0" / f"new{n}.png", 500 + n, size=(120, 90))
        with qtbot.waitSignal(window.indexingFinished, timeout=60000):
            window.indexing.start()  # as a watcher's run starts
        assert "no engine can run" in window.index_label.text()
    assert [s[0] for s in said] == ["no engine can run this model here"]
    assert said[0][1:] == (False, False)  # said once the bar and the buttons went
    with qtbot.waitSignal(window.indexingFinished, timeout=60000):
        menu_action(window, "Rescan folders").trigger()
    assert len(said) == 2
