"""The results pane: controls (count, relevance cut-off, duplicates, filters), a line saying how
many results are shown, and the grid. The filters: a folder (the library folders and the folders
under them that hold photos) and a time (quick ranges, the library's own years, or a range typed
or picked, opening at the library's dates)."""
from __future__ import annotations

import os
from datetime import date, datetime, timedelta
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QSlider, QSpinBox,
                               QStyledItemDelegate,
                               QVBoxLayout, QWidget)

from ..core.paths import display
from ..core.pipeline.search import Filters
from ..core.paths import is_within
from .results import ResultsModel, ResultsView
from .widgets import DateField, ElidedLabel


DEPTH_ROLE = Qt.UserRole + 1  # folder filter items: how deep below a library folder (0: the folder)


class _IndentedItems(QStyledItemDelegate):
    """Draws each item of the folder list indented by its DEPTH_ROLE (the name stays the item's
    text, so typing it still picks it)."""

    def initStyleOption(self, option, index):  # noqa: N802 - Qt's name
        super().initStyleOption(option, index)
        depth = index.data(DEPTH_ROLE) or 0
        option.rect = option.rect.adjusted(18 * depth, 0, 0, 0)

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
        self.count.setMinimumWidth(self.count.sizeHint().width())  # "Show 100" read "Show 1" at 960 px
        self.cutoff = QSlider(Qt.Horizontal)
        self.cutoff.setRange(0, 100)
        self.cutoff.setValue(0)
        self.cutoff.setMinimumWidth(60)
        self.cutoff.setMaximumWidth(140)
        self.cutoff.setToolTip("Hide results whose relevance (the bar under each photo) is below this")
        self.cutoff_label = QLabel()
        self.cutoff_label.setFixedWidth(self.cutoff_label.fontMetrics().horizontalAdvance("min 0.00 ") + 4)
        self.hide_dups = QCheckBox("One per duplicate")
        self.hide_dups.setToolTip("Show one photo of each set of copies: identical files, and the same photo re-encoded, resized, rotated or mirrored (as Duplicates finds them)")
        self.filter_btn = QPushButton("Filter…")
        self.filter_btn.setCheckable(True)
        self.filter_btn.setToolTip("Restrict the search to a folder or a date range")
        for w in (self.count, QLabel("Relevance"), self.cutoff, self.cutoff_label, self.filter_btn):
            row.addWidget(w)
        row.addStretch()
        v.addLayout(row)
        # the filter bar (hidden until asked for): two short rows, so that opening it never takes
        # width from the query pane
        self.filter_bar = QWidget()
        fv = QVBoxLayout(self.filter_bar)
        fv.setContentsMargins(0, 0, 0, 0)
        fb = QHBoxLayout()
        self.folder = QComboBox()
        self.folder.setToolTip("Only photos in this folder (and below)")
        self.folder.setMinimumContentsLength(10)
        self.folder.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.folder.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.folder.setItemDelegate(_IndentedItems(self.folder))  # subfolders shown under their folder
        fv.addLayout(fb)
        tb = QHBoxLayout()
        self.when = QComboBox()
        self.when.setToolTip("Only photos taken in this time (EXIF date, else the file's date)")
        self.after = DateField("Photos taken on or after this day (type it as YYYY-MM-DD, or pick it)")
        self.before = DateField("Photos taken on or before this day (type it as YYYY-MM-DD, or pick it)")
        self.clear_filters = QPushButton("Clear")
        self.clear_filters.setToolTip("Search the whole library again")
        self.to_label = QLabel("to")
        # Clear beside the folder, and a typed range on a row of its own: beside the choice of
        # time, the day fields clipped it ("Custom ra") in a narrow results pane (960 px)
        for w in (QLabel("Folder"), self.folder, self.clear_filters):
            fb.addWidget(w)
        for w in (QLabel("Taken"), self.when):
            tb.addWidget(w)
        tb.addStretch()
        fv.addLayout(tb)
        self.range_row = QWidget()
        rb = QHBoxLayout(self.range_row)
        rb.setContentsMargins(0, 0, 0, 0)
        for w in (QLabel("From"), self.after, self.to_label, self.before):
            rb.addWidget(w)
        rb.addStretch()
        self.range_row.setVisible(False)
        fv.addWidget(self.range_row)
        self.filter_bar.setVisible(False)
        v.addWidget(self.filter_bar)
        self._span: tuple[date, date] | None = None
        self._years: set[int] | None = None  # years holding photos, once read
        self.set_dates(None)
        self.info = ElidedLabel("")
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
        self.when.currentIndexChanged.connect(self._on_when)
        self.after.changed.connect(self._dates_changed)
        self.before.changed.connect(self._dates_changed)
        self.clear_filters.clicked.connect(lambda: self.reset_filters())

    def _set_cutoff_label(self, v: int) -> None:
        self.cutoff_label.setText("min off" if v == 0 else f"min {v / 100:.2f}")

    def _on_cutoff(self, v: int) -> None:
        self._set_cutoff_label(v)
        self.cutoffChanged.emit(v / 100)

    def set_folders(self, folders: list[str], subfolders: list[str] | None = None) -> None:
        """The library folders, and (when known) the folders under them that hold photos, each
        under the one listed above it by its own name ("Rome" under "2019", not
        "Paris/eiffel" under "Paris"), so that typing a name picks it; its whole path in its tooltip."""
        if (list(folders), list(subfolders or ())) == getattr(self, "_folders_shown", None):
            return  # asked again at every library count: the same list is not built again
        self._folders_shown = (list(folders), list(subfolders or ()))
        current = self.folder.currentData()
        self.folder.blockSignals(True)
        self.folder.clear()
        self.folder.addItem("All folders", "")
        names = [os.path.basename(f.rstrip(os.sep)) or f for f in folders]
        for f, name in zip(folders, names):
            # by its name, as the Library pane lists it (its whole path where two share a name)
            self.folder.addItem(display(name if names.count(name) == 1 else f), f)
            self.folder.setItemData(self.folder.count() - 1, display(f), Qt.ToolTipRole)
            listed = {f: 0}  # folder -> its depth in the list
            # by components, so that "2019/Rome" comes right after "2019", not after "2019-summer"
            for sub in sorted((s for s in subfolders or () if s != f and is_within(s, f)), key=lambda s: Path(s).parts):
                parent = os.path.dirname(sub)
                while parent not in listed and os.path.dirname(parent) != parent:
                    parent = os.path.dirname(parent)
                parent = parent if parent in listed else f
                listed[sub] = listed[parent] + 1
                self.folder.addItem(display(os.path.relpath(sub, parent)), sub)
                self.folder.setItemData(self.folder.count() - 1, display(sub), Qt.ToolTipRole)
                self.folder.setItemData(self.folder.count() - 1, listed[sub], DEPTH_ROLE)
        self.folder.setCurrentIndex(max(0, self.folder.findData(current or "")))
        self.folder.blockSignals(False)

    def set_dates(self, span: tuple[float, float] | None) -> None:
        """The library's dates (first, last taken, POSIX times): quick ranges and the years it
        holds; a custom range opens at them."""
        today = date.today()
        self._span = (date.fromtimestamp(span[0]), date.fromtimestamp(span[1])) if span else None
        self._fill_when()
        first, last = self._span or (today - timedelta(days=365), today)
        if (self.when.currentData() or ("any",))[0] != "custom":  # a range in use stays as the library grows
            self.after.setDate(first)
            self.before.setDate(last)

    def set_years(self, years: list[int] | None) -> None:
        """The years that hold photos (read when the filter opens): only those are offered."""
        self._years = set(years) if years is not None else None
        self._fill_when()

    def _fill_when(self) -> None:
        today = date.today()
        current = self.when.currentData()
        choices = [("Any time", ("any",)), ("Last 30 days", ("days", 30)), ("Last 12 months", ("days", 365)),
                   (f"This year ({today.year})", ("year", today.year)),
                   (f"Last year ({today.year - 1})", ("year", today.year - 1))]  # named: "Last year" left "which year?"
        if self._span:  # every year the library holds (it listed only the last 12), none without photos
            for y in range(self._span[1].year, max(self._span[0].year, self._span[1].year - 60) - 1, -1):
                if y < today.year - 1 and (self._years is None or y in self._years):
                    choices.append((str(y), ("year", y)))
        choices.append(("Custom range…", ("custom",)))
        self.when.blockSignals(True)
        self.when.clear()
        for text, data in choices:
            self.when.addItem(text, data)
        i = self.when.findData(current) if current is not None else 0
        self.when.setCurrentIndex(max(0, i))
        self.when.blockSignals(False)

    def _dates_changed(self) -> None:
        """A range typed the other way round is put in order, in the fields too (it gave "No
        results"; then it was read in order while the fields still showed it reversed)."""
        a, b = self.after.date(), self.before.date()
        if a and b and a > b:
            self.after.setDate(b)
            self.before.setDate(a)
        self.changed.emit()

    def _on_when(self, _i: int) -> None:
        self.range_row.setVisible((self.when.currentData() or ("any",))[0] == "custom")
        self.changed.emit()

    def reset_filters(self) -> None:
        for w in (self.folder, self.when):
            w.blockSignals(True)
        self.folder.setCurrentIndex(0)
        self.when.setCurrentIndex(0)
        for w in (self.folder, self.when):
            w.blockSignals(False)
        self._on_when(0)

    def filters(self) -> Filters:
        folder = self.folder.currentData()
        kind = self.when.currentData() or ("any",)

        def stamp(d: date) -> float:
            return datetime(d.year, d.month, d.day).timestamp()

        after = before = None
        today = date.today()
        if kind[0] == "days":
            after = stamp(today - timedelta(days=kind[1]))
        elif kind[0] == "year":
            after, before = stamp(date(kind[1], 1, 1)), stamp(date(kind[1] + 1, 1, 1))
        elif kind[0] == "custom":
            a, b = self.after.date(), self.before.date()
            after = stamp(a) if a else None
            before = stamp(b + timedelta(days=1)) if b else None
        return Filters((folder,) if folder else (), after, before)

    @property
    def min_score(self) -> float:
        return self.cutoff.value() / 100
