"""Defaults as policies of the library: functions of its size and of the query kind, chosen by
measurement on every shared set at once (docs/METHOD.md, "Policies"; benchmarks/policies.py).

A setting left at "auto" (or 0 for the dimension) follows these; any other value overrides them.
"""
from __future__ import annotations

from dataclasses import dataclass

# Whitening: no whitening below MIN_WHITEN photos; above, D grows with the library
# (n / PHOTOS_PER_DIM, rounded down to a power of two, between MIN_DIM and MAX_DIM), with
# eigenvalue shrinkage SHRINKAGE. No cliff: D = 32 at 256 photos, 512 from 8,192 on.
MIN_WHITEN = 256
PHOTOS_PER_DIM = 8
MIN_DIM = 32
MAX_DIM = 512
SHRINKAGE = 1.0
# Refit when the library has grown by this factor since the last fit (or the planned D changes).
REFIT_GROWTH = 2.0


def whitening_dim(n: int, channels: int, requested: int = 0) -> int:
    """The whitened dimension D for a library of n photos (0 = no whitening).

    requested > 0 (the user's fixed D) is honoured as soon as there are enough photos to fit it
    (n >= 2 D); below that the policy's D is used."""
    if n < MIN_WHITEN:
        return 0
    d = MIN_DIM
    while d * 2 <= min(MAX_DIM, n / PHOTOS_PER_DIM):
        d *= 2
    if requested > 0 and n >= 2 * requested:
        d = requested
    return min(d, channels)


def refit_due(n: int, fitted_n: int, fitted_dim: int, channels: int, requested: int = 0) -> bool:
    """Whether the whitening should be (re)fitted for a library of n photos."""
    want = whitening_dim(n, channels, requested)
    if want != fitted_dim:
        return want > 0 or fitted_dim > 0
    return want > 0 and n >= REFIT_GROWTH * max(fitted_n, 1)


# HeR helps a query with many relevant photos (a landmark shot from every side: Paris) and hurts
# one with few (an object in 4 photos: UKBench), whatever the library's size or the query's kind.
# So it is decided per query from its own neighbourhood: how many photos are clearly closer to it
# than the background of the shortlist (`close_neighbours`). Measured: benchmarks/policies.py.
NEIGHBOURHOOD = 200  # shortlist similarities looked at
HER_MIN_NEIGHBOURS = 8


def close_neighbours(sims, query_in_library: bool) -> int:
    """How many of a query's nearest photos stand out from the background: similarity above the
    midpoint between the best match and the median of the first NEIGHBOURHOOD.
    sims: descending similarities of the shortlist (the query itself first when it is in the library)."""
    import numpy as np

    s = np.asarray(sims, dtype=np.float64)
    if query_in_library and len(s):
        s = s[1:]
    if len(s) < 3:
        return len(s)
    top, bg = float(s[0]), float(np.median(s))
    return int((s >= bg + 0.5 * (top - bg)).sum())


def use_her(sims, query_in_library: bool, min_neighbours: int = HER_MIN_NEIGHBOURS) -> bool:
    return close_neighbours(sims, query_in_library) >= min_neighbours


@dataclass(frozen=True)
class SearchPlan:
    """How one query is refined. box_mode: map | crop | hybrid (box queries only)."""

    qe: bool
    qe_n: int
    qe_alpha: float
    her: bool
    her_k: int
    box_mode: str


def search_plan(n: int, box: bool, qe: str = "auto", her: str = "auto", box_mode: str = "auto",
                qe_n: int = 2, qe_alpha: float = 3.0, her_k: int = 800) -> SearchPlan:
    """The refinements for a query on a library of n photos; box: whether it is a box query.
    qe/her: auto | on | off; box_mode: auto | map | crop | hybrid."""
    auto_qe = True
    auto_her = True
    auto_mode = "map"
    return SearchPlan(auto_qe if qe == "auto" else qe == "on", qe_n, qe_alpha,
                      auto_her if her == "auto" else her == "on", her_k,
                      auto_mode if box_mode == "auto" else box_mode)
