"""An immutable view of a library for readers: space, centring mean, whitening, the searched
vectors (or the server table holding them), folders, generation. The writer builds a new Snapshot
after every change and swaps it in one assignment; a search takes one at its start and uses
nothing else, so it can never pair the index of one whitening with the query projection of
another.

Two kinds, one interface (`search`, `vectors_of`, `contains`, `all_vectors`):
- Snapshot: the vectors in this process (a SQLite library: exact search or an HNSW graph);
- ServerSnapshot: the vectors in PostgreSQL (pgvector); only the shortlist crosses the network.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from ..aggregate.descriptor import Whitening
from ..catalog.records import Filters, FolderInfo, SpaceInfo
from ..index.vectors import EXACT_MAX_WORK, HnswGraph, beam, top_k

SCALE_SAMPLE = 600  # photos whose pairwise similarities give the library's similarity scale
# The beam asked of pgvector's graph (m = 16), x hnswlib's (M = 32) for the same library: on all
# dimensions 1.5 (100,000 photos: recall@800 0.863 -> 0.985); on the leading ones, whose beam is
# already vectors.RERANK_WIDEN wider, 1 (a million photos: recall@200/@800 0.962/0.960 in 96 ms;
# 1.5: 0.978/0.982 in 127 ms). benchmarks/pg_latency.py --widen; pgvector's own beam stops at
# 1,000, its iterative scans go on past it.
PG_WIDEN = 1.5
PG_WIDEN_LEADING = 1.0

__all__ = ["Snapshot", "ServerSnapshot", "Shortlist", "FolderInfo", "SpaceInfo", "similarities", "sample_ids"]


def similarities(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(k,) float32 cosines of the unit rows `vectors` (k, D) float32 to the unit query `q` (D,):
    the similarities a shortlist carries, which relevance is read from, on every backend.

    Each is the float64 sum of the rows' float64 products, rounded once to float32. A float32
    matrix product sums a row in an order that depends on the matrix around it (BLAS blocks rows
    and columns; how many rows it is given, and where a row sits, change it), so the same photo
    read 1e-7 apart from a whole-library product and from a shortlist's. In float64 the order
    changes the sum by ~1e-16, far below float32's rounding step (6e-8 relative): the rounded
    value is the same wherever it is computed, but for a sum within 1e-16 of a rounding boundary
    (about one in 10^8)."""
    return (np.asarray(vectors, np.float64) @ np.asarray(q, np.float64).ravel()).astype(np.float32)


def sample_ids(ids: np.ndarray, n: int) -> np.ndarray:
    """The photos of the similarity scale's sample among the live catalog ids `ids`: sorted by id,
    every step-th from the first (step = len // n, at least 1), at most n. By catalog id, never by
    position: a file snapshot's slots and a server table's rows order photos differently, and the
    sample must be the same photos for the scale to be the same. PostgresDialect.sample_vectors
    applies this rule in SQL."""
    ids = np.sort(np.asarray(ids, np.int64))
    return ids[:: max(1, len(ids) // max(n, 1))][:n]


def _by_similarity(sl_ids: np.ndarray, vectors: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, sims): `similarities` of a shortlist and its order, best first, ties by catalog id
    (the same order whichever backend chose the shortlist, and in whatever order it came)."""
    sims = similarities(vectors, q)
    return np.lexsort((sl_ids, -sims)), sims


@dataclass(frozen=True, eq=False)
class Shortlist:
    """ids (k,) int64 catalog ids best first; sims (k,) float32; vectors (k, D) float32 unit rows."""

    ids: np.ndarray
    sims: np.ndarray
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True, eq=False)
class _Common:
    """generation: the catalog generation this view reflects. space: the space searches use;
    pending: a space being indexed that will answer once ready (searches meanwhile use `space`)."""

    generation: int = 0
    space: SpaceInfo | None = None
    mu: np.ndarray | None = None
    whitening: Whitening | None = None
    n_alive: int = 0
    folders: tuple[FolderInfo, ...] = ()
    read_only: bool = False
    pending: SpaceInfo | None = None

    @property
    def ready(self) -> bool:
        """Whether searches can run (a space with a centring mean and at least one vector)."""
        return self.space is not None and self.mu is not None and self.n_alive > 0

    @cached_property
    def similarity_scale(self) -> tuple[float, float]:
        """(centre, spread) of the similarity of two photos of this library, from a fixed sample:
        the scale on which a result's similarity reads as high or not (unwhitened descriptors are
        all alike, ~0.5 apart; whitened ones ~0). The median and the median absolute deviation
        (x 1.4826, a standard deviation for a normal spread), not the mean and standard deviation:
        in a small library the pairs of photos of one subject are many (12 photos of 3 objects:
        18 of the 66 pairs, at 0.9 against 0.5) and tripled the standard deviation, so another view
        of the query's object read 0.06. Pairs of identical photos (copies) are left out, and the
        spread is at least a quarter of the standard deviation (0.67-0.94 of it on every library
        measured, 0.26 in that one) and 0.01: with more copies than other pairs (two copies and a
        third photo) the deviation is 0, and every result read 0 or 1."""
        v = self._sample(SCALE_SAMPLE).astype(np.float64)
        if len(v) < 3:
            return 0.0, 1.0
        g = v @ v.T
        pairs = g[np.triu_indices(len(v), 1)]
        pairs = pairs[pairs < 0.9999] if (pairs < 0.9999).any() else pairs
        centre = float(np.median(pairs))
        mad = 1.4826 * float(np.median(np.abs(pairs - centre)))
        return centre, max(mad, 0.25 * float(pairs.std()), 0.01)

    def _sample(self, n: int) -> np.ndarray:
        raise NotImplementedError

    def folder_state(self, folder_id: int) -> str:
        for f in self.folders:
            if f.id == folder_id:
                return f.state
        return "ok"


@dataclass(frozen=True, eq=False)
class Snapshot(_Common):
    """vectors: (n, D) float32 unit rows (read-only; row = slot); ids: (n,) int64 catalog image
    id per slot, -1 for a dead slot; graph: the HNSW graph over the slots, or None (exact search).
    filter_ids(filters) -> ids allowed by a filter (the catalog's)."""

    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.float32))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    graph: HnswGraph | None = None
    filter_ids: Callable[[Filters], np.ndarray] | None = None

    def __post_init__(self):
        live = self.ids >= 0
        object.__setattr__(self, "_live", live)  # computed once: every search starts from it
        object.__setattr__(self, "_all_live", bool(live.all()))

    @property
    def backend(self) -> str:
        return "exact" if self.graph is None else "hnsw"

    def alive_mask(self) -> np.ndarray:
        return self._live

    def search(self, q: np.ndarray, k: int, filters: Filters | None = None) -> Shortlist:
        """Top k photos for a (D,) query, best first (only those `filters` admit)."""
        allowed = None
        if filters is not None and filters.active:
            allowed = np.isin(self.ids, self.filter_ids(filters)) if self.filter_ids else np.zeros(len(self.ids), bool)
        slots, _ = self.search_slots(q, k, allowed)
        order, sims = _by_similarity(self.ids[slots], self.vectors[slots], q)
        slots = slots[order]
        return Shortlist(self.ids[slots], sims[order], self.vectors[slots])

    def search_slots(self, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
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
            labels = self.graph.search(q, min(want + 64, len(self.ids) + 64, self.n_alive), self.n_alive)
            labels = labels[(labels < len(self.ids))]
            labels = labels[live[labels]]
            if len(labels) >= k or want >= self.n_alive:
                break
            want *= 4
        sims = self.vectors[labels] @ q
        best = np.argsort(-sims, kind="stable")[:k]
        return labels[best], sims[best]

    def _sample(self, n: int) -> np.ndarray:
        where = self._slots_of(sample_ids(self.ids[self._live], n))
        return self.vectors[[where[int(i)] for i in sorted(where)]].reshape(-1, self.vectors.shape[1])

    def _slots_of(self, ids) -> dict[int, int]:
        ids = np.asarray(list(ids), np.int64)
        slots = np.nonzero(np.isin(self.ids, ids) & self._live)[0]
        return {int(self.ids[s]): int(s) for s in slots}

    def vectors_of(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(ids that are searchable here, their (m, D) vectors), in the order of `ids`."""
        where = self._slots_of(ids)
        found = [int(i) for i in ids if int(i) in where]
        return np.asarray(found, np.int64), self.vectors[[where[i] for i in found]].reshape(len(found), -1)

    def contains(self, ids) -> np.ndarray:
        """(len(ids),) bool: which of `ids` are searchable in this snapshot."""
        return np.isin(np.asarray(list(ids), np.int64), self.ids[self._live])

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of every searchable photo."""
        live = np.nonzero(self._live)[0]
        return self.ids[live], self.vectors[live]


@dataclass(frozen=True, eq=False)
class ServerSnapshot(_Common):
    """The vectors stay in the database table `table`; each search sends the query and gets the
    shortlist (ids, similarities, vectors) back. ann: whether the table has its HNSW index;
    graph_width: the leading dimensions its graph is built on (0: all D)."""

    catalog: object = None
    table: str = ""
    ann: bool = False
    graph_width: int = 0

    @property
    def backend(self) -> str:
        return "pgvector-hnsw" if self.ann else "pgvector-exact"

    def _exact(self) -> bool:
        return not self.ann or self.n_alive * (self.whitening.dim if self.whitening else 1) <= EXACT_MAX_WORK

    def search(self, q: np.ndarray, k: int, filters: Filters | None = None) -> Shortlist:
        k = min(int(k), self.n_alive)
        if k <= 0:
            return Shortlist(np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, len(q)), np.float32))
        ef = int((PG_WIDEN_LEADING if self.graph_width else PG_WIDEN) * beam(k, self.n_alive, bool(self.graph_width)))
        ids, _, vecs = self.catalog.search_vectors(self.table, np.asarray(q, np.float32).ravel(), k, self._exact(), ef,
                                                   filters, self.n_alive, EXACT_MAX_WORK, self.graph_width)
        order, sims = _by_similarity(ids, vecs, q)
        return Shortlist(ids[order], sims[order], vecs[order])

    def _sample(self, n: int) -> np.ndarray:
        return self.catalog.sample_vectors(self.table, self.whitening.dim, n, self.n_alive)

    def vectors_of(self, ids) -> tuple[np.ndarray, np.ndarray]:
        return self.catalog.vectors_of(self.table, list(ids), self.whitening.dim)

    def contains(self, ids) -> np.ndarray:
        found = set(self.vectors_of(ids)[0].tolist())
        return np.asarray([int(i) in found for i in ids], bool)

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        parts = list(self.catalog.iter_vectors(self.table, self.whitening.dim))
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self.whitening.dim), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
