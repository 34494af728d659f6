"""The catalog: the one module that issues SQL and keeps the library's generation.

    cat = Catalog.open(home / "catalog.sqlite")            # or "postgresql+psycopg://host/db"
    gen = cat.apply_batch(space_id, records, ...).generation
    rows = cat.image_rows(ids)

Typed operations over SQLAlchemy 2, portable between SQLite and PostgreSQL; what only one of them
does (PRAGMAs, integrity check, VACUUM and the file lock; advisory locks, COPY and pgvector
tables) lives in `sqlite.py` and `postgres.py`. Nothing outside this package issues SQL.

Generations: every write transaction that changes which photos are searchable, or what a
descriptor is, in any space, bumps the library's generation inside the transaction and stamps
the descriptors it writes with it; the new generation is returned only after the commit. A
vector cache (files, a reader's snapshot) that records generation g is exact for g; anything
older is reconciled against the live ids and the descriptors written since g (`changes_since`).
"""
from __future__ import annotations

import hashlib
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
from sqlalchemy import case, delete, func, insert, inspect, or_, select, update
from sqlalchemy.exc import DBAPIError, DatabaseError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from .. import paths
from ..errors import Cancelled, CatalogError, InputError
from .migrations import migrate
from .models import SCHEMA_VERSION, Base, Descriptor, Folder, Image, Meta, Space, State
from .queries import chunks, under
from .records import BatchOutcome, FolderInfo, ImageRow, Known, Record, SpaceInfo, SpaceRow
from .sqlite import SqliteDialect

CHUNK = 500  # ids per IN (...) list: well under SQLite's variable limit


def is_url(location) -> bool:
    return isinstance(location, str) and "://" in location


def dialect_for(location, passfile=None):
    """The dialect of a library location: a PostgreSQL URL, or a SQLite file (a path or sqlite:///).
    passfile: a libpq password file for a PostgreSQL URL without a password (the data folder's)."""
    if is_url(location):
        scheme = location.split("://", 1)[0].lower()
        if scheme.startswith("postgres"):
            try:  # psycopg and pgvector: optional (heatsearch[scale]), 0.4 s; a SQLite library never loads them
                from .postgres import PostgresDialect
            except ImportError as e:
                raise InputError(f"a PostgreSQL library needs the scale packages ({e.name} is missing): "
                                 "pip install 'heatsearch[scale]'") from e
            return PostgresDialect(location, passfile=passfile)
        if scheme == "sqlite":
            return SqliteDialect(Path(location.split("://", 1)[1].lstrip("/")).absolute()
                                 if not location.startswith("sqlite:////") else Path(location[len("sqlite:///"):]))
        raise InputError(f"a library is a data folder or a postgresql:// URL, not '{location.split('://', 1)[0]}://...'")
    return SqliteDialect(Path(location))


class Catalog:
    def __init__(self, dialect, engine, read_only: bool):
        self.dialect = dialect
        self.engine = engine
        self.read_only = read_only
        self._session = sessionmaker(engine, expire_on_commit=False)
        # called before every write transaction: the service's check that it holds the writer
        # lock (a lock that dropped, or a write outside a write command, raises before anything)
        self.before_write: Callable[[], None] = lambda: None
        self.on_wait: Callable[[str], None] = lambda msg: None  # told once when another program holds the lock
        # how a space's stored whitening is applied: whitening(mean (C,) | None, proj (D, C) | None,
        # channels) -> an object whose `apply` maps (n, C) raw descriptors to (n, D) unit vectors
        # (aggregate.descriptor.Whitening.stored). A shared library's writes keep its search tables
        # in step inside their transactions, with it; the library's writer sets it.
        self.whitening: Callable | None = None

    # ---- opening ---------------------------------------------------------------------------------
    @classmethod
    def connect(cls, location, read_only: bool = False, passfile=None) -> "Catalog":
        """The catalog at `location` (a SQLite file or a PostgreSQL URL), checked (integrity,
        reachability) but not yet created or migrated: `prepare()` does that, under the writer's
        lock. CatalogError with one line saying what to do, and nothing written, when it cannot
        be used. read_only: never creates or writes. passfile: see `dialect_for`."""
        dialect = dialect_for(location, passfile)
        try:
            dialect.check()
            return cls(dialect, dialect.engine(read_only), read_only)
        except CatalogError:
            raise
        except (SQLAlchemyError, ValueError, *dialect.driver_errors) as e:
            raise dialect.explain(e) from e

    def prepare(self) -> "Catalog":
        """Create a new catalog or migrate an old one (a read-only catalog is only checked)."""
        try:
            self._prepare()
            return self
        except CatalogError:
            raise
        except (SQLAlchemyError, ValueError, *self.dialect.driver_errors) as e:
            raise self.dialect.explain(e) from e

    @classmethod
    def open(cls, location, read_only: bool = False, passfile=None) -> "Catalog":
        """connect + prepare (for callers that hold no writer lock: tests, tools)."""
        return cls.connect(location, read_only, passfile).prepare()

    def _prepare(self) -> None:
        if not inspect(self.engine).has_table("meta"):
            if self.read_only:
                raise CatalogError(f"no catalog in {self.where}: nothing is indexed there yet")
            self._create_or_finish()
            return
        version = self.schema_version()
        if version == 0:  # tables without a schema row: a creation cut short (or a damaged catalog)
            if self.read_only:
                raise CatalogError(f"the catalog {self.where} was never finished (it has no schema version); "
                                   "run `heatsearch index` on it once to finish it")
            self._create_or_finish()
            return
        if version > SCHEMA_VERSION:
            raise CatalogError(f"the catalog {self.where} was written by a newer HeatSearch (schema {version} > "
                               f"{SCHEMA_VERSION}); update HeatSearch or use another library")
        if version < SCHEMA_VERSION:
            if self.read_only:
                raise CatalogError(f"the catalog {self.where} needs an upgrade that only a writing HeatSearch can make; "
                                   "close the other HeatSearch and try again")
            migrate(self.engine, version)

    def _create(self) -> None:
        """Tables, the dialect's indexes and the meta rows in ONE transaction (SQLite and PostgreSQL
        both have transactional DDL): a crash leaves either no catalog or a whole one, never tables
        without a schema version."""
        with self.engine.begin() as conn:
            if self.dialect.name == "sqlite":
                self.dialect.begin(conn)
            Base.metadata.create_all(conn)
            self.dialect.prepare_schema(conn)
            if conn.scalar(select(Meta.value).where(Meta.key == "schema_version")) is None:
                conn.execute(insert(Meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
            if conn.scalar(select(State.id).where(State.id == 1)) is None:
                conn.execute(insert(State).values(id=1, generation=0))

    def _create_or_finish(self) -> None:
        """A new catalog, or one with tables but no schema version (left by a creation that was not
        one transaction): with no photo in it nothing can be lost, so it is created or finished;
        with photos its schema is unknown, so it is refused in one line."""
        where = self.where
        with self._session() as s:
            photos = s.scalar(select(func.count()).select_from(Image)) if inspect(self.engine).has_table("images") else 0
        if photos:
            raise CatalogError(f"the catalog {where} holds {photos} photos but no schema version: it is damaged; restore "
                               "it from a backup, or start a new library (another data folder or database) and run "
                               "`heatsearch index` there to rebuild it from your photos")
        self._create()

    def exists(self) -> bool:
        """Whether a HeatSearch catalog is there (False: an empty database or no file)."""
        try:
            return inspect(self.engine).has_table("meta")
        except (SQLAlchemyError, *self.dialect.driver_errors) as e:
            raise self.dialect.explain(e) from e

    def schema_version(self) -> int:
        with self._session() as s:
            return int(s.scalar(select(Meta.value).where(Meta.key == "schema_version")) or 0)

    @property
    def where(self) -> str:
        """The catalog in words (a file path, or a URL without its password)."""
        return self.dialect.where

    @property
    def kind(self) -> str:
        return self.dialect.name

    @property
    def stores_vectors(self) -> bool:
        """Whether searched vectors live in the database (PostgreSQL) rather than in files."""
        return self.dialect.stores_vectors

    def writable(self) -> bool:
        """Whether this client may write the library (False: a searcher's URL, a read-only folder):
        asked of the database's privileges or the file system, never by trying a write."""
        try:
            return bool(self.dialect.can_write(self.engine))
        except (SQLAlchemyError, OSError, *self.dialect.driver_errors) as e:
            raise self.dialect.explain(e) from e

    def writer_lock(self):
        """The lock that keeps one writer per library across processes and machines."""
        return self.dialect.writer_lock(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # ---- transactions and the generation -----------------------------------------------------------
    def _read(self) -> Session:
        return self._session()

    def _write(self, fn: Callable[[Session], object], cancelled: Callable[[], bool] | None = None,
               waiting: Callable[[str], None] | None = None, max_wait: float | None = None):
        """Run fn(session) in one write transaction. When another program holds the catalog's
        write lock past the busy timeout, say so once and retry until it is free, we are
        cancelled, or `max_wait` seconds have passed (then CatalogError)."""
        told = False
        start = time.monotonic()
        while True:
            self.before_write()
            try:
                with self._session.begin() as s:
                    return fn(s)
            except (OperationalError, DBAPIError) as e:
                if not self.dialect.is_lock_error(e):
                    raise self.dialect.explain(e) from e
                if cancelled is not None and cancelled():
                    raise Cancelled("cancelled while the catalog was locked") from e
                if max_wait is not None and time.monotonic() - start > max_wait:
                    raise self.dialect.explain(e) from e
                if not told:
                    (waiting or self.on_wait)("the catalog is locked by another program; waiting for it")
                    told = True
                time.sleep(1.0)
            except DatabaseError as e:
                raise self.dialect.explain(e) from e

    @staticmethod
    def _bump(s: Session) -> int:
        """The library's next generation, inside transaction `s`."""
        row = s.get(State, 1, with_for_update=True)
        if row is None:
            row = State(id=1, generation=0)
            s.add(row)
        row.generation = (row.generation or 0) + 1
        s.flush()
        return row.generation

    def generation(self) -> int:
        with self._read() as s:
            return int(s.scalar(select(State.generation).where(State.id == 1)) or 0)

    def version(self) -> tuple:
        """What a reader's view depends on, cheaply compared: the generation, the spaces' states
        (active, ready, whitening, model, mean) and the folders. Equal versions: nothing to re-read."""
        with self._read() as s:
            gen = int(s.scalar(select(State.generation).where(State.id == 1)) or 0)
            spaces = tuple(s.execute(select(Space.id, Space.active, Space.ready, Space.white_version, Space.model_digest,
                                            Space.mu_n).order_by(Space.id)).all())
            folders = tuple(s.execute(select(Folder.id, Folder.path, Folder.state).order_by(Folder.id)).all())
        return gen, tuple(map(tuple, spaces)), tuple(map(tuple, folders))

    @property
    def identity(self) -> str:
        """The library, whoever connects to it: a PostgreSQL server and database without the user,
        or the SQLite file (what a client remembers about a library is kept under it)."""
        return self.dialect.identity

    @property
    def server(self) -> str:
        """A PostgreSQL library's server in words (HOST:PORT, or "this computer" for its socket)."""
        return getattr(self.dialect, "server", "")

    def guard(self, fn, *a, **kw):
        """Run a read `fn`, turning a database failure into the dialect's one-line CatalogError."""
        try:
            return fn(*a, **kw)
        except CatalogError:  # StaleSnapshotError included: the caller takes a fresh snapshot
            raise
        except (SQLAlchemyError, *self.dialect.driver_errors) as e:
            raise self.dialect.explain(e) from e

    # ---- spaces ------------------------------------------------------------------------------------
    def spaces(self) -> list[SpaceRow]:
        with self._read() as s:
            return [_space_row(sp) for sp in s.scalars(select(Space).order_by(Space.id))]

    def space(self, key: str) -> SpaceRow | None:
        with self._read() as s:
            sp = s.scalar(select(Space).where(Space.key == key))
            return _space_row(sp) if sp is not None else None

    def space_by_id(self, space_id: int) -> SpaceRow | None:
        with self._read() as s:
            sp = s.get(Space, space_id)
            return _space_row(sp) if sp is not None else None

    def create_space(self, key: str, backbone: str, weights_digest: str, max_side: int, threshold: float,
                     z_ratio: float, channels: int, precision: str, max_wait: float | None = None) -> SpaceRow:
        """A new, inactive space. It is ready at once when the library has no photo yet (there is
        nothing to index, so nothing it could fail to answer)."""
        def write(s):
            empty = s.scalar(select(func.count()).select_from(Image).where(Image.status == "indexed")) == 0
            sp = Space(key=key, backbone=backbone, weights_digest=weights_digest, max_side=max_side, threshold=threshold,
                       z_ratio=z_ratio, channels=channels, precision=precision, active=0, ready=int(empty),
                       ready_at=time.time() if empty else 0.0)
            s.add(sp)
            s.flush()
            return _space_row(sp)

        return self._write(write, max_wait=max_wait)

    def set_active(self, space_id: int, max_wait: float | None = None) -> None:
        """Make `space_id` the one indexing writes (the others stay, for searches until it is ready).
        The space active until now, when ready, takes ready_at = now: it answered the user's last
        searches, so it (not a space used once before it) answers until `space_id` is ready. A
        space used before that lacks photos added since is not ready until a run completes it: it
        would answer without them (a real window read 303 of 366 photos searchable)."""
        now = time.time()

        def write(s):
            s.execute(update(Space).where(Space.active == 1, Space.ready == 1, Space.id != space_id).values(ready_at=now))
            new = s.get(Space, space_id)
            if new.ready and _lacking(s, space_id):
                new.ready = 0
            s.execute(update(Space).values(active=case((Space.id == space_id, 1), else_=0)))

        self._write(write, max_wait=max_wait)

    def set_ready(self, space_id: int, complete_only: bool = False) -> bool:
        """Mark `space_id` ready; complete_only: only when it describes every searchable photo of
        the reachable folders. Returns whether it is ready."""
        def write(s):
            sp = s.get(Space, space_id)
            if not sp.ready and not (complete_only and _lacking(s, space_id)):
                sp.ready, sp.ready_at = 1, time.time()
            return bool(sp.ready)

        return self._write(write)

    def lacking(self, key: str) -> int:
        """How many searchable photos of the reachable folders the space `key` does not describe
        (all of them for a space not made yet): what a switch to it indexes."""
        with self._read() as s:
            sid = s.scalar(select(Space.id).where(Space.key == key))
            return _lacking(s, -1 if sid is None else sid)

    def set_mu(self, space_id: int, mu: np.ndarray, n_photos: int) -> None:
        def write(s):
            sp = s.get(Space, space_id)
            sp.mu, sp.mu_n = np.asarray(mu, np.float64).tobytes(), int(n_photos)

        self._write(write)

    def set_model(self, space_id: int, blob: bytes) -> None:
        """Store an int8 space's own model (features/quantise.py) and its SHA-256, once: a space's
        model is never replaced (clients refuse a model that changes under a space; another
        model is another space)."""
        def write(s):
            sp = s.get(Space, space_id, with_for_update=True)
            if sp.model_digest:
                raise CatalogError("this space has its 8-bit model already; another model is another space")
            sp.model, sp.model_digest = bytes(blob), hashlib.sha256(blob).hexdigest()

        self._write(write)

    def space_model(self, space_id: int) -> bytes | None:
        """An int8 space's model, None when it has none yet; CatalogError when the stored bytes do
        not match their SHA-256 (never run a damaged model: its vectors would be wrong)."""
        with self._read() as s:
            blob, digest = s.execute(select(Space.model, Space.model_digest).where(Space.id == space_id)).one()
        if not digest:
            return None
        if hashlib.sha256(blob or b"").hexdigest() != digest:
            raise CatalogError("the library's 8-bit model does not match its checksum (damaged): its photos can still be "
                               "searched with Exact precision (Settings > Advanced > Precision)")
        return bytes(blob)

    def set_whitening(self, space_id: int, mean: np.ndarray | None, proj: np.ndarray | None, n: int,
                      before_commit: Callable[[Session, int], None] | None = None, shrink: float = 0.0) -> int:
        """Store a new whitening (None: none) fitted on n photos with eigenvalue shrinkage `shrink`;
        returns its version.
        `before_commit(session, version)` runs inside the same transaction (PostgreSQL: the new
        vector table becomes the searched one at the same instant)."""
        def write(s):
            sp = s.get(Space, space_id, with_for_update=True)
            if proj is None:
                sp.white_mean, sp.white_proj, sp.white_dim = b"", b"", 0
            else:
                sp.white_mean, sp.white_proj = np.asarray(mean, np.float64).tobytes(), np.asarray(proj, np.float64).tobytes()
                sp.white_dim = int(proj.shape[0])
            sp.white_n, sp.white_version = int(n), sp.white_version + 1
            sp.white_shrink = 0.0 if proj is None else float(shrink)
            if before_commit is not None:
                before_commit(s, sp.white_version)
            return sp.white_version

        return self._write(write)

    def delete_spaces(self, space_ids: list[int]) -> None:
        def write(s):
            for sid in space_ids:
                s.execute(delete(Descriptor).where(Descriptor.space_id == sid))
                s.execute(delete(Space).where(Space.id == sid))

        self._write(write)
        self.dialect.drop_vectors(self.engine, space_ids)

    # ---- folders -----------------------------------------------------------------------------------
    def folder_paths(self) -> list[str]:
        """The library folders' paths, from any schema version (read before a migration)."""
        if not inspect(self.engine).has_table("folders"):
            return []
        with self._read() as s:
            return [paths.from_db(p) for p in s.scalars(select(Folder.path))]

    def folders(self) -> list[FolderInfo]:
        """The library folders (not the exclusions)."""
        with self._read() as s:
            return [FolderInfo(f.id, paths.from_db(f.path), f.state)
                    for f in s.scalars(select(Folder).where(Folder.state != "excluded").order_by(Folder.path))]

    def exclusions(self) -> list[str]:
        """Folders and files inside library folders that the user forgot: never scanned again
        (until added back)."""
        with self._read() as s:
            return [paths.from_db(p) for p in s.scalars(select(Folder.path).where(Folder.state == "excluded"))]

    def set_exclusion(self, path: str, excluded: bool) -> None:
        """Exclude `path` (forgotten inside a library folder: exclusions under it are merged into
        it), or lift the exclusions that cover `path` (asked for again), leaving those inside it."""
        def write(s):
            for f in s.scalars(select(Folder).where(Folder.state == "excluded")):
                inside, covers = paths.is_within(paths.from_db(f.path), path), paths.is_within(path, paths.from_db(f.path))
                if (excluded and inside) or (not excluded and covers):
                    s.delete(f)
            if excluded:
                s.flush()
                s.add(Folder(path=paths.to_db(path), added_at=time.time(), state="excluded"))

        self._write(write)

    def add_folder(self, path: str) -> FolderInfo:
        """Add a resolved folder path; a folder inside an existing one adds nothing (returns the
        enclosing one). Library folders inside the new one become part of it: their photos, with
        their descriptions, move under it (kept apart, the parent read "0 photos" above its
        children, and removing a child forgot photos the parent still held)."""
        def write(s):
            for f in s.scalars(select(Folder).where(Folder.state != "excluded")):
                if paths.is_within(path, paths.from_db(f.path)):
                    return FolderInfo(f.id, paths.from_db(f.path), f.state)
            f = Folder(path=paths.to_db(path), added_at=time.time(), state="ok")
            s.add(f)
            s.flush()
            _take_in_nested(s)
            return FolderInfo(f.id, path, "ok")

        return self._write(write)

    def take_in_nested_folders(self) -> int:
        """Library folders inside another become part of it (a library where a parent was added
        over its folders before they were taken in: add_folder). Returns how many were."""
        return self._write(_take_in_nested)

    def set_folder_states(self, states: dict[int, str], max_wait: float | None = None) -> None:
        def write(s):
            for fid, state in states.items():
                f = s.get(Folder, fid)
                if f is not None:
                    f.state = state

        self._write(write, max_wait=max_wait)

    def drop_empty_folders(self, folder_ids: list[int]) -> list[int]:
        """Forget those of `folder_ids` that hold no photo any more. Returns the ones dropped."""
        def write(s):
            used = set(s.scalars(select(Image.folder_id).where(Image.folder_id.in_(folder_ids)).distinct()))
            empty = [i for i in folder_ids if i not in used]
            if empty:
                s.execute(delete(Folder).where(Folder.id.in_(empty)))
            return empty

        return self._write(write) if folder_ids else []

    # ---- reads for indexing --------------------------------------------------------------------------
    def known(self, folder_ids, space_id: int) -> dict[str, Known]:
        """path -> Known for the rows under `folder_ids`. A row without a descriptor in `space_id`
        (a new space, a crash before its batch, a file that could not be read here) counts as
        changed (mtime -1)."""
        with self._read() as s:
            have = set(s.scalars(select(Descriptor.image_id).where(Descriptor.space_id == space_id)))
            rows = s.execute(select(Image.id, Image.path, Image.size, Image.mtime_ns, Image.status)
                             .where(Image.folder_id.in_(list(folder_ids)))).all()
        return {paths.from_db(p): Known(i, sz, mt if (st == "failed" or i in have) else -1, st) for i, p, sz, mt, st in rows}

    def content_index(self, space_id: int) -> tuple[dict[str, int], set[int]]:
        """(digest -> id of a row whose descriptor in `space_id` can be reused for the same bytes,
        ids of missing rows a moved file may claim). A present copy wins over a missing one."""
        with self._read() as s:
            rows = s.execute(select(Image.digest, Image.id, Image.status).join(Descriptor, Descriptor.image_id == Image.id)
                             .where(Descriptor.space_id == space_id, Image.digest != "",
                                    Image.status.in_(("indexed", "missing")))).all()
        reuse = {dg: i for dg, i, st in rows if st == "missing"}
        reuse.update({dg: i for dg, i, st in rows if st == "indexed"})
        return reuse, {i for _, i, st in rows if st == "missing"}

    def image_ids(self, folder_ids, status: str | None = None) -> list[int]:
        with self._read() as s:
            q = select(Image.id).where(Image.folder_id.in_(list(folder_ids)))
            if status is not None:
                q = q.where(Image.status == status)
            return list(s.scalars(q))

    def image_paths(self, folder_ids) -> list[tuple[int, str, str]]:
        """(id, path, status) of every row under `folder_ids`."""
        with self._read() as s:
            return [(i, paths.from_db(p), st) for i, p, st in
                    s.execute(select(Image.id, Image.path, Image.status).where(Image.folder_id.in_(list(folder_ids))))]

    # ---- writes for indexing (each returns the generation it committed) ---------------------------------
    def apply_batch(self, space_id: int, records: list[Record], existing: dict[str, int], claim: set[int],
                    cancelled: Callable[[], bool] | None = None, waiting: Callable[[str], None] | None = None
                    ) -> BatchOutcome:
        """One transaction for a batch of described files in `space_id`.

        existing: path -> id of rows the scan found changed (re-described in place); claim: ids a
        moved file may take over (its row follows the file, descriptor and all). A file whose
        content changed loses its descriptors in every other space (they describe old pixels).
        A failure about this machine rather than the file (`retry`: no permission, no decoder
        here) is kept as 'unreadable' and tried again at every scan."""
        def write(s) -> BatchOutcome:
            out = BatchOutcome(self._bump(s))
            gen = out.generation
            # the rows and descriptors the batch touches, read in a few statements (one per photo,
            # and a flush per photo for its new id, made the writer's pace into PostgreSQL ~200
            # records/s: benchmarks/writer_rate.py)
            want = sorted({existing[r.path] for r in records if r.path in existing}
                          | {r.reuse_of for r in records if r.reuse_of is not None})
            rows: dict[int, Image] = {}
            descs: dict[int, Descriptor] = {}  # image id -> its descriptor in space_id
            for chunk in chunks(want, CHUNK):
                rows.update((r.id, r) for r in s.scalars(select(Image).where(Image.id.in_(chunk))))
                descs.update((d.image_id, d) for d in s.scalars(
                    select(Descriptor).where(Descriptor.space_id == space_id, Descriptor.image_id.in_(chunk))))
            pending: list[tuple[Record, Image, bool]] = []  # described: their descriptors once new rows have ids
            for rec in records:
                row_id = existing.get(rec.path)
                moving = rec.reuse_of is not None and rec.reuse_of in claim and rec.reuse_of not in out.moved and row_id is None
                if rec.reuse_of is not None and not moving and not rec.error and rec.reuse_of != row_id:
                    # the row to copy from was looked up when the file was read; it may have been
                    # described again since (a run's batches commit in any order on a cluster):
                    # its descriptor serves these bytes only while its digest is still theirs
                    srow = rows.get(rec.reuse_of)
                    if srow is None or srow.digest != rec.digest or rec.reuse_of not in descs:
                        out.redo.append(rec.path)
                        continue
                if moving:
                    row = rows.get(rec.reuse_of) or s.get(Image, rec.reuse_of)
                    row.path, row.folder_id, row.size, row.mtime_ns = paths.to_db(rec.path), rec.folder_id, rec.size, rec.mtime_ns
                    out.moved.append(rec.reuse_of)
                    out.ids[rec.path] = row.id
                    out.reused += 1
                    if row.status == "missing":  # back from a vanished folder: into the results again
                        row.status = "indexed"
                        dsc = descs.get(row.id)
                        if dsc is not None:
                            dsc.gen = gen
                            out.added.append((row.id, dsc.raw))
                        self.dialect.vectors_restored(s, [row.id], self.whitening)
                    continue
                row = (rows.get(row_id) or s.get(Image, row_id)) if row_id is not None else None
                new = row is None
                if new:
                    row = Image(path=paths.to_db(rec.path), folder_id=rec.folder_id, size=0, mtime_ns=0)
                    s.add(row)
                elif row.digest != rec.digest:  # new content: descriptors of other spaces are stale too
                    s.execute(delete(Descriptor).where(Descriptor.image_id == row.id, Descriptor.space_id != space_id))
                    out.dropped.append(row.id)
                row.size, row.mtime_ns, row.folder_id, row.digest = rec.size, rec.mtime_ns, rec.folder_id, rec.digest
                if rec.error:
                    row.status, row.error = ("unreadable" if rec.retry else "failed"), rec.error
                    if not new:
                        s.execute(delete(Descriptor).where(Descriptor.image_id == row.id))
                        descs.pop(row.id, None)
                        out.killed.append(row.id)
                        out.dropped.append(row.id)
                    out.errors.append((rec.path, rec.error))
                    continue
                row.status, row.error = "indexed", ""
                pending.append((rec, row, new))
            s.flush()  # the new rows' ids, in one statement per table
            for rec, row, new in pending:
                out.ids[rec.path] = row.id
                if rec.reuse_of is not None:
                    if rec.reuse_of == row.id:
                        continue  # touched, same bytes: nothing to recompute
                    src, srow = descs[rec.reuse_of], rows[rec.reuse_of]
                    raw, grid, gh, gw = src.raw, src.grid, src.grid_h, src.grid_w
                    row.width, row.height, row.taken, row.sharpness = srow.width, srow.height, srow.taken, srow.sharpness
                    row.phash, row.thumb, row.border, row.camera = srow.phash, srow.thumb, srow.border, srow.camera
                    out.reused += 1
                else:
                    raw = np.asarray(rec.raw, np.float32).tobytes()
                    grid, (gh, gw) = np.asarray(rec.grid, np.float16).tobytes(), rec.grid.shape
                    row.width, row.height = rec.width, rec.height
                    row.taken, row.sharpness, row.phash, row.thumb = rec.taken, rec.sharpness, rec.phash, rec.thumb
                    row.border, row.camera = rec.border, rec.camera
                dsc = None if new else descs.get(row.id)  # a new row has no descriptor anywhere
                if dsc is None:
                    s.add(Descriptor(image_id=row.id, space_id=space_id, raw=raw, grid=grid, grid_h=gh, grid_w=gw, gen=gen))
                else:
                    dsc.raw, dsc.grid, dsc.grid_h, dsc.grid_w, dsc.gen = raw, grid, gh, gw, gen
                out.killed.append(row.id)  # a slot an older cache may hold for this id is stale
                out.added.append((row.id, raw))
            s.flush()
            if out.added:
                self.dialect.vectors_added(s, space_id, [i for i, _ in out.added], [r for _, r in out.added],
                                           self.whitening)
            return out

        return self._write(write, cancelled, waiting)

    def record_failures(self, failures: list[tuple[str, int, str]], known: dict[str, Known]) -> int:
        """(path, folder id, reason) recorded as failed (not regular files, unreadable entries).
        Returns the generation."""
        def write(s):
            gen = self._bump(s)
            for p, fid, why in failures:
                row = s.get(Image, known[p].id) if p in known else None
                if row is None:
                    row = Image(path=paths.to_db(p), folder_id=fid, size=0, mtime_ns=0)
                    s.add(row)
                row.status, row.error = "failed", why
                if row.id is not None:
                    s.execute(delete(Descriptor).where(Descriptor.image_id == row.id))
            return gen

        return self._write(write)

    def set_status(self, ids: list[int], status: str, cancelled: Callable[[], bool] | None = None) -> int:
        """Mark rows missing (out of the results, descriptors kept) or indexed again. Returns the
        generation."""
        def write(s):
            gen = self._bump(s)
            for chunk in chunks(ids, CHUNK):
                s.execute(update(Image).where(Image.id.in_(chunk)).values(status=status))
                if status == "indexed":  # back in the results: every space's vector caches take them again
                    s.execute(update(Descriptor).where(Descriptor.image_id.in_(chunk)).values(gen=gen))
            if status == "indexed":
                self.dialect.vectors_restored(s, ids, self.whitening)
            else:
                self.dialect.vectors_hidden(s, ids)
            return gen

        return self._write(write, cancelled)

    def remove_images(self, ids: list[int], folder_ids: Iterable[int] = (), cancelled=None) -> int:
        """Delete rows (and their descriptors) and folder rows. Photos are never touched.
        Returns the generation."""
        folder_ids = list(folder_ids)

        def write(s):
            gen = self._bump(s)
            for chunk in chunks(ids, CHUNK):
                s.execute(delete(Image).where(Image.id.in_(chunk)))
            if folder_ids:
                s.execute(delete(Folder).where(Folder.id.in_(folder_ids)))
            return gen

        return self._write(write, cancelled)

    def compact(self) -> bool:
        """Give free space back after large deletions (SQLite VACUUM). Returns whether it ran."""
        return self.dialect.compact(self.engine)

    # ---- reads for the vector caches ----------------------------------------------------------------
    def live_ids(self, space_id: int) -> np.ndarray:
        """(n,) int64 sorted ids of searchable photos with a descriptor in `space_id`."""
        with self._read() as s:
            ids = s.scalars(select(Descriptor.image_id).join(Image, Image.id == Descriptor.image_id)
                            .where(Descriptor.space_id == space_id, Image.status == "indexed").order_by(Descriptor.image_id))
            return np.fromiter(ids, np.int64)

    def changes_since(self, space_id: int, generation: int) -> tuple[int, np.ndarray, list[tuple[int, bytes]]]:
        """(generation now, live ids, descriptors written after `generation`) of `space_id`, read in
        one transaction: a reader catching up never mixes two states of the catalog."""
        with self._session() as s:  # closing it rolls the read transaction back
            if self.dialect.name == "postgresql":  # one snapshot for the whole transaction
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            else:  # pysqlite issues no BEGIN before a SELECT: each would read the latest commit
                self.dialect.begin(s.connection())
            gen = int(s.scalar(select(State.generation).where(State.id == 1)) or 0)
            live = np.fromiter(s.scalars(select(Descriptor.image_id).join(Image, Image.id == Descriptor.image_id)
                                         .where(Descriptor.space_id == space_id, Image.status == "indexed")
                                         .order_by(Descriptor.image_id)), np.int64)
            fresh = [(i, r) for i, r in s.execute(
                select(Descriptor.image_id, Descriptor.raw).join(Image, Image.id == Descriptor.image_id)
                .where(Descriptor.space_id == space_id, Descriptor.gen > generation, Image.status == "indexed")
                .order_by(Descriptor.image_id))]
        return gen, live, fresh

    def descriptors_of(self, ids, space_id: int) -> dict[int, bytes]:
        """{image id: raw descriptor bytes ((C,) float32)} of those of `ids` that have one."""
        rows: dict[int, bytes] = {}
        with self._read() as s:
            for chunk in chunks([int(i) for i in ids], CHUNK):
                rows.update(s.execute(select(Descriptor.image_id, Descriptor.raw)
                                      .where(Descriptor.space_id == space_id, Descriptor.image_id.in_(chunk))).all())
        return rows

    def raw_descriptors(self, ids, space_id: int, channels: int) -> np.ndarray:
        """(len(ids), C) float32 raw descriptors in the order of `ids` (KeyError for one that has none)."""
        ids = [int(i) for i in ids]
        if not ids:
            return np.zeros((0, channels), np.float32)
        rows = self.descriptors_of(ids, space_id)
        return np.stack([np.frombuffer(rows[i], np.float32) for i in ids])

    def descriptor(self, image_id: int, space_id: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(raw (C,) float32, heat grid (h, w) float32) of one photo, or None."""
        with self._read() as s:
            d = s.get(Descriptor, (image_id, space_id))
            if d is None:
                return None
            return (np.frombuffer(d.raw, np.float32).copy(),
                    np.frombuffer(d.grid, np.float16).reshape(d.grid_h, d.grid_w).astype(np.float32))

    # ---- reads for searches and the views ---------------------------------------------------------------
    def image_rows(self, ids) -> dict[int, ImageRow]:
        """id -> ImageRow of those of catalog `ids` that are in the catalog (any status)."""
        out = {}
        with self._read() as s:
            for chunk in chunks([int(i) for i in ids], CHUNK):
                out.update((r[0], _image_row(r)) for r in s.execute(select(*_ROW).where(Image.id.in_(chunk))))
        return out

    def library_row(self, path: str, space_id: int) -> ImageRow | None:
        """The row of the searchable photo at `path` with a descriptor in `space_id`, or None."""
        with self._read() as s:
            r = s.execute(select(*_ROW).join(Descriptor, Descriptor.image_id == Image.id)
                          .where(Image.path == paths.to_db(path), Descriptor.space_id == space_id,
                                 Image.status == "indexed")).first()
        return _image_row(r) if r is not None else None

    def ids_with_digest(self, digest: str) -> list[int]:
        """Searchable photos with exactly these bytes, by id."""
        with self._read() as s:
            return list(s.scalars(select(Image.id).where(Image.digest == digest, Image.status == "indexed").order_by(Image.id)))

    def filter_ids(self, folders: tuple[str, ...] = (), after: float | None = None, before: float | None = None,
                   among: list[int] | None = None) -> np.ndarray:
        """(n,) int64 ids of searchable photos under any of `folders` (by path components) and
        taken in [after, before); with `among`, only those of these ids."""
        q = select(Image.id, Image.path).where(Image.status == "indexed")
        if among is not None:
            q = q.where(Image.id.in_([int(i) for i in among]))
        if after is not None:
            q = q.where(Image.taken >= after)
        if before is not None:
            q = q.where(Image.taken < before)
        if folders:
            q = q.where(or_(*[c for f in folders for c in _under(f)]))
        with self._read() as s:
            rows = s.execute(q).all()
        if folders:  # LIKE found candidates; components decide (and bytes-safe names are decoded)
            rows = [r for r in rows if any(paths.is_within(paths.from_db(r[1]), f) for f in folders)]
        return np.fromiter((r[0] for r in rows), np.int64, len(rows))

    def subfolders(self) -> list[str]:
        """The library folders and every folder under them that holds a searchable photo (with
        the folders between), sorted: the choices of the folder filter."""
        roots = [f.path for f in self.folders()]
        with self._read() as s:
            files = [paths.from_db(p) for p in s.scalars(select(Image.path).where(Image.status == "indexed"))]
        out = set(roots)
        for d in {os.path.dirname(p) for p in files}:
            while d not in out and any(paths.is_within(d, r) for r in roots):
                out.add(d)
                d = os.path.dirname(d)
        return sorted(out)

    def failures(self) -> list[tuple[str, str]]:
        with self._read() as s:
            rows = s.execute(select(Image.path, Image.error).where(Image.status.in_(("failed", "unreadable")))
                             .order_by(Image.path)).all()
        return [(paths.from_db(p), e) for p, e in rows]

    def missing(self) -> list[str]:
        with self._read() as s:
            return [paths.from_db(p) for p in s.scalars(select(Image.path).where(Image.status == "missing").order_by(Image.path))]

    def duplicate_rows(self) -> dict[int, ImageRow]:
        """id -> ImageRow of every searchable photo (what the duplicate finder compares)."""
        with self._read() as s:
            return {r[0]: _image_row(r) for r in s.execute(select(*_ROW).where(Image.status == "indexed"))}

    def stats(self, space_id: int | None, folders: Iterable[FolderInfo]) -> dict:
        """Counts per folder and in total: images, indexed (in `space_id`), failed, missing."""
        sid = space_id if space_id is not None else -1
        folders = list(folders)

        def blank():
            return {"images": 0, "indexed": 0, "failed": 0, "missing": 0}

        per: dict[int, dict] = {f.id: blank() for f in folders}
        with self._read() as s:
            for fid, status, n in s.execute(select(Image.folder_id, Image.status, func.count()).group_by(Image.folder_id, Image.status)):
                d = per.setdefault(fid, blank())
                d["images"] += n
                if status in ("failed", "unreadable", "missing"):
                    d["missing" if status == "missing" else "failed"] += n
            for fid, n in s.execute(select(Image.folder_id, func.count()).join(Descriptor, Descriptor.image_id == Image.id)
                                    .where(Descriptor.space_id == sid, Image.status == "indexed").group_by(Image.folder_id)):
                per.setdefault(fid, blank())["indexed"] = n
        out = [{"id": f.id, "path": f.path, "state": f.state, **per.get(f.id, blank())} for f in folders]
        total = {k: sum(d[k] for d in per.values()) for k in ("images", "indexed", "failed", "missing")}
        return {"folders": out, **total}

    def date_range(self) -> tuple[float, float] | None:
        """(first, last) time a searchable photo was taken (POSIX), or None for an empty library."""
        with self._read() as s:
            lo, hi = s.execute(select(func.min(Image.taken), func.max(Image.taken)).where(Image.status == "indexed",
                                                                                          Image.taken > 0)).first()
        return (float(lo), float(hi)) if lo is not None else None

    def taken_years(self) -> list[int]:
        """The years (local time: today's offset from UTC) in which the searchable photos were
        taken, ascending: the date filter offers those (it offered every year between the first
        and the last, and a year with no photo gave "No results")."""
        with self._read() as s:
            taken = np.fromiter(s.scalars(select(Image.taken).where(Image.status == "indexed", Image.taken > 0)), np.float64)
        offset = int(datetime.now().astimezone().utcoffset().total_seconds())
        local = (taken + offset).astype("datetime64[s]").astype("datetime64[Y]").astype(np.int64)
        return [int(y) + 1970 for y in np.unique(local)]

    # ---- server-side vectors (PostgreSQL: the dialect's pgvector tables) ----------------------------------
    def _server(self):
        if not self.dialect.stores_vectors:
            raise CatalogError("this library keeps its vectors in files, not in the database")
        return self.dialect

    def vector_table(self, space_id: int, white_version: int) -> str:
        return self._server().vec_table(space_id, white_version)

    def vector_table_exists(self, table: str) -> bool:
        return self._server().table_exists(self.engine, table)

    def build_vectors(self, space_id: int, white_version: int, dim: int, chunks, cancelled=None) -> str | None:
        return self._server().build_vectors(self.engine, space_id, white_version, dim, chunks, cancelled)

    def count_vectors(self, table: str) -> int:
        return self._server().count(self.engine, table)

    def vector_ann_exists(self, table: str) -> bool:
        return self._server().has_ann(self.engine, table)

    def vector_ann_width(self, table: str) -> int | None:
        """The leading dimensions the table's graph is built on; 0: all of them; None: no graph."""
        return self._server().ann_width(self.engine, table)

    def build_vector_ann(self, table: str, width: int = 0) -> None:
        with self.engine.connect() as c:
            self._server().build_ann(c, table, width)

    def drop_vector_table(self, table: str) -> None:
        self._server().drop_table(self.engine, table)

    def drop_old_vector_tables(self, space_id: int, keep_from: int) -> None:
        self._server().drop_old_tables(self.engine, space_id, keep_from)

    def search_vectors(self, table: str, q: np.ndarray, k: int, exact: bool, ef: int, filters=None, n_alive: int = 0,
                       exact_below: int = 0, width: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top k of a vector table for the unit query q (D,): (ids, sims, vectors), best first;
        `filters` (records.Filters) restrict it in SQL, exactly when they leave at most
        `exact_below` multiply-adds (photos x D); `width`: the graph's (vector_ann_width)."""
        return self.guard(self._server().search_filtered, self.engine, table, q, k, exact, ef, filters, n_alive,
                          exact_below, width)

    def vectors_of(self, table: str, ids, dim: int) -> tuple[np.ndarray, np.ndarray]:
        return self.guard(self._server().vectors_of, self.engine, table, [int(i) for i in ids], dim)

    def sample_vectors(self, table: str, dim: int, n: int, n_alive: int) -> np.ndarray:
        return self.guard(self._server().sample_vectors, self.engine, table, dim, n, n_alive)

    def iter_vectors(self, table: str, dim: int):
        return self._server().iter_vectors(self.engine, table, dim)


def _take_in_nested(s) -> int:
    """In session `s`: each library folder inside another moves its photos, with their
    descriptions, under the outer one and goes. Returns how many went."""
    folders = [(f.id, paths.from_db(f.path)) for f in s.scalars(select(Folder).where(Folder.state != "excluded"))]
    gone: set[int] = set()
    for fid, path in folders:
        around = [(len(paths.norm(p)), o) for o, p in folders if o != fid and o not in gone and paths.is_within(path, p)]
        if around:  # into the outermost; moved before the folder goes: its row would take the photos with it
            outer = min(around)[1]
            s.execute(update(Image).where(Image.folder_id == fid).values(folder_id=outer))
            s.execute(delete(Folder).where(Folder.id == fid))
            gone.add(fid)
    return len(gone)


def _under(folder: str) -> list:
    """SQL conditions that hold for rows at or under `folder` (a superset: components decide)."""
    stored, pattern = under(folder)
    return [Image.path == stored, Image.path.like(pattern, escape="\\"), Image.path.like("?bytes:%")]


# the columns of an ImageRow, in its fields' order
_ROW = (Image.id, Image.path, Image.folder_id, Image.status, Image.width, Image.height, Image.size, Image.mtime_ns,
        Image.digest, Image.taken, Image.sharpness, Image.camera, Image.border, Image.phash, Image.thumb)


def _image_row(r) -> ImageRow:
    return ImageRow(r[0], paths.from_db(r[1]), *r[2:])


def _lacking(s, space_id: int) -> int:
    """Searchable photos in reachable folders (not offline) with no descriptor in `space_id`."""
    have = select(Descriptor.image_id).where(Descriptor.space_id == space_id)
    return s.scalar(select(func.count()).select_from(Image).join(Folder, Image.folder_id == Folder.id)
                    .where(Image.status == "indexed", Folder.state != "offline", Image.id.not_in(have)))


def _space_row(sp: Space) -> SpaceRow:
    info = SpaceInfo(sp.id, sp.key, sp.backbone, sp.weights_digest, sp.max_side, sp.precision or "f32", sp.threshold,
                     sp.z_ratio, sp.channels, sp.white_version, sp.model_digest or "")
    mu = np.frombuffer(sp.mu, np.float64).copy() if sp.mu else None
    wm = np.frombuffer(sp.white_mean, np.float64).copy() if sp.white_dim else None
    wp = np.frombuffer(sp.white_proj, np.float64).reshape(sp.white_dim, sp.channels).copy() if sp.white_dim else None
    return SpaceRow(info, mu, sp.mu_n or 0, wm, wp, sp.white_n or 0, bool(sp.active), bool(sp.ready), sp.ready_at or 0.0,
                    sp.white_shrink or 0.0)


__all__ = ["Catalog", "dialect_for", "is_url"]
