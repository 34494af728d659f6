"""An immutable view of a library for readers: space, centring mean, whitening, vectors, search
backend, folders, generation. The writer builds a new Snapshot after every change and swaps it
in one assignment; a search takes one at its start and uses nothing else, so it can never pair
the index of one whitening with the query projection of another.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..aggregate.descriptor import Whitening
from ..index.vectors import EXACT_MAX_WORK, HnswGraph, top_k


@dataclass(frozen=True)
class SpaceInfo:
    """How the vectors of a space are made (a detached copy of the catalog row)."""

    id: int
    key: str
    backbone: str
    weights_digest: str
    max_side: int
    precision: str
    threshold: float
    z_ratio: float
    channels: int
    white_version: int


@dataclass(frozen=True)
class FolderInfo:
    """A library folder. state: ok | offline (its root is not reachable: rows kept) |
    missing (reachable parent, folder gone: rows kept until the user confirms)."""

    id: int
    path: str
    state: str = "ok"


@dataclass(frozen=True, eq=False)
class Snapshot:
    """vectors: (n, D) float32 unit rows (read-only; row = slot); ids: (n,) int64 catalog image
    id per slot, -1 for a dead slot; graph: the HNSW graph over the slots, or None (exact search)."""

    generation: int = 0
    space: SpaceInfo | None = None
    mu: np.ndarray | None = None
    whitening: Whitening | None = None
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.float32))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    graph: HnswGraph | None = None
    n_alive: int = 0
    folders: tuple[FolderInfo, ...] = ()
    read_only: bool = False

    def __post_init__(self):
        live = self.ids >= 0
        object.__setattr__(self, "_live", live)  # computed once: every search starts from it
        object.__setattr__(self, "_all_live", bool(live.all()))

    @property
    def ready(self) -> bool:
        """Whether searches can run (a space with a centring mean and at least one vector)."""
        return self.space is not None and self.mu is not None and self.n_alive > 0

    @property
    def backend(self) -> str:
        return "exact" if self.graph is None else "hnsw"

    def alive_mask(self) -> np.ndarray:
        return self._live

    def search(self, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (slots, similarities) for a (D,) query, best first, over live slots (and only
        those where `allowed` ((n,) bool) is True). Exact unless the snapshot has a graph and the
        candidate set is too large for exact search."""
        live = self._live
        if allowed is not None:
            live = live & allowed[: len(live)]
        m = int(live.sum()) if allowed is not None or not self._all_live else len(live)
        k = min(int(k), m)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.asarray(q, np.float32).ravel()
        if self.graph is None or m * self.vectors.shape[1] <= EXACT_MAX_WORK:
            if allowed is not None and m * 4 < len(live):  # narrow filter: only the allowed rows
                rows = np.nonzero(live)[0]
                sims = self.vectors[rows] @ q
                best = top_k(sims, k)
                return rows[best], sims[best]
            sims = self.vectors @ q
            if allowed is not None or not self._all_live:
                sims[~live] = -np.inf
            best = top_k(sims, k)
            return best, sims[best]
        want = k
        if allowed is not None:  # the graph knows no filter: ask for enough that k pass it, in one go
            want = min(self.n_alive, int(1.5 * k * self.n_alive / m) + 1)
        while True:  # the graph may hold slots this snapshot does not (newer, or filtered out)
            labels = self.graph.search(q, min(want + 64, len(self.ids) + 64, self.n_alive))
            labels = labels[(labels < len(self.ids))]
            labels = labels[live[labels]]
            if len(labels) >= k or want >= self.n_alive:
                break
            want *= 4
        sims = self.vectors[labels] @ q
        best = np.argsort(-sims, kind="stable")[:k]
        return labels[best], sims[best]

    def folder_state(self, folder_id: int) -> str:
        for f in self.folders:
            if f.id == folder_id:
                return f.state
        return "ok"
