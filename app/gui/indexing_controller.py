"""Indexing runs of the open library as the window shows them: which run is going, its progress
in a person's words, pause, resume and stop, what a stopped run left, runs asked for while one
goes (a watcher's change, a rescan), and the pace that estimates a re-index.

It talks to the library service through the LibraryController only, and holds the run's state as
named fields; the window renders its signals (the status line's indexing part, the bar, the
buttons, the File menu's Pause/Resume).
"""
from __future__ import annotations

import time

from PySide6.QtCore import QObject, QTimer, Signal

from ..core.config import Settings
from ..core.features.quantise import CALIBRATION_PHOTOS
from ..core.features.registry import REGISTRY
from .library_controller import LibraryController
from .library_pane import folder_total, plural

DONE_KEPT_S = 120  # s an "Indexing done" line stays when the checks after it find nothing new
ESTIMATED_RATE = 8.0  # photos/s of the default model at 512 px on a 2-core laptop (docs "Speed"), until one is measured here


class IndexingController(QObject):
    """State: `index_cmd` (the id of the run going, None when none), `last_progress`, `paused`,
    `left` (library folder -> photos a stopped run left to index), `again` (a run was asked for
    while one went: it follows, over `changed_dirs`, None meaning every folder), and `model_pace`
    (photos a second of a model of cost 1 at 512 px, measured here)."""

    runStarted = Signal()
    line = Signal(str)  # the indexing part of the status bar
    bar = Signal(int, int)  # done, total; (0, 0): busy with no count
    scanTotals = Signal(object)  # library folder id -> photos the run's scan found there
    pausedChanged = Signal(bool)
    resumable = Signal(bool)  # photos a stopped run left: File > Resume indexing can go on with them
    runFinished = Signal(object)  # the last Progress (None when the run failed)
    failed = Signal(str)  # a run or a change of the library failed: said in a dialog
    libraryChanged = Signal()  # photos were indexed or removed: a shown search may be stale

    def __init__(self, library: LibraryController, ui_settings, parent=None):
        super().__init__(parent)
        self.lib = library
        self.ui_settings = ui_settings
        self.index_cmd: int | None = None
        self.last_progress = None
        self.paused = False
        self.left: dict[str, int] = {}
        self.again = False
        self.changed_dirs: set[str] | None = set()
        self.rescan_asked = False  # the next run's end is said, whatever it finds
        self.stop_asked = False  # the person stopped the run (else a command went first: it goes on)
        self.waits_for_server = False  # a run ended because the shared library's server stopped answering
        self.switching = False  # new settings were applied: their run's words are the window's until it starts
        self.last_failure = ""  # the last run's failure, said in a dialog once
        self.indexed_at = -1e9  # time.monotonic() of the last run that indexed photos (cleared by anything said after it)
        self.model_pace = 0.0
        self._tuning_from: tuple[float, int] | None = None  # (time.monotonic(), photos prepared) when first counted
        library.event.connect(self._on_event)
        library.statsChanged.connect(self._stats_changed)
        library.removing.connect(lambda path: self.left.pop(path, None))
        library.said.connect(lambda _text: setattr(self, "indexed_at", -1e9))  # newer than the last run's words
        library.connectionChanged.connect(self._connection_changed)
        library.foldersTouched.connect(lambda dirs: self.start(only=sorted(dirs)))
        library.foldersGone.connect(lambda gone: QTimer.singleShot(0, lambda: self.start(only=gone)))
        library.modelBack.connect(self._model_back)

    def reset(self) -> None:
        """Another library opened: nothing of the last one's runs applies."""
        self.index_cmd, self.last_progress, self.paused = None, None, False
        self.left.clear()
        self.again, self.changed_dirs = False, set()

    @property
    def running(self) -> bool:
        """Whether a run goes or is queued (a run whose end was told is over, though the service
        holds it while it saves)."""
        svc = self.lib.svc
        cur = svc.running if svc is not None else None
        return self.index_cmd is not None or (cur is not None and cur.name == "index" and not cur.future.done())

    # ---- asking for runs -----------------------------------------------------------------------------
    def start(self, only=None, retry_model: bool = False) -> None:
        """Look for new, changed and deleted photos (`only`: in these folders) and index them,
        with the library's own model. retry_model: also when the library's model could not run
        here (the run looks again); else such a library is not indexed (each watcher's run would
        fail and say so)."""
        svc = self.lib.svc
        if svc is None or svc.closed or svc.read_only or (svc.unusable and not retry_model):
            return  # closed: a start's rescan timer fired after a quick shutdown
        if self.running:
            self.again = True
            self.changed_dirs = None if only is None or self.changed_dirs is None else self.changed_dirs | set(only)
            return
        self.again = False
        self.changed_dirs = set()
        svc.index(only=only, model="library")

    def rescan(self) -> None:
        """Rescan (and Resume), asked by the person: its end is said even when it finds nothing."""
        svc = self.lib.svc
        self.rescan_asked = svc is not None and not (svc.closed or svc.read_only)
        self.start(retry_model=True)

    def _model_back(self) -> None:
        self.line.emit("The model's weights file is back: indexing…")
        self.start(retry_model=True)

    def toggle_pause(self) -> None:
        """Pause or resume the run; with none, go on with what a stopped run left."""
        svc = self.lib.svc
        cur = svc.running if svc is not None else None
        # a run whose end was told (its future done) is over, though the service still holds it
        if cur is None or cur.name != "index" or cur.future.done():
            if any(self.left.values()):
                self.start()
            return
        if cur.control.paused:
            cur.control.resume()
            self.paused = False
        else:
            cur.control.pause()
            self.paused = True
        self.pausedChanged.emit(self.paused)
        if self.last_progress is not None:
            self._show_progress(self.last_progress)

    def cancel(self) -> None:
        svc = self.lib.svc
        cur = svc.running if svc is not None else None
        if cur is not None and cur.name == "index":
            self.again = False
            self.stop_asked = True
            cur.control.cancel()
            self.line.emit("Cancelling after the current photo…")

    # ---- what the service says -----------------------------------------------------------------------
    def _on_event(self, ev) -> None:
        kind = ev.kind
        if kind == "started" and ev.data == "index":
            self.index_cmd = ev.command
            self.last_progress = None
            self.paused = False
            self.waits_for_server = False
            self.switching = False
            self.runStarted.emit()
            self.bar.emit(0, 0)
            self.line.emit("Looking for new and changed photos…")
        elif kind == "progress" and ev.command == self.index_cmd:
            self.last_progress = ev.data
            if ev.data.phase != "indexing" or not ev.data.done:  # a new phase says so at once
                self._show_progress(ev.data)
            # while photos are committed, the count is shown with the Library pane's (the next
            # "stats", at most 1.5 s later): two counts taken at different times disagreed
        elif kind == "log":  # the core's lines are the CLI's ("heatsearch: ..."): a sentence here
            self.line.emit(ev.data[:1].upper() + ev.data[1:])
        elif kind in ("done", "failed", "unreachable") and ev.command == self.index_cmd:
            self._finished(ev)
        elif kind == "failed" and ev.command not in self.lib.forgetting:
            self.line.emit(ev.data)  # another change of the library (new settings refused while loading)
            self.failed.emit(ev.data)

    def _stats_changed(self, _stats: dict) -> None:
        if self.index_cmd is not None and self.last_progress is not None:
            self._show_progress(self.last_progress)

    def _connection_changed(self, down: bool, _words: str) -> None:
        """The server answers again: a run it stopped goes on (a new run: it scans afresh)."""
        if not down and self.waits_for_server:
            self.waits_for_server = False
            self.start()

    def _show_progress(self, prog) -> None:
        svc = self.lib.svc
        stats = self.lib.stats
        if prog.total:
            self.bar.emit(prog.done, prog.total)
        if prog.folder_totals:
            self.scanTotals.emit(dict(prog.folder_totals))
        # a rate from a few photos is mostly start-up; moved or touched photos cost no model
        if prog.model_rate and prog.modelled >= 16 and svc is not None:
            self.model_pace = prog.model_rate * model_load(svc.settings)
            self.ui_settings.setValue("model_pace", round(self.model_pace, 3))
            # each precision's own: Settings says whether 8-bit is faster here, measured
            self.ui_settings.setValue(f"model_pace/{svc.settings.precision}", round(self.model_pace, 3))
        note = ", paused" if self.paused else ""
        if prog.phase != "tuning the 8-bit model":
            self._tuning_from = None  # a later tuning counts its own pace
        if prog.phase == "scanning":
            text = "Looking for new and changed photos…"
        elif prog.phase == "tuning the 8-bit model":
            done, total = prog.tuned
            text = "Tuning the 8-bit model on your photos (once)…"
            if total:
                self.bar.emit(done, total)
                text = f"Tuning the 8-bit model on your photos (once): {done} of {total}{self._tuning_left(done, total)}…"
        elif prog.phase in ("loading the model", "calibrating") and not prog.done:
            # calibrating: a sample of up to 48 photos is described before the count moves
            first = ": describing a first sample of them" if prog.phase == "calibrating" else ""
            text = f"Preparing to index {plural(prog.total, 'photo')}{first}…"
        elif prog.phase in ("finishing", "done"):
            text = f"Finishing: {plural(prog.done, 'photo')} described, making them searchable…" if prog.done else "Finishing…"
        else:
            # counted as the Library pane counts, over the folders the run scans: photos indexed
            # (the last stats) of photos the scan found; with no scan counts, the run's own count
            totals = prog.folder_totals or {}
            scoped = [f for f in stats.get("folders", []) if f["id"] in totals]
            done = sum(f.get("indexed", 0) for f in scoped)
            total = sum(folder_total(f, totals) for f in scoped)
            if total <= 0 or done > total:
                done, total = prog.done, prog.total
            self.bar.emit(done, max(total, 1))  # the bar shows the count the text says
            # one pace for both figures, so that they agree with the count beside them: the time
            # left is (total - done) at the rate shown (the time left first: at the smallest window
            # the end is cut off)
            pace = prog.pace or prog.rate
            running = prog.done and pace > 0 and not self.paused
            eta = f", {time_left((total - done) / pace)}" if running and total > done else ""
            rate = f" at {pace:.1f} photos/s" if running else ""
            text = f"Indexing {done} of {total}{note}{eta}{rate}"
            if prog.failed:
                text += f"; {prog.failed} skipped"
        if self.paused and not text.startswith("Indexing "):
            # a run stops once its model is loaded and between batches; a scan, the 8-bit tuning and
            # the first sample go on to their end
            if prog.phase == "loading the model":
                text = f"Paused: {text[0].lower()}{text[1:]}"
            elif prog.phase not in ("finishing", "done"):
                text += " (pausing once this step ends)"
        if prog.message:
            text += f" — {prog.message}"
        self.line.emit(text)

    def _finished(self, ev) -> None:
        self.index_cmd = None
        self.paused = False
        prog = ev.data if ev.kind == "done" else None
        st = self.lib.svc.stats()
        asked, stop_asked, self.stop_asked = self.rescan_asked, self.stop_asked, False
        if not self.again:  # else it is for the run put off until now
            self.rescan_asked = False
        left_before = any(self.left.values())
        if ev.kind == "unreachable":  # the server stopped answering: the run goes on once it answers
            self.waits_for_server = True
            self.line.emit("Indexing waits: the shared library is not answering")
        elif ev.kind == "failed":
            self.indexed_at = -1e9
            self.line.emit(ev.data)
        elif prog is not None:
            extra = f", {prog.missing} missing" if prog.missing else ""
            if prog.phase == "cancelled" and not stop_asked:
                # stopped for a command that goes first (new settings, a removal): it goes on after it
                if not self.switching:  # "Switching to the new settings…" stays until their run starts
                    self.line.emit("Indexing goes on after the library's change…")
            elif prog.phase == "cancelled":
                left = max(0, prog.total - prog.done)
                totals = dict(getattr(prog, "folder_totals", {}) or {})
                self.left = {f["path"]: max(0, folder_total(f, totals) - f.get("indexed", 0))
                             for f in st.get("folders", []) if f["id"] in totals}
                where = " (Resume: Library pane)" if any(self.left.values()) else ""
                # within a switch, searches use the previous descriptions: counted as the pane does
                before = " (the previous settings)" if st.get("serving_space") else ""
                self.line.emit(f"Stopped: {plural(st.get('searchable', st['indexed']), 'photo')} searchable"
                               f"{before}, {left} to go{where}")
            elif not (prog.total or prog.missing or prog.removed or prog.restored):  # nothing to do: said
                self.left = {}
                # ... unless, not asked for, it follows a run that indexed photos: that run's words stay
                recent = time.monotonic() - self.indexed_at < DONE_KEPT_S and not asked
                self.line.emit(done_words(st) if recent else
                               f"Checked at {time.strftime('%H:%M:%S')}: no new or changed photos; "
                               f"{plural(st['indexed'], 'photo')} searchable")
            else:
                self.left = {}
                self.indexed_at = time.monotonic()
                self.line.emit(done_words(st, extra))
        if any(self.left.values()) or left_before:
            self.resumable.emit(any(self.left.values()))
        self.lib.show_stats(st)
        self.lib.watch()
        self.libraryChanged.emit()
        self.runFinished.emit(prog)
        # a failure in a dialog once the run's bar and buttons went; the same failure of the runs
        # that follow by themselves (a watcher's, the next start's) stays in the status line only
        if ev.kind == "failed" and (ev.data != self.last_failure or asked):
            self.failed.emit(ev.data)
        self.last_failure = ev.data if ev.kind == "failed" else ""
        if self.again:
            self.again = False
            only = None if self.changed_dirs is None else sorted(self.changed_dirs)
            QTimer.singleShot(0, lambda: self.start(only=only))

    def _tuning_left(self, done: int, total: int) -> str:
        """', about 40 seconds left' at the pace since the first photo was prepared ('' before)."""
        now = time.monotonic()
        if done <= 0 or self._tuning_from is None or done < self._tuning_from[1]:
            self._tuning_from = (now, done) if done > 0 else None
            return ""
        t0, d0 = self._tuning_from
        if done - d0 < 5 or now - t0 < 1:
            return ""
        return f", {time_left((total - done) * (now - t0) / (done - d0))}"

    def paces(self) -> dict[str, float]:
        """Photos a second each precision described here at the default's load (the last run of
        each): {"exact": 3.0, "int8": 2.1}; a precision never run here is absent."""
        out = {}
        for key in ("exact", "fastest", "int8"):
            v = float(self.ui_settings.value(f"model_pace/{key}", 0) or 0)
            if v > 0:
                out[key] = v
        return out

    # ---- estimates ----------------------------------------------------------------------------------------
    def reindex_estimate(self, new: Settings, n: int, set_up: bool = True) -> str:
        """`n` photos and the time describing them with `new` takes here: the last run's pace
        over `new`'s model cost and photo size; and, unless `set_up`, the model's first export."""
        pace = self.model_pace or float(self.ui_settings.value("model_pace", 0) or 0) or ESTIMATED_RATE
        paces = self.paces()
        s = max(1, int(n * model_load(new) / max(paces.get(new.precision, pace), 0.01) + 0.5))  # its own, once run here
        if not set_up and new.backbone in REGISTRY:
            s += int(REGISTRY[new.backbone].setup + 0.5)
        if new.precision == "int8" and self.lib.svc.settings.precision != "int8":
            # tuning first: ~6 s of imports, then its photos at about half the exact model's pace
            # (300 photos: 42 s here, efficientnet-lite2, Xeon Sapphire Rapids 2 cores)
            s += 6 + int(2 * min(n, CALIBRATION_PHOTOS) * model_load(new) / max(paces.get("exact", pace), 0.01) + 0.5)
        when = f"about {plural(int(s / 60 + 0.5), 'minute')}" if s >= 90 else f"about {plural(s, 'second')}"
        failed = self.lib.stats.get("failed", 0)
        # the Library pane's count, and the files it skipped apart
        skipped = f" and {plural(failed, 'file')} it could not read" if failed else ""
        return f"{plural(n, 'photo')}{skipped}, {when} on this computer"


def done_words(st: dict, extra: str = "") -> str:
    """'Indexing done: 308 photos searchable' and ', 2 skipped' when some were (never ', 0 skipped')."""
    skipped = f", {st['failed']} skipped" if st.get("failed") else ""
    return f"Indexing done: {plural(st['indexed'], 'photo')} searchable{skipped}{extra}"


def time_left(seconds: float) -> str:
    """Rounded to what a person reads: 'about 40 s left', 'about 3 min left', 'about 1 h 20 min left'."""
    s = max(1, int(seconds + 0.5))
    if s < 90:
        return f"about {s} s left"
    m = int(s / 60 + 0.5)  # to the nearest minute (2.5 min is "about 3 min"), never down by habit
    return f"about {m} min left" if m < 90 else f"about {m // 60} h {m % 60:02d} min left"


def model_load(settings: Settings) -> float:
    """A photo's work for `settings`' model against the default's at 512 px: the model's cost
    (registry, `benchmarks/backbones.py`) times the photo size's pixels."""
    spec = REGISTRY.get(settings.backbone)
    return (spec.cost if spec else 1.0) * (settings.max_side / 512) ** 2
