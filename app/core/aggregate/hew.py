"""HeW: heat-equation weighting of local features (docs/METHOD.md, "HeW").

Shapes: a map is X with N = H*W rows of C channels, X >= 0. `mu` is the (C,) mean local feature
of a sample of the library. The weights are (N,), finite and >= 0.

    A = thresholded cosine affinity of the centred rows, diagonal 0
    Z = z_ratio * mean(A[A > 0])
    K = inv(diag(A.sum(1)) - A + Z I)           (SPD; only its diagonal is needed)
    w_l = Z K_ll / (1 - Z K_ll)

numpy + LAPACK (no PyTorch): the Gram product, a Cholesky factorisation K^-1 = L L^T (potrf)
and the inverse of the factor (trtri) give diag(K) as the squared column norms of L^-1.
Two precisions, one formula:
- `precise=True`: float64 throughout, the reference (tested against the literal procedure).
- default: float32 Gram and factorisation with a stability guard: when the factorisation fails,
  or a node's Z K_ll is so close to 1 that float32 cannot resolve 1 - Z K_ll, the solve is redone
  in float64. Within 2e-4 of the reference (tested); 1.5x faster than float64 at N = 768
  (benchmarks/hew_speed.py).
BLAS runs on one thread here: these matrices are small, and on a 2-core machine a second BLAS
thread fights the inference engine's threads (measured: slower and erratic).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import lapack
from threadpoolctl import ThreadpoolController

THRESHOLD = 0.1  # t: edges below it are cut (authors' HeWR code; the earlier release used 0)
Z_RATIO = 0.1  # Z = 0.1 * mean of the positive affinities
# float32 resolves 1 - Z K_ll to about 1e-7 / (1 - Z K_ll) relative; past this the guard recomputes in float64.
GUARD = 1e-3
# Above this many features the float32 factorisation's error grows past 1e-4 (the condition number
# grows with N): larger maps are factorised in float64.
FLOAT32_MAX_N = 1536
BLAS = ThreadpoolController()  # made once, shared with HeR: a fresh threadpool_limits() rescans every library (~1 ms)


def affinity(x: np.ndarray, mu: np.ndarray, threshold: float = THRESHOLD, dtype=np.float64) -> np.ndarray:
    """Steps 1-3: (N, N) thresholded cosine affinity of the centred rows, diagonal 0, in `dtype`.

    All-zero positions get no edges among themselves (their centred rows are all -mu)."""
    x = np.asarray(x)
    zero = x.sum(1) == 0
    y = np.asarray(x, dtype) - np.asarray(mu, dtype)
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    y /= np.where(norms > 0, norms, 1.0)
    a = y @ y.T
    np.fill_diagonal(a, 0.0)
    if zero.any():
        a[np.ix_(zero, zero)] = 0.0
    a[a < threshold] = 0.0
    return a


def _diag_inverse(lap: np.ndarray) -> np.ndarray | None:
    """diag(lap^-1) of an SPD matrix: Cholesky lap = L L^T (potrf), L^-1 (trtri), then the squared
    column norms of L^-1. None when the factorisation fails. lap is overwritten."""
    potrf, trtri = (lapack.spotrf, lapack.strtri) if lap.dtype == np.float32 else (lapack.dpotrf, lapack.dtrtri)
    c, info = potrf(lap, lower=1, overwrite_a=1, clean=1)
    if info != 0:
        return None
    inv, info = trtri(c, lower=1, overwrite_c=1)
    return None if info != 0 else np.einsum("ij,ij->j", inv, inv, dtype=np.float64)


def hew_weights(features, mean, threshold: float = THRESHOLD, z_ratio: float = Z_RATIO,
                precise: bool = False) -> np.ndarray:
    """Heat weights of one map. features: (N, C) array >= 0; mean: (C,). Returns (N,) float64.

    Guards (the authors' code has none): isolated nodes (no edge above the threshold; infinite
    weight in the literal formula) get the largest finite weight of the image; with no positive
    affinity at all (N = 1, tiny or constant maps), all weights are 1 (SumA)."""
    with BLAS.limit(limits=1, user_api="blas"):
        return _hew_weights(features, mean, threshold, z_ratio, precise)


def _hew_weights(features, mean, threshold, z_ratio, precise) -> np.ndarray:
    n = len(features)
    dtype = np.float64 if precise else np.float32
    a = affinity(features, mean, threshold, dtype)
    if n > FLOAT32_MAX_N:
        precise = True  # the Gram product stays float32 (cosines to ~1e-7); the solve is float64
    npos = np.count_nonzero(a)
    if npos == 0:
        return np.ones(n)
    z = z_ratio * float(a.sum(dtype=np.float64)) / npos
    deg = a.sum(1, dtype=np.float64)
    isolated = deg == 0

    def solve(dt):
        lap = -a.astype(dt, copy=True)
        lap[np.diag_indices(n)] = deg + z
        return _diag_inverse(lap)

    kdiag = solve(np.float64 if precise else np.float32)
    zk = None if kdiag is None else z * kdiag
    if not precise and (zk is None or not np.isfinite(zk).all() or (zk[~isolated] > 1 - GUARD).any()):
        zk = z * solve(np.float64)  # the stability guard
    zk = np.minimum(zk, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = zk / (1.0 - zk)
    isolated |= ~np.isfinite(w)
    if isolated.all():
        return np.ones(n)
    w[isolated] = w[~isolated].max()
    return w


def hew_weights_literal(features, mean, threshold: float = THRESHOLD, z_ratio: float = Z_RATIO) -> np.ndarray:
    """The procedure as the paper writes it, for tests only (O(N^3) full inverse, float64).

    Append a ground node joined to every node with affinity Z, row-normalise (P = D^-1 A), invert
    I - P on the N non-ground nodes (the ground absorbs heat), and take for each source l the heat
    that reaches the other nodes over the heat that stays at l: psi_l = (colsum_l(G) - G_ll) / G_ll.
    Weight = 1/psi_l (infinite for an isolated node: no guard here, on purpose).
    """
    a = affinity(features, mean, threshold, np.float64)
    n = a.shape[0]
    z = z_ratio * a[a > 0].mean()
    full = np.zeros((n + 1, n + 1))
    full[:n, :n] = a
    full[:n, n] = z
    full[n, :n] = z
    p = full / full.sum(1, keepdims=True)
    g = np.linalg.inv(np.eye(n) - p[:n, :n])
    d = np.diag(g)
    with np.errstate(divide="ignore"):
        return d / (g.sum(0) - d)


def aggregate(features: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """v = sum_l w_l X_l over the raw features. features (N, C), weights (N,) or None (SumA). Returns (C,) float64."""
    f = np.asarray(features, dtype=np.float64)
    return f.sum(0) if weights is None else np.asarray(weights, dtype=np.float64) @ f
