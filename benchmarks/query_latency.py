"""Query latency excluding the CNN, with the search backend the app picks for the library's size:
shortlist (exact or HNSW) + alpha-QE + HeR at D = 512, p50 and p95; recall of the shortlist
against exact search at k = 200 (the app's HeR shortlist) and k = 800 (the paper's); memory.

    python benchmarks/query_latency.py --n 10000 100000 1000000
    python benchmarks/query_latency.py --n 1000000 --sweep 1600 3200 4800 --graph-file /tmp/g --build-threads 2

The second form tunes the search beam: it measures the graph alone at fixed beams, and keeps the
graph in /tmp/g.<n>x<d> so that the next run loads it (checked against the data) instead of
building it again (an hour at 1M).

Synthetic data: unit vectors from a mixture of n / 50 Gaussian clusters (retrieval descriptors are
clustered, not uniform: ~50 views per "place"), queries are perturbed database vectors, each
dimension scaled as whitened descriptors are (`--spectrum shared`, the default: dimension i's
energy ~ (1 + i / (D / 4))^-1.8, within 0.016 of the cumulative energy of the 2,691 shared photos
whitened at D = 512, 0.81 of it in the first half; `--spectrum flat`: every dimension alike, the
data of the figures before issue 47). Same path as the app: Snapshot.search (exact below
vectors.EXACT_MAX_WORK multiply-adds, HNSW above, on the graph's dimensions: vectors.graph_width),
alpha-QE (n = 2) as the heat source, HeR on the original shortlist.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.aggregate.descriptor import l2n  # noqa: E402
from app.core.index.vectors import VectorStore, choose_backend  # noqa: E402
from app.core.library.snapshot import Snapshot  # noqa: E402
from app.core.rerank.her import her_rerank  # noqa: E402
from app.core.rerank.qe import expand_query  # noqa: E402


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def spectrum(d: int, kind: str) -> np.ndarray:
    """(d,) float32 scale of each dimension: the square root of its share of the energy, times d."""
    if kind == "flat":
        return np.ones(d, np.float32)
    e = (1 + np.arange(d) / (d / 4)) ** -1.8
    return np.sqrt(e * d / e.sum()).astype(np.float32)


def synth(n, d, rng, scale=None):
    """(n, d) float32 unit rows (the module's docstring); scale: `spectrum`'s, None for every
    dimension alike (benchmarks/pg_latency.py's data, as its figures were measured)."""
    scale = np.ones(d, np.float32) if scale is None else scale
    clusters = max(1, n // 50)
    centres = l2n(rng.normal(size=(clusters, d))).astype(np.float32)
    out = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        out[s: s + m] = l2n((centres[rng.integers(0, clusters, m)] + (0.5 / np.sqrt(d)) * rng.normal(size=(m, d)).astype(np.float32)) * scale)
    return out


def exact_up_to(work: int) -> None:
    """Search exactly only up to `work` multiply-adds (the app's vectors.EXACT_MAX_WORK, 26
    million: 50,000 photos at D = 512), the graph above: --smoke reaches the graph's code with a
    few thousand photos."""
    from app.core.index import vectors
    from app.core.library import snapshot

    vectors.EXACT_MAX_WORK = snapshot.EXACT_MAX_WORK = work


def top(sims: np.ndarray, k: int) -> np.ndarray:
    """The rows of the k largest `sims` (all of them when there are fewer)."""
    return np.argpartition(-sims, min(k, len(sims)) - 1)[:k]


def build_graph(store, n, a):
    """The app's graph (store.build_graph), optionally on more threads or loaded from a file."""
    from app.core.index import vectors

    vecs, _ = store.view()
    width = vectors.graph_width(vecs)
    built = vectors.HNSW_EF_CONSTRUCTION if width == store.dim else vectors.PREFIX_EF_CONSTRUCTION
    path = a.graph_file and a.graph_file.with_name(
        f"{a.graph_file.name}.{n}x{store.dim}.{a.spectrum}.w{width}.M{vectors.HNSW_M}.ef{built}")
    if path and path.exists():
        import hnswlib

        index = hnswlib.Index(space="ip", dim=width)
        index.load_index(str(path), max_elements=max(1024, int(n * 1.25)))
        rows = np.random.default_rng(1).choice(n, 16, replace=False)
        if index.element_count != n or not np.allclose(np.asarray(index.get_items(rows)), vecs[rows, :width], atol=1e-6):
            sys.exit(f"{path} holds a graph of other vectors: delete it")
        store.graph = vectors.HnswGraph(store.dim, index=index)
        return "loaded"
    store.build_graph(threads=a.build_threads)  # as the app builds it
    if path:
        store.graph.index.save_index(str(path))
    return "built"


def sweep(graph, data, queries, beams):
    """Recall of the graph alone (on its dimensions; on fewer than D its whole beam ranked by
    the full vectors, as the app does) against exact search at k = 200 and 800 for fixed beams."""
    index, width = graph.index, graph.width
    exact = {}
    sims = data @ queries.T  # (n, q)
    for k in (200, 800):
        exact[k] = [set(top(sims[:, j], k).tolist()) for j in range(len(queries))]
    for ef in beams:
        index.set_ef(ef)
        row = []
        for k in (200, 800):
            if k > ef:
                continue
            t, r = [], []
            for j, q in enumerate(queries):
                t0 = time.perf_counter()
                labels, _ = index.knn_query(q[:width].reshape(1, -1), k=min(k if width == len(q) else ef, len(data)))
                labels = labels[0]
                if width < len(q):
                    labels = labels[top(data[labels] @ q, k)]
                t.append(time.perf_counter() - t0)
                r.append(len(exact[k][j] & set(labels.tolist())) / len(exact[k][j]))
            row.append(f"top-{k}: recall {np.mean(r):.3f} (min {np.min(r):.3f}), p50 {np.percentile(t, 50) * 1000:.1f} ms, "
                       f"p95 {np.percentile(t, 95) * 1000:.1f} ms")
        print(f"  ef = {ef}: " + "; ".join(row), flush=True)


def filtered(snap, queries, frac, k):
    """A folder filter: the first `frac` of the slots allowed; p50 and recall of the top k among them."""
    allowed = np.zeros(snap.n_alive, bool)
    allowed[: int(frac * len(allowed))] = True
    rows = np.nonzero(allowed)[0]
    t, r = [], []
    for q in queries:
        t0 = time.perf_counter()
        got, _ = snap.search_slots(q, k, allowed)
        t.append(time.perf_counter() - t0)
        sims = snap.vectors[rows] @ q
        want = set(rows[top(sims, k)].tolist())
        r.append(len(set(got.tolist()) & want) / len(want))
    print(f"  {frac:.0%} of the library allowed: top-{k} p50 {np.percentile(t, 50) * 1000:.1f} ms, "
          f"p95 {np.percentile(t, 95) * 1000:.1f} ms, recall {np.mean(r):.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--spectrum", choices=("shared", "flat"), default="shared",
                    help="each dimension's energy: as the shared photos' whitened descriptors (default), or all alike")
    ap.add_argument("--k", type=int, default=200, help="HeR shortlist (the app's)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--sweep", type=int, nargs="*", default=[],
                    help="also measure these fixed HNSW beams (ef): recall@200/@800 and graph latency")
    ap.add_argument("--graph-file", type=Path, help="keep the built graph here and reuse it (tuning runs)")
    ap.add_argument("--build-threads", type=int, help="threads for the graph build (default: every core, as the app)")
    ap.add_argument("--m", type=int, help="the graph's M (default: the app's vectors.HNSW_M)")
    ap.add_argument("--ef-construction", type=int, help="the graph's ef_construction (default: the app's)")
    ap.add_argument("--filtered", type=float, nargs="*", default=[],
                    help="also time searches allowed only this fraction of the library (a folder filter)")
    ap.add_argument("--smoke", action="store_true",
                    help="a check that it runs (tests/test_benchmarks.py): 1,000 photos searched exactly and 3,000 "
                         "by the graph, 10 queries, a filter and a beam")
    a = ap.parse_args()
    from app.core.index import vectors

    vectors.HNSW_M = a.m or vectors.HNSW_M
    vectors.HNSW_EF_CONSTRUCTION = a.ef_construction or vectors.HNSW_EF_CONSTRUCTION
    vectors.PREFIX_EF_CONSTRUCTION = a.ef_construction or vectors.PREFIX_EF_CONSTRUCTION
    if a.smoke:
        a.n, a.queries, a.filtered, a.sweep = [1000, 3000], 10, [0.1], [800]
        exact_up_to(2000 * a.d)
    for n in a.n:
        rng = np.random.default_rng(0)  # each size the same data, alone or in a list
        scale = spectrum(a.d, a.spectrum)
        data = synth(n, a.d, rng, scale)
        base = rss_mb()
        t = time.time()
        store = VectorStore(a.d, capacity=n)
        for s in range(0, n, 50_000):
            store.append(np.arange(s, min(n, s + 50_000)), data[s: s + 50_000])
        backend = choose_backend(n, a.d)
        how = "built"
        if backend == "hnsw":
            how = build_graph(store, n, a)
        build = time.time() - t
        mem = (rss_mb() - base) * 2**20 / n
        vecs, ids = store.view()
        snap = Snapshot(generation=1, vectors=vecs, ids=ids, graph=store.graph, n_alive=n)
        qids = rng.choice(n, a.queries, replace=False)
        queries = l2n(data[qids] + (0.3 / np.sqrt(a.d)) * rng.normal(size=(a.queries, a.d)).astype(np.float32) * scale).astype(np.float32)
        lat, lat_short = [], []
        for q in queries:
            t0 = time.perf_counter()
            slots, _ = snap.search_slots(q, a.k)
            t1 = time.perf_counter()
            v = snap.vectors[slots]
            order = np.arange(len(slots))
            qe = expand_query(q, v, order, 2, 3.0)
            her_rerank(qe, v, order, a.k)
            lat.append(time.perf_counter() - t0)
            lat_short.append(t1 - t0)
        recall, sims = {}, data @ queries.T  # (n, queries)
        for k in (a.k, 800):
            r = []
            for j, q in enumerate(queries):
                slots, _ = snap.search_slots(q, k)
                exact = set(top(sims[:, j], k).tolist())
                r.append(len(set(slots.tolist()) & exact) / len(exact))
            recall[k] = float(np.mean(r))
        del sims
        for frac in a.filtered:
            filtered(snap, queries, frac, a.k)
        if a.sweep and store.graph is not None:
            sweep(store.graph, data, queries, a.sweep)
        lat, lat_short = np.array(lat) * 1000, np.array(lat_short) * 1000
        graph = "" if store.graph is None else (
            f", on {store.graph.width} of the {a.d} dimensions, M = {vectors.HNSW_M}, ef_construction = "
            f"{store.graph.index.ef_construction}, {a.build_threads or os.cpu_count()} threads")
        print(f"n = {n:,} D = {a.d} ({a.spectrum} spectrum): {backend} search ({how} in {build:.0f} s{graph}); shortlist top-{a.k} p50 "
              f"{np.percentile(lat_short, 50):.1f} ms; shortlist + alpha-QE + HeR k={a.k}: p50 {np.percentile(lat, 50):.1f} ms, "
              f"p95 {np.percentile(lat, 95):.1f} ms; recall vs exact @{a.k} {recall[a.k]:.3f}, @800 {recall[800]:.3f}; "
              f"memory {mem:.0f} bytes/photo", flush=True)
        del store, snap, data, vecs


if __name__ == "__main__":
    main()
