"""The searched vectors of one space of a PostgreSQL library: a pgvector table the catalog keeps
exact inside its own transactions (catalog/postgres.py). The writer only builds it (at first use,
or for a new whitening) and adds its HNSW index when the library crosses the exact-search size;
readers query it through ServerSnapshots and never hold the vectors.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..aggregate.descriptor import Whitening
from ..catalog.records import SpaceRow
from ..errors import Cancelled
from .vectors import choose_backend, graph_width


def build_graph(catalog, table: str, dim: int, n: int) -> int:
    """pgvector's HNSW graph over the vector table `table` of n rows of D = `dim`, on the leading
    dimensions that hold most of the vectors' energy (vectors.graph_width of a sample of its
    rows, as the file backend's graph; the search ranks its candidates by all D). Returns the
    graph's width (D: all of them)."""
    sample = catalog.sample_vectors(table, dim, 20_000, n)
    width = graph_width(sample) if len(sample) else dim
    catalog.build_vector_ann(table, width if width < dim else 0)
    return width


class ServerIndex:
    backend_kind = "server"

    def __init__(self, catalog, space: SpaceRow, whitening: Whitening, log: Callable[[str], None],
                 version: int | None = None, may_write: Callable[[], bool] = lambda: True):
        self.catalog = catalog
        self.may_write = may_write  # whether this process holds the writer lock now (tables are built only then)
        self.space = space
        self.whitening = whitening
        self.log = log
        self.version = space.info.white_version if version is None else version
        self.table = catalog.vector_table(space.id, self.version)
        self.saved_generation = -1
        self._alive = 0

    def _chunks(self, whitening: Whitening):
        ids = self.catalog.live_ids(self.space.id)
        for s in range(0, len(ids), 5000):
            chunk = ids[s: s + 5000]
            yield chunk, whitening.apply(self.catalog.raw_descriptors(chunk, self.space.id, self.space.info.channels))

    def load(self, generation: int, cancelled=None) -> None:
        """The table when it exists (the catalog keeps it exact); built from the raw descriptors
        when it does not (a new space, or one created by an older HeatSearch) by a writer. A
        reader never builds it: until a writer has, the space holds nothing to search."""
        if not self.catalog.vector_table_exists(self.table):
            if not self.may_write():
                self._alive = 0
                return
            n = len(self.catalog.live_ids(self.space.id))
            if n:
                self.log(f"building the server's search table for {n} photos")
            if self.catalog.build_vectors(self.space.id, self.version, self.whitening.dim, self._chunks(self.whitening),
                                          cancelled) is None:
                raise Cancelled("building the search table was cancelled")
            if choose_backend(n, self.whitening.dim) == "hnsw":
                build_graph(self.catalog, self.table, self.whitening.dim, n)
        self._alive = self.catalog.count_vectors(self.table)

    def rebuild(self, cancelled=None) -> None:
        self.catalog.drop_vector_table(self.table)
        self.load(-1, cancelled)

    def apply(self, added, killed) -> None:
        self._alive = max(0, self._alive + len(added) - len(set(killed) - {i for i, _ in added}))

    def hide(self, ids) -> None:
        self._alive = self.catalog.count_vectors(self.table)

    restore = hide

    def refit(self, whitening: Whitening, cancelled=None) -> "ServerIndex | None":
        """The table of the next whitening version, built beside the searched one; the catalog's
        commit of the new whitening makes it the searched one."""
        out = ServerIndex(self.catalog, self.space, whitening, self.log, version=self.version + 1, may_write=self.may_write)
        n = len(self.catalog.live_ids(self.space.id))
        if self.catalog.build_vectors(self.space.id, out.version, whitening.dim, self._chunks(whitening), cancelled) is None:
            return None
        if choose_backend(n, whitening.dim) == "hnsw":
            build_graph(self.catalog, out.table, whitening.dim, n)
        out._alive = self.catalog.count_vectors(out.table)
        return out

    def maintain(self, cancelled=None) -> None:
        if not self.catalog.vector_table_exists(self.table):
            if not self.may_write():
                self._alive = 0
                return
            self.load(-1, cancelled)
        self._alive = self.catalog.count_vectors(self.table)
        if self.may_write() and choose_backend(self._alive, self.whitening.dim) == "hnsw" and not self.catalog.vector_ann_exists(self.table):
            self.log(f"building the server's search graph for {self._alive} photos")
            build_graph(self.catalog, self.table, self.whitening.dim, self._alive)

    def save(self, generation: int, force: bool = False) -> bool:
        self.saved_generation = generation
        return False  # nothing to write: the database is the truth

    def remove_files(self) -> None:
        self.catalog.drop_vector_table(self.table)

    def retire_older(self) -> None:
        """After a refit committed: drop the tables of older whitening versions. A reader whose
        snapshot still names one gets a StaleSnapshotError and searches again on a fresh one."""
        self.catalog.drop_old_vector_tables(self.space.id, self.version)

    def with_space(self, space: SpaceRow) -> None:
        self.space = space

    @property
    def alive(self) -> int:
        return self._alive

    @property
    def backend(self) -> str:
        return "pgvector-hnsw" if self.catalog.vector_ann_exists(self.table) else "pgvector-exact"

    def live_ids(self) -> np.ndarray:
        return self.catalog.live_ids(self.space.id)

    def snapshot_parts(self) -> dict:
        width = self.catalog.vector_ann_width(self.table) if self._alive else None
        return {"catalog": self.catalog, "table": self.table, "n_alive": self._alive, "ann": width is not None,
                "graph_width": width or 0}
