"""Schema migrations from version v to v + 1, written once for every dialect: columns are added
with their SQLAlchemy type compiled for the database at hand, so the same step runs on SQLite
and on PostgreSQL. A catalog is migrated in one transaction."""
from __future__ import annotations

from sqlalchemy import BigInteger, Float, Integer, LargeBinary, String, func, insert, inspect, literal, select, update
from sqlalchemy.engine import Connection, Engine

from .models import SCHEMA_VERSION, Base, Descriptor, Meta, Space, State


def add_column(conn: Connection, table: str, name: str, type_, default) -> None:
    """ALTER TABLE table ADD COLUMN name TYPE DEFAULT default, in the database's own words; nothing
    when the table has it (a catalog marked older than its tables, e.g. by a restored meta row)."""
    if name in {c["name"] for c in inspect(conn).get_columns(table)}:
        return
    d = conn.dialect
    sql_type = type_.compile(dialect=d)
    lit = literal(default, type_).compile(dialect=d, compile_kwargs={"literal_binds": True})
    conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type} DEFAULT {lit}")


def _v1(conn: Connection) -> None:
    add_column(conn, "folders", "state", String(), "ok")
    add_column(conn, "images", "taken", Float(), 0.0)
    add_column(conn, "images", "sharpness", Float(), 0.0)
    add_column(conn, "spaces", "precision", String(), "f32")
    add_column(conn, "spaces", "generation", BigInteger(), 0)
    add_column(conn, "spaces", "mu_n", Integer(), 0)
    add_column(conn, "descriptors", "gen", BigInteger(), 0)
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_descriptors_space_gen ON descriptors (space_id, gen)")


def _v2(conn: Connection) -> None:
    add_column(conn, "images", "phash", BigInteger(), 0)
    add_column(conn, "images", "thumb", LargeBinary(), b"")


def _v3(conn: Connection) -> None:
    """One library-wide generation instead of one per space (a change made in one space could
    leave another space's vector files trusted); spaces that answered searches stay ready."""
    add_column(conn, "spaces", "ready", Integer(), 0)
    add_column(conn, "spaces", "ready_at", Float(), 0.0)
    Base.metadata.create_all(conn, tables=[State.__table__])
    top = conn.execute(select(func.max(Space.generation))).scalar() or 0
    # above every generation a vector file may record: each is reconciled once at its next use
    conn.execute(insert(State).values(id=1, generation=int(top) + 1))
    used = select(Descriptor.space_id).distinct().scalar_subquery()
    conn.execute(update(Space).where(Space.id.in_(used)).values(ready=1, ready_at=func.coalesce(Space.ready_at, 0.0)))


def _v4(conn: Connection) -> None:
    """Signatures of the photo's content (borders left out, an orientation-free hash) and the
    camera: rows indexed before keep their old signatures, marked by border -1."""
    add_column(conn, "images", "border", Float(), -1.0)
    add_column(conn, "images", "camera", String(), "")


def _v5(conn: Connection) -> None:
    """The whitening's shrinkage, stored: every whitening fitted before was fitted with 1.0, and is
    refitted with the policy's at the next indexing run."""
    add_column(conn, "spaces", "white_shrink", Float(), 1.0)


def _v6(conn: Connection) -> None:
    """An int8 space's own model (none before: int8 spaces are new in schema 7)."""
    add_column(conn, "spaces", "model", LargeBinary(), b"")
    add_column(conn, "spaces", "model_digest", String(), "")


STEPS = {1: _v1, 2: _v2, 3: _v3, 4: _v4, 5: _v5, 6: _v6}


def migrate(engine: Engine, version: int) -> None:
    """Bring a catalog at `version` to SCHEMA_VERSION."""
    with engine.begin() as conn:
        for v in range(version, SCHEMA_VERSION):
            STEPS[v](conn)
        conn.execute(update(Meta).where(Meta.key == "schema_version").values(value=str(SCHEMA_VERSION)))
