"""Query latency excluding the CNN: ANN shortlist + QE + HeR (k = 800) at D = 512, on synthetic
descriptors, p50 and p95; recall of the ANN top-800 against exact search; memory per image.

    python benchmarks/query_latency.py --n 100000 1000000

Synthetic data: unit vectors from a mixture of n / 50 Gaussian clusters (retrieval descriptors are
clustered, not uniform: ~50 views per "place", within-cluster cosine ~0.8), queries are perturbed
database vectors. Same path as the app: ANN top-k, alpha-QE (n = 2) as the heat source, HeR on the
original shortlist (with HeR on, the app makes no second ANN search).
"""
from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from app.core.aggregate.descriptor import l2n
from app.core.index.ann import AnnIndex
from app.core.rerank.her import her_rerank
from app.core.rerank.qe import expand_query


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def synth(n, d, rng):
    clusters = max(1, n // 50)
    centres = l2n(rng.normal(size=(clusters, d))).astype(np.float32)
    out = np.empty((n, d), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        out[s: s + m] = l2n(centres[rng.integers(0, clusters, m)] + (0.5 / np.sqrt(d)) * rng.normal(size=(m, d)).astype(np.float32))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--k", type=int, default=800)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--ef", type=int, default=0, help="hnswlib ef at search (default: the app's, max(256, k))")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    for n in a.n:
        data = synth(n, a.d, rng)
        base = rss_mb()
        t = time.time()
        idx = AnnIndex(a.d, capacity=n)
        for s in range(0, n, 50_000):
            idx.add(np.arange(s, min(n, s + 50_000)), data[s: s + 50_000])
        build = time.time() - t
        if a.ef:
            idx._index.set_ef(a.ef)
        mem = (rss_mb() - base) * 2**20 / n
        qids = rng.choice(n, a.queries, replace=False)
        queries = l2n(data[qids] + (0.3 / np.sqrt(a.d)) * rng.normal(size=(a.queries, a.d)).astype(np.float32)).astype(np.float32)
        lat, lat_ann, recalls = [], [], []
        for q in queries:
            t0 = time.perf_counter()
            ids, _ = idx.search(q, a.k)
            t1 = time.perf_counter()
            vecs = idx.vectors(ids)
            order = np.arange(len(ids))
            qe = expand_query(q, vecs, order, 2, 3.0)
            her_rerank(qe, vecs, order, a.k)
            t2 = time.perf_counter()
            lat.append(t2 - t0)
            lat_ann.append(t1 - t0)
        recalls100 = []
        for q in queries[:20]:
            ids, _ = idx.search(q, a.k)
            sims = data @ q
            exact = np.argpartition(-sims, a.k)[: a.k]
            recalls.append(len(set(ids.tolist()) & set(exact.tolist())) / a.k)
            top100 = np.argpartition(-sims, 100)[:100]
            recalls100.append(len(set(ids[:100].tolist()) & set(top100.tolist())) / 100)
        lat, lat_ann = np.array(lat) * 1000, np.array(lat_ann) * 1000
        print(f"n = {n:,} D = {a.d} ef = {idx._index.ef}: index build {build:.0f} s; ANN top-{a.k}: p50 {np.percentile(lat_ann, 50):.1f} ms; "
              f"ANN + alpha-QE + HeR k={a.k}: p50 {np.percentile(lat, 50):.1f} ms, p95 {np.percentile(lat, 95):.1f} ms; "
              f"recall@{a.k} vs exact {np.mean(recalls):.3f}, recall@100 {np.mean(recalls100):.3f}; index memory {mem:.0f} bytes/image (hnsw graph + vectors + QE/HeR copy)",
              flush=True)
        del idx, data


if __name__ == "__main__":
    main()
