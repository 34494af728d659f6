"""The library's one sink: what the writer thread owns and does. Only the writer thread calls into
a LibraryWriter; readers see its work through the Snapshots it publishes.

Two spaces may be loaded at once: the *target* (the space the settings ask for: indexing writes
it) and the *serving* space (searches use it). They are the same except while a new model or
photo size is being indexed: the last ready space keeps answering until the new one is complete.

Crash safety: the catalog is the truth. Every commit returns the library generation it made, and
only then is the in-memory state moved to it; vector caches record the generation they reflect
and are reconciled or rebuilt at load when the catalog moved on without them.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import paths, policy
from ..aggregate.descriptor import Whitening, learn_whitening
from ..aggregate.hew import THRESHOLD, Z_RATIO
from ..catalog.catalog import Catalog
from ..catalog.records import BatchOutcome, FolderInfo, Known, Record, SpaceRow
from ..config import Settings
from ..errors import HeatSearchError, InputError
from ..features.engine import EngineChoice, int8_available, precision_of
from ..features.registry import REGISTRY, WeightsLoadError, WeightsMissingError, check_loads, load_backbone
from ..index.local import LocalIndex
from ..index.server import ServerIndex
from ..index.vectors import remove_files
from .snapshot import ServerSnapshot, Snapshot

WHITEN_SAMPLE = 20_000  # descriptors used to fit the whitening (a random sample beyond that)
VACUUM_AFTER = 1000  # forgetting more photos than this gives the catalog's free space back
SAVE_EVERY_S = 300  # during long runs, save the vector files this often (shorter catch-up after a crash)
# opening waits this long for another program's catalog lock, then says so
OPEN_WAIT_S = float(os.environ.get("HEATSEARCH_OPEN_WAIT_S", "15"))


def space_key(backbone: str, digest: str, max_side: int, precision: str) -> str:
    """The identity of a descriptor space. f32 keys keep the first release's format."""
    key = f"{backbone}|{digest}|{max_side}|{THRESHOLD}|{Z_RATIO}"
    return key if precision == "f32" else f"{key}|{precision}"


def resolve_space(st: Settings) -> tuple[str, object]:
    """(space key, Backbone) for settings `st`: locates the weights (cheap), never builds."""
    if st.backbone not in REGISTRY:
        raise WeightsMissingError(f"unknown model '{st.backbone}'; known: {', '.join(REGISTRY)}")
    bb = load_backbone(st.backbone, st.weights or None)
    if st.precision == "int8":  # OpenVINO on the CPU, whatever engine and device say
        if not int8_available():
            raise WeightsMissingError("8-bit precision needs OpenVINO and NNCF (pip install nncf)")
        prec = "int8"
    else:
        prec = precision_of(EngineChoice(st.engine, st.device, st.precision == "fastest"))
    return space_key(st.backbone, bb.weights_digest, st.max_side, prec), bb


def whitening_of(row: SpaceRow) -> Whitening:
    return Whitening.stored(row.white_mean, row.white_proj, row.info.channels)


@dataclass
class SpaceState:
    """A loaded space: its catalog row, whitening and searched vectors."""

    row: SpaceRow
    whitening: Whitening
    index: object  # index.local.LocalIndex | index.server.ServerIndex

    @property
    def id(self) -> int:
        return self.row.id

    @property
    def mu(self) -> np.ndarray | None:
        return self.row.mu


class LibraryWriter:
    def __init__(self, home: Path, catalog: Catalog, settings: Settings, publish: Callable[[object], None],
                 log: Callable[[str], None], read_only: bool = False):
        self.home = home
        self.catalog = catalog
        catalog.on_wait = log
        catalog.whitening = Whitening.stored  # a shared library's search tables follow each write with it
        self.settings = settings
        self._publish = publish
        self.log = log
        self.read_only = read_only  # this client may never write the library (a searcher)
        self.writing = False  # the service holds the writer lock: the only time anything is written
        self.behind = False  # a cache failed to follow a commit: reconciled at the next sync
        self.target: SpaceState | None = None
        self.active: SpaceRow | None = None  # the library's active space as last read (its model may not run here)
        self.serving: SpaceState | None = None
        self.unusable = ""  # why the settings' model cannot run here ("" when it can)
        self.generation = 0
        self.last_save = time.monotonic()
        self.folders: tuple[FolderInfo, ...] = ()

    # ---- shorthands for the target space ---------------------------------------------------------
    @property
    def space(self) -> SpaceRow | None:
        return self.target.row if self.target else None

    @property
    def mu(self) -> np.ndarray | None:
        return self.target.mu if self.target else None

    @property
    def whitening(self) -> Whitening | None:
        return self.target.whitening if self.target else None

    def _states(self) -> list[SpaceState]:
        out = [s for s in (self.target, self.serving) if s is not None]
        return out if len(out) < 2 or out[0] is not out[1] else out[:1]

    # ---- the library's spaces -----------------------------------------------------------------------
    def _check_model(self, bb) -> None:
        """Before a space is created for a weights file the user named: the file must load as
        this model (a wrong file would make an empty space that a purge could mistake for the
        library's)."""
        if not self.settings.weights:
            return
        try:
            check_loads(bb)  # loads the checkpoint (weights_only) into the architecture, in a child process
        except WeightsLoadError as e:
            if str(bb.weights_path) in str(e):
                raise
            raise WeightsLoadError(f"the weights file {self.settings.weights} cannot be used: {e}") from e

    def open(self, cancelled=None) -> None:
        """Load the library's own spaces as the catalog has them, reading only: the *target* is
        the library's active space (what indexing writes), the *serving* space answers searches
        (the active one once ready, else the newest ready one; when the active space's model
        cannot run here, the newest ready space whose model can). Spaces already loaded are kept
        and brought up to the catalog's generation; publishes a snapshot. Never creates or
        activates a space: a client whose settings differ searches with the library's model
        (`settings_note` says so). Called at open and whenever the catalog changed (`sync`)."""
        since = self.generation
        self.generation = self.catalog.generation()
        spaces = self.catalog.spaces()
        rows = {s.id: s for s in spaces}
        old: dict[int, SpaceState] = {}
        for st in self._states():  # loaded before: follow the catalog
            row = rows.get(st.id)
            if row is None:
                continue
            if row.info.white_version != st.row.info.white_version:
                continue  # another whitening: loaded again below
            st.row = row
            st.index.with_space(row)
            if since != self.generation or self.behind:
                if st.index.backend_kind == "local":
                    st.index.reconcile(since)
                else:
                    st.index.maintain()
            old[st.id] = st
        self.behind = False
        active = self.active = next((s for s in spaces if s.active), None)
        self.unusable = self._cannot_run(active) if active is not None else ""
        ready = sorted((s for s in spaces if s.ready), key=lambda s: s.ready_at)
        if active is not None and active.ready:
            serve = active
        else:
            serve = ready[-1] if ready else active
        if self.unusable and serve is not None:
            # searches need the model of the space that answers: when the library's own cannot run
            # here (a weights file away with its drive), the newest ready space whose model can
            runs = next((s for s in sorted(ready, key=lambda s: (s.id != serve.id, -s.ready_at))
                         if not self._cannot_run(s)), None)
            serve = runs or serve
        if active is None and serve is None:
            self.target = self.serving = None
        else:
            self.target = None if active is None else (old.get(active.id) or self._load(active, cancelled))
            if self.target is not None:
                old[active.id] = self.target
            self.serving = self.target if serve is None or (active is not None and serve.id == active.id) else \
                (old.get(serve.id) or self._load(serve, cancelled))
            if self.unusable and not self.read_only:
                self.target = None  # nothing may be indexed with a model that cannot run here
        self.refresh_folders()
        self.publish()

    sync = open

    def activate(self, cancelled=None) -> None:
        """Make the space of the current settings the library's active one (created when new),
        then load the spaces again (`open`). A write: only under the writer lock, for an
        indexing run or a settings change the person asked for. Raises a HeatSearchError in
        words when the settings' model cannot run here (nothing is changed then)."""
        key, bb = resolve_space(self.settings)
        row = self.catalog.space(key)
        if row is None:
            self._check_model(bb)
            st = self.settings
            prec = key.rsplit("|", 1)[1] if key.count("|") > 4 else "f32"
            row = self.catalog.create_space(key, bb.name, bb.weights_digest, st.max_side, THRESHOLD, Z_RATIO,
                                            bb.spec.channels, prec, max_wait=OPEN_WAIT_S)
        if not row.active:
            self.catalog.set_active(row.id, max_wait=OPEN_WAIT_S)
        self.open(cancelled)

    def settings_note(self) -> str:
        """"" when the settings ask for the library's own model; else what differs, in words
        (searches and automatic indexing use the library's model)."""
        active = self.target.row if self.target is not None else None
        if active is None:
            active = next((s for s in self.catalog.spaces() if s.active), None)
        if active is None:
            return ""
        try:
            key, _ = resolve_space(self.settings)
        except HeatSearchError as e:
            return f"your settings' model cannot run here ({e}); this library's own model is used"
        if key == active.key:
            return ""
        st, info = self.settings, active.info
        want = []
        if st.backbone != info.backbone:
            want.append(st.backbone)
        elif key.split("|")[1] != info.weights_digest:
            want.append("another weights file")
        if st.max_side != info.max_side:
            want.append(f"{st.max_side} px")
        prec = key.rsplit("|", 1)[1] if key.count("|") > 4 else "f32"
        if prec != info.precision:
            want.append({"int8": "8-bit", "bf16": "16-bit", "f32": "exact precision"}.get(prec, prec))
        return (f"this library is described with {info.backbone} at {info.max_side} px"
                f"{'' if info.precision == 'f32' else ' (' + info.precision + ')'}; your settings ask for "
                f"{', '.join(want) or 'another model'}: the library's model is used")

    def _cannot_run(self, row: SpaceRow) -> str:
        """"" when the model of space `row` can be built here (its weights file found, the same
        file); else why not, in words. Cheap: locates and hashes (cached), builds nothing."""
        info = row.info
        if info.backbone not in REGISTRY:
            return f"this library's model '{info.backbone}' is not known to this HeatSearch (update it)"
        weights = self.settings.weights if info.backbone == self.settings.backbone else ""
        try:
            bb = load_backbone(info.backbone, weights or None)
        except HeatSearchError as e:
            return str(e)
        if bb.weights_digest != info.weights_digest:
            return (f"this library's {info.backbone} was made with another weights file than "
                    f"{weights or 'the built-in one'} (choose that file in Settings)")
        if info.precision == "int8" and not int8_available():
            return "this library's 8-bit model needs OpenVINO and NNCF (pip install nncf)"
        return ""

    def _load(self, row: SpaceRow, cancelled=None) -> SpaceState:
        w = whitening_of(row)
        if self.catalog.stores_vectors:
            index = ServerIndex(self.catalog, row, w, self.log, may_write=lambda: self.writing)
        else:
            index = LocalIndex(self.catalog, self.home, row, w, self.log)
        index.load(self.generation, cancelled)
        return SpaceState(row, w, index)

    def publish(self) -> None:
        sv = self.serving
        pending = self.target.row.info if self.target is not None and self.target is not sv else None
        common = dict(generation=self.generation, folders=self.folders, read_only=self.read_only, pending=pending)
        if sv is None:
            self._publish(Snapshot(**common))
            return
        base = dict(space=sv.row.info, mu=sv.mu, whitening=sv.whitening, **common)
        parts = sv.index.snapshot_parts()
        if sv.index.backend_kind == "server":
            self._publish(ServerSnapshot(**base, **parts))
        else:
            self._publish(Snapshot(**base, **parts, filter_ids=lambda f: self.catalog.filter_ids(f.folders, f.after, f.before)))

    def save(self, force: bool = False) -> bool:
        """Write the vector caches when the catalog moved on since their last save."""
        if self.read_only or not self.writing:
            return False
        wrote = False
        for st in self._states():
            wrote = st.index.save(self.generation, force) or wrote
        self.last_save = time.monotonic()
        return wrote

    def save_if_due(self) -> None:
        if time.monotonic() - self.last_save > SAVE_EVERY_S:
            self.save()

    def rebuild(self, cancelled=None) -> int:
        """The searched vectors again from the catalog's raw descriptors (no CNN)."""
        for st in self._states():
            st.index.rebuild(cancelled)
            st.index.maintain(cancelled)
        self.save(force=True)
        self.publish()
        return self.serving.index.alive if self.serving else 0

    # ---- the sink: commits, then the caches -----------------------------------------------------------
    def _after(self, gen: int, follow: Callable[[], None]) -> None:
        """The catalog committed generation `gen`: bring the caches along (`follow`), and only then
        say they reflect it. When a cache fails to follow, the generation stays the one they last
        matched, so saved files are never labelled with a generation they lack (the next load
        reconciles them from the catalog)."""
        try:
            follow()
        except BaseException:
            self.behind = True  # `open` (the next write's sync) reconciles the caches from self.generation
            raise
        self.generation = gen

    def commit_batch(self, records: list[Record], existing: dict[str, int], claim: set[int],
                     cancelled=None, waiting=None) -> BatchOutcome:
        """One transaction for a batch of Records in the target space, then its vectors."""
        out = self.catalog.apply_batch(self.target.id, records, existing, claim, cancelled, waiting)

        def follow():
            self.target.index.apply(out.added, out.killed)
            if self.serving is not self.target and out.dropped:  # new content: the old space's vector is stale
                self.serving.index.hide(out.dropped)

        self._after(out.generation, follow)
        self.publish()
        return out

    def record_failures(self, failures: list[tuple[str, int, str]], known: dict[str, Known]) -> None:
        gen = self.catalog.record_failures(failures, known)
        ids = [known[p].id for p, _, _ in failures if p in known]
        self._after(gen, lambda: [st.index.hide(ids) for st in self._states()])

    def mark_missing(self, ids: list[int], cancelled=None) -> None:
        """Photos whose folder vanished: out of the results, rows and descriptors kept."""
        if not ids:
            return
        gen = self.catalog.set_status(ids, "missing", cancelled)
        self._after(gen, lambda: [st.index.hide(ids) for st in self._states()])
        self.publish()

    def restore(self, ids: list[int]) -> None:
        """Photos marked missing whose file is back unchanged: searchable again, no CNN."""
        if not ids:
            return
        gen = self.catalog.set_status(ids, "indexed")
        self._after(gen, lambda: [st.index.restore(ids) for st in self._states()])
        self.publish()

    def remove(self, ids: list[int], folder_ids=(), cancelled=None) -> None:
        """Rows (and folder rows) forgotten. Photos are never touched."""
        if not ids and not folder_ids:
            return
        gen = self.catalog.remove_images(ids, folder_ids, cancelled)
        self._after(gen, lambda: [st.index.hide(ids) for st in self._states()])
        self.publish()

    def mark_ready(self, whole: bool = True) -> None:
        """An indexing run finished in the target: it answers searches from now on. whole: the
        run scanned every folder (else it is ready only when it lacks no photo: a watcher's run
        of one folder after a stopped run left the others out)."""
        if self.target is None or self.target.row.ready:
            return
        if not self.catalog.set_ready(self.target.id, complete_only=not whole):
            return
        self.target.row = self.catalog.space_by_id(self.target.id)
        if self.serving is not self.target:
            self.log("the new descriptions are complete: searches use them from now on")
        self.serving = self.target
        self.publish()

    # ---- centring mean and whitening ------------------------------------------------------------------
    def set_mu(self, mu: np.ndarray, n_photos: int) -> None:
        self.catalog.set_mu(self.target.id, mu, n_photos)
        self.target.row = self.catalog.space_by_id(self.target.id)

    def set_model(self, blob: bytes) -> None:
        """Store the target space's own int8 model (made before its first photo is described)."""
        self.catalog.set_model(self.target.id, blob)
        self.target.row = self.catalog.space_by_id(self.target.id)

    def refit_whitening(self, force: bool = False, cancelled=None) -> bool:
        """Fit or refit the target's whitening when the size policy asks for it (or `force`):
        the stored descriptors re-projected into new vectors, published in one step (no CNN)."""
        st = self.target
        if st is None:
            return False
        sp = st.row
        ids = st.index.live_ids()
        n = len(ids)
        dim = policy.whitening_dim(n, sp.info.channels, self.settings.dim)
        fitted_dim = st.whitening.dim if sp.white_proj is not None else 0
        # a whitening fitted with another shrinkage than the policy's (a library from before it
        # changed) is refitted as if its D were due
        stale = fitted_dim > 0 and dim > 0 and sp.white_shrink != policy.SHRINKAGE
        if not force and not stale and not policy.refit_due(n, sp.white_n, fitted_dim, sp.info.channels, self.settings.dim):
            return False
        if dim == 0:
            w = Whitening.identity(sp.info.channels)
        else:
            rng = np.random.default_rng(0)
            sample = np.sort(rng.choice(ids, WHITEN_SAMPLE, replace=False)) if n > WHITEN_SAMPLE else np.sort(ids)
            w = learn_whitening(self.catalog.raw_descriptors(sample.tolist(), sp.id, sp.info.channels), dim, policy.SHRINKAGE)
        if cancelled is not None and cancelled():
            return False
        new_index = st.index.refit(w, cancelled)
        if new_index is None:
            return False
        self.catalog.set_whitening(sp.id, None if w.is_identity else w.mean, None if w.is_identity else w.proj, n,
                                   shrink=policy.SHRINKAGE)
        st.row = self.catalog.space_by_id(sp.id)
        new_index.with_space(st.row)
        st.whitening, st.index = w, new_index
        if new_index.backend_kind == "server":
            new_index.retire_older()
        self.log(f"whitening {'removed' if w.is_identity else f'fitted on {n} photos (D = {w.dim})'}")
        self.publish()
        self.save(force=True)
        return True

    def maintain(self, cancelled=None) -> None:
        for st in self._states():
            st.index.maintain(cancelled)

    # ---- folders ----------------------------------------------------------------------------------------
    def refresh_folders(self) -> None:
        """Folder states from the file system: offline when the root cannot be reached, missing when
        its parent is there but the folder is gone."""
        rows = self.catalog.folders()
        out, changed = [], {}
        for f in rows:
            p = Path(f.path)
            state = "ok" if p.is_dir() else ("missing" if p.parent.is_dir() and not p.exists() and _mounted(p.parent) else "offline")
            if state != f.state:
                changed[f.id] = state
            out.append(FolderInfo(f.id, f.path, state))
        if changed and self.writing:
            self.catalog.set_folder_states(changed, max_wait=OPEN_WAIT_S)
        self.folders = tuple(out)

    def add_folder(self, path) -> FolderInfo:
        p = Path(path).expanduser()
        try:
            p = p.resolve(strict=True)
        except OSError as e:
            raise InputError(f"not a folder: {paths.display(p)} ({e.strerror or e})") from e
        if not p.is_dir():
            raise InputError(f"not a folder: {paths.display(p)}")
        if not self.catalog.stores_vectors:
            if paths.is_within(self.home, p):
                raise InputError(f"{paths.display(p)} contains the HeatSearch data folder ({self.home}); "
                                 "choose another data folder (--home) or another photo folder")
            if paths.is_within(p, self.home):
                raise InputError("the HeatSearch data folder cannot be a photo folder")
        self.catalog.set_exclusion(str(p), excluded=False)  # asked for again: scanned again
        f = self.catalog.add_folder(str(p))
        self.refresh_folders()
        self.publish()
        return f

    def forget(self, path, missing_only: bool = False) -> int:
        """Remove a folder, a subtree or one file from the catalog (matched by path components),
        or with missing_only only the photos marked missing under it (path None: everywhere).
        Photos are never touched. Returns how many images were forgotten.

        An empty path or a file-system root is refused: `forget ""` (an unset shell variable) must
        never mean "everything"."""
        if path is not None:
            text = os.fspath(path)
            if not str(text).strip():
                raise InputError("forget needs a folder or a photo: the path is empty (nothing was forgotten)")
            target = str(Path(text).expanduser().resolve())
            if Path(target).parent == Path(target):
                raise InputError(f"forget {target} would forget the whole library; name a library folder instead "
                                 "(nothing was forgotten)")
        elif not missing_only:
            raise InputError("forget needs a folder or a photo (nothing was forgotten)")
        else:
            target = None
        rows = self.catalog.folders()
        whole = [f.id for f in rows if target is None or paths.is_within(f.path, target)]
        above = [f.path for f in rows if f.id in whole and target is not None and paths.norm(f.path) != paths.norm(target)]
        if above and not missing_only:  # `forget /tmp` for folders under it: as blunt as `forget /`
            names = ", ".join(paths.display(p) for p in above[:3]) + (" …" if len(above) > 3 else "")
            raise InputError(f"{paths.display(target)} is not a library folder but holds {len(above)} of them ({names}); "
                             "forget each by name (nothing was forgotten)")
        partial = [f.id for f in rows if f.id not in whole and target is not None and paths.is_within(target, f.path)]
        if missing_only:
            self.refresh_folders()  # which folders are gone now (`_failed_and_gone`): one may have come back
        ids = [i for i, p, st in self.catalog.image_paths(whole + partial)
               if (not missing_only or st == "missing" or self._failed_and_gone(p, st))
               and (target is None or paths.is_within(p, target))]
        if not ids and (missing_only or not whole):
            if target is not None and not whole and not partial:
                raise InputError(f"{paths.display(target)} is not in the library (nothing was forgotten)")
            return 0
        self.remove(ids, [] if missing_only else whole)
        if not missing_only and target is not None and not whole:  # a part of a library folder
            self.catalog.set_exclusion(target, excluded=True)  # or the next scan would bring it back
        self.maintain()
        self.refresh_folders()
        self.publish()
        self.save()
        if len(ids) > VACUUM_AFTER and self.catalog.compact():
            self.log("catalog compacted")
        return len(ids)

    def _failed_and_gone(self, path: str, status: str) -> bool:
        """Whether a file that failed to read is gone with its folder (files that vanished under
        the indexer stayed "unreadable" after their folder's missing photos were forgotten;
        one gone from a folder that is there is removed by the next scan)."""
        return status in ("failed", "unreadable") and any(f.state == "missing" and paths.is_within(path, f.path)
                                                          for f in self.folders)

    def purge_spaces(self, force: bool = False) -> tuple[int, str]:
        """Delete the descriptors of every space not in use. The space that answers searches while
        a new one is indexed is kept unless `force`; with settings whose model cannot run here, the
        space that answers is always kept. Returns (how many, what was kept and why)."""
        keep = {self.target.id} if self.target is not None else set()
        note = ""
        sv = self.serving
        if sv is not None and sv is not self.target:
            if force and self.target is not None:
                self.serving = self.target
                self.publish()
            else:
                keep.add(sv.id)
                why = "until the new ones are complete" if self.target is not None else "(the settings' model cannot run here)"
                note = f"kept the descriptions searches use {why}: {sv.row.info.backbone} at {sv.row.info.max_side} px"
        old = [s.id for s in self.catalog.spaces() if s.id not in keep]
        if not old:
            return 0, note
        self.catalog.delete_spaces(old)
        if not self.catalog.stores_vectors:
            for sid in old:
                remove_files(self.home / f"space-{sid}")
        self.catalog.compact()
        return len(old), note

    # ---- numbers for the GUI and `status` ----------------------------------------------------------
    def stats(self) -> dict:
        """Counts per folder and in total (indexed: in the target space), the space, whether an
        older space answers meanwhile. Runs on the writer thread; readers get the published copy."""
        st = self.target or self.serving
        out = self.catalog.stats(st.id if st else None, self.folders)
        sv = self.serving
        out.update({
            "generation": self.generation,
            "space": st.row.info.__dict__ if st else None,
            "dim": st.whitening.dim if st else 0,
            "whitened_on": st.row.white_n if st else 0,
            "backend": sv.index.backend if sv else "exact",
            "searchable": sv.index.alive if sv else 0,
            "serving_space": sv.row.info.__dict__ if sv and sv is not st else None,
            "unusable": self.unusable,
            "library": self.catalog.where,
            "taken_range": self.catalog.date_range(),
            "exclusions": self.catalog.exclusions(),
        })
        return out


def _mounted(parent: Path) -> bool:
    """Whether `parent` can be listed (an unreadable parent makes its children look gone)."""
    try:
        next(iter(parent.iterdir()), None)
        return True
    except OSError:
        return False

