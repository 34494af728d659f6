"""Opening the catalog: engine with WAL, busy timeout and foreign keys; schema version check."""
from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from ..errors import CatalogError
from .models import SCHEMA_VERSION, Base, Meta

# Migrations from version v to v + 1, as SQL statements. Version 1 is the first schema.
MIGRATIONS: dict[int, list[str]] = {}


def _pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crash loses at most the last commit, never corrupts
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def open_catalog(path: Path) -> sessionmaker[Session]:
    """Open (creating or migrating) the catalog at `path`. Raises CatalogError for a newer schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    engine: Engine = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 10})
    event.listen(engine, "connect", _pragmas)
    Base.metadata.create_all(engine)
    factory = sessionmaker(engine, expire_on_commit=False)
    with factory.begin() as s:
        row = s.get(Meta, "schema_version")
        if row is None:
            s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
            return factory
        version = int(row.value)
    if version > SCHEMA_VERSION:
        raise CatalogError(f"the catalog {path} was written by a newer HeatSearch (schema {version} > {SCHEMA_VERSION})")
    with engine.begin() as conn:
        for v in range(version, SCHEMA_VERSION):
            for stmt in MIGRATIONS.get(v, []):
                conn.exec_driver_sql(stmt)
    with factory.begin() as s:
        s.get(Meta, "schema_version").value = str(SCHEMA_VERSION)
    return factory


def schema_version(factory: sessionmaker[Session]) -> int:
    with factory() as s:
        return int(s.scalar(select(Meta.value).where(Meta.key == "schema_version")))
