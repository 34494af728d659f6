"""The open library as the window sees it: the service, its events on the GUI thread, the counts
and folders it last published, following what other processes and computers change, the outage
state of a shared library, and the folder operations (add, remove, forget missing).

It talks to the LibraryService only (never to its writer or catalog), and every read that queries
the catalog runs off the GUI thread (`Background`): the GUI thread only ever reads what the
service published (`stats()`, `snapshot()`).
"""
from __future__ import annotations

import os

from PySide6.QtCore import QObject, QTimer, Signal

from ..core.paths import display, is_within
from ..core.library.service import LibraryService
from .library_pane import plural
from .watcher import LibraryWatcher
from .workers import Background, CoreBridge

MODEL_CHECK_MS = 5000  # a model that cannot run (its weights file away) is looked for again this often
REFRESH_MS = 3000  # what other processes committed is looked for this often (one cheap query when nothing changed)


class LibraryController(QObject):
    """State: `svc` (the open library), `stats` (its counts as last published), `outage` (the
    words of a shared library's server that does not answer, "" while it does), the commands
    removing folders (`forgetting`) and the folder filter's choices as last read.

    Signals carry plain data; the window renders them."""

    attached = Signal()  # a library is open (the first, or after a switch)
    event = Signal(object)  # every service Event, on the GUI thread
    statsChanged = Signal(object)  # the counts, folders and states as published
    searchDone = Signal(object)  # SearchResult
    searchFailed = Signal(int, str)  # request id, message
    heatReady = Signal(int)  # image id whose overlay grid was made
    connectionChanged = Signal(bool, str)  # the server stopped answering (True, the words) or answers again
    said = Signal(str)  # a line about the library's folders (the indexing part of the status bar)
    notice = Signal(str)  # a passing message (the search part of the status bar)
    removing = Signal(str)  # a folder is being forgotten: its photos leave what is shown
    forgotten = Signal()  # photos left the library (a removal ended): a shown search may be stale
    foldersGone = Signal(list)  # library folders deleted while they were indexed (never watched): to rescan
    foldersTouched = Signal(list)  # folders inside the library whose files changed (the watcher, debounced)
    modelBack = Signal()  # the library's model can run again (its weights file is back)
    filterChoicesRead = Signal(list, list)  # subfolders, years

    def __init__(self, parent=None):
        super().__init__(parent)
        self.svc: LibraryService | None = None
        self.bridge: CoreBridge | None = None
        self.stats: dict = {}
        self.outage = ""
        self.forgetting: dict[int, tuple[str | None, dict]] = {}  # forget command -> (folder, its counts then)
        self.subfolders: list[str] | None = None  # the folder filter's choices, read when it opens
        self._subfolders_gen = -1
        self._subfolders_stale = True  # the library changed since they were read
        self._subfolders_reading = False
        self._subfolder_roots: list[str] = []  # the library folders when they were read
        self.background = Background(self)
        self.watcher = LibraryWatcher(self)
        self.watcher.changed.connect(self.foldersTouched)
        self._model_check = QTimer(self, interval=MODEL_CHECK_MS)
        self._model_check.timeout.connect(self._look_for_model)
        self._refresh = QTimer(self, interval=REFRESH_MS)
        self._refresh.timeout.connect(self._follow)
        self.event.connect(self._on_event)

    # ---- opening and closing ----------------------------------------------------------------------
    def attach(self, svc: LibraryService) -> None:
        """Show `svc`'s library: its events, counts and folders, following what others commit."""
        self.svc = svc
        self.bridge = CoreBridge(svc, self)
        self.bridge.event.connect(self.event)
        self.bridge.searchDone.connect(self.searchDone)
        self.bridge.searchFailed.connect(self.searchFailed)
        self.bridge.matches.ready.connect(self.heatReady)
        self.outage = ""
        self.forgetting.clear()
        self.subfolders, self._subfolders_gen, self._subfolders_stale = None, -1, True
        self.stats = {}
        self.show_stats(svc.stats())
        # any library may be written by another process or computer meanwhile: followed, cheaply
        self._refresh.start()
        self.watch()
        self.attached.emit()

    def detach(self, timeout: float = 3.0) -> None:
        """Stop following the library and close it (never waiting long: see LibraryService.close)."""
        self._refresh.stop()
        self._model_check.stop()
        if self.bridge is not None:
            self.bridge.shutdown(timeout)
            self.bridge.deleteLater()
            self.bridge = None
        if self.svc is not None:
            self.svc.close(timeout)

    @property
    def read_only(self) -> bool:
        return self.svc is None or self.svc.read_only

    @property
    def shared(self) -> bool:
        return self.svc is not None and bool(self.svc.library)

    # ---- what the service publishes ----------------------------------------------------------------
    def _on_event(self, ev) -> None:
        if ev.kind == "stats":
            self.show_stats(ev.data)
        elif ev.kind == "connection":
            self.outage = ev.data["message"] if ev.data["down"] else ""
            self.connectionChanged.emit(bool(ev.data["down"]), self.outage)
        elif ev.kind in ("done", "failed", "unreachable") and ev.command in self.forgetting:
            self._forget_ended(ev)

    def show_stats(self, stats: dict) -> None:
        """New counts: kept, the model check started or stopped, the filter's choices marked stale."""
        self.stats = stats
        if stats.get("unusable") and not self.read_only and not self._model_check.isActive():
            self._model_check.start()
        elif not stats.get("unusable"):
            self._model_check.stop()
        if stats.get("generation") != self._subfolders_gen:
            self._subfolders_stale = True
        self.statsChanged.emit(stats)

    def folders(self) -> list[str]:
        return [f["path"] for f in self.stats.get("folders", [])]

    def _follow(self) -> None:
        if self.svc is not None and not self.svc.closed:
            self.svc.refresh()  # coalesced by the service: never a queue of them

    def _look_for_model(self) -> None:
        """The library's model could not run here (its weights file away with its drive): index
        once it can."""
        if self.svc is None or not self.svc.model_runs():
            return
        self._model_check.stop()
        self.modelBack.emit()

    def watch(self) -> None:
        """Watch the library folders that are there; a folder deleted while it was indexed was
        never watched: the window is told, and a rescan of it says it is gone."""
        folders = self.stats.get("folders", [])
        self.watcher.watch([f["path"] for f in folders if f.get("state") == "ok"])
        gone = [f["path"] for f in folders if f.get("state") == "ok" and not os.path.isdir(f["path"])]
        if gone:
            self.foldersGone.emit(gone)

    # ---- folders ------------------------------------------------------------------------------------------
    def add_folder(self, path: str) -> bool:
        """Add a folder (indexing follows: the caller starts it). False, with a notice, when it
        cannot be added: a library open for searching only, or a folder already in it."""
        if self.read_only:
            self.notice.emit("This library is open for searching only here: folders are added by its indexers.")
            return False
        real = os.path.realpath(path)
        folders = self.stats.get("folders", [])
        holder = next((f["path"] for f in folders if is_within(real, f["path"])), None)
        if holder is not None and any(is_within(real, x) for x in self.stats.get("exclusions", ())):
            holder = None  # forgotten inside a library folder (`heatsearch forget`): added back
        if holder is not None:
            where = "" if is_within(holder, real) else f" (inside {display(holder)})"
            self.notice.emit(f"{display(real)} is already in the library{where}")
            return False
        inner = [os.path.basename(f["path"]) for f in folders if is_within(f["path"], real)]
        if inner:
            names = ", ".join(inner[:3]) + (" …" if len(inner) > 3 else "")
            self.notice.emit(f"{os.path.basename(real)} now holds the library folders {names}: "
                             "their photos stay as they were described")
        self.svc.add_folder(path, index=False)
        return True

    def remove_folder(self, path: str) -> None:
        """Forget a folder (the person confirmed): runs on the writer; its photos leave what is
        shown at once (`removing`)."""
        cmd = self.svc.forget(path)
        self.forgetting[cmd.id] = path, next((f for f in self.stats.get("folders", ()) if f["path"] == path), {})
        self.said.emit(f"Removing {os.path.basename(display(path))} from the library (the photos stay on disk)…")
        self.removing.emit(path)

    def missing_counts(self) -> tuple[int, int]:
        """(photos marked missing, files of vanished folders that could not be read)."""
        st = self.stats
        failed = sum(f.get("failed", 0) for f in st.get("folders", []) if f.get("state") == "missing")
        return st.get("missing", 0), failed

    def forget_missing(self) -> None:
        """Forget the photos marked missing (the person confirmed), with the unreadable files of
        their vanished folders."""
        _, failed = self.missing_counts()
        cmd = self.svc.forget(None, missing_only=True)
        self.forgetting[cmd.id] = None, {"failed": failed}

    def _forget_ended(self, ev) -> None:
        path, counts = self.forgetting.pop(ev.command)
        folder = os.path.basename(display(path).rstrip("/")) if path else ""
        ok = ev.kind == "done" and isinstance(ev.data, int)
        if path is None:  # Forget missing photos
            failed = counts.get("failed", 0)
            also = f" and {plural(failed, 'skipped file')}" if failed else ""
            self.said.emit(f"Forgot {plural(max(0, ev.data - failed), 'missing photo')}{also}" if ok
                           else f"Missing photos could not be forgotten: {ev.data}")
        elif ok:
            # in the Library pane's words: its photos, and the files it skipped or lost
            failed, missing = counts.get("failed", 0), counts.get("missing", 0)
            others = "".join(f", {w}" for w in (failed and plural(failed, "unreadable file"),
                                               missing and f"{missing} missing") if w)
            where = "the files stay on disk" if os.path.isdir(path) else "its folder is gone"
            self.said.emit(f"Removed {folder}: {plural(max(0, ev.data - failed - missing), 'photo')} "
                           f"forgotten{others}; {where}")
        else:
            self.said.emit(f"{folder} could not be removed: {ev.data}")
        self.show_stats(self.svc.stats())
        self.watch()
        self.forgotten.emit()

    # ---- reads off the GUI thread ---------------------------------------------------------------------
    def read_filter_choices(self) -> None:
        """The folders under the library folders and the years holding photos, for the filters:
        read off the GUI thread (a large library has many), `filterChoicesRead` when they arrive.
        Nothing when they are current or being read."""
        if not self._subfolders_stale or self._subfolders_reading or self.svc is None:
            return
        svc, stats = self.svc, self.svc.stats()
        gen, roots = stats.get("generation"), [f["path"] for f in stats.get("folders", [])]
        self._subfolders_reading = True

        def got(result) -> None:
            self._subfolders_reading = False
            if svc is not self.svc or isinstance(result, Exception):
                return
            subs, years = result
            self.subfolders, self._subfolders_gen, self._subfolder_roots = subs, gen, roots
            self._subfolders_stale = gen != svc.stats().get("generation")
            self.filterChoicesRead.emit(subs, years)

        self.background.run(svc.filter_choices, got)

    def filter_choices_due(self, indexing: bool) -> bool:
        """Whether the open filter's choices should be read again now: the library's folders
        changed, or a run ended (not at every batch: it reads every photo's path)."""
        return self._subfolders_stale and (self.folders() != self._subfolder_roots or not indexing)

    def read_log(self, callback) -> None:
        """callback((failures [(path, why)], missing [path])) with what indexing skipped, read off
        the GUI thread; callback(exception) when it could not be read."""
        svc = self.svc
        self.background.run(lambda: (svc.failures(), svc.missing()), callback)

    def read_photos_to_index(self, new, callback) -> None:
        """callback((photos a switch to `new` describes, whether those settings were used before)),
        read off the GUI thread; callback(exception) when it could not be read."""
        svc = self.svc
        self.background.run(lambda: svc.photos_to_index(new), callback)
