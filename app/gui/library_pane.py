"""The Library pane: the photo folders with live counts and honest states (indexing, stopped with
photos left, offline, missing), and the buttons that change the library, named as what they do:
Add, Remove (asks first), Rescan (look for new, changed and deleted photos now), Resume (index the
photos a stopped run left), Forget missing photos."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMessageBox, QPushButton, QVBoxLayout,
                               QWidget)

from ..core.paths import display


def folder_names(paths: list[str]) -> list[str]:
    """What the pane calls each folder: its name, with its parent's where two share a name (two
    folders called "Misc" looked alike), or its whole path where that is not enough."""
    def name(p, up):
        parts = display(p).rstrip("/").split("/")
        return parts[-1] if up == 0 else f"{parts[-1]} (in {'/'.join(parts[-1 - up:-1]) or '/'})"

    names = [name(p, 0) or display(p) for p in paths]
    for up in (1, 2):
        names = [name(p, up) if names.count(n) > 1 else n for p, n in zip(paths, names)]
    return [display(p) if names.count(n) > 1 else n for p, n in zip(paths, names)]


class LibraryPane(QWidget):
    addRequested = Signal()
    removeRequested = Signal(str)  # folder path, after the user confirmed
    reindexRequested = Signal()  # Rescan and Resume: an incremental index does both
    forgetMissingRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 4)
        self.folder_list = QListWidget()
        self.folder_list.setToolTip("Your photo folders (searched with everything below them). "
                                    "HeatSearch only reads them: it never changes, moves or deletes a photo.")
        self.folder_list.setWordWrap(True)
        self.folder_list.setTextElideMode(Qt.ElideMiddle)
        # a folder's two lines (its name, its count) one band, told from the next folder's (else
        # 4 folders read as a list of 8 items)
        self.folder_list.setAlternatingRowColors(True)
        self.folder_list.setSpacing(1)
        v.addWidget(self.folder_list, 1)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        v.addWidget(self.summary)
        row = QHBoxLayout()
        row2 = QHBoxLayout()
        self.add_btn = QPushButton("Add…")
        self.add_btn.setToolTip("Add a photo folder to the library (or drop a folder on the window)")
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.setToolTip("Forget the selected folder (its photos stay where they are)")
        self.reindex_btn = QPushButton("Rescan")
        self.reindex_btn.setToolTip("Look for new, changed and deleted photos in these folders now (only what changed "
                                    "is analysed again)")
        self.resume_btn = QPushButton("Resume")
        self.resume_btn.setToolTip("Index the photos a stopped run left (what is done stays done)")
        self.resume_btn.setVisible(False)
        row.addWidget(self.add_btn)
        row.addWidget(self.remove_btn)
        row2.addWidget(self.reindex_btn)
        row2.addWidget(self.resume_btn)
        v.addLayout(row)
        v.addLayout(row2)
        self.missing_btn = QPushButton("Forget missing photos")
        self.missing_btn.setToolTip("Photos whose folder vanished are kept (out of the results) in case it comes back; "
                                    "this forgets them for good")
        self.missing_btn.setVisible(False)
        v.addWidget(self.missing_btn)
        self.add_btn.clicked.connect(lambda: self.addRequested.emit())
        self.remove_btn.clicked.connect(self._confirm_remove)
        self.reindex_btn.clicked.connect(lambda: self.reindexRequested.emit())
        self.resume_btn.clicked.connect(lambda: self.reindexRequested.emit())
        self.missing_btn.clicked.connect(lambda: self.forgetMissingRequested.emit())
        self.setMinimumWidth(160)
        self._totals: dict[int, int] = {}
        self._read_only = False
        self._enable_folder_buttons()

    def set_read_only(self, read_only: bool) -> None:
        self._read_only = read_only
        for b in (self.add_btn, self.remove_btn, self.reindex_btn, self.resume_btn, self.missing_btn):
            b.setEnabled(not read_only)
        self._enable_folder_buttons()

    def _enable_folder_buttons(self) -> None:
        """Remove and Rescan only where there is a folder to remove or rescan."""
        for b in (self.remove_btn, self.reindex_btn):
            b.setEnabled(not self._read_only and self.folder_list.count() > 0)

    def set_scan_totals(self, totals: dict[int, int]) -> None:
        """Photos found per folder by the running scan (for "48 of 56" while indexing)."""
        self._totals = dict(totals)

    def update_stats(self, stats: dict, indexing: bool = False, left: dict | None = None, paused: bool = False) -> None:
        """Counts per folder. indexing: a run is going (shows "48 of 56 indexed" from the scan),
        paused by the person (", paused"); left: folder path -> photos a stopped run left to index."""
        current = self.current_path()
        left = left or {}
        self.folder_list.clear()
        folders = stats.get("folders", [])
        for f, name in zip(folders, folder_names([f["path"] for f in folders])):
            indexed, failed = f.get("indexed", 0), f.get("failed", 0)
            total = folder_total(f, self._totals) if indexing else 0
            stopped = False
            if indexing and total > indexed:
                # describing the library again for new settings: the old descriptions still serve
                # ("0 of 1054 indexed" read as if the library had been wiped)
                done = "described again" if stats.get("serving_space") else "indexed"
                count = f"{indexed} of {total} {done}" + (", paused" if paused else "")
            elif indexing and not indexed and not total:  # just added: its scan has not counted it yet
                count = "being scanned…"
            elif left.get(f["path"]):  # stopped; after a switch of settings it says "described again"
                # ("0 of 60 indexed (stopped)" contradicted "364 photos searchable" beside it)
                done = "described again" if stats.get("serving_space") else "indexed"
                count = f"{indexed} of {indexed + left[f['path']]} {done}"
                stopped = True
            elif not indexed and not failed and not f.get("missing") and f.get("state", "ok") == "ok":
                count = "no photos found in it"  # "0 photos" gave no hint why
            elif not indexed and not failed and not f.get("missing") and f.get("state") == "missing":
                # its photos forgotten ("0 photos" stayed, with no hint what the row was for)
                count = "nothing left of it · Remove takes it off the list"
            else:
                count = plural(indexed, "photo")
            # a narrow pane wraps before a dot, not inside "1 skipped" (not "· 1", then "skipped");
            # beside a running or stopped count, on the name's line (not "· 1 skipped" on a line of its own
            # under "0 of 155 described again"), as "stopped" (at the default width "130 of 150 described again
            # (stopped)" wrapped, a line of its own for "(stopped)")
            extra = (" ·\u00a0stopped" if stopped else "") + \
                (f" ·\u00a0{failed}\u00a0skipped" if failed else "") + \
                (f" ·\u00a0{f['missing']}\u00a0missing" if f.get("missing") else "")
            long_count = (indexing and total > indexed) or stopped  # "66 of 152 indexed"
            state = {"offline": "  (offline: not reachable now)", "missing": "  (missing: the folder is gone)"}.get(f.get("state"), "")
            item = QListWidgetItem(f"{name}{state}{extra}\n{count}" if long_count else f"{name}{state}\n{count}{extra}")
            item.setData(Qt.UserRole, f["path"])
            item.setData(Qt.UserRole + 1, f.get("state", "ok"))
            item.setToolTip(display(f["path"]))
            self.folder_list.addItem(item)
            if f["path"] == current:
                self.folder_list.setCurrentItem(item)
        self._enable_folder_buttons()
        missing = stats.get("missing", 0)
        # a vanished folder's skipped files go with its missing photos (Forget missing photos)
        gone_skipped = sum(f.get("failed", 0) for f in stats.get("folders", []) if f.get("state") == "missing")
        self.missing_btn.setVisible(bool(missing or gone_skipped))
        self.missing_btn.setText(f"Forget {plural(missing, 'missing photo')}" if missing else "Forget missing photos")
        remaining = sum(left.values())
        self.resume_btn.setVisible(bool(remaining) and not indexing)
        self.resume_btn.setText(f"Resume ({remaining} left)")
        n = stats.get("searchable", stats.get("indexed", 0))
        text = f"{plural(n, 'photo')} searchable" if stats.get("folders") else ""
        old = stats.get("serving_space")
        if old and stats.get("folders"):
            # short: the pane is narrow (it took six lines, and "(not running: Resume or Rescan goes on)" read
            # awkwardly); the rows and the Resume button say the rest
            text += (" (the previous settings); "
                     + f"{stats.get('indexed', 0)} described again for the new settings"
                     + (", paused" if indexing and paused else " so far" if indexing else ", stopped"))
        if stats.get("unusable") and stats.get("folders"):  # in full here: the status line cut it
            text += (f". Indexing waits: {stats['unusable']}. Searches use the descriptions made before (by a model "
                     "that runs here); indexing starts by itself once the model can run (its weights file back), or "
                     "choose another model in Settings")
        self.summary.setText(text)

    def chosen_item(self) -> QListWidgetItem | None:
        """The folder row the person selected: not merely the current one, which the list makes
        its first row when it takes the focus (after a restart Remove offered to forget a folder
        nobody chose)."""
        items = self.folder_list.selectedItems()
        return items[0] if items else None

    def current_path(self) -> str | None:
        item = self.chosen_item()
        return item.data(Qt.UserRole) if item is not None else None

    def _confirm_remove(self) -> None:
        item = self.chosen_item()
        if item is None:
            QMessageBox.information(self, "Remove a folder", "Select a folder in the list first (click it, or Space on it).")
            return
        path = item.data(Qt.UserRole)
        # a folder that is gone is not said to keep its photos on disk "exactly as they are"
        after = ("The folder is gone from the disk; HeatSearch forgets what it knew of it."
                 if item.data(Qt.UserRole + 1) == "missing" else
                 "Its photos stay on disk exactly as they are; HeatSearch only stops searching them.")
        box = QMessageBox(QMessageBox.Question, "Remove this folder from the library?",
                          f"Forget {display(path)}?\nIn the library: {item.text().splitlines()[-1].replace(chr(0xa0), ' ')}.\n\n{after}",
                          QMessageBox.NoButton, self)
        # the button says what it does (Alt+R); Enter and Escape cancel: nothing on disk is
        # touched, but a large folder's index takes hours to make again (Enter to remove was
        # asked for once, but a mis-click and Enter forgot 150 photos)
        remove = box.addButton("&Remove from library", QMessageBox.DestructiveRole)
        cancel = box.addButton(QMessageBox.Cancel)
        box.setDefaultButton(cancel)
        box.exec()
        chosen = box.clickedButton() is remove
        box.deleteLater()
        if chosen:
            self.removeRequested.emit(path)


def folder_total(folder: dict, totals: dict[int, int]) -> int:
    """Photos of a library folder (its stats row) that a run means to have indexed: what the
    scan found (`totals`: folder id -> count), the ones that cannot be read left out (the scan
    counts them; they are skipped, not left to do)."""
    failed = folder.get("failed", 0)
    return max(totals.get(folder["id"], 0) - failed, folder.get("images", 0) - failed - folder.get("missing", 0))


def plural(n: int, word: str) -> str:
    """'1 photo', '2 photos'."""
    return f"{n} {word}{'' if n == 1 else 's'}"
