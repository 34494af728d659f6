"""HeW: heat-equation weighting of local features (ALGORITHM.md section 2).

Shapes: a map is X with N = H*W rows of C channels, X >= 0. `mu` is the (C,) mean local feature
of a training sample. The weights are (N,), finite and >= 0.

Two paths, one formula:
- `hew_weights` (public, numpy in, numpy out) computes in float64 on the CPU: the reference.
- `hew_weights_torch` runs on any device for a batch of same-shape maps (B, N, C); in float32 it
  uses a Cholesky factorisation and the diagonal of the inverse from the inverse factor
  (diag(K) = row-wise squared norms of L^-1 where K^-1 = L L^T), which is what a GPU does well.
  On the CPU the extractor calls it with float64.
Only diag(K) is needed, never the full inverse.
"""
from __future__ import annotations

import numpy as np
import torch

THRESHOLD = 0.1  # t: edges below it are cut (authors' HeWR code; the earlier release used 0)
Z_RATIO = 0.1  # Z = 0.1 * mean of the positive affinities


def hew_weights(features, mean, threshold: float = THRESHOLD, z_ratio: float = Z_RATIO) -> np.ndarray:
    """Heat weights of one map. features: (N, C) array >= 0; mean: (C,). Returns (N,) float64 weights.

    w_l = Z*K_ll / (1 - Z*K_ll), K = inv(diag(A.sum(1)) - A + Z*I); see ALGORITHM.md section 2.
    Guards: isolated nodes (no edge above the threshold; infinite weight in the literal formula)
    get the largest finite weight of the image; with no positive affinity at all, all weights are 1
    (SumA).
    """
    x = torch.as_tensor(np.asarray(features, dtype=np.float64))[None]
    mu = torch.as_tensor(np.asarray(mean, dtype=np.float64))
    return hew_weights_torch(x, mu, threshold, z_ratio)[0].numpy()


def affinity(x: torch.Tensor, mu: torch.Tensor, threshold: float = THRESHOLD,
             gram_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Steps 1-3: thresholded cosine affinity (B, N, N) of the centred rows, diagonal 0.

    gram_dtype=torch.float32 computes the (N, C) x (C, N) product in single precision (the one
    O(N^2 C) step; cosines to ~1e-7) and returns it in x's dtype for the solve."""
    zero = x.sum(-1) == 0  # (B, N) all-zero positions
    gram_dtype = gram_dtype or x.dtype
    y = x.to(gram_dtype) - mu.to(gram_dtype)
    y = y / y.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(gram_dtype).tiny)
    a = (y @ y.transpose(1, 2)).to(x.dtype)
    a.diagonal(dim1=1, dim2=2).zero_()
    a.masked_fill_(zero[:, :, None] & zero[:, None, :], 0.0)
    a.masked_fill_(a < threshold, 0.0)
    return a


def hew_weights_torch(x: torch.Tensor, mu: torch.Tensor, threshold: float = THRESHOLD,
                      z_ratio: float = Z_RATIO, gram_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Batched HeW weights. x: (B, N, C) float tensor >= 0 on any device; mu: (C,). Returns (B, N) in x's dtype."""
    a = affinity(x, mu, threshold, gram_dtype)
    b, n, _ = a.shape
    pos = a > 0
    npos = pos.sum((1, 2))
    z = z_ratio * a.sum((1, 2)) / npos.clamp_min(1)  # (B,)
    deg = a.sum(-1)  # (B, N)
    lap = -a
    lap.diagonal(dim1=1, dim2=2).add_(deg + z[:, None])
    # K = lap^-1 is SPD (Laplacian + Z*I, Z > 0). diag(K)_l = || (L^-1)[:, l] ||^2 with lap = L L^T.
    safe = npos > 0
    lap[~safe] = torch.eye(n, dtype=lap.dtype, device=lap.device)  # placeholder, replaced by SumA below
    chol = torch.linalg.cholesky(lap)
    # Stay in torch: on 2 cores, handing small matrices to scipy's OpenBLAS makes its threads fight
    # torch's OpenMP pool (measured 3x slower end to end).
    eye = torch.eye(n, dtype=lap.dtype, device=lap.device).expand(b, n, n)
    linv = torch.linalg.solve_triangular(chol, eye, upper=False)
    kdiag = (linv * linv).sum(1)  # column norms of L^-1 = diag(L^-T L^-1) = diag(K)
    zk = (z[:, None] * kdiag).clamp(max=1.0)
    w = zk / (1.0 - zk)
    isolated = (deg == 0) | ~torch.isfinite(w)
    w = torch.where(isolated, torch.zeros_like(w), w)
    wmax = w.amax(1, keepdim=True)
    w = torch.where(isolated, wmax.expand_as(w), w)
    w[~safe] = 1.0  # no positive affinity at all (N = 1, tiny or constant maps): SumA
    return w


def hew_weights_literal(features, mean, threshold: float = THRESHOLD, z_ratio: float = Z_RATIO) -> np.ndarray:
    """The procedure as the paper writes it, for tests only (O(N^3) full inverse, float64).

    Append a ground node joined to every node with affinity Z, row-normalise (P = D^-1 A), invert
    I - P on the N non-ground nodes (the ground absorbs heat), and take for each source l the heat
    that reaches the other nodes over the heat that stays at l: psi_l = (colsum_l(G) - G_ll) / G_ll.
    Weight = 1/psi_l (infinite for an isolated node: no guard here, on purpose).
    """
    x = torch.as_tensor(np.asarray(features, dtype=np.float64))[None]
    a = affinity(x, torch.as_tensor(np.asarray(mean, dtype=np.float64)), threshold)[0].numpy()
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
