"""The library service: one writer thread that owns every change, lock-free reads of immutable
snapshots, and a cross-process lock on the data folder.

    svc = LibraryService(home)              # takes the lock (or read_only=True)
    cmd = svc.index(["~/Pictures"])         # a Command: runs on the writer thread
    for ev in cmd.events(): ...             # or svc.subscribe(callback) for every event
    snap = svc.snapshot()                   # any thread, any time: consistent, never blocks
    svc.close()

Threads (the rules the GUI and the CLI rely on):
- `heatsearch-writer` runs commands one at a time: indexing, add folder, forget, settings change,
  whitening refit, rebuild, save, purge. Nothing else writes the catalog or the vector files.
- Readers (searches, the GUI) call `snapshot()`, `stats()` and the small read helpers; they never
  wait for the writer. A command that conflicts with a running indexing job (forget, a new model)
  cancels it between batches, runs, and indexing resumes by itself.
- Events (progress, snapshot, stats, log, done, failed) are delivered to subscribers on the writer
  thread; the GUI forwards them to its own thread with queued signals.
- A search that needs the CNN raises `interactive` for its duration; indexing yields the engine
  to it between photos.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..catalog.catalog import Catalog
from ..config import Settings, check_home, home_dir, models_dir
from ..errors import Cancelled, CatalogError, HeatSearchError, InputError, ReadOnlyError
from ..features.engine import EngineChoice
from ..features.extractor import Extractor
from . import paths
from .snapshot import Snapshot, SpaceInfo
from .writer import LibraryWriter

@dataclass
class Event:
    """kind: progress | snapshot | stats | log | started | done | failed. command: the id of the
    command it belongs to (0 for library-wide events). data: Progress, dict, str or a result."""

    kind: str
    command: int
    data: Any = None


STATS_EVERY = 1.5  # s: the counts (a catalog query) are published at most this often while indexing
_malloc_trim = None  # glibc's, once looked up; False where there is none


def return_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere).
    Indexing decodes and frees photo-sized buffers from several threads, and glibc keeps the
    freed pages: after 250 photos the service alone held 560 MB, 435 MB once trimmed; the window
    657 -> 505 MB (benchmarks/gui_memory.py). A fixed mmap threshold kept it as low but indexed
    20 % slower."""
    global _malloc_trim
    if _malloc_trim is None:
        import ctypes
        import sys

        try:  # glibc's name, opened without a search (find_library runs ldconfig)
            _malloc_trim = sys.platform.startswith("linux") and ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc (musl)
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


class JobControl:
    """Pause / resume / cancel from any thread; a job honours them between steps. Paused time is
    accounted so rates and ETAs can leave it out."""

    def __init__(self):
        self._run = threading.Event()
        self._run.set()
        self._cancel = threading.Event()
        self.preempted = False
        self.paused_s = 0.0

    def pause(self):
        self._run.clear()

    def resume(self):
        self._run.set()

    def cancel(self, preempted: bool = False):
        self.preempted = self.preempted or preempted
        self._cancel.set()
        self._run.set()

    @property
    def paused(self) -> bool:
        return not self._run.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait(self) -> None:
        """Block while paused (returns at once when running or cancelled)."""
        if self._run.is_set():
            return
        t = time.monotonic()
        self._run.wait()
        self.paused_s += time.monotonic() - t

    def check(self) -> None:
        self.wait()
        if self.cancelled:
            raise Cancelled("cancelled")


@dataclass
class Command:
    id: int
    name: str
    fn: Callable[["Command"], Any]
    control: JobControl = field(default_factory=JobControl)
    future: Future = field(default_factory=Future)
    preempts: bool = False  # cancels a running indexing job (which then resumes by itself)
    _events: "queue.Queue | None" = None

    def result(self, timeout: float | None = None):
        return self.future.result(timeout)

    def events(self) -> Iterator[Event]:
        """This command's events until it ends (done/failed), for callers on another thread."""
        if self._events is None:
            raise RuntimeError("events() must be asked for before the command is submitted (svc.submit(..., stream=True))")
        while True:
            ev = self._events.get()
            yield ev
            if ev.kind in ("done", "failed"):
                return


class LibraryService:
    def __init__(self, home=None, settings: Settings | None = None, *, library: str | None = None,
                 read_only: bool = False, wait: float = 0.0, on_wait: Callable[[str], None] | None = None,
                 start: bool = True, create: bool = True):
        """Open a library: `library` is a PostgreSQL URL, or None for the SQLite catalog in the
        data folder `home` (default: home_dir()), which also keeps the settings, the model caches
        and (for SQLite) the vector files. Unless read_only, take the library's write lock, waiting
        up to `wait` seconds (on_wait is told who holds it); LibraryBusyError when it stays taken.
        create=False: a library that does not exist yet is an error, and nothing is written.
        The writer thread then loads the spaces in the background: `wait_ready()` blocks until
        the first snapshot is published."""
        self.home = check_home(home_dir(home), create=False)
        self.library = library
        location = library if library else self.home / "catalog.sqlite"
        if not library and not create and not (self.home / "catalog.sqlite").exists():
            raise CatalogError(f"no library in {self.home}: nothing is indexed there yet "
                               f"(heatsearch index FOLDER{' --home ' + str(self.home) if home else ''})")
        if not read_only and not library:
            check_home(self.home)
        self.settings = settings or Settings.load(self.home)
        self.read_only = read_only
        self.catalog = Catalog.connect(location, read_only)
        if library and not create and not self.catalog.exists():
            self.catalog.close()
            raise CatalogError(f"no library at {self.catalog.where}: nothing is indexed there yet "
                               "(heatsearch index FOLDER --library URL)")
        try:
            self._check_home_not_in_folders()
            self.lock = self.catalog.writer_lock()
            if not read_only:
                self.lock.acquire(wait, on_wait)
            try:
                self.catalog.prepare()
            except BaseException:
                self.lock.release()
                raise
        except BaseException:
            self.catalog.close()
            raise
        self._snapshot: Snapshot = Snapshot(read_only=read_only)
        self._stats: dict = {"folders": [], "images": 0, "indexed": 0, "failed": 0, "missing": 0}
        self._subscribers: list[Callable[[Event], None]] = []
        self._queue: queue.Queue[Command | None] = queue.Queue()
        self._ids = itertools.count(1)
        self._current: Command | None = None
        self._ready = threading.Event()
        self.open_error: str | None = None
        self.interactive = _Counter()
        self._extractor_lock = threading.Lock()
        self._extractors: list[tuple[tuple, Extractor]] = []  # newest first, at most two
        self.writer = LibraryWriter(self.home, self.catalog, self.settings, self._set_snapshot, self._log, read_only)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="heatsearch-writer", daemon=True)
        self.submit("open", self._open)
        if start:
            self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether `close` was called: no command is taken any more."""
        return self._closed

    @property
    def where(self) -> str:
        """The library in words: a data folder, or a PostgreSQL URL without its password."""
        return self.catalog.where if self.library else str(self.home)

    def _check_home_not_in_folders(self) -> None:
        """HeatSearch never writes into a photo folder: a data folder that lies in one of the
        library's folders is refused before anything (lock, catalog, vectors) is written there."""
        if self.library or not (self.home / "catalog.sqlite").exists():
            return
        for folder in self.catalog.guard(self.catalog.folder_paths):
            if paths.is_within(self.home, folder):
                raise HeatSearchError(f"the data folder {self.home} lies inside the photo folder {paths.display(folder)}; "
                                      "HeatSearch never writes into photo folders: choose another --home")

    # ---- reads: any thread, never blocking on the writer ----------------------------------------
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def stats(self) -> dict:
        return self._stats

    def fresh_snapshot(self, timeout: float = 30.0) -> Snapshot:
        """A snapshot that reflects the catalog now (re-read when another process changed it; the
        writing process's own snapshot always does)."""
        if self.read_only and not self._closed and self._thread.is_alive() and threading.current_thread() is not self._thread:
            try:
                self.refresh(force=True).result(timeout)
            except Cancelled:
                pass
        return self._snapshot

    def wait_ready(self, timeout: float | None = None) -> Snapshot:
        """Block until the first snapshot is published (the open command ran). Raises the open
        error (e.g. missing weights) as a HeatSearchError."""
        if not self._ready.wait(timeout):
            raise HeatSearchError("the library did not open in time")
        if self.open_error:
            raise HeatSearchError(self.open_error)
        return self._snapshot

    def failures(self) -> list[tuple[str, str]]:
        return self.catalog.guard(self.catalog.failures)

    def missing(self) -> list[str]:
        return self.catalog.guard(self.catalog.missing)

    def image_rows(self, ids) -> dict[int, dict]:
        """id -> {path, width, height, folder_id, digest, taken, size, status} for catalog ids."""
        return self.catalog.guard(self.catalog.image_rows, ids)

    # ---- the model -------------------------------------------------------------------------------------
    def extractor(self, space: SpaceInfo | None = None) -> Extractor:
        """The extractor for `space` (default: the snapshot's), built on first use (seconds) and
        shared by indexing and searches; the last two are kept (while a new space is indexed,
        searches still use the old one's). Thread-safe."""
        space = space or self._snapshot.space
        st = self.settings
        if space is None:
            raise HeatSearchError("the library has no active model yet")
        weights = st.weights if space.backbone == st.backbone else ""
        key = (space.key, space.model_digest, weights, st.engine, st.device)
        with self._extractor_lock:
            for k, ex in self._extractors:
                if k == key:
                    return ex
            from ..features.registry import load_backbone

            bb = load_backbone(space.backbone, weights or None)
            quantised = None
            if space.precision == "int8":  # the library's own model, checked against its digest
                quantised = self.catalog.guard(self.catalog.space_model, space.id)
                if quantised is None:
                    raise HeatSearchError("this library's 8-bit model is not made yet: index the library")
            # a GPU's fp16 vectors (before fp16 was dropped: TorchEngine) are float32's within 4e-5
            # in cosine (measured on an H100): an exact engine serves them while the library re-indexes
            want = "f32" if space.precision == "f16" else space.precision
            ex = Extractor.create(bb, EngineChoice(st.engine, st.device, want != "f32"), space.max_side,
                                  models_dir(self.home), self._log, quantised)
            if ex.engine.precision != want:
                ex.engine.close()
                raise HeatSearchError(f"the engine runs at {ex.engine.precision}, the library's vectors were made at "
                                      f"{space.precision}: choose the matching precision in Settings")
            if ex.channels != space.channels:
                ex.engine.close()
                raise HeatSearchError(f"the model gives {ex.channels} channels, the library's space has {space.channels}")
            # kept for the spaces searched or indexed now (a search of an older snapshot's space builds
            # its own and lets it go), the last two at most
            live = self._live_spaces()
            kept = [(k, e) for k, e in [(key, ex)] + self._extractors if k[:2] in live][:2]
            old = [(k, e) for k, e in self._extractors if all(e is not e2 for _, e2 in kept)]
            self._extractors = kept
            # the window's status line shows it: plain words (trial 20 read "OpenVINO on the CPU (exact)"
            # as jargon; `heatsearch doctor` names the engine)
            self._log("Photo analyser ready" + (" (on the graphics card)" if ex.engine.device != "cpu" else ""))
        for _, o in old:
            o.engine.close()
        return ex

    def _make_model(self, photos: list[str], cancelled) -> bytes | None:
        """The target space's own int8 model, tuned on `photos` (features/quantise.py)."""
        from ..features.quantise import quantise
        from ..features.registry import load_backbone

        space = self.writer.target.row.info
        weights = self.settings.weights if space.backbone == self.settings.backbone else ""
        bb = load_backbone(space.backbone, weights or None)
        return quantise(bb, photos, space.max_side, models_dir(self.home), self._log, cancelled)

    def _drop_extractor(self, timeout: float = -1) -> None:
        """Close and forget the cached extractors; nothing when their lock is not had within
        `timeout` seconds (-1: wait)."""
        if not self._extractor_lock.acquire(timeout=timeout):
            return
        try:
            old, self._extractors = self._extractors, []
        finally:
            self._extractor_lock.release()
        for _, ex in old:
            ex.engine.close()

    def warm_model(self) -> threading.Thread | None:
        """Load the model in the background (a daemon thread), so that the first search after a
        start does not wait seconds for it. Nothing when the library has no photos yet; a failure
        is left for the first search to report."""
        if self._closed or self._snapshot.space is None or not self._snapshot.ready:
            return None

        def load():
            try:
                self.extractor()
            except Exception:  # noqa: BLE001 - the first search reports it, in words
                return
            if self._closed:  # close() did not wait for this load: free what it made
                self._drop_extractor()

        t = threading.Thread(target=load, name="heatsearch-warm-model", daemon=True)
        t.start()
        return t

    # ---- commands -----------------------------------------------------------------------------------------
    def submit(self, name: str, fn: Callable[[Command], Any], preempts: bool = False, stream: bool = False,
               control: JobControl | None = None) -> Command:
        if self._closed:
            raise HeatSearchError("the library is closed")
        cmd = Command(next(self._ids), name, fn, control or JobControl(), preempts=preempts,
                      _events=queue.Queue() if stream else None)
        if preempts:
            cur = self._current
            if cur is not None and cur.name == "index":
                cur.control.cancel(preempted=True)
        self._queue.put(cmd)
        return cmd

    def index(self, folders=(), control: JobControl | None = None, stream: bool = False, verify: bool = False,
              ray: str | None = None, workers: int | None = None, path_map=(), only=None) -> Command:
        """Add `folders` (if any) and index the whole library (incremental); `only`: just these
        folders inside it (what a watcher saw change). ray: describe the
        photos on a Ray cluster ("auto" or an address; pipeline/distributed.py) instead of here;
        workers: its actors; path_map: (local, remote) folders for workers that mount them elsewhere."""
        self._writable()
        from ..pipeline.indexer import LocalProducer, index_library

        def run(cmd: Command):
            for f in folders:
                self.writer.add_folder(f)
            if self.writer.target is None and self.writer.unusable:  # its weights file may be back (a drive)
                self.writer.activate(lambda: cmd.control.cancelled)
                self._drop_extractor()
                self._publish_stats()
            if self.writer.target is None:
                raise HeatSearchError(self.writer.unusable or "no model to index with")
            space = self.writer.target.row.info
            # the target's row when the model is loaded: an int8 space's own model is made just before
            prod = LocalProducer(lambda: self.extractor(self.writer.target.row.info), self.interactive)
            if ray:
                from ..pipeline.distributed import RayProducer
                from ..pipeline.produce import ModelSpec

                prod = RayProducer(ray, ModelSpec.of(space, self.settings), prod, workers, path_map, self._log)
            last = None
            try:
                for prog in index_library(self.writer, cmd.control, prod, self.settings.batch_size, verify=verify,
                                          only=None if folders else only, make_model=self._make_model):
                    if last is not None and prog.phase != last.phase:
                        self._publish_stats()  # a new phase at once: a folder just added is listed after its scan
                    last = prog
                    self._emit(Event("progress", cmd.id, prog), cmd)
                    self._maybe_stats()
            finally:
                if hasattr(prod, "close"):
                    prod.close()
                return_freed_memory()
            self._publish_stats()
            if cmd.control.preempted:
                self.submit("index", run, control=JobControl())  # resume after the preempting command
            return last

        return self.submit("index", run, control=control, stream=stream)

    def add_folder(self, path, index: bool = True) -> Command:
        self._writable()
        cmd = self.submit("add_folder", lambda c: self.writer.add_folder(path))
        if index:
            self.index()
        return cmd

    def forget(self, path, missing_only: bool = False) -> Command:
        self._writable()

        def run(cmd):
            n = self.writer.forget(path, missing_only)
            self._publish_stats()
            return n

        return self.submit("forget", run, preempts=True)

    def apply_settings(self, new: Settings, reindex: bool = True) -> Command:
        """Switch to `new` settings: a new descriptor space is activated (and indexed when reindex),
        a new D refits the whitening, other changes take effect on the next search."""
        self._writable()

        def run(cmd):
            old = self.settings
            new.save(self.home)
            self.settings = new
            self.writer.settings = new
            if new.needs_new_space(old) or (new.engine, new.device) != (old.engine, old.device):
                self._drop_extractor()
            if new.needs_new_space(old):
                self.writer.activate(lambda: cmd.control.cancelled)
                self._publish_stats()
                if reindex:
                    self.index()
            elif new.dim != old.dim:
                self.writer.refit_whitening(force=True, cancelled=lambda: cmd.control.cancelled)
                self._publish_stats()
            return True

        return self.submit("settings", run, preempts=True)

    def refit(self, force: bool = True) -> Command:
        self._writable()
        return self.submit("refit", lambda c: self.writer.refit_whitening(force, lambda: c.control.cancelled), preempts=True)

    def rebuild(self) -> Command:
        """Rebuild the searched vectors (and graph) from the catalog's descriptors (no CNN)."""
        self._writable()
        return self.submit("rebuild", lambda cmd: self.writer.rebuild(lambda: cmd.control.cancelled), preempts=True)

    def purge(self, force: bool = False) -> Command:
        """Delete the descriptors of unused model settings; returns (how many, what was kept).
        Refused while the settings file could not be read: the defaults standing in for it are
        not the settings whose descriptors the user means to keep."""
        self._writable()
        if self.settings.problems:
            raise InputError("fix the settings file before purge: with defaults standing in for it, purge would "
                             "delete the descriptors of the settings you meant (nothing was deleted)")
        return self.submit("purge", lambda c: self.writer.purge_spaces(force), preempts=True)

    def refresh(self, force: bool = False) -> Command:
        """Re-read the catalog (read-only beside another writer, or a shared library): pick up
        what other processes committed. Cheap when nothing changed."""

        def run(cmd):
            if not force and self.catalog.generation() == self.writer.generation and self.read_only:
                self.writer.refresh_folders()
                return False
            self.writer.reload()
            self._publish_stats()
            return True

        return self.submit("refresh", run)

    def cancel_running(self) -> None:
        cur = self._current
        if cur is not None:
            cur.control.cancel()

    @property
    def running(self) -> Command | None:
        return self._current

    def _writable(self):
        if self.read_only:
            raise ReadOnlyError(f"the library {self.where} is read-only here: {self.lock.describe_holder()} is writing it")

    # ---- events -------------------------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[Event], None]) -> None:
        self._subscribers.append(fn)

    def unsubscribe(self, fn) -> None:
        if fn in self._subscribers:
            self._subscribers.remove(fn)

    def _emit(self, ev: Event, cmd: Command | None = None) -> None:
        if cmd is not None and cmd._events is not None:
            cmd._events.put(ev)
        for fn in list(self._subscribers):
            try:
                fn(ev)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not stop the writer
                traceback.print_exc()

    def _log(self, msg: str) -> None:
        self._emit(Event("log", self._current.id if self._current else 0, msg), self._current)

    def _set_snapshot(self, snap: Snapshot) -> None:
        self._snapshot = snap  # one assignment: readers see the old or the new, never a mix
        self._forget_stale_extractors()
        self._emit(Event("snapshot", 0, snap.generation))

    def _forget_stale_extractors(self) -> None:
        """Forget the cached extractors of spaces neither searched nor indexed now: once a switch of
        model is over, the old one's ~250 MB (ResNet50 beside Lite2, measured) go; a search still
        running with it holds its own reference (an engine's close() frees nothing more). Nothing
        when a model is being built (the lock is busy): that build keeps only the live ones."""
        if not self._extractor_lock.acquire(timeout=0):
            return
        try:
            live = self._live_spaces()
            self._extractors = [(k, ex) for k, ex in self._extractors if k[:2] in live]
        finally:
            self._extractor_lock.release()

    def _live_spaces(self) -> set[tuple]:
        """(space key, model digest) of the spaces searched (the snapshot's) and indexed (the target)."""
        target = self.writer.target
        return {(s.key, s.model_digest) for s in (self._snapshot.space, target.row.info if target else None) if s}

    _last_stats = 0.0

    def _maybe_stats(self) -> None:
        if time.monotonic() - self._last_stats > STATS_EVERY:
            self._publish_stats()
            return_freed_memory()  # while indexing: its peak too

    def _publish_stats(self) -> None:
        self._last_stats = time.monotonic()
        if self.writer.target is None and self.writer.serving is None:
            return
        self._stats = self.writer.stats()
        self._emit(Event("stats", 0, self._stats))

    # ---- the writer thread ---------------------------------------------------------------------------------
    def _open(self, cmd: Command):
        try:
            self.writer.activate(lambda: cmd.control.cancelled)
            self._publish_stats()
        except HeatSearchError as e:
            self.open_error = str(e)
            self.writer.refresh_folders()
            raise
        finally:
            self._ready.set()

    def _loop(self) -> None:
        while True:
            cmd = self._queue.get()
            if cmd is None:
                return
            self._current = cmd
            self._emit(Event("started", cmd.id, cmd.name), cmd)
            try:
                if cmd.control.cancelled and not cmd.name == "open":
                    raise Cancelled("cancelled before it started")
                result = cmd.fn(cmd)
                cmd.future.set_result(result)
                self._emit(Event("done", cmd.id, result), cmd)
            except Cancelled as e:
                cmd.future.set_exception(e)
                self._emit(Event("done", cmd.id, None), cmd)
            except HeatSearchError as e:
                cmd.future.set_exception(e)
                self._emit(Event("failed", cmd.id, str(e)), cmd)
            except Exception as e:  # noqa: BLE001 - never a silent writer death
                traceback.print_exc()
                cmd.future.set_exception(e)
                self._emit(Event("failed", cmd.id, f"{cmd.name} stopped: {type(e).__name__}: {e}"), cmd)
            finally:
                self._current = None
                if self._queue.empty() and not self.read_only:
                    try:
                        self.writer.save()
                    except Exception:  # noqa: BLE001 - saving is an optimisation; the catalog is the truth
                        traceback.print_exc()

    def run(self, cmd: Command, timeout: float | None = None):
        """Wait for `cmd` and return its result (raises its error)."""
        return cmd.future.result(timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Cancel what runs, let the writer save and stop (up to `timeout` s), release the lock.
        Returns False when the writer was still busy (a model load): the process may exit anyway;
        the catalog is consistent at every commit."""
        if self._closed:
            return True
        self._closed = True
        self.cancel_running()
        # drop queued commands: they would only delay the exit
        try:
            while True:
                c = self._queue.get_nowait()
                if c is not None:
                    c.future.set_exception(Cancelled("closed"))
        except queue.Empty:
            pass
        self._queue.put(None)
        finished = True
        if self._thread.is_alive():
            self._thread.join(timeout)
            finished = not self._thread.is_alive()
        if finished:
            self.lock.release()
            self._drop_extractor(timeout=0.2)  # not behind a model still loading (warm_model)
            self.catalog.close()
        return finished


class _Counter:
    """How many interactive searches need the engine right now (indexing yields to them)."""

    def __init__(self):
        self._n = 0
        self._cond = threading.Condition()

    def __enter__(self):
        with self._cond:
            self._n += 1

    def __exit__(self, *exc):
        with self._cond:
            self._n -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._n == 0, timeout)

