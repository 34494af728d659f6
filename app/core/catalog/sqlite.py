"""What only a SQLite catalog does: its engine (WAL, busy timeout, foreign keys), the integrity
check at open, telling a lock from damage, VACUUM, and the file lock that keeps one writer per
data folder. Everything else the Catalog does is portable SQL."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from ..errors import CatalogError
from .lock import LibraryLock

# How long a statement waits for another program's lock before the writer reports it and retries.
BUSY_TIMEOUT_MS = int(os.environ.get("HEATSEARCH_BUSY_MS", "30000"))
# quick_check reads every page (~1 s per 300 MB here); larger catalogs are checked as they are read.
QUICK_CHECK_MAX = 1 << 30


class SqliteDialect:
    name = "sqlite"
    stores_vectors = False  # vectors live in files beside the catalog (index/vectors.py)
    driver_errors = (sqlite3.Error,)

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def identity(self) -> str:
        return str(self.path.resolve())

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def engine(self, read_only: bool) -> Engine:
        """The engine; a read-only one never creates or writes the file. A 0-byte file is a damaged
        catalog, not a new one (a new catalog has no file at all)."""
        if self.path.exists() and self.path.stat().st_size == 0:
            raise CatalogError(f"the catalog {self.path} is empty (0 bytes): it is damaged, not new; "
                               "restore it from a backup, or move it aside and run `heatsearch index` to rebuild it "
                               "from your photos")
        if read_only and not self.path.exists():
            raise CatalogError(f"no catalog in {self.path.parent}: nothing is indexed there yet")
        url = f"sqlite:///file:{self.path}?mode=ro&uri=true" if read_only else f"sqlite:///{self.path}"
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _pragmas_ro if read_only else _pragmas)
        return engine

    def check(self) -> None:
        """Read the catalog's own integrity check (on a read-only connection, before anything could
        write); CatalogError (damaged, with the way out) unless it says ok."""
        if not self.path.exists():
            return
        try:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                con.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                if self.path.stat().st_size <= QUICK_CHECK_MAX:
                    rows = [r[0] for r in con.execute("PRAGMA quick_check(4)")]
                else:
                    rows = ["ok"] if con.execute("SELECT count(*) FROM sqlite_master").fetchone() else ["no schema"]
            finally:
                con.close()
        except sqlite3.Error as e:
            raise self.explain(e) from e
        if rows != ["ok"]:
            lines = [ln.strip() for r in rows for ln in str(r).splitlines() if ln.strip() and not ln.startswith("***")]
            raise damaged(self.path, (lines[0] if lines else "integrity check failed")[:120])

    def is_lock_error(self, e: Exception) -> bool:
        text = str(getattr(e, "orig", e) or e).lower()
        return "locked" in text or "busy" in text

    def explain(self, e: Exception) -> CatalogError:
        """A one-line CatalogError for a database exception, saying what to do."""
        text = str(getattr(e, "orig", e) or e).lower()
        if self.is_lock_error(e):
            return CatalogError(f"the catalog {self.path} is locked by another program; close it (or wait) and try again")
        if "not a database" in text or "malformed" in text or "corrupt" in text or "disk image" in text:
            return damaged(self.path, "")
        if "readonly" in text or "read-only" in text or "unable to open" in text:
            return CatalogError(f"cannot open the catalog {self.path} for writing: check the folder's permissions")
        return CatalogError(f"the catalog {self.path} cannot be used: {str(getattr(e, 'orig', e)).splitlines()[0][:200]}")

    def compact(self, engine: Engine) -> bool:
        """VACUUM when more than a quarter of the file is free pages. Returns whether it ran."""
        with engine.connect() as conn:
            free = conn.exec_driver_sql("PRAGMA freelist_count").scalar() or 0
            total = conn.exec_driver_sql("PRAGMA page_count").scalar() or 1
        if free <= 0.25 * total:
            return False
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM")
        return True

    def can_write(self, engine: Engine) -> bool:
        """Whether this process may write the catalog: the file (when it exists) and its folder
        (SQLite writes its journal and WAL beside the file; a new catalog is created there), or
        the nearest folder above that exists when that folder is not there yet."""
        folder = self.path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if self.path.exists() and not os.access(self.path, os.W_OK):
            return False
        return os.access(folder, os.W_OK | os.X_OK)

    def prepare_schema(self, conn) -> None:
        pass  # the models' own indexes are enough

    @staticmethod
    def begin(conn) -> None:
        """Open the transaction on `conn` now. pysqlite begins one only before INSERT, UPDATE or
        DELETE: without this, each CREATE commits on its own and each SELECT reads the latest
        commit, so neither a creation nor a set of reads would be one transaction."""
        conn.exec_driver_sql("BEGIN")

    def writer_lock(self, engine: Engine) -> LibraryLock:
        return LibraryLock(self.path.parent)

    # Vectors are kept in files by the writer after each commit: nothing happens in the transaction.
    def vectors_added(self, s, space_id: int, ids: list[int], raws: list[bytes], whitening) -> None:
        pass

    def vectors_hidden(self, s, ids: list[int]) -> None:
        pass

    def vectors_restored(self, s, ids: list[int], whitening) -> None:
        pass

    def drop_vectors(self, engine: Engine, space_ids: list[int]) -> None:
        pass  # the writer removes the files of dropped spaces


def damaged(path, detail: str) -> CatalogError:
    why = f" ({detail})" if detail else ""
    return CatalogError(f"the catalog {path} is damaged{why}; nothing was changed. Restore it from a backup, or move it "
                        "aside (your photos are not affected) and run `heatsearch index` to rebuild it from your photos")


def _pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses at most the last commit, never corrupts
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.close()


def _pragmas_ro(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cur.close()
