"""HeR: heat re-ranking of a shortlist (docs/METHOD.md, "HeR").

The heat source is the query vector (the QE vector when QE is on); the shortlist is the top k of
the *original* query's ranking. Heat diffuses on the graph of the shortlist (+ source) and the
shortlisted items are reordered by the heat they receive; ranks beyond k keep their order.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from ..aggregate.hew import BLAS

Z_RATIO = 0.1
K_DEFAULT = 800  # the paper's shortlist; the app's is policy.HER_K


def her_scores(source: np.ndarray, shortlist: np.ndarray, z_ratio: float = Z_RATIO) -> np.ndarray | None:
    """Heat at each of the (k, D) shortlist vectors from a unit source at `source` (D,).

    Returns (k,) float64, or None when the graph has no positive edge (nothing to diffuse).
    The (k+1) x D Gram product runs in float32 (the O(k^2 D) step), the SPD solve in float64.
    """
    with BLAS.limit(limits=1, user_api="blas"):  # the (k+1)-sized solve: faster and steadier on one thread
        return _her_scores(source, shortlist, z_ratio)


def _her_scores(source, shortlist, z_ratio):
    t = np.vstack([np.asarray(shortlist, dtype=np.float32), np.asarray(source, dtype=np.float32)[None]])
    t -= t.mean(0)
    a = (t @ t.T).astype(np.float64)
    np.fill_diagonal(a, 0.0)
    np.maximum(a, 0.0, out=a)
    npos = np.count_nonzero(a)
    if npos == 0:
        return None
    z = z_ratio * float(a.sum()) / npos
    lap = -a
    lap[np.diag_indices(len(t))] = a.sum(1) + z
    e = np.zeros((len(t), 1))
    e[-1] = 1.0
    _, h, info = lapack.dposv(lap, e, lower=1, overwrite_a=1, overwrite_b=1)
    if info != 0:
        return None
    return h[:-1, 0]


def her_rerank(query: np.ndarray, vectors: np.ndarray, ranking: np.ndarray, k: int = K_DEFAULT,
               z_ratio: float = Z_RATIO, return_heat: bool = False):
    """Re-rank `ranking` ((M,) 0-based rows of `vectors` (N, D)) with heat from `query` (D,).

    The first min(k, M) items are reordered by descending heat (stable); the rest keep their order.
    Returns the new full ranking as an (M,) int64 array; with return_heat, also the heat of the
    reordered shortlist ((min(k, M),) float64, descending) or None when nothing diffused.
    """
    ranking = np.asarray(ranking, dtype=np.int64)
    k = min(int(k), len(ranking))
    h = her_scores(query, np.asarray(vectors)[ranking[:k]], z_ratio) if k >= 2 else None
    if h is None:
        out = ranking.copy()
        return (out, None) if return_heat else out
    order = np.argsort(-h, kind="stable")
    out = np.concatenate([ranking[:k][order], ranking[k:]])
    return (out, h[order]) if return_heat else out
