"""The duplicates view: groups of exact copies, near-duplicates, rotated/mirrored copies and crops,
kept apart from "similar"; one threshold slider with a live preview of what it includes; Reveal,
Find similar, Copy paths, Export (CSV or JSON). HeatSearch never deletes."""
from __future__ import annotations

import csv
import json
import os
import threading

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QIcon, QPixmap
from PySide6.QtWidgets import (QCheckBox, QDialog, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSlider,
                               QStyledItemDelegate, QStyleOptionViewItem, QTreeWidget, QTreeWidgetItem, QVBoxLayout)

from ..core.duplicates import NEAR_DEFAULT, SLIDER_RANGE, STRENGTH, find_duplicates, to_records
from ..core.paths import display
from .library_pane import plural
from .viewer import open_externally
from .widgets import choose_path

ICON = QSize(64, 64)


class _Runner(QObject):
    """find_duplicates on a Python thread; the newest request wins (the slider moves fast)."""

    done = Signal(int, object)  # request number, groups (or an error string)

    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.svc = svc
        self.n = 0
        self.threads: list[threading.Thread] = []
        self.cache: dict = {}  # neighbours and crop scores of the library version: a slider move only regroups
        self.lock = threading.Lock()  # one grouping at a time over the shared cache

    def run(self, threshold: float, crops: bool) -> int:
        self.n += 1
        n = self.n

        def work():
            try:
                with self.lock:
                    groups = find_duplicates(self.svc, threshold, crops, cache=self.cache)
            except Exception as e:  # noqa: BLE001 - shown in the dialog
                groups = f"could not group: {e}"
            self.done.emit(n, groups)

        t = threading.Thread(target=work, name="heatsearch-duplicates", daemon=True)
        self.threads = [x for x in self.threads if x.is_alive()] + [t]
        t.start()
        return n

    def join(self, timeout: float = 10.0) -> None:
        for t in self.threads:
            t.join(timeout)


class WrapWords(QStyledItemDelegate):
    """Cells whose words wrap onto the lines of a thumbnail's row, cut at their end past them, in
    a view that cuts the others at their start (a reason reads from its start: "the same photo
    turned 90° clockwise, resized to 50 %" was cut to "the same photo tu…" at the dialog's size)."""

    def initStyleOption(self, option, index):
        super().initStyleOption(option, index)
        option.features |= QStyleOptionViewItem.WrapText
        option.textElideMode = Qt.ElideRight


class WrapName(QStyledItemDelegate):
    """A file name on the lines of its thumbnail's row (cut to one line, a long name read
    "Summer holiday i…inal edit v3.jpg"), cut in its middle past them: its start and its extension
    both say which it is (cut at its start, "…S30__2_.jpg" lost the camera's name)."""

    def initStyleOption(self, option, index):
        super().initStyleOption(option, index)
        option.features |= QStyleOptionViewItem.WrapText
        option.textElideMode = Qt.ElideMiddle


class DuplicatesDialog(QDialog):
    findSimilar = Signal(str)

    def __init__(self, svc, loader, parent=None, ui_settings=None):
        super().__init__(parent)
        self.setWindowTitle("Duplicates — HeatSearch")
        self.svc, self.loader = svc, loader
        self.ui_settings = ui_settings  # QSettings: where the last list was saved, the slider, crops
        self.groups = []
        self.shown = 0  # the runner request whose groups are on screen
        v = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("How alike copies must be"))
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(round(SLIDER_RANGE[0] * 100), round(SLIDER_RANGE[1] * 100))
        self.slider.setValue(round(NEAR_DEFAULT * 100))
        self.slider.setToolTip("How alike two photos' pixels must be to count as the same photo, once turned and scaled "
                               "onto each other.\nRight: only copies that look identical (re-saved, resized, turned). "
                               "Left: also heavier edits (strong compression, brightness or contrast changed),\n"
                               "and more risk of grouping two different shots of the same scene. Identical files are "
                               "always found.")
        self.value = QLabel()
        self.crops = QCheckBox("Include crops")
        self.crops.setChecked(True)
        self.crops.setToolTip("Also group photos that are a crop of another photo")
        if ui_settings is not None:  # both remembered, as the results' cut-off (else back to 0.92 at every start)
            try:
                self.slider.setValue(int(ui_settings.value("duplicates_alike", self.slider.value())))
            except (TypeError, ValueError):
                pass
            self.crops.setChecked(str(ui_settings.value("duplicates_crops", "true")) == "true")
            self.slider.valueChanged.connect(lambda v: ui_settings.setValue("duplicates_alike", int(v)))
            self.crops.toggled.connect(lambda on: ui_settings.setValue("duplicates_crops", "true" if on else "false"))
        for w in (self.slider, self.value, self.crops):
            row.addWidget(w)
        v.addLayout(row)
        self.summary = QLabel("Looking for duplicates…")
        self.summary.setWordWrap(True)  # unwrapped, its line set the dialog's width (past a 1366 px screen's edge)
        v.addWidget(self.summary)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Photo", "Size", "Folder", "Why"])
        self.tree.setIconSize(ICON)
        self.tree.setColumnWidth(0, 330)
        self.tree.setColumnWidth(1, 90)
        self.tree.setColumnWidth(2, 160)
        # a wider dialog widens the folder and the reason, not the reason alone (else the folder
        # stayed cut at "…ial6/photos/life/camera" in a maximised dialog)
        self.tree.header().setSectionResizeMode(2, QHeaderView.Stretch)
        self.tree.header().setSectionResizeMode(3, QHeaderView.Stretch)
        self.tree.setTextElideMode(Qt.ElideLeft)  # a folder's end says which it is ("…/photos/objects")
        self._why_delegate = WrapWords(self.tree)
        self.tree.setItemDelegateForColumn(3, self._why_delegate)
        self._name_delegate = WrapName(self.tree)
        self.tree.setItemDelegateForColumn(0, self._name_delegate)
        self.tree.setToolTip("The first photo of each group is the original, the one to keep: no added border, not a crop, "
                             "not enlarged, most pixels, the camera's file, the original format, the oldest file, "
                             "turned as most of its copies, the largest file")
        v.addWidget(self.tree, 1)
        buttons = QHBoxLayout()
        self.reveal_btn = QPushButton("Show in folder")
        self.similar_btn = QPushButton("Find similar")
        self.copy_btn = QPushButton("Copy paths")
        self.export_btn = QPushButton("Export list…")
        tips = {self.reveal_btn: "Open the selected photo's folder in your file manager",
                self.similar_btn: "Search the library with the selected photo",
                self.copy_btn: "Copy the paths of the selected group (or photo) to the clipboard",
                self.export_btn: "Save every group as CSV or JSON (HeatSearch itself never deletes a photo)"}
        for b, tip in tips.items():
            b.setToolTip(tip)
            buttons.addWidget(b)
        self.done_note = QLabel()  # what the last button did ("Copied 2 paths", "Saved the list to ...")
        buttons.addWidget(self.done_note, 1)
        v.addLayout(buttons)
        self.runner = _Runner(svc, self)
        self.runner.done.connect(self._on_groups)
        self._debounce = QTimer(self, singleShot=True, interval=250)
        self._debounce.timeout.connect(self.refresh)
        self.slider.valueChanged.connect(self._on_slider)
        self.crops.toggled.connect(lambda _: self.refresh())
        self.reveal_btn.clicked.connect(lambda: self._selected_path() and open_externally(self, self._selected_path(), folder=True))
        self.similar_btn.clicked.connect(self._find_similar)
        self.copy_btn.clicked.connect(self._copy)
        self.export_btn.clicked.connect(lambda: self.export())  # clicked(bool) would pass False as the target
        self.tree.currentItemChanged.connect(lambda *_: self._enable())
        loader.loaded.connect(self._on_thumb)
        self._items: dict[str, list[QTreeWidgetItem]] = {}
        self._on_slider(self.slider.value(), search=False)
        self._enable()
        self.resize(900, 600)

    def _enable(self) -> None:
        """Each button only where it has something to act on (none while no group is shown)."""
        item = self.tree.currentItem()
        photo = item is not None and item.parent() is not None
        self.reveal_btn.setEnabled(photo)
        self.similar_btn.setEnabled(photo)
        self.copy_btn.setEnabled(item is not None)
        self.export_btn.setEnabled(bool(self.groups))

    @property
    def threshold(self) -> float:
        return self.slider.value() / 100

    def _on_slider(self, v: int, search: bool = True) -> None:
        self.value.setText(f"{v / 100:.2f}")
        if search:
            self._debounce.start()

    def refresh(self) -> None:
        self.summary.setText("Looking for duplicates…")
        self._pending = self.runner.run(self.threshold, self.crops.isChecked())

    def _on_groups(self, n: int, groups) -> None:
        if n != self.runner.n:
            return  # a newer threshold is on its way
        if isinstance(groups, str):
            self.summary.setText(groups)
            return
        self.groups = groups
        self.shown = n
        photos = sum(len(g.members) for g in groups)
        # a link frees nothing: counted apart (else "3 could go" counted links to photos elsewhere)
        links = sum(m.link for g in groups for m in g.members[1:])
        extra = sum(len(g.members) - 1 for g in groups) - links
        besides = f" (and {plural(links, 'link')}, which free{'s' if links == 1 else ''} no space)" if links else ""
        # the least alike copy says what the slider can still take away (below it, nothing changes);
        # a crop's number is its window's, held to a bar of its own: said apart, as the list and
        # the exported file give it (a summary of 0.99 beside a crop listed at 0.96 contradicted them)
        least = min((m.similarity for g in groups for m in g.members[1:] if m.relation not in ("exact", "crop")),
                    default=None)
        least_crop = min((m.similarity for g in groups for m in g.members[1:] if m.relation == "crop"), default=None)
        # in plain words: "the least alike whole-photo copy found" read as jargon, "copies found down
        # to 1.00 alike" as confusing; a copy at half size reads 1.00 too, so it is "the same
        # picture", not "the same pixels"
        spread = ("" if least is None else "; every copy found is the same picture" if least >= 0.995
                  else f"; the least alike copy found: {least:.2f}")
        if least_crop is not None:
            spread += f"; the least alike crop: {least_crop:.2f}"
        self.summary.setText(f"{plural(len(groups), 'group')}, {plural(photos, 'photo')}: {extra} could go{besides} if you kept the "
                             f"first of each (pixels at least {self.threshold:.2f} alike{spread}). Nothing is deleted here."
                             if groups else f"No copies at this setting (pixels at least {self.threshold:.2f} alike).")
        self.done_note.clear()  # "Saved 2 groups to ..." was about the groups before
        self.tree.clear()
        self._items.clear()
        kinds = {"exact": "identical files", "format": "the same photo in other formats", "reencoded": "re-encoded copies",
                 "resized": "resized copies", "turned": "turned or mirrored copies", "edited": "edited copies",
                 "bordered": "copies with a border", "crop": "crops", "similar": "copies"}
        for k, g in enumerate(groups, 1):
            # every kind of copy the group holds, loosest first (not "resized copies" alone over an identical file too)
            held = sorted({m.relation for m in g.members[1:]}, key=lambda r: -STRENGTH[r]) or ["exact"]
            words = [kinds[r] for r in held]
            named = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
            top = QTreeWidgetItem([f"Group {k}: {named} ({len(g.members)} photos)", "", "", ""])
            self.tree.addTopLevelItem(top)
            top.setFirstColumnSpanned(True)  # the title has the whole row (it read "(3 ph…" in the Photo column)
            for m in g.members:
                folder = os.path.dirname(display(m.path))
                item = QTreeWidgetItem([os.path.basename(display(m.path)), f"{m.width}x{m.height}", folder, m.reason])
                item.setToolTip(0, display(m.path))
                item.setToolTip(2, folder)
                item.setToolTip(3, m.reason)
                item.setData(0, Qt.UserRole, m.path)
                top.addChild(item)
                self._items.setdefault(m.path, []).append(item)
                self._set_icon(item, m.path)
            top.setExpanded(k <= 50)
        self._enable()

    def _set_icon(self, item, path: str) -> None:
        img = self.loader.get(path, ICON)
        if img is None:
            self.loader.request(path, ICON)
        elif not img.isNull():
            item.setIcon(0, QIcon(QPixmap.fromImage(img)))

    def _on_thumb(self, path: str) -> None:
        for item in self._items.get(path, []):
            self._set_icon(item, path)

    def _selected_path(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, Qt.UserRole) if item is not None else None

    def _find_similar(self) -> None:
        p = self._selected_path()
        if p:
            self.findSimilar.emit(p)

    def _copy(self) -> None:
        item = self.tree.currentItem()
        if item is None:
            return
        group = item if item.parent() is None else item.parent()
        paths = [group.child(i).data(0, Qt.UserRole) for i in range(group.childCount())] if item.parent() is None \
            else [item.data(0, Qt.UserRole)]
        QGuiApplication.clipboard().setText("\n".join(display(p) for p in paths))
        self.done_note.setText(f"Copied {plural(len(paths), 'path')}")

    def export(self, target: str | None = None) -> str | None:
        if target is None:
            # where the last list went (else the dialog always opened in the home folder)
            start = self.ui_settings.value("last_export_dir", "") if self.ui_settings is not None else ""
            target, chosen = choose_path(self, "Export the duplicate groups",
                                         os.path.join(start or os.path.expanduser("~"), "duplicates.csv"),
                                         "CSV (*.csv);;JSON (*.json)", mode="save")
            if target and not os.path.splitext(target)[1]:  # a name typed without one ("dups1")
                target += ".json" if "json" in chosen.lower() else ".csv"
        if not target:
            return None
        try:
            saved = self._write(target)
        except OSError as e:
            self.done_note.setText(f"Could not save the list: {e.strerror or e}")
            return None
        if self.ui_settings is not None:
            self.ui_settings.setValue("last_export_dir", os.path.dirname(os.path.abspath(saved)))
        return saved

    def _write(self, target: str) -> str:
        records = to_records(self.groups)
        if target.lower().endswith(".json"):
            with open(target, "w") as fh:
                json.dump({"threshold": self.threshold, "groups": records}, fh, indent=1)
        else:
            with open(target, "w", newline="") as fh:
                w = csv.writer(fh)
                # the dialog's own words in `reason` (the relation alone says "turned" for mirrored too)
                w.writerow(["group", "kind", "keep", "relation", "reason", "similarity", "width", "height", "bytes", "path"])
                for r in records:
                    for m in r["members"]:
                        w.writerow([r["group"], r["kind"], "yes" if m["keep"] else "", m["relation"], m["reason"],
                                    m["similarity"], m["width"], m["height"], m["bytes"], display(m["path"])])
        self.done_note.setText(f"Saved {plural(len(records), 'group')} to {os.path.basename(target)}")
        self.done_note.setToolTip(display(target))
        return target
