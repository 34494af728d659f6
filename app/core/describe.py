"""Feature maps -> HeW weights -> raw global descriptors. Shared by indexing, search and evaluation.

The "raw descriptor" is the aggregated vector after power 0.5 and L2, before whitening:
(C,) float32. The share grid, (H, W) float32, is how much each cell makes up the descriptor: its
HeW weight times the length of its feature vector (what the heat overlay shows; docs/METHOD.md).
numpy only: no PyTorch here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .aggregate.descriptor import normalize_raw
from .aggregate.hew import THRESHOLD, Z_RATIO, hew_weights
from .features.preprocess import FeatureMap


@dataclass
class Described:
    """raw: (C,) float32 unit vector (HeW, or SumA when weights are all 1); share: (H, W) float32,
    each cell's part of the sum (weight x |feature|); where: the original-pixel rectangle the
    cells cover (x1, y1, x2, y2), or None for the whole image; cells (a query's, `query_cells`):
    (N, C) float32, what the match overlay looks for in a result (`match_cells`), or None."""

    raw: np.ndarray
    share: np.ndarray
    where: tuple[float, float, float, float] | None = None
    cells: np.ndarray | None = None


@dataclass(frozen=True)
class HewParams:
    threshold: float = THRESHOLD
    z_ratio: float = Z_RATIO


def describe_features(features: np.ndarray, mu: np.ndarray | None, params: HewParams = HewParams(),
                      suma: bool = False, precise: bool = False, cells: bool = False) -> Described:
    """Describe one (H, W, C) map. suma=True (or mu None) skips HeW (weights 1); cells: a query's,
    also its cells for the match overlay (`query_cells`)."""
    h, w, c = features.shape
    x = features.reshape(h * w, c)
    if suma or mu is None:
        wts = np.ones(h * w)
    else:
        wts = hew_weights(x, mu, params.threshold, params.z_ratio, precise=precise)
    x64 = x.astype(np.float64)
    vec = wts @ x64
    # The overlay shows what the sum is made of, not the weights alone: HeW weights are nearly flat
    # (0.7-1.0) and high on plain sky, which adds little to the sum (short feature vectors): shown
    # alone, sky corners read "distinctive" and the boxed building "repeated" (docs/METHOD.md)
    share = wts * np.sqrt(np.einsum("ij,ij->i", x64, x64))
    return Described(normalize_raw(vec), share.reshape(h, w).astype(np.float32),
                     cells=query_cells(x, share, mu) if cells else None)


def _unit_rows(x: np.ndarray, mu: np.ndarray | None) -> np.ndarray:
    """(N, C) rows centred by the HeW mean `mu` (C,) (None: not centred), each of length 1, float32."""
    y = np.asarray(x, np.float32) - (np.asarray(mu, np.float32) if mu is not None else 0.0)
    return y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)


QUERY_CELLS = 256  # the strongest cells kept (all of a 512-px photo's 192; a 1024-px photo's 768 would cost 4 MB a turn at 1,280 channels)


def query_cells(x: np.ndarray, share: np.ndarray, mu: np.ndarray | None) -> np.ndarray:
    """A query's cells as the match overlay seeks them: (M, C) float32, M <= QUERY_CELLS, the
    features (x, (N, C)) of its strongest cells centred by `mu`, each of length its part of the
    description (share, (N,)) over the largest part: the query's strongest cells count most (on a
    landmark photo its tower or dome; sky and pavement are short features, and the weakest cells
    hardly ever give a result cell its best likeness)."""
    s = np.asarray(share, np.float64).reshape(-1)
    keep = np.argsort(-s, kind="stable")[:QUERY_CELLS]
    return _unit_rows(x[keep], mu) * (s[keep] / max(float(s.max()), 1e-12)).astype(np.float32)[:, None]


def match_cells(features: np.ndarray, mu: np.ndarray | None, cells: np.ndarray) -> np.ndarray:
    """How closely each cell of one (H, W, C) map resembles one of the query's strongest cells:
    (H, W) float32 >= 0, the largest weighted cosine (`query_cells`) above the photo's median,
    squared (the factor of `match_heat`). A cell's own likeness, not the whole photo's pull:
    the gradient alone (`match_share`) of a whole-photo query also warms what is merely salient in
    a result (a tent, a shelf edge) where the query has none of it."""
    h, w, c = features.shape
    best = (_unit_rows(features.reshape(h * w, c), mu) @ cells.T).max(1)
    return (np.maximum(best - np.median(best), 0.0) ** 2).reshape(h, w).astype(np.float32)


def match_heat(features: np.ndarray, mu: np.ndarray | None, whitening, query: np.ndarray,
               cells: np.ndarray | None, params: HewParams = HewParams()) -> np.ndarray:
    """What the match overlay draws before its stretch (heatmap.stretch_match): (H, W) float32 >= 0,
    the positive part of `match_share` times `match_cells` (cells None, or of another model: the
    first alone). benchmarks/match_overlay.py: whole-photo Paris queries put 0.78 of it inside
    the landmark's box (the gradient alone 0.61), box queries 0.93 (0.89)."""
    grid = np.maximum(match_share(features, mu, whitening, query, params), 0.0)
    if cells is None or cells.shape[1] != features.shape[-1]:
        return grid
    return grid * match_cells(features, mu, cells)


def match_share(features: np.ndarray, mu: np.ndarray | None, whitening, query: np.ndarray,
                params: HewParams = HewParams(), suma: bool = False) -> np.ndarray:
    """How much each cell of one (H, W, C) map makes this photo like the query: (H, W) float32,
    each cell's part of the sum (w_l X_l) times the gradient of the score (the cosine of `query`,
    (D,) unit vector in the searched space of `whitening`, and this photo's searched vector) with
    respect to the sum: how much the score rises as the sum moves along that cell's term. The
    cosine does not change with the sum's length, so the terms add up to 0: a cell is positive
    where it pulls the photo toward the query beyond what the photo already is, negative where it
    pulls away (the match overlay shows the positive part). Vanishes as the photo's vector nears
    the query's (copies of the query show its own grid instead: search.on_copy)."""
    h, w, c = features.shape
    x = features.reshape(h * w, c).astype(np.float64)
    wts = np.ones(h * w) if suma or mu is None else hew_weights(features.reshape(h * w, c), mu, params.threshold,
                                                                   params.z_ratio)
    v = wts @ x
    a = np.abs(v)
    p = np.sign(v) * np.sqrt(a)
    r = p / max(float(np.linalg.norm(p)), 1e-300)
    q = np.asarray(query, np.float64)
    u = r if whitening.is_identity else (r - whitening.mean) @ whitening.proj.T
    nu = max(float(np.linalg.norm(u)), 1e-300)
    y = u / nu
    g_u = (q - float(q @ y) * y) / nu  # d cos(q, u/|u|) / du
    g_r = g_u if whitening.is_identity else whitening.proj.T @ g_u
    g_p = (g_r - float(g_r @ r) * r) / max(float(np.linalg.norm(p)), 1e-300)
    g_v = g_p * 0.5 / np.sqrt(np.maximum(a, 1e-300))  # d sign(v)|v|^0.5 / dv = 0.5 |v|^-0.5
    g_v[a == 0] = 0.0
    return (wts * (x @ g_v)).reshape(h, w).astype(np.float32)


def describe_map(fm: FeatureMap, mu: np.ndarray | None, box=None, params: HewParams = HewParams(),
                 suma: bool = False, precise: bool = False, cells: bool = False) -> Described:
    """Describe a FeatureMap, optionally only the block of cells whose centres fall inside `box`
    (original pixels; *map mode*: no new CNN pass). `where` is exactly the rectangle those cells
    cover, so an overlay drawn there lies over the features that were aggregated."""
    if box is None:
        return describe_features(fm.features, mu, params, suma, precise, cells)
    rows, cols = fm.box_cells(box)
    d = describe_features(fm.features[rows, cols], mu, params, suma, precise, cells)
    d.where = fm.cells_rect(rows, cols)
    return d


def mean_local_feature(maps: list[np.ndarray]) -> np.ndarray:
    """mu: (C,) float64 mean of all local features of (H, W, C) maps (the centring mean of HeW)."""
    total = sum(m.reshape(-1, m.shape[-1]).sum(0, dtype=np.float64) for m in maps)
    count = sum(m.shape[0] * m.shape[1] for m in maps)
    return total / max(count, 1)
