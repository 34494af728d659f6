"""The library service: one writer thread that owns every change, lock-free reads of immutable
snapshots, and a cross-process writer lock held only while a write runs.

    svc = LibraryService(home)              # reads only: takes no lock
    cmd = svc.index(["~/Pictures"])         # a Command: runs on the writer thread, under the lock
    for ev in cmd.events(): ...             # or svc.subscribe(callback) for every event
    snap = svc.snapshot()                   # any thread, any time: consistent, never blocks
    svc.close()

Threads (the rules the GUI and the CLI rely on):
- `heatsearch-writer` runs commands one at a time: indexing, add folder, forget, settings change,
  whitening refit, rebuild, purge (writes), and opening and refreshing (reads). Nothing else
  writes the catalog or the vector files, and it writes only inside a write command.
- A write command takes the library's writer lock first (waiting, cancellably, while another
  process or computer writes; the wait is said in a log event naming the holder), catches up with
  what others committed, runs, and the lock is let go as soon as no write is queued. An open,
  idle window, a search or a status never hold it, so they never delay another indexer.
- Readers (searches, the GUI) call `snapshot()`, `stats()` and the small read helpers; they never
  wait for the writer. A command that conflicts with a running indexing job (forget, a new model)
  cancels it between batches, runs, and indexing resumes by itself.
- Events (progress, snapshot, stats, log, started, done, failed, unreachable, connection) are
  delivered to subscribers on the writer thread; the GUI forwards them with queued signals.
- A shared library's server that stops answering is a state (`outage`), published once as a
  "connection" event and again when it answers; calls meanwhile fail fast with one line.
- A search that needs the CNN raises `interactive` for its duration; indexing yields the engine
  to it between photos.
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import json
import os
import queue
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy.exc import SQLAlchemyError

from .. import paths, policy
from ..catalog import pgpass
from ..catalog.catalog import Catalog
from ..catalog.models import SCHEMA_VERSION
from ..catalog.records import ImageRow
from ..config import Settings, check_home, home_dir, models_dir
from ..errors import (Cancelled, CatalogError, HeatSearchError, InputError, LibraryBusyError, LockLostError,
                      ReadOnlyError, ServerUnreachable)
from ..features.engine import EngineChoice
from ..features.extractor import Extractor
from ..features.quantise import quantise
from ..features.registry import load_backbone
from ..pipeline.distributed import RayProducer
from ..pipeline.indexer import LocalProducer, index_library
from ..pipeline.produce import ModelSpec
from .snapshot import Snapshot, SpaceInfo
from .writer import OPEN_WAIT_S, LibraryWriter, resolve_space

TRUSTED_MODELS = "trusted-models.json"  # in the data folder: the model digest first run per library and space

@dataclass
class Event:
    """kind: progress | snapshot | stats | log | started | done | failed | unreachable (a command
    ended because the server does not answer) | connection (the outage state changed: data
    {"down": bool, "message": str}). command: the id of the command it belongs to (0 for
    library-wide events). data: Progress, dict, str or a result."""

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
    writes: bool = False  # runs under the writer lock
    started: bool = False  # the writer thread took it
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
        and (for SQLite) the vector files. No lock is taken: a write command takes the library's
        writer lock while it runs. read_only: this client never writes (also when the URL's
        user may only read: a searcher role). create=False: a library that does not exist yet
        is an error, and nothing is written. A new catalog (create) or an older one to upgrade
        is prepared under the writer lock, waiting up to `wait` seconds for it (on_wait is told
        who holds it; LibraryBusyError when it stays taken).
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
        self.catalog = Catalog.connect(location, read_only, passfile=self.home / "pgpass")
        if library and not create and not self.catalog.exists():
            self.catalog.close()
            raise CatalogError(f"no library at {self.catalog.where}: nothing is indexed there yet "
                               "(heatsearch index FOLDER --library URL)")
        try:
            self._check_home_not_in_folders()
            self.lock = self.catalog.writer_lock()
            # a searcher's URL opens for searching only, said once (the title, `status`)
            self.read_only = read_only or not self.catalog.writable()
            self._prepare(wait, on_wait)
        except BaseException:
            self.catalog.close()
            raise
        self.catalog.before_write = self._refuse_write
        self._snapshot: Snapshot = Snapshot(read_only=self.read_only)
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
        self.writer = LibraryWriter(self.home, self.catalog, self.settings, self._set_snapshot, self._log, self.read_only)
        self._seen = None  # catalog.version() the writer's state reflects (None: not read yet)
        self._refresh_cmd: Command | None = None  # the refresh queued and not yet started (coalesced)
        self._refresh_lock = threading.Lock()
        self.outage: float | None = None  # time.time() since the server stopped answering, None while it answers
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="heatsearch-writer", daemon=True)
        self.submit("open", self._open)
        if start:
            self._thread.start()

    def _prepare(self, wait: float, on_wait) -> None:
        """Create a new catalog or upgrade an older one, under the writer lock; a current one
        needs nothing (no lock, nothing written)."""
        if self.catalog.exists() and self.catalog.schema_version() == SCHEMA_VERSION:
            return
        if self.read_only:
            self.catalog.prepare()  # says why it cannot be used as it is (no catalog, an older one)
            return
        self.lock.acquire(max(wait, OPEN_WAIT_S), on_wait)
        try:
            self.catalog.prepare()
        finally:
            self.lock.release()

    @property
    def closed(self) -> bool:
        """Whether `close` was called: no command is taken any more."""
        return self._closed

    @property
    def where(self) -> str:
        """The library in words: a data folder, or a PostgreSQL URL without its password."""
        return self.catalog.where if self.library else str(self.home)

    @property
    def server(self) -> str:
        """A shared library's server in words (HOST:PORT), "" for a library in a data folder."""
        return self.catalog.server if self.library else ""

    @property
    def unusable(self) -> str:
        """Why the library's model cannot run here ("" when it can): searches use another ready
        space whose model runs, and nothing is indexed until it can."""
        return self.writer.unusable

    def model_runs(self) -> bool:
        """Whether the library's model can run here now (its weights file back with its drive).
        Cheap: the file is located and its digest checked, nothing is built. Any thread."""
        active = self.writer.active
        return active is None or not self.writer._cannot_run(active)

    @property
    def can_index(self) -> bool:
        """Whether this client may index the library now: it may write, and the library's model
        (or, for a new library, the settings' model) can run here."""
        return not self.read_only and not self.writer.unusable

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
        if not self._closed and self._thread.is_alive() and threading.current_thread() is not self._thread:
            try:
                self.refresh().result(timeout)
            except (Cancelled, CatalogError):
                pass
        return self._snapshot

    def wait_ready(self, timeout: float | None = None) -> Snapshot:
        """Block until the first snapshot is published (the open command ran). Raises the open
        error (e.g. a server that does not answer) as a HeatSearchError."""
        if not self._ready.wait(timeout):
            raise HeatSearchError("the library did not open in time")
        if self.open_error:
            raise HeatSearchError(self.open_error)
        return self._snapshot

    def settings_note(self) -> str:
        """"" when the settings ask for the library's own model; else, in words, what differs
        (searches and automatic indexing keep the library's model)."""
        return self.catalog.guard(self.writer.settings_note)

    def failures(self) -> list[tuple[str, str]]:
        return self.catalog.guard(self.catalog.failures)

    def missing(self) -> list[str]:
        return self.catalog.guard(self.catalog.missing)

    def exclusions(self) -> list[str]:
        """Folders and files inside library folders that were forgotten (not scanned again)."""
        return self.catalog.guard(self.catalog.exclusions)

    def filter_choices(self) -> tuple[list[str], list[int]]:
        """(the library folders and every folder under them holding a searchable photo, the years
        holding photos): what the folder and date filters offer. Reads every photo's path: call
        it off the GUI thread."""
        return self.catalog.guard(self.catalog.subfolders), self.catalog.guard(self.catalog.taken_years)

    def photos_to_index(self, new: Settings) -> tuple[int, bool]:
        """(photos a switch to `new` settings describes, whether those settings were used before):
        the library's photos less those an earlier use of the same settings left described."""
        key, _ = resolve_space(new)
        return self.catalog.guard(self.catalog.lacking, key), self.catalog.guard(self.catalog.space, key) is not None

    def image_rows(self, ids) -> dict[int, ImageRow]:
        """id -> the catalog row of those of catalog `ids` that are in the catalog."""
        return self.catalog.guard(self.catalog.image_rows, ids)

    # ---- the outage state ----------------------------------------------------------------------------
    @property
    def outage_words(self) -> str:
        return f"The shared library at {self.server or self.where} is not answering; trying again…"

    def check_reachable(self) -> None:
        """Raise ServerUnreachable at once while the server is known not to answer (a search
        fails fast instead of waiting for a connection timeout)."""
        if self.outage is not None:
            raise ServerUnreachable(self.outage_words)

    def explain(self, e: BaseException) -> HeatSearchError | None:
        """A database failure as the catalog's one-line error (ServerUnreachable for a server
        that does not answer, which also starts the outage state); None for other errors."""
        if isinstance(e, HeatSearchError):
            out = e
        elif isinstance(e, (SQLAlchemyError, *self.catalog.dialect.driver_errors)):
            out = self.catalog.dialect.explain(e)
        else:
            return None
        if isinstance(out, ServerUnreachable):
            self._unreachable()
        return out

    def _unreachable(self) -> None:
        if self.outage is None:
            self.outage = time.time()
            self._emit(Event("connection", 0, {"down": True, "message": self.outage_words}))

    def _reachable(self) -> None:
        if self.outage is not None:
            self.outage = None
            self._emit(Event("connection", 0, {"down": False, "message": ""}))

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
            bb = load_backbone(space.backbone, weights or None)
            quantised = None
            if space.precision == "int8":  # the library's own model, checked against its digest
                quantised = self.catalog.guard(self.catalog.space_model, space.id)
                if quantised is None:
                    raise HeatSearchError("this library's 8-bit model is not made yet: index the library")
                self._trust_model(space, hashlib.sha256(quantised).hexdigest())
            # a GPU's fp16 vectors (before fp16 was dropped: TorchEngine) are float32's within 4e-5
            # in cosine (measured on an H100): an exact engine serves them while the library re-indexes
            want = "f32" if space.precision == "f16" else space.precision
            ex = Extractor.create(bb, EngineChoice(st.engine, st.device, want != "f32"), space.max_side,
                                  models_dir(self.home), self._log, quantised, policy.BOX_SIDE)
            if ex.engine.precision != want:
                raise HeatSearchError(f"the engine runs at {ex.engine.precision}, the library's vectors were made at "
                                      f"{space.precision}: choose the matching precision in Settings")
            if ex.channels != space.channels:
                raise HeatSearchError(f"the model gives {ex.channels} channels, the library's space has {space.channels}")
            # kept for the spaces searched or indexed now (a search of an older snapshot's space builds
            # its own and lets it go), the last two at most
            live = self._live_spaces()
            self._extractors = [(k, e) for k, e in [(key, ex)] + self._extractors if k[:2] in live][:2]
            # plain words in the status line (`heatsearch doctor` names the engine)
            self._log("Photo analyser ready" + (" (on the graphics card)" if ex.engine.device != "cpu" else ""))
        return ex

    def _trust_model(self, space: SpaceInfo, digest: str) -> None:
        """The model a client runs for a space is the one it first ran for it: a stored model that
        changed under the same space (its digest recomputed beside it by anyone who could write the
        row) is refused in one line. Remembered per library and space in the data folder."""
        path = self.home / TRUSTED_MODELS
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = {}
        if not isinstance(known, dict):
            known = {}
        mine = known.setdefault(self.catalog.identity, {})
        key = f"{space.id}|{space.key}"
        if key in mine and mine[key] != digest:
            raise HeatSearchError(f"the 8-bit model of {self.where} changed under the same settings (it was "
                                  f"{mine[key][:12]}…, it is {digest[:12]}…): it is not run. A change of model is a new "
                                  "space, made by indexing with new settings")
        if mine.get(key) == digest:
            return
        mine[key] = digest
        try:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(known))
            os.replace(tmp, path)
        except OSError:  # a data folder that cannot be written: checked against the row's digest only
            pass

    def _make_model(self, photos: list[str], cancelled, steps) -> bytes | None:
        """The target space's own int8 model, tuned on `photos` (features/quantise.py)."""
        space = self.writer.target.row.info
        weights = self.settings.weights if space.backbone == self.settings.backbone else ""
        bb = load_backbone(space.backbone, weights or None)
        blob = quantise(bb, photos, space.max_side, models_dir(self.home), self._log, cancelled, steps)
        if blob is not None:
            self._trust_model(space, hashlib.sha256(blob).hexdigest())
        return blob

    def _drop_extractor(self, timeout: float = -1) -> None:
        """Forget the cached extractors; nothing when their lock is not had within `timeout`
        seconds (-1: wait)."""
        if not self._extractor_lock.acquire(timeout=timeout):
            return
        try:
            self._extractors = []
        finally:
            self._extractor_lock.release()

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
               control: JobControl | None = None, writes: bool = False) -> Command:
        """Queue `fn` on the writer thread. writes: it changes the library (it runs under the
        writer lock; refused at once by a client that may only read)."""
        if self._closed:
            raise HeatSearchError("the library is closed")
        if writes:
            self._writable()
        cmd = Command(next(self._ids), name, fn, control or JobControl(), preempts=preempts,
                      _events=queue.Queue() if stream else None, writes=writes)
        if preempts:
            cur = self._current
            if cur is not None and cur.name == "index":
                cur.control.cancel(preempted=True)
        self._queue.put(cmd)
        return cmd

    def index(self, folders=(), control: JobControl | None = None, stream: bool = False, verify: bool = False,
              ray: str | None = None, workers: int | None = None, path_map=(), only=None,
              model: str = "settings") -> Command:
        """Add `folders` (if any) and index the whole library (incremental); `only`: just these
        folders inside it (what a watcher saw change). model: "settings" indexes with the
        settings' model, making it the library's when it is another (an indexing run the person
        asked for); "library" keeps the library's own model (automatic runs: a start's rescan, a
        watcher; a shared library indexed from a computer whose settings differ). ray: describe
        the photos on a Ray cluster ("auto" or an address; pipeline/distributed.py) instead of
        here; workers: its actors; path_map: (local, remote) folders for workers that mount them
        elsewhere."""
        return self.submit("index", self._indexing(folders, verify, ray, workers, path_map, only, model),
                           control=control, stream=stream, writes=True)

    def _indexing(self, folders=(), verify: bool = False, ray: str | None = None, workers: int | None = None,
                  path_map=(), only=None, model: str = "library") -> Callable[[Command], Any]:
        """The function of an indexing command (`index` says what the arguments mean)."""
        def run(cmd: Command):
            for f in folders:
                self.writer.add_folder(f)
            # library folders inside another (from before add_folder took them in) become part of it
            if self.catalog.take_in_nested_folders():
                self.writer.refresh_folders()
            before = self.writer.target.id if self.writer.target is not None else None
            if model == "settings" or not self.catalog.spaces():
                self.writer.activate(lambda: cmd.control.cancelled)
            elif self.writer.target is None:  # its weights file may be back (a drive)
                self.writer.open(lambda: cmd.control.cancelled)
            if self.writer.target is None:
                raise HeatSearchError(self.writer.unusable or "no model to index with")
            if self.writer.target.id != before:
                self._drop_extractor()
                self._publish_stats()
            space = self.writer.target.row.info
            # the target's row when the model is loaded: an int8 space's own model is made just before
            prod = LocalProducer(lambda: self.extractor(self.writer.target.row.info), self.interactive)
            if ray:
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
            if cmd.control.preempted:  # resume after the preempting command, with the library's model
                self.submit("index", self._indexing(only=None if folders else only), writes=True)
            return last

        return run

    def add_folder(self, path, index: bool = True) -> Command:
        def run(cmd):
            f = self.writer.add_folder(path)
            self._publish_stats()
            return f

        cmd = self.submit("add_folder", run, writes=True)
        if index:
            self.index(model="library")
        return cmd

    def forget(self, path, missing_only: bool = False) -> Command:
        def run(cmd):
            n = self.writer.forget(path, missing_only)
            self._publish_stats()
            return n

        return self.submit("forget", run, preempts=True, writes=True)

    def apply_settings(self, new: Settings, reindex: bool = True) -> Command:
        """Switch to `new` settings (a change the person confirmed): when they ask for another
        model than the library's, its space becomes the library's (and is indexed when reindex);
        a new D refits the whitening; other changes take effect on the next search."""
        def run(cmd):
            old = self.settings
            new.save(self.home)
            self.settings = new
            self.writer.settings = new
            if new.needs_new_space(old) or (new.engine, new.device) != (old.engine, old.device):
                self._drop_extractor()
            if self.writer.settings_note() or new.needs_new_space(old):
                self.writer.activate(lambda: cmd.control.cancelled)
                self._publish_stats()
                if reindex:
                    self.index()
            elif new.dim != old.dim:
                self.writer.refit_whitening(force=True, cancelled=lambda: cmd.control.cancelled)
                self._publish_stats()
            return True

        return self.submit("settings", run, preempts=True, writes=True)

    def refit(self, force: bool = True) -> Command:
        return self.submit("refit", lambda c: self.writer.refit_whitening(force, lambda: c.control.cancelled),
                           preempts=True, writes=True)

    def rebuild(self) -> Command:
        """Rebuild the searched vectors (and graph) from the catalog's descriptors (no CNN)."""
        return self.submit("rebuild", lambda cmd: self.writer.rebuild(lambda: cmd.control.cancelled), preempts=True,
                           writes=True)

    def purge(self, force: bool = False) -> Command:
        """Delete the descriptors of unused model settings; returns (how many, what was kept).
        Refused while the settings file could not be read: the defaults standing in for it are
        not the settings whose descriptors the user means to keep."""
        if self.settings.problems:
            raise InputError("fix the settings file before purge: with defaults standing in for it, purge would "
                             "delete the descriptors of the settings you meant (nothing was deleted)")
        return self.submit("purge", lambda c: self.writer.purge_spaces(force), preempts=True, writes=True)

    def refresh(self, force: bool = False) -> Command:
        """Follow what other processes committed (cheap when nothing changed: one look at the
        catalog's version). Coalesced: while a refresh waits its turn, asking again returns it.
        Also the outage probe: it reports when the server answers again."""
        def run(cmd):
            seen = self.catalog.guard(self.catalog.version)
            self._reachable()
            if seen == self._seen and not force and not self.writer.behind:
                self.writer.refresh_folders()
                return False
            self.writer.sync()
            self._seen = seen
            self._publish_stats()
            return True

        with self._refresh_lock:
            cmd = self._refresh_cmd
            if cmd is not None and not cmd.started and not self._closed:
                return cmd
            cmd = self._refresh_cmd = self.submit("refresh", run)
        return cmd

    def cancel_running(self) -> None:
        cur = self._current
        if cur is not None:
            cur.control.cancel()

    @property
    def running(self) -> Command | None:
        return self._current

    def _writable(self):
        if self.read_only:
            raise ReadOnlyError(f"the library {self.where} is open for searching only here"
                                + (" (its user may only read it)" if self.library else ""))

    def _refuse_write(self) -> None:
        """The catalog's guard outside write commands: nothing is written without the lock."""
        raise ReadOnlyError(f"nothing is written to {self.where} outside an indexing run or a change the person asked for "
                            "(a write without the writer lock was refused)")

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
        running with it holds its own reference. Nothing when a model is being built (the lock
        is busy): that build keeps only the live ones."""
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
            self._stats = {**self._stats, "folders": self.catalog.stats(None, self.writer.folders)["folders"],
                           "unusable": self.writer.unusable, "generation": self.writer.generation}
            self._emit(Event("stats", 0, self._stats))
            return
        self._stats = self.writer.stats()
        self._emit(Event("stats", 0, self._stats))

    # ---- the writer thread ---------------------------------------------------------------------------------
    def _open(self, cmd: Command):
        try:
            seen = self.catalog.version()
            self.writer.open(lambda: cmd.control.cancelled)
            self._seen = seen
            self._publish_stats()
        except Exception as e:
            err = self.explain(e) or e
            self.open_error = str(err)
            if not isinstance(err, ServerUnreachable):
                try:
                    self.writer.refresh_folders()
                except Exception:  # noqa: BLE001 - the open error says what is wrong
                    pass
            raise err from e
        finally:
            self._ready.set()

    def _begin_write(self, cmd: Command) -> None:
        """Before a write command: hold the writer lock (waiting, cancellably, while another
        process writes, naming it once), then catch up with what others committed meanwhile."""
        self._writable()
        if not self.lock.held:
            told = []

            def waiting(who: str) -> None:
                if not told:
                    told.append(who)
                    self._log(f"waiting for {who} to finish with the library")

            try:
                self.lock.acquire(float("inf"), waiting, cancelled=lambda: cmd.control.cancelled or self._closed)
            except LibraryBusyError as e:
                raise Cancelled("cancelled while waiting for the library") from e
            self.catalog.before_write = self.lock.check
        self.writer.writing = True
        seen = self.catalog.version()
        if seen != self._seen or self.writer.behind:
            self.writer.sync(lambda: cmd.control.cancelled)
            self._seen = seen
            self._publish_stats()

    def _end_write(self, save: bool = True) -> None:
        """After the last queued write: save the vector caches, note the catalog's version (our
        own writes are not news at the next refresh), and let the lock go."""
        try:
            if save and self.lock.held:
                self.writer.save()
                self._seen = self.catalog.version()
        except Exception as e:  # noqa: BLE001 - saving is an optimisation; the catalog is the truth
            if self.explain(e) is None:
                traceback.print_exc()
        finally:
            self.writer.writing = False
            self.catalog.before_write = self._refuse_write
            self.lock.release()

    def _writes_queued(self) -> bool:
        with self._queue.mutex:
            return any(c is not None and c.writes for c in self._queue.queue)

    def _loop(self) -> None:
        while True:
            cmd = self._queue.get()
            if cmd is None:
                break
            self._current = cmd
            cmd.started = True
            self._emit(Event("started", cmd.id, cmd.name), cmd)
            try:
                if cmd.control.cancelled and not cmd.name == "open":
                    raise Cancelled("cancelled before it started")
                if cmd.writes:
                    self._begin_write(cmd)
                result = cmd.fn(cmd)
                cmd.future.set_result(result)
                self._emit(Event("done", cmd.id, result), cmd)
            except Cancelled as e:
                cmd.future.set_exception(e)
                self._emit(Event("done", cmd.id, None), cmd)
            except LockLostError as e:
                # another writer may hold the lock now: nothing more is written by this one; an
                # indexing run goes on once the lock is held again (a new run: it scans afresh)
                self._end_write(save=False)
                cmd.future.set_exception(e)
                self._log(str(e))
                if cmd.name == "index" and not self._closed:
                    self.submit("index", self._indexing(), writes=True)
                self._emit(Event("failed", cmd.id, str(e)), cmd)
            except Exception as e:  # noqa: BLE001 - never a silent writer death
                err = self.explain(e)
                if err is None:
                    traceback.print_exc()
                    err = HeatSearchError(f"{cmd.name} stopped: {type(e).__name__}: {e}")
                cmd.future.set_exception(err)
                if isinstance(err, ServerUnreachable):
                    self._end_write(save=False) if self.lock.held else None
                    self._emit(Event("unreachable", cmd.id, self.outage_words), cmd)
                elif cmd.name != "refresh":  # a refresh's failure is news only as an outage
                    self._emit(Event("failed", cmd.id, str(err)), cmd)
                else:
                    self._emit(Event("done", cmd.id, None), cmd)
            finally:
                self._current = None
                if self.lock.held and not self._writes_queued():
                    self._end_write()
        self._let_go()

    def _let_go(self) -> None:
        """The writer thread's last act: whatever close() could not wait for is let go here (the
        lock, the catalog's connections, the models)."""
        if self.lock.held:
            self._end_write()
        self._drop_extractor(timeout=0.2)  # not behind a model still loading (warm_model)
        self.catalog.close()

    def run(self, cmd: Command, timeout: float | None = None):
        """Wait for `cmd` and return its result (raises its error)."""
        return cmd.future.result(timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Cancel what runs, let the writer save and stop (up to `timeout` s). Returns False when
        the writer was still busy (a model load): the process may exit anyway (the catalog is
        consistent at every commit), and the writer lets go of the lock and the catalog itself
        as soon as it is done."""
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
        if not self._thread.is_alive():  # never started: nothing else will let go
            self._let_go()
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


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


def url_has_password(url: str) -> bool:
    """Whether a library URL carries a password (which every user of the computer sees in `ps`)."""
    return pgpass.has_password(url)


def remember_password(home, url: str, password: str = "") -> str:
    """Keep a shared library's password in the data folder's password file (mode 0600; libpq's
    format), never in a URL that is remembered or shown: returns `url` without its password. A
    password typed into the URL is moved there too; "" and none keeps what was saved before."""
    address, typed = pgpass.split_password(url) if pgpass.has_password(url) else (url, "")
    password = password or typed
    if password:
        try:
            pgpass.save(Path(home) / pgpass.NAME, pgpass.targets(address)[0], password)
        except (OSError, ValueError, IndexError, ImportError) as e:
            raise InputError(f"the password could not be kept in {home}: {e}") from e
    return address
