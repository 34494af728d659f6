"""The results pane: controls (count, relevance cut-off, exact duplicates, filters), a line saying
how many results are shown, and the grid."""
from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDateEdit, QHBoxLayout, QLabel, QPushButton, QSlider, QSpinBox,
                               QVBoxLayout, QWidget)

from ..core.library.paths import display
from ..core.pipeline.search import Filters
from .results import ResultsModel, ResultsView


class ResultsPane(QWidget):
    changed = Signal()  # a control that needs a new search (count, duplicates, filters)
    cutoffChanged = Signal(float)

    def __init__(self, parent=None):
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.count = QSpinBox()
        self.count.setRange(1, 5000)
        self.count.setPrefix("Show ")
        self.count.setToolTip("How many results to show")
        self.cutoff = QSlider(Qt.Horizontal)
        self.cutoff.setRange(0, 100)
        self.cutoff.setValue(0)
        self.cutoff.setMinimumWidth(60)
        self.cutoff.setMaximumWidth(140)
        self.cutoff.setToolTip("Hide results whose relevance (the bar under each photo) is below this")
        self.cutoff_label = QLabel()
        self.cutoff_label.setFixedWidth(self.cutoff_label.fontMetrics().horizontalAdvance("min 0.00 ") + 4)
        self.hide_dups = QCheckBox("One per duplicate")
        self.hide_dups.setToolTip("Show only one of each set of byte-identical photos")
        self.filter_btn = QPushButton("Filter…")
        self.filter_btn.setCheckable(True)
        self.filter_btn.setToolTip("Restrict the search to a folder or a date range")
        for w in (self.count, QLabel("Relevance"), self.cutoff, self.cutoff_label, self.filter_btn):
            row.addWidget(w)
        row.addStretch()
        v.addLayout(row)
        # the filter bar (hidden until asked for)
        self.filter_bar = QWidget()
        fb = QHBoxLayout(self.filter_bar)
        fb.setContentsMargins(0, 0, 0, 0)
        self.folder = QComboBox()
        self.folder.setToolTip("Only photos in this folder (and below)")
        self.folder.setMinimumContentsLength(12)
        self.folder.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.after = QDateEdit()
        self.before = QDateEdit()
        for d, tip in ((self.after, "Only photos taken on or after this day (EXIF date, else the file's date)"),
                       (self.before, "Only photos taken on or before this day")):
            d.setCalendarPopup(True)
            d.setDisplayFormat("yyyy-MM-dd")
            d.setSpecialValueText("any")
            d.setMinimumDate(QDate(1900, 1, 1))
            d.setDate(d.minimumDate())
            d.setToolTip(tip)
        self.clear_filters = QPushButton("Clear")
        self.clear_filters.setToolTip("Search the whole library again")
        for w in (QLabel("Folder"), self.folder, QLabel("From"), self.after, QLabel("to"), self.before, self.clear_filters):
            fb.addWidget(w)
        fb.addStretch()
        self.filter_bar.setVisible(False)
        v.addWidget(self.filter_bar)
        self.info = QLabel("")
        self.info.setWordWrap(True)
        info_row = QHBoxLayout()
        info_row.addWidget(self.info, 1)
        info_row.addWidget(self.hide_dups)
        v.addLayout(info_row)
        self.model = ResultsModel(self)
        self.view = ResultsView()
        self.view.setModel(self.model)
        v.addWidget(self.view, 1)
        self.set_folders([])
        self._set_cutoff_label(0)
        self.count.valueChanged.connect(lambda _: self.changed.emit())
        self.hide_dups.toggled.connect(lambda _: self.changed.emit())
        self.cutoff.valueChanged.connect(self._on_cutoff)
        self.filter_btn.toggled.connect(self.filter_bar.setVisible)
        self.folder.currentIndexChanged.connect(lambda _: self.changed.emit())
        self.after.dateChanged.connect(lambda _: self.changed.emit())
        self.before.dateChanged.connect(lambda _: self.changed.emit())
        self.clear_filters.clicked.connect(self.reset_filters)

    def _set_cutoff_label(self, v: int) -> None:
        self.cutoff_label.setText("min off" if v == 0 else f"min {v / 100:.2f}")

    def _on_cutoff(self, v: int) -> None:
        self._set_cutoff_label(v)
        self.cutoffChanged.emit(v / 100)

    def set_folders(self, folders: list[str]) -> None:
        current = self.folder.currentData()
        self.folder.blockSignals(True)
        self.folder.clear()
        self.folder.addItem("All folders", "")
        for f in folders:
            self.folder.addItem(display(f), f)
        self.folder.setCurrentIndex(max(0, self.folder.findData(current or "")))
        self.folder.blockSignals(False)

    def reset_filters(self) -> None:
        for w in (self.folder, self.after, self.before):
            w.blockSignals(True)
        self.folder.setCurrentIndex(0)
        self.after.setDate(self.after.minimumDate())
        self.before.setDate(self.before.minimumDate())
        for w in (self.folder, self.after, self.before):
            w.blockSignals(False)
        self.changed.emit()

    def filters(self) -> Filters:
        folder = self.folder.currentData()

        def day(edit: QDateEdit, end: bool) -> float | None:
            if edit.date() == edit.minimumDate():
                return None
            d = edit.date()
            t = datetime(d.year(), d.month(), d.day()).timestamp()
            return t + 86400 if end else t

        return Filters((folder,) if folder else (), day(self.after, False), day(self.before, True))

    @property
    def min_score(self) -> float:
        return self.cutoff.value() / 100
