"""What the writer thread owns: the active descriptor space, its centring mean and whitening, the
vector store and the catalog writes. Only the writer thread calls into a LibraryWriter; readers
see its work through the Snapshots it publishes.

Crash safety: the catalog is the truth. Every transaction that changes a space's descriptors
bumps `spaces.generation` and stamps the descriptors it writes with it; the vector files on disk
record the generation they reflect. On open, files at the catalog's generation are used as they
are; older files are caught up from the descriptors written since (and the ids that are gone);
files that fail their CRC, belong to another whitening, or are missing are rebuilt from the
catalog. So a kill at any point leaves nothing that a restart does not repair.
"""
from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Callable

import numpy as np
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import OperationalError

from .. import policy
from ..aggregate.descriptor import Whitening, learn_whitening
from ..aggregate.hew import THRESHOLD, Z_RATIO
from ..catalog.models import Descriptor, Folder, Image, Space
from ..catalog.store import explain
from ..config import Settings
from ..errors import Cancelled, HeatSearchError, InputError
from ..features.engine import EngineChoice, precision_of
from ..features.registry import REGISTRY, WeightsMissingError, load_backbone
from ..index.vectors import VectorStore, choose_backend, remove_files
from . import paths
from .snapshot import FolderInfo, Snapshot, SpaceInfo

WHITEN_SAMPLE = 20_000  # descriptors used to fit the whitening (a random sample beyond that)
COMPACT_DEAD = 0.25  # compact the vector store when this share of its slots is dead
SAVE_EVERY_S = 300  # during long runs, save the vector files this often (shorter catch-up after a crash)
# opening waits this long for another program's catalog lock, then says so
OPEN_WAIT_S = float(os.environ.get("HEATSEARCH_OPEN_WAIT_S", "15"))


def f32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


def f64(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float64).copy()


def space_key(backbone: str, digest: str, max_side: int, precision: str) -> str:
    """The identity of a descriptor space. f32 keys keep the first release's format."""
    key = f"{backbone}|{digest}|{max_side}|{THRESHOLD}|{Z_RATIO}"
    return key if precision == "f32" else f"{key}|{precision}"


def info_of(sp: Space) -> SpaceInfo:
    return SpaceInfo(sp.id, sp.key, sp.backbone, sp.weights_digest, sp.max_side, sp.precision or "f32",
                     sp.threshold, sp.z_ratio, sp.channels, sp.white_version)


class LibraryWriter:
    def __init__(self, home: Path, db, settings: Settings, publish: Callable[[Snapshot], None],
                 log: Callable[[str], None], read_only: bool = False):
        self.home = home
        self.db = db
        self.settings = settings
        self._publish = publish
        self.log = log
        self.read_only = read_only
        self.space: Space | None = None
        self.mu: np.ndarray | None = None
        self.whitening: Whitening | None = None
        self.store: VectorStore | None = None
        self.generation = 0
        self.saved_generation = -1
        self.last_save = time.monotonic()
        self.folders: tuple[FolderInfo, ...] = ()

    # ---- catalog transactions ---------------------------------------------------------------------
    def transaction(self, fn, cancelled: Callable[[], bool] | None = None, waiting: Callable[[str], None] | None = None,
                    max_wait: float | None = None):
        """Run fn(session) in one write transaction. When another program holds the catalog's
        write lock past SQLite's busy timeout, say so and retry until it is free, we are cancelled,
        or `max_wait` seconds have passed (then CatalogError)."""
        told = False
        start = time.monotonic()
        while True:
            try:
                with self.db.begin() as s:
                    return fn(s)
            except OperationalError as e:
                if "locked" not in str(e).lower() and "busy" not in str(e).lower():
                    raise explain(self.home / "catalog.sqlite", e) from e
                if cancelled is not None and cancelled():
                    raise Cancelled("cancelled while the catalog was locked") from e
                if max_wait is not None and time.monotonic() - start > max_wait:
                    raise explain(self.home / "catalog.sqlite", e) from e
                if not told:
                    msg = "the catalog is locked by another program; waiting for it"
                    (waiting or self.log)(msg)
                    told = True
                time.sleep(1.0)

    def bump(self, s) -> int:
        """Increment the active space's generation inside transaction `s`; returns the new one."""
        row = s.get(Space, self.space.id)
        row.generation = (row.generation or 0) + 1
        return row.generation

    # ---- the active space ---------------------------------------------------------------------------
    def resolve(self) -> tuple[str, object]:
        """(space key, Backbone) for the current settings: locates the weights (cheap), never builds."""
        st = self.settings
        if st.backbone not in REGISTRY:
            raise WeightsMissingError(f"unknown model '{st.backbone}'; known: {', '.join(REGISTRY)}")
        bb = load_backbone(st.backbone, st.weights or None)
        prec = precision_of(EngineChoice(st.engine, st.device, st.precision == "fastest"))
        return space_key(st.backbone, bb.weights_digest, st.max_side, prec), bb

    def activate(self, cancelled=None) -> None:
        """Make the space of the current settings active (created when new), load its vectors and
        publish a snapshot. Read-only: the space must exist."""
        key, bb = self.resolve()
        prec = key.rsplit("|", 1)[1] if key.count("|") > 4 else "f32"
        with self.db() as s:
            sp = s.scalar(select(Space).where(Space.key == key))
        if sp is None:
            if self.read_only:
                raise HeatSearchError("this library is not indexed with the current model settings yet "
                                      "(it is read-only here: another HeatSearch is writing it)")

            def create(s):
                row = Space(key=key, backbone=bb.name, weights_digest=bb.weights_digest, max_side=self.settings.max_side,
                            threshold=THRESHOLD, z_ratio=Z_RATIO, channels=bb.spec.channels, precision=prec)
                s.add(row)
                return row

            self.transaction(create, max_wait=OPEN_WAIT_S)
        if not self.read_only:
            with self.db() as s:
                actives = set(s.scalars(select(Space.key).where(Space.active == 1)))
            if actives != {key}:
                self.transaction(lambda s: s.execute(update(Space).values(active=(Space.key == key))), max_wait=OPEN_WAIT_S)
        self.reload_space(key)
        self.load_store(cancelled)
        self.refresh_folders()
        self.publish()

    def reload_space(self, key: str | None = None) -> None:
        key = key or self.space.key
        with self.db() as s:
            sp = s.scalar(select(Space).where(Space.key == key))
            s.expunge(sp)
        self.space = sp
        self.generation = sp.generation or 0
        self.mu = f64(sp.mu) if sp.mu else None
        self.whitening = (Whitening(f64(sp.white_mean), f64(sp.white_proj).reshape(sp.white_dim, sp.channels))
                          if sp.white_dim else Whitening.identity(sp.channels))

    def _prefix(self) -> Path:
        return self.home / f"space-{self.space.id}"

    def load_store(self, cancelled=None) -> None:
        """Vectors from the files when they match the catalog; caught up or rebuilt otherwise."""
        loaded = VectorStore.load(self._prefix())
        if loaded is not None:
            store, meta = loaded
            if meta.get("white_version") == self.space.white_version and store.dim == self.whitening.dim:
                file_gen = int(meta.get("generation", -1))
                if file_gen == self.generation:
                    self.store, self.saved_generation = store, file_gen
                    return
                if 0 <= file_gen < self.generation:
                    self.store = store
                    self.catch_up(file_gen)
                    return
        self.rebuild_store(cancelled)

    def catch_up(self, file_gen: int) -> None:
        """Apply to self.store what the catalog committed after `file_gen`: descriptors written
        since (new slots, their old slots killed) and images that lost their descriptor."""
        sid = self.space.id
        with self.db() as s:
            live = set(s.scalars(select(Descriptor.image_id).join(Image, Image.id == Descriptor.image_id)
                                 .where(Descriptor.space_id == sid, Image.status == "indexed")))
            fresh = list(s.execute(select(Descriptor.image_id, Descriptor.raw)
                                   .join(Image, Image.id == Descriptor.image_id)
                                   .where(Descriptor.space_id == sid, Descriptor.gen > file_gen, Image.status == "indexed")
                                   .order_by(Descriptor.image_id)))
        have = set(self.store.live_ids().tolist())
        fresh_ids = [i for i, _ in fresh]
        self.store.kill_ids(sorted((have - live) | (have & set(fresh_ids))))
        if fresh:
            self.store.append(fresh_ids, self.whitening.apply(np.stack([f32(r) for _, r in fresh])))
        self.log(f"vector index caught up with the catalog ({len(fresh)} new, {len(have - live)} gone)")

    def rebuild_store(self, cancelled=None) -> None:
        """All vectors again from the catalog's raw descriptors (no CNN)."""
        sid = self.space.id
        with self.db() as s:
            ids = list(s.scalars(select(Descriptor.image_id).join(Image, Image.id == Descriptor.image_id)
                                 .where(Descriptor.space_id == sid, Image.status == "indexed").order_by(Descriptor.image_id)))
        store = VectorStore(self.whitening.dim, capacity=max(1024, len(ids)))
        for chunk in _chunks(ids, 5000):
            if cancelled is not None and cancelled():
                raise Cancelled("rebuild cancelled")
            store.append(chunk, self.whitening.apply(self.raw_descriptors(chunk)))
        if choose_backend(store.alive, store.dim) == "hnsw":
            if not store.build_graph(cancelled):
                raise Cancelled("rebuild cancelled")
        self.store = store
        self.saved_generation = -1

    def raw_descriptors(self, ids, space_id: int | None = None) -> np.ndarray:
        """(len(ids), C) float32 raw descriptors, in the order of `ids`."""
        space_id = space_id or self.space.id
        ids = list(ids)
        if not ids:
            return np.zeros((0, self.space.channels), np.float32)
        rows: dict[int, bytes] = {}
        with self.db() as s:
            for chunk in _chunks(ids, 900):
                rows.update(s.execute(select(Descriptor.image_id, Descriptor.raw)
                                      .where(Descriptor.space_id == space_id, Descriptor.image_id.in_(chunk))).all())
        return np.stack([f32(rows[i]) for i in ids])

    def maintain_backend(self, cancelled=None) -> None:
        """Compact a store with many dead slots; switch exact <-> HNSW as the library crosses the size
        where exact search gets slow."""
        st = self.store
        if st.n > 1000 and st.n - st.alive > COMPACT_DEAD * st.n:
            graph = st.graph is not None
            self.store = st = st.compacted()
            if graph and not st.build_graph(cancelled):
                return
        want = choose_backend(st.alive, st.dim)
        if want == "hnsw" and st.graph is None:
            self.log(f"building the search graph for {st.alive} photos")
            st.build_graph(cancelled)
        elif want == "exact" and st.graph is not None:
            st.graph = None

    def publish(self) -> None:
        vecs, ids = self.store.view() if self.store is not None else (np.zeros((0, 1), np.float32), np.zeros(0, np.int64))
        self._publish(Snapshot(self.generation, info_of(self.space) if self.space else None, self.mu, self.whitening,
                               vecs, ids, self.store.graph if self.store else None, int((ids >= 0).sum()), self.folders,
                               self.read_only))

    def save(self, force: bool = False) -> bool:
        """Write the vector files when the catalog moved on since the last save."""
        if self.read_only or self.store is None or (self.saved_generation == self.generation and not force):
            return False
        self.store.save(self._prefix(), {"generation": self.generation, "white_version": self.space.white_version,
                                         "space": self.space.key})
        self.saved_generation = self.generation
        self.last_save = time.monotonic()
        return True

    def save_if_due(self) -> None:
        if time.monotonic() - self.last_save > SAVE_EVERY_S:
            self.save()

    # ---- centring mean and whitening ------------------------------------------------------------------
    def set_mu(self, mu: np.ndarray, n_photos: int) -> None:
        def write(s):
            row = s.get(Space, self.space.id)
            row.mu, row.mu_n = np.asarray(mu, np.float64).tobytes(), int(n_photos)
        self.transaction(write)
        self.mu = np.asarray(mu, np.float64)
        self.space.mu_n = int(n_photos)

    def refit_whitening(self, force: bool = False, cancelled=None) -> bool:
        """Fit or refit the whitening when the size policy asks for it (or `force`); re-projects the
        stored descriptors into a new store and publishes it in one step (no CNN)."""
        sp = self.space
        ids = self.store.live_ids() if self.store is not None else np.zeros(0, np.int64)
        n = len(ids)
        dim = policy.whitening_dim(n, sp.channels, self.settings.dim)
        if not force and not policy.refit_due(n, sp.white_n, sp.white_dim, sp.channels, self.settings.dim):
            return False
        if dim == 0:
            w = Whitening.identity(sp.channels)
        else:
            rng = np.random.default_rng(0)
            sample = np.sort(rng.choice(ids, WHITEN_SAMPLE, replace=False)) if n > WHITEN_SAMPLE else np.sort(ids)
            w = learn_whitening(self.raw_descriptors(sample.tolist()), dim, policy.SHRINKAGE)
        if cancelled is not None and cancelled():
            return False
        store = VectorStore(w.dim, capacity=max(1024, n))
        live = sorted(ids.tolist())
        for chunk in _chunks(live, 5000):
            if cancelled is not None and cancelled():
                return False
            store.append(chunk, w.apply(self.raw_descriptors(chunk)))
        if choose_backend(store.alive, store.dim) == "hnsw" and not store.build_graph(cancelled):
            return False

        def write(s):
            row = s.get(Space, sp.id)
            if w.is_identity:
                row.white_mean, row.white_proj, row.white_dim = b"", b"", 0
            else:
                row.white_mean, row.white_proj, row.white_dim = w.mean.tobytes(), w.proj.tobytes(), w.dim
            row.white_n, row.white_version = n, row.white_version + 1
            return row.white_version

        self.transaction(write)
        self.reload_space()
        self.store = store
        self.saved_generation = -1
        self.log(f"whitening {'removed' if w.is_identity else f'fitted on {n} photos (D = {w.dim})'}")
        self.publish()
        self.save()
        return True

    # ---- folders ----------------------------------------------------------------------------------------
    def folder_rows(self) -> list[Folder]:
        with self.db() as s:
            return list(s.scalars(select(Folder).order_by(Folder.path)))

    def refresh_folders(self) -> None:
        """Folder states from the file system: offline when the root cannot be reached, missing when
        its parent is there but the folder is gone."""
        rows = self.folder_rows()
        out = []
        changed = {}
        for f in rows:
            p = Path(paths.from_db(f.path))
            state = "ok" if p.is_dir() else ("missing" if p.parent.is_dir() and not p.exists() and _mounted(p.parent) else "offline")
            if state != f.state:
                changed[f.id] = state
            out.append(FolderInfo(f.id, paths.from_db(f.path), state))
        if changed and not self.read_only:
            def write(s):
                for fid, state in changed.items():
                    s.get(Folder, fid).state = state
            self.transaction(write, max_wait=OPEN_WAIT_S)
        self.folders = tuple(out)

    def add_folder(self, path) -> FolderInfo:
        p = Path(path).expanduser()
        try:
            p = p.resolve(strict=True)
        except OSError as e:
            raise InputError(f"not a folder: {paths.display(p)} ({e.strerror or e})") from e
        if not p.is_dir():
            raise InputError(f"not a folder: {paths.display(p)}")
        if paths.is_within(self.home, p):
            raise InputError(f"{paths.display(p)} contains the HeatSearch data folder ({self.home}); "
                             "choose another data folder (--home) or another photo folder")
        if paths.is_within(p, self.home):
            raise InputError("the HeatSearch data folder cannot be a photo folder")

        def write(s):
            for f in s.scalars(select(Folder)):
                if paths.is_within(p, paths.from_db(f.path)):
                    return f  # already inside a library folder: nothing to add
            f = Folder(path=paths.to_db(str(p)), added_at=time.time(), state="ok")
            s.add(f)
            s.flush()
            return f

        f = self.transaction(write)
        self.refresh_folders()
        self.publish()
        return FolderInfo(f.id, paths.from_db(f.path), "ok")

    def forget(self, path, missing_only: bool = False) -> int:
        """Remove a folder, a subtree or one file from the catalog (matched by path components),
        or with missing_only only the photos marked missing under it. Photos are never touched.
        Returns how many images were forgotten."""
        target = str(Path(path).expanduser().resolve()) if path else None
        rows = self.folder_rows()
        whole = [f.id for f in rows if target is None or paths.is_within(paths.from_db(f.path), target)]
        partial = [f.id for f in rows if f.id not in whole and target is not None and paths.is_within(target, paths.from_db(f.path))]
        with self.db() as s:
            q = select(Image.id, Image.path, Image.status).where(Image.folder_id.in_(whole + partial))
            ids = [i for i, p, st in s.execute(q)
                   if (not missing_only or st == "missing") and (target is None or paths.is_within(paths.from_db(p), target))]
        if not ids and (missing_only or not whole):
            return 0

        def write(s):
            for chunk in _chunks(ids, 500):
                s.execute(delete(Image).where(Image.id.in_(chunk)))
            if not missing_only:
                s.execute(delete(Folder).where(Folder.id.in_(whole)))
            if self.space is not None:
                self.generation = self.bump(s)

        self.transaction(write)
        if self.store is not None:
            self.store.kill_ids(ids)
            self.maintain_backend()
        self.refresh_folders()
        self.publish()
        self.save()
        if ids and len(ids) > 1000:
            self.vacuum_if_worth_it()
        return len(ids)

    def vacuum_if_worth_it(self) -> None:
        """VACUUM when more than a quarter of the catalog file is free pages."""
        with self.db() as s:
            free = s.connection().exec_driver_sql("PRAGMA freelist_count").scalar() or 0
            total = s.connection().exec_driver_sql("PRAGMA page_count").scalar() or 1
        if free > 0.25 * total:
            with self.db.kw["bind"].connect() as conn:
                conn.exec_driver_sql("VACUUM")
            self.log("catalog compacted")

    def purge_spaces(self) -> int:
        """Delete the descriptors and files of every inactive space. Returns how many spaces."""
        with self.db() as s:
            old = [(sp.id, sp.key) for sp in s.scalars(select(Space).where(Space.id != self.space.id))]
        if not old:
            return 0

        def write(s):
            for sid, _ in old:
                s.execute(delete(Descriptor).where(Descriptor.space_id == sid))
                s.execute(delete(Space).where(Space.id == sid))

        self.transaction(write)
        for sid, _ in old:
            remove_files(self.home / f"space-{sid}")
        self.vacuum_if_worth_it()
        return len(old)

    # ---- numbers for the GUI and `status` ----------------------------------------------------------
    def stats(self) -> dict:
        """Counts per folder and in total, in the active space. Runs on the writer thread; readers
        get the published copy."""
        sid = self.space.id if self.space else -1
        per: dict[int, dict] = {f.id: {"images": 0, "indexed": 0, "failed": 0, "missing": 0} for f in self.folders}
        with self.db() as s:
            for fid, status, n in s.execute(select(Image.folder_id, Image.status, func.count()).group_by(Image.folder_id, Image.status)):
                d = per.setdefault(fid, {"images": 0, "indexed": 0, "failed": 0, "missing": 0})
                d["images"] += n
                if status in ("failed", "missing"):
                    d[status] += n
            for fid, n in s.execute(select(Image.folder_id, func.count()).join(Descriptor, Descriptor.image_id == Image.id)
                                    .where(Descriptor.space_id == sid, Image.status == "indexed").group_by(Image.folder_id)):
                per.setdefault(fid, {"images": 0, "indexed": 0, "failed": 0, "missing": 0})["indexed"] = n
        folders = [{"id": f.id, "path": f.path, "state": f.state, **per.get(f.id, {})} for f in self.folders]
        total = {k: sum(d[k] for d in per.values()) for k in ("images", "indexed", "failed", "missing")}
        return {"folders": folders, **total, "generation": self.generation,
                "space": info_of(self.space).__dict__ if self.space else None,
                "dim": self.whitening.dim if self.whitening else 0,
                "whitened_on": self.space.white_n if self.space else 0,
                "backend": "hnsw" if self.store is not None and self.store.graph is not None else "exact"}


def _mounted(parent: Path) -> bool:
    """Whether `parent` can be listed (an unreadable parent makes its children look gone)."""
    try:
        next(iter(parent.iterdir()), None)
        return True
    except OSError:
        return False


def _chunks(seq, n):
    seq = list(seq)
    for i in range(0, len(seq), n):
        yield seq[i: i + n]


def sample_ids(ids: list, k: int, seed: int = 0) -> list:
    """A reproducible random sample of k ids (all when fewer)."""
    if len(ids) <= k:
        return list(ids)
    return random.Random(seed).sample(list(ids), k)
