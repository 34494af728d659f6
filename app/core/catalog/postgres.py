"""What only a PostgreSQL catalog does: its engine (psycopg 3 + pgvector), one-line errors for a
server that cannot be reached, a wrong password or a missing database, the advisory lock that
keeps one writer per library across machines, and the searched vectors in pgvector tables.

Vectors: one table per space and whitening version, `vec_s<space>_w<version>` (image_id, space_id,
emb vector(D)), holding the whitened unit vector of every searchable photo with a descriptor in
that space. Its rows are written inside the same transactions as the catalog rows they follow
(`vectors_added`, `vectors_hidden`, `vectors_restored`; deletions cascade from `descriptors`), so
a reader never sees a half batch and a table that exists is always exact. Those writes whiten the
raw descriptors with the space's stored whitening, read in the same transaction; the caller hands
in how a stored whitening is applied (the catalog knows no whitening: `Catalog.whitening`). A
refit builds the next version's table beside the old one; the space row switches to it in one
commit.
Search: exact (a sequential scan) while the library is small, pgvector's HNSW index above the
size the caller names (the file backend's, index.vectors.EXACT_MAX_WORK); filters in SQL with
iterative index scans.
"""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool

from ..errors import CatalogError, LibraryBusyError, LockLostError, ServerUnreachable, StaleSnapshotError
from . import pgpass
from .lock import describe, whoami
from .queries import chunks, under

LOCK_KEY = 0x4865_6174  # pg_advisory_lock key of the writer ("Heat")
CONNECT_TIMEOUT_S = int(os.environ.get("HEATSEARCH_PG_CONNECT_TIMEOUT", "10"))
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
EF_SEARCH_MAX = 1000  # pgvector's limit; iterative scans go on beyond it
# an iterative scan keeps the candidates it has not yet returned in work_mem x this (4 MB x 16);
# past it, it drops them and finds fewer of the true neighbours (300,000 photos: recall@800 of a
# 6,000-candidate beam 0.922 at x 1, 0.956 at x 8; benchmarks/pg_latency.py)
SCAN_MEM_MULTIPLIER = 16
# ... and gives up after visiting this many tuples per candidate asked (pgvector's default stops
# at 20,000: at a million photos a 2,400-candidate beam then found 0.941 of the top 200, at 20 x
# 0.967; a 9,000-candidate one 0.925 of the top 800 at 4 x, 0.985 at 20 x)
SCAN_TUPLES_PER_CANDIDATE = 20
# a filter is searched exactly up to this many times the work of an unfiltered exact search: a
# graph walk that must skip nine photos of ten for each it keeps visits too many (a million
# photos, 10 % allowed: recall 0.77 in 252 ms by the graph, 1.000 in 234 ms exactly)
FILTER_EXACT_FACTOR = 4
VECTOR_TYPE = os.environ.get("HEATSEARCH_PG_VECTOR", "vector")  # vector | halfvec (README: "Large libraries")
# whether current_user may index: INSERT on the photos, or CREATE where a new library's tables go
CAN_WRITE_SQL = ("SELECT CASE WHEN to_regclass('images') IS NOT NULL "
                 "THEN coalesce(has_table_privilege(current_user, to_regclass('images'), 'INSERT'), false) "
                 "ELSE current_schema() IS NOT NULL AND has_schema_privilege(current_user, current_schema(), 'CREATE') "
                 "END")


def normalise_url(url: str) -> str:
    """postgres://, postgresql:// or postgresql+psycopg:// -> the psycopg 3 driver URL."""
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme.lower() in ("postgres", "postgresql", "postgresql+psycopg") else url


def mask(url: str) -> str:
    """A URL for messages, as the user would write it: postgresql://user:***@host:port/db?... (the
    password hidden, no driver name)."""
    scheme, rest = url.split("://", 1)
    rest = re.sub(r"^([^@/]*?):[^@/]*@", r"\1:***@", rest) if "@" in rest.split("/", 1)[0] else rest
    rest = re.sub(r"([?&]password=)[^&]*", r"\1***", rest)
    return f"postgresql://{rest}" if scheme.lower().startswith("postgres") else f"{scheme}://{rest}"


def vec_table(space_id: int, white_version: int) -> str:
    return f"vec_s{int(space_id)}_w{int(white_version)}"


class PostgresDialect:
    name = "postgresql"
    stores_vectors = True
    vec_table = staticmethod(vec_table)

    def __init__(self, url: str, passfile=None):
        """passfile: a libpq password file (the data folder's) for a URL without a password; used
        only when it holds a line for this URL and neither PGPASSWORD nor PGPASSFILE is set, so
        libpq's own sources (those, ~/.pgpass, pg_service.conf) answer every other URL."""
        self.url = normalise_url(url)
        self.driver_errors = (psycopg.Error,)
        self._whitenings: dict[tuple[int, int], object] = {}
        self._read_only = False
        self.passfile = None
        if passfile is not None and not pgpass.has_password(self.url) and not os.environ.get("PGPASSFILE") \
                and not os.environ.get("PGPASSWORD") and pgpass.lookup(Path(passfile), self.url):
            self.passfile = str(passfile)

    def _connect_args(self) -> dict:
        args = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "heatsearch"}
        if self.passfile:
            args["passfile"] = self.passfile
        return args

    @property
    def user(self) -> str:
        """The user the URL logs in as, for messages ("the user in <url>" when the URL names none)."""
        try:
            return make_url(self.url).username or "in the URL"
        except Exception:  # noqa: BLE001 - only for a message
            return "in the URL"

    @property
    def where(self) -> str:
        return mask(self.url)

    @property
    def server(self) -> str:
        """HOST:PORT of the server, or "this computer" for its Unix socket."""
        u = make_url(self.url)
        host = u.host or (u.query.get("host") if u.query else None) or ""
        if not host or str(host).startswith("/"):
            return "this computer"
        return f"{host}:{u.port or 5432}"

    @property
    def identity(self) -> str:
        """The server and database, without the user: the same library for its indexer and searchers."""
        u = make_url(self.url)
        return f"postgresql://{self.server}/{u.database or ''}"

    # ---- connecting --------------------------------------------------------------------------------
    def engine(self, read_only: bool) -> Engine:
        self._read_only = read_only
        args = self._connect_args()
        if read_only:
            args["options"] = "-c default_transaction_read_only=on"
        if not read_only:  # the extension must exist before its types can be registered
            boot = create_engine(self.url, connect_args=args, poolclass=NullPool)
            with boot.begin() as c:
                # looked up first: CREATE EXTENSION is refused in a read-only session (a searcher)
                # even when the extension is there
                if not c.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'vector'").first():
                    c.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
            boot.dispose()
        engine = create_engine(self.url, connect_args=args, pool_pre_ping=True, pool_size=4, max_overflow=8)

        @event.listens_for(engine, "connect")
        def _register(dbapi_conn, _record):
            try:
                register_vector(dbapi_conn)
            except Exception:  # noqa: BLE001 - a database without pgvector yet: only a writer creates it
                pass
            dbapi_conn.commit()

        return engine

    def check(self) -> None:
        """Reach the server once with a short timeout (one line when it cannot be reached)."""
        try:
            plain = make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
            with psycopg.connect(plain, **self._connect_args()) as con:
                con.execute("SELECT 1")
        except psycopg.Error as e:
            raise self.explain(e) from e

    def is_lock_error(self, e: Exception) -> bool:
        code = getattr(getattr(e, "orig", e), "sqlstate", None)
        return code in ("55P03", "40P01", "40001")

    def explain(self, e: Exception) -> CatalogError:
        """One line saying what is wrong and what to do."""
        orig = getattr(e, "orig", e)
        text = self._scrub(str(orig))
        msg = text.strip().splitlines()[0] if text.strip() else type(orig).__name__
        low = text.lower()
        where = self.where
        if "no password supplied" in low:
            return CatalogError(f"no password for {where}: save it once with `heatsearch server login URL` "
                                "(or set PGPASSWORD, or use ~/.pgpass)")
        if "password authentication failed" in low:
            return CatalogError(f"the PostgreSQL server refused the user or password for {where}; check them "
                                "(`heatsearch server login URL` saves a new password)")
        if "permission denied for database" in low:
            return CatalogError(f"the user {self.user} may not connect to the database of {where}; ask for the "
                                "library's indexer or searcher URL")
        if "does not exist" in low and "database" in low:
            return CatalogError(f"the database in {where} does not exist; create it (createdb) or use the URL that "
                                "`heatsearch server start` printed")
        if "role" in low and "does not exist" in low:
            return CatalogError(f"the PostgreSQL user in {where} does not exist; check the URL")
        if any(w in low for w in ("connection refused", "no such file or directory", "could not connect",
                                  "timeout expired", "could not translate host name", "connection is bad",
                                  "server closed the connection", "terminating connection")):
            return ServerUnreachable(f"cannot reach the PostgreSQL server of {where}: is it running and reachable from "
                                     "here? (`heatsearch server start` runs one)")
        if "permission denied to create extension" in low:
            return CatalogError(f"the database of {where} has no pgvector extension and the user {self.user} may not "
                                "create it; an administrator runs `heatsearch server init ADMIN_URL` once")
        if "permission denied" in low or "must be owner" in low or (
                "read-only transaction" in low and not self._read_only):  # a searcher's sessions are read-only
            return CatalogError(f"the user {self.user} may only search the library {where}; indexing needs the "
                                "indexer's URL")
        if 'extension "vector"' in low or "type \"vector\" does not exist" in low:
            return CatalogError(f"the PostgreSQL server of {where} has no pgvector extension; install pgvector there, "
                                "or use `heatsearch server start` (it ships with it)")
        if "read-only transaction" in low:
            return CatalogError(f"the library {where} is open read-only here")
        if self.is_lock_error(e):
            return CatalogError(f"the library {where} is locked by another program; wait and try again")
        return CatalogError(f"the PostgreSQL library {where} cannot be used: {msg[:200]}")

    def _scrub(self, text: str) -> str:
        """A driver's message without the URL's password (some echo the connection string)."""
        try:
            password = make_url(self.url).password
        except Exception:  # noqa: BLE001 - an unparsable URL: nothing to take out
            password = None
        return text.replace(password, "***") if password else text

    def can_write(self, engine: Engine) -> bool:
        """Whether this URL's user may index: INSERT on the photo table, or, before the library
        has tables, CREATE in the schema they would go in. (An indexer's sessions run as the
        library's owner, so current_user is the owner there.)"""
        with engine.connect() as c:
            ok = c.exec_driver_sql(CAN_WRITE_SQL).scalar()
            c.rollback()
        return bool(ok)

    def compact(self, engine: Engine) -> bool:
        return False  # autovacuum gives dead rows back; nothing to do by hand

    def writer_lock(self, engine: Engine) -> "AdvisoryLock":
        return AdvisoryLock(engine, self.where)

    def prepare_schema(self, conn) -> None:
        """Indexes only PostgreSQL needs: prefix search on paths (folder filters), dates. Inside the
        caller's transaction on `conn`, the one that creates the tables."""
        conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_images_path_prefix ON images (path text_pattern_ops)")
        conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_images_taken ON images (taken)")

    # ---- vectors inside the catalog's transactions --------------------------------------------------
    def _whitening(self, conn, space_id: int, whitening):
        """(table, whitening) of a space's current version, or None when its table does not exist.
        whitening(mean (C,) | None, proj (D, C) | None, channels): what applies a stored whitening
        (None, None: none stored), an object whose `apply` maps (n, C) raw descriptors to the
        table's (n, D) unit vectors."""
        if whitening is None:
            raise CatalogError("this catalog was opened without a whitening: it cannot write a shared library's vectors")
        row = conn.exec_driver_sql("SELECT white_version, white_dim, channels, white_mean, white_proj FROM spaces "
                                   "WHERE id = %(id)s", {"id": int(space_id)}).first()
        if row is None:
            return None
        version, dim, channels, mean, proj = row
        table = vec_table(space_id, version)
        if not _exists(conn, table):
            return None
        key = (int(space_id), int(version))
        if key not in self._whitenings:
            self._whitenings[key] = whitening(np.frombuffer(mean, np.float64) if dim else None,
                                              np.frombuffer(proj, np.float64).reshape(dim, channels) if dim else None,
                                              channels)
        return table, self._whitenings[key]

    def vectors_added(self, s, space_id: int, ids: list[int], raws: list[bytes], whitening) -> None:
        conn = s.connection()
        found = self._whitening(conn, space_id, whitening)
        if found is None or not ids:
            return
        table, w = found
        vecs = w.apply(np.stack([np.frombuffer(r, np.float32) for r in raws]))
        _upsert(conn, table, space_id, ids, vecs)

    def vectors_hidden(self, s, ids: list[int]) -> None:
        conn = s.connection()
        for table in _vector_tables(conn):
            for chunk in chunks(ids, 5000):
                conn.exec_driver_sql(f"DELETE FROM {table} WHERE image_id = ANY(%(ids)s)", {"ids": [int(i) for i in chunk]})

    def vectors_restored(self, s, ids: list[int], whitening) -> None:
        conn = s.connection()
        for sid in [r[0] for r in conn.exec_driver_sql("SELECT id FROM spaces")]:
            found = self._whitening(conn, sid, whitening)
            if found is None:
                continue
            table, w = found
            for chunk in chunks(ids, 5000):
                rows = conn.exec_driver_sql("SELECT image_id, raw FROM descriptors WHERE space_id = %(s)s AND "
                                            "image_id = ANY(%(ids)s)", {"s": sid, "ids": [int(i) for i in chunk]}).all()
                if rows:
                    vecs = w.apply(np.stack([np.frombuffer(r, np.float32) for _, r in rows]))
                    _upsert(conn, table, sid, [i for i, _ in rows], vecs)

    def drop_vectors(self, engine: Engine, space_ids: list[int]) -> None:
        with engine.begin() as c:
            for table in _vector_tables(c):
                if int(table.split("_")[1][1:]) in set(map(int, space_ids)):
                    c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")

    # ---- building and searching (the writer's ServerIndex and the readers' snapshots) ----------------
    def build_vectors(self, engine: Engine, space_id: int, white_version: int, dim: int, chunks,
                      cancelled: Callable[[], bool] | None = None) -> str | None:
        """Create (replacing) the table of (space, version) from `chunks` of (ids, whitened (m, D)
        float32) by binary COPY (its HNSW index: build_ann). Returns the table, or None when
        cancelled (nothing left behind)."""
        table = vec_table(space_id, white_version)
        with engine.connect() as c:
            with c.begin():
                c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
                c.exec_driver_sql(
                    f"CREATE TABLE {table} (image_id BIGINT PRIMARY KEY, space_id BIGINT NOT NULL DEFAULT {int(space_id)}, "
                    f"emb {VECTOR_TYPE}({int(dim)}) NOT NULL, FOREIGN KEY (image_id, space_id) "
                    "REFERENCES descriptors (image_id, space_id) ON DELETE CASCADE)")
                # a 512-d vector (2 KB) would go out of line (TOAST) and be fetched from a second
                # table by every search; kept in the row instead (a row still fits a page)
                c.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN emb SET STORAGE PLAIN")
            raw = c.connection.driver_connection
            for ids, vecs in chunks:
                if cancelled is not None and cancelled():
                    with c.begin():
                        c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
                    return None
                with c.begin():
                    with raw.cursor() as cur, cur.copy(f"COPY {table} (image_id, emb) FROM STDIN WITH (FORMAT BINARY)") as cp:
                        cp.set_types(["int8", VECTOR_TYPE])
                        for i, v in zip(np.asarray(ids).tolist(), np.asarray(vecs, np.float32)):
                            cp.write_row((i, v if VECTOR_TYPE == "vector" else _half(v)))
        return table

    def build_ann(self, c, table: str, width: int = 0) -> None:
        """pgvector's HNSW index over a vector table (inner product), with parallel maintenance
        workers where the server has cores. `width` > 0: the graph is built on the vectors'
        leading `width` dimensions in halfvec (an expression index; index.vectors.graph_width
        says when), and `search` ranks what it finds by all of them."""
        if width:
            key, ops = f"((subvector(emb, 1, {int(width)}))::halfvec({int(width)}))", "halfvec_ip_ops"
        else:
            key, ops = "emb", "vector_ip_ops" if VECTOR_TYPE == "vector" else "halfvec_ip_ops"
        with c.begin():
            # at least 1 GB (a million photos' graph, 0.8 GB, is built in memory), never less than
            # the server's own setting (an administrator raises it for ten million)
            kb = int(c.exec_driver_sql("SELECT setting FROM pg_settings WHERE name = 'maintenance_work_mem'").scalar())
            c.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{max(kb, 2**20)}kB'")
            c.exec_driver_sql(f"SET LOCAL max_parallel_maintenance_workers = {max(0, (os.cpu_count() or 1) - 1)}")
            c.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw ({key} {ops}) "
                              f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")

    def has_ann(self, engine: Engine, table: str) -> bool:
        with engine.connect() as c:
            return c.exec_driver_sql("SELECT to_regclass(%(t)s) IS NOT NULL", {"t": f"{table}_hnsw"}).scalar()

    def ann_width(self, engine: Engine, table: str) -> int | None:
        """The leading dimensions the table's HNSW graph is built on: 0 when it is built on all of
        them, None when there is none."""
        with engine.connect() as c:
            d = c.exec_driver_sql("SELECT pg_get_indexdef(to_regclass(%(t)s))", {"t": f"{table}_hnsw"}).scalar()
        if d is None:
            return None
        m = re.search(r"subvector\(emb, 1, (\d+)\)", d)
        return int(m.group(1)) if m else 0

    def drop_old_tables(self, engine: Engine, space_id: int, keep_from: int) -> None:
        """Drop the space's vector tables of whitening versions below `keep_from` (the previous
        version is kept a while: a reader may still hold a snapshot of it)."""
        with engine.begin() as c:
            for table in _vector_tables(c):
                sid, ver = (int(x[1:]) for x in table.split("_")[1:3])
                if sid == int(space_id) and ver < keep_from:
                    c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")

    def drop_table(self, engine: Engine, table: str) -> None:
        with engine.begin() as c:
            c.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")

    def table_exists(self, engine: Engine, table: str) -> bool:
        with engine.connect() as c:
            return _exists(c, table)

    def count(self, engine: Engine, table: str) -> int:
        with engine.connect() as c:
            return int(c.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar())

    def search(self, engine: Engine, table: str, q: np.ndarray, k: int, exact: bool, ef: int,
               where_sql: str = "", params: dict | None = None, scan_tuples: int = 20_000, width: int = 0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top k of `table` for the unit query `q` (D,): (ids (k,) int64, sims (k,) float32,
        vectors (k, D) float32), best first by exact similarity. `where_sql` restricts the rows
        (the photo table is `i`); exact: a sequential scan; else the HNSW graph asked for `ef`
        candidates (the beam the library's size needs: pgvector's own beam stops at 1,000 and its
        iterative scan goes on), ids and distances only, whose best k are then read with their
        vectors in the same transaction. `width` > 0: the graph is built on the leading `width`
        dimensions (build_ann); its `ef` candidates are ranked by all of them on the server and
        the best k come back with their vectors."""
        join = " JOIN images i ON i.id = v.image_id" if where_sql else ""
        cast = "::halfvec" if VECTOR_TYPE == "halfvec" else ""
        # exact: an ORDER BY expression the HNSW index cannot serve (a scan of every row, exact
        # top k), while the join may still use the b-tree indexes
        order = f"(v.emb <#> %(q)s{cast}) + 0" if exact else f"v.emb <#> %(q)s{cast}"
        where = f"{' WHERE ' + where_sql if where_sql else ''}"
        args = {"q": np.asarray(q, np.float32), "k": int(k), "m": int(max(k, ef)), **(params or {})}
        with engine.connect() as c, c.begin():
            raw = c.connection.driver_connection
            with raw.cursor(binary=True) as cur:
                try:
                    if exact:
                        cur.execute(f"SELECT v.image_id, v.emb{'::vector' if cast else ''} FROM {table} v{join}{where} "
                                    f"ORDER BY {order} LIMIT %(k)s", args)
                        rows = cur.fetchall()
                    else:
                        c.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {int(min(max(ef, 10), EF_SEARCH_MAX))}")
                        c.exec_driver_sql("SET LOCAL hnsw.iterative_scan = relaxed_order")
                        c.exec_driver_sql(f"SET LOCAL hnsw.max_scan_tuples = "
                                          f"{int(max(scan_tuples, SCAN_TUPLES_PER_CANDIDATE * args['m']))}")
                        c.exec_driver_sql(f"SET LOCAL hnsw.scan_mem_multiplier = {SCAN_MEM_MULTIPLIER}")
                        if width:
                            args["ql"] = _half(np.asarray(q, np.float32)[: int(width)])
                            cur.execute(leading_sql(table, int(width), join + where), args)
                            rows = cur.fetchall()
                        else:
                            # the graph's candidates come in relaxed order: keep the best k of m by distance
                            cur.execute(f"SELECT v.image_id, {order} FROM {table} v{join}{where} ORDER BY {order} LIMIT %(m)s", args)
                            cand = cur.fetchall()
                            best = [r[0] for r in sorted(cand, key=lambda r: r[1])[: int(k)]]
                            cur.execute(f"SELECT image_id, emb{'::vector' if cast else ''} FROM {table} "
                                        f"WHERE image_id = ANY(%(ids)s)", {"ids": best})
                            rows = cur.fetchall()
                except psycopg.errors.UndefinedTable as e:
                    raise StaleSnapshotError(f"the search table {table} was replaced") from e
        ids, vecs = _rows(rows, len(q))
        sims = vecs @ np.asarray(q, np.float32)
        order = np.argsort(-sims, kind="stable")
        return ids[order], sims[order], vecs[order]

    def search_filtered(self, engine: Engine, table: str, q: np.ndarray, k: int, exact: bool, ef: int, filters,
                        n_alive: int, exact_below: int, width: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`search` restricted by folder and date filters: a filter that leaves few photos (at most
        FILTER_EXACT_FACTOR x `exact_below` multiply-adds: photos x D) is searched exactly;
        otherwise the HNSW scan goes on (iteratively) until k rows pass."""
        if filters is None or not filters.active:
            return self.search(engine, table, q, k, exact, ef, width=width)
        conds, params = ["i.status = 'indexed'"], {}
        if filters.after is not None:
            conds.append("i.taken >= %(after)s")
            params["after"] = float(filters.after)
        if filters.before is not None:
            conds.append("i.taken < %(before)s")
            params["before"] = float(filters.before)
        if filters.folders:
            ors = []
            for n, f in enumerate(filters.folders):
                params[f"f{n}"], params[f"l{n}"] = under(f)
                ors.append(f"(i.path = %(f{n})s OR i.path LIKE %(l{n})s ESCAPE '\\')")
            conds.append("(" + " OR ".join(ors) + ")")
        where = " AND ".join(conds)
        with engine.connect() as c:
            with c.connection.driver_connection.cursor() as cur:
                cur.execute(f"SELECT count(*) FROM images i WHERE {where}", params)
                allowed = int(cur.fetchone()[0])
            c.rollback()
        if allowed == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, len(q)), np.float32)
        exact = exact or allowed * len(q) <= FILTER_EXACT_FACTOR * exact_below
        scan = int(min(2_000_000, max(20_000, SCAN_TUPLES_PER_CANDIDATE * max(k, ef) * max(n_alive, allowed) / allowed)))
        return self.search(engine, table, q, k, exact, ef, where, params, scan, width)

    def vectors_of(self, engine: Engine, table: str, ids: list[int], dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids found (m,), their vectors (m, D)) in the order of `ids`."""
        if not ids:
            return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        cast = "::vector" if VECTOR_TYPE == "halfvec" else ""
        with engine.connect() as c:
            raw = c.connection.driver_connection
            with raw.cursor(binary=True) as cur:
                try:
                    cur.execute(f"SELECT image_id, emb{cast} FROM {table} WHERE image_id = ANY(%(ids)s)",
                                {"ids": [int(i) for i in ids]})
                except psycopg.errors.UndefinedTable as e:
                    raise StaleSnapshotError(f"the search table {table} was replaced") from e
                rows = cur.fetchall()
            c.rollback()
        got, vecs = _rows(rows, dim)
        order = {int(i): n for n, i in enumerate(got)}
        keep = [order[int(i)] for i in ids if int(i) in order]
        return got[keep], vecs[keep]

    def sample_vectors(self, engine: Engine, table: str, dim: int, n: int, n_alive: int) -> np.ndarray:
        """(m <= n, D) vectors of the similarity scale's sample, by id: the rule of
        library.snapshot.sample_ids (the table's ids sorted, every (count // n)-th from the first,
        at most n), so that a SQLite library's snapshot takes the same photos. The count is the
        table's own, read in the same statement (`n_alive` is not needed)."""
        cast = "::vector" if VECTOR_TYPE == "halfvec" else ""
        n = max(int(n), 1)
        with engine.connect() as c:
            raw = c.connection.driver_connection
            with raw.cursor(binary=True) as cur:
                try:
                    cur.execute(f"SELECT v.image_id, v.emb{cast} FROM {table} v JOIN ("
                                f"SELECT image_id FROM (SELECT image_id, row_number() OVER (ORDER BY image_id) - 1 AS r, "
                                f"count(*) OVER () AS m FROM {table}) x WHERE r %% greatest(1, m / %(n)s) = 0 "
                                f"ORDER BY image_id LIMIT %(n)s) s ON s.image_id = v.image_id ORDER BY v.image_id",
                                {"n": n})
                except psycopg.errors.UndefinedTable as e:
                    raise StaleSnapshotError(f"the search table {table} was replaced") from e
                rows = cur.fetchall()
            c.rollback()
        return _rows(rows, dim)[1]

    def iter_vectors(self, engine: Engine, table: str, dim: int, chunk: int = 20_000):
        """(ids, vectors) of the whole table in chunks, by id (duplicates, exports)."""
        cast = "::vector" if VECTOR_TYPE == "halfvec" else ""
        last = -1
        while True:
            with engine.connect() as c:
                raw = c.connection.driver_connection
                with raw.cursor(binary=True) as cur:
                    cur.execute(f"SELECT image_id, emb{cast} FROM {table} WHERE image_id > %(a)s ORDER BY image_id LIMIT %(n)s",
                                {"a": last, "n": chunk})
                    rows = cur.fetchall()
                c.rollback()
            if not rows:
                return
            ids, vecs = _rows(rows, dim)
            last = int(ids[-1])
            yield ids, vecs


class AdvisoryLock:
    """One writer per PostgreSQL library, across machines: a session-level advisory lock held on
    its own connection for as long as the writer lives (the server drops it when that connection
    ends, so a killed writer leaves no stale lock). The holder says who it is in the connection's
    application_name, which the server shows beside the lock (pg_locks + pg_stat_activity), so
    the description is always of the current holder."""

    def __init__(self, engine: Engine, where: str):
        self.engine = engine
        self.where = where
        self._conn = None
        self._mutex = threading.Lock()

    @property
    def held(self) -> bool:
        return self._conn is not None

    def holder(self) -> dict:
        try:
            with self.engine.connect() as c:
                name = c.exec_driver_sql(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %(k)s AND l.database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1", {"k": LOCK_KEY}).scalar()
            return _parse_holder(name or "")
        except Exception:  # noqa: BLE001 - only for a message
            return {}

    def describe_holder(self) -> str:
        return describe(self.holder())

    def acquire(self, wait: float = 0.0, on_wait: Callable[[str], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> None:
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        deadline = time.monotonic() + wait
        told = False
        try:
            while not conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({LOCK_KEY})").scalar():
                if time.monotonic() >= deadline or (cancelled and cancelled()):
                    raise LibraryBusyError(f"the library {self.where} is in use by {self.describe_holder()}")
                if not told and on_wait:
                    on_wait(self.describe_holder())
                    told = True
                time.sleep(0.5)
            conn.exec_driver_sql("SELECT set_config('application_name', %(v)s, false)", {"v": _holder_name(whoami())})
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def check(self) -> None:
        """Raise LockLostError unless this writer still holds the lock: its connection answers and
        its backend is the lock's holder (a dropped connection, a restarted server or a backend
        terminated by an administrator each let another writer take it). Before each write."""
        conn = self._conn
        held = False
        if conn is not None:
            try:
                held = bool(conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %(k)s "
                    "AND pid = pg_backend_pid()", {"k": LOCK_KEY}).scalar())
            except Exception:  # noqa: BLE001 - a connection that does not answer holds nothing
                held = False
        if not held:
            self.release()
            raise LockLostError(f"the writer lock of {self.where} was lost (the connection to the server dropped): "
                                "nothing more is written until it is held again")

    def release(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({LOCK_KEY})")
            except Exception:  # noqa: BLE001 - closing the connection releases it anyway
                pass
            finally:
                conn.close()


def _holder_name(h: dict) -> str:
    """A holder record in PostgreSQL's application_name (63 bytes at most)."""
    text = f"hs|{h['pid']}|{h['host'][:20]}|{int(h['since'])}|{h.get('user', '')[:16]}|{h['command']}"
    return text.encode()[:63].decode(errors="ignore")


def _parse_holder(name: str) -> dict:
    parts = name.split("|", 5)
    if len(parts) != 6 or parts[0] != "hs":
        return {}
    return {"pid": parts[1], "host": parts[2], "since": float(parts[3]), "user": parts[4], "command": parts[5]}


# ---- helpers ------------------------------------------------------------------------------------

def _exists(conn, table: str) -> bool:
    return bool(conn.exec_driver_sql("SELECT to_regclass(%(t)s) IS NOT NULL", {"t": table}).scalar())


def _vector_tables(conn) -> list[str]:
    return [r[0] for r in conn.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'vec\\_s%%\\_w%%'")]


def leading_sql(table: str, width: int, join_where: str = "") -> str:
    """The search of a graph on the leading `width` dimensions (build_ann): its %(m)s nearest by
    them for %(ql)s (the query's leading dimensions, halfvec), of which the server returns the
    %(k)s nearest to %(q)s by all of them, with their vectors (float32)."""
    cast = "::halfvec" if VECTOR_TYPE == "halfvec" else ""
    lead = f"(subvector(v.emb, 1, {width}))::halfvec({width}) <#> %(ql)s"
    return (f"SELECT c.image_id, c.emb{'::vector' if cast else ''} FROM (SELECT v.image_id, v.emb FROM {table} v{join_where} "
            f"ORDER BY {lead} LIMIT %(m)s) c ORDER BY c.emb <#> %(q)s{cast} LIMIT %(k)s")


def _upsert(conn, table: str, space_id: int, ids, vecs: np.ndarray) -> None:
    raw = conn.connection.driver_connection
    cast = "::halfvec" if VECTOR_TYPE == "halfvec" else ""
    with raw.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} (image_id, space_id, emb) VALUES (%s, %s, %s{cast}) "
                        "ON CONFLICT (image_id) DO UPDATE SET emb = EXCLUDED.emb",
                        [(int(i), int(space_id), np.asarray(v, np.float32)) for i, v in zip(ids, vecs)])


def _half(v: np.ndarray):
    return HalfVector(np.asarray(v, np.float16))


def _rows(rows, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids (m,) int64, vectors (m, D) float32) of (image_id, Vector) rows."""
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    vecs = np.stack([r[1].to_numpy() if hasattr(r[1], "to_numpy") else np.asarray(r[1], np.float32) for r in rows])
    return ids, vecs.astype(np.float32, copy=False)
