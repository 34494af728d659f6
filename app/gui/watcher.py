"""A live library: the library's folders are watched (QFileSystemWatcher on every folder, up to a
limit), and a change asks for an incremental index of the folders that changed (not a rescan of
the whole library) after a quiet moment."""
from __future__ import annotations

import os

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

MAX_WATCHED = 4000  # folders; beyond, changes are found by the rescan at start and by Re-index
DEBOUNCE_MS = 3000


class LibraryWatcher(QObject):
    changed = Signal(list)  # the folders that changed under the library folders (debounced)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.fs = QFileSystemWatcher(self)
        self.fs.directoryChanged.connect(self._poke)
        self.timer = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self.timer.timeout.connect(self._fire)
        self.roots: list[str] = []
        self._dirs: set[str] = set()

    def _poke(self, path: str) -> None:
        self._dirs.add(path)
        self.timer.start()

    def _fire(self) -> None:
        dirs, self._dirs = sorted(self._dirs), set()
        if dirs:
            self.changed.emit(dirs)

    def watch(self, roots: list[str]) -> int:
        """Watch `roots` and their subfolders (hidden ones skipped). Returns how many are watched."""
        old = self.fs.directories()
        if old:
            self.fs.removePaths(old)
        self.roots = list(roots)
        dirs: list[str] = []
        for root in roots:
            if not os.path.isdir(root):
                continue
            for d, subdirs, _files in os.walk(root, onerror=lambda e: None):
                subdirs[:] = sorted(s for s in subdirs if not s.startswith("."))
                try:
                    d.encode("utf-8")  # Qt cannot name a folder that is not valid Unicode: the rescan covers it
                except UnicodeEncodeError:
                    continue
                dirs.append(d)
                if len(dirs) >= MAX_WATCHED:
                    break
        if dirs:
            self.fs.addPaths(dirs)
        return len(dirs)
