"""Opening the catalog: engine with WAL, busy timeout and foreign keys; schema version check and
migrations; one-line errors (with what to do) for a catalog that is locked, corrupt or newer."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ..errors import CatalogError
from .models import SCHEMA_VERSION, Base, Meta

# Migrations from version v to v + 1, as SQL statements (run in one transaction).
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "ALTER TABLE folders ADD COLUMN state VARCHAR DEFAULT 'ok'",
        "ALTER TABLE images ADD COLUMN taken FLOAT DEFAULT 0",
        "ALTER TABLE images ADD COLUMN sharpness FLOAT DEFAULT 0",
        "ALTER TABLE spaces ADD COLUMN precision VARCHAR DEFAULT 'f32'",
        "ALTER TABLE spaces ADD COLUMN generation INTEGER DEFAULT 0",
        "ALTER TABLE spaces ADD COLUMN mu_n INTEGER DEFAULT 0",
        "ALTER TABLE descriptors ADD COLUMN gen INTEGER DEFAULT 0",
        "CREATE INDEX IF NOT EXISTS ix_descriptors_space_gen ON descriptors (space_id, gen)",
    ],
    2: [
        "ALTER TABLE images ADD COLUMN phash INTEGER DEFAULT 0",
        "ALTER TABLE images ADD COLUMN thumb BLOB DEFAULT x''",
    ],
}
import os

# How long a statement waits for another program's lock before the writer reports it and retries.
BUSY_TIMEOUT_MS = int(os.environ.get("HEATSEARCH_BUSY_MS", "30000"))


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


def explain(path: Path, e: Exception) -> CatalogError:
    """A one-line CatalogError for a database exception, saying what to do."""
    text = str(getattr(e, "orig", e) or e).lower()
    if "locked" in text or "busy" in text:
        return CatalogError(f"the catalog {path} is locked by another program; close it (or wait) and try again")
    if "not a database" in text or "malformed" in text or "corrupt" in text or "disk image" in text:
        return CatalogError(f"the catalog {path} is damaged; move it aside (your photos are not affected) and run "
                            f"`heatsearch index` again to rebuild it, or restore it from a backup")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return CatalogError(f"cannot open the catalog {path} for writing: check the folder's permissions")
    return CatalogError(f"the catalog {path} cannot be used: {str(getattr(e, 'orig', e)).splitlines()[0][:200]}")


def open_catalog(path: Path, read_only: bool = False) -> sessionmaker[Session]:
    """Open (creating or migrating) the catalog at `path`. Raises CatalogError (one line) for a
    newer schema, a damaged or locked file. read_only: never creates or writes."""
    path = Path(path)
    if read_only and not path.exists():
        raise CatalogError(f"no catalog in {path.parent}: nothing is indexed there yet")
    url = f"sqlite:///file:{path}?mode=ro&uri=true" if read_only else f"sqlite:///{path}"
    try:
        engine: Engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _pragmas_ro if read_only else _pragmas)
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA quick_check(1)" if path.stat().st_size < (64 << 20) else "SELECT 1 FROM sqlite_master LIMIT 1")
        factory = sessionmaker(engine, expire_on_commit=False)
        if read_only:
            with factory() as s:
                _check_version(path, int(s.scalar(select(Meta.value).where(Meta.key == "schema_version")) or 0))
            return factory
        if _is_new(engine):  # an existing catalog is migrated first: its old tables lack new columns
            Base.metadata.create_all(engine)
        with factory.begin() as s:
            row = s.get(Meta, "schema_version")
            if row is None:
                s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
                return factory
            version = int(row.value)
        _check_version(path, version)
        if version < SCHEMA_VERSION:
            with engine.begin() as conn:
                for v in range(version, SCHEMA_VERSION):
                    for stmt in MIGRATIONS.get(v, []):
                        conn.exec_driver_sql(stmt)
                conn.exec_driver_sql("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        Base.metadata.create_all(engine, checkfirst=True)
        return factory
    except CatalogError:
        raise
    except (DatabaseError, OperationalError, sqlite3.Error, ValueError) as e:
        raise explain(path, e) from e


def _is_new(engine: Engine) -> bool:
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").scalar() == 0


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise CatalogError(f"the catalog {path} was written by a newer HeatSearch (schema {version} > {SCHEMA_VERSION}); "
                           "update HeatSearch or use another --home")


def schema_version(factory: sessionmaker[Session]) -> int:
    with factory() as s:
        return int(s.scalar(select(Meta.value).where(Meta.key == "schema_version")))
