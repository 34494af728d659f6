"""The searched vectors of one space of a SQLite library: a VectorStore in memory, saved to files
beside the catalog. The files are a cache: the catalog can always rebuild them, and they are
trusted only at the generation they record (older files are reconciled, damaged ones rebuilt).

Used only by the library's writer thread; readers get Snapshots.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..aggregate.descriptor import Whitening
from ..catalog.queries import chunks
from ..catalog.records import SpaceRow
from ..errors import Cancelled
from .vectors import VectorStore, choose_backend, remove_files

COMPACT_DEAD = 0.25  # compact the store when this share of its slots is dead
COMPACT_MIN = 1000  # ... and it has at least this many slots


class LocalIndex:
    backend_kind = "local"

    def __init__(self, catalog, home: Path, space: SpaceRow, whitening: Whitening, log: Callable[[str], None]):
        self.catalog = catalog
        self.space = space
        self.whitening = whitening
        self.prefix = Path(home) / f"space-{space.id}"
        self.log = log
        self.store: VectorStore | None = None
        self.saved_generation = -1

    # ---- loading --------------------------------------------------------------------------------
    def load(self, generation: int, cancelled=None) -> None:
        """The files when they match the catalog at `generation`; reconciled when older; rebuilt
        when missing, damaged, of another whitening, or newer than the catalog (restored backup)."""
        loaded = VectorStore.load(self.prefix)
        if loaded is not None:
            store, meta = loaded
            same_whitening = meta.get("white_version") == self.space.info.white_version and store.dim == self.whitening.dim
            file_gen = int(meta.get("generation", -1))
            if same_whitening and meta.get("space") == self.space.key and 0 <= file_gen <= generation:
                self.store = store
                if file_gen == generation:
                    self.saved_generation = file_gen
                else:
                    self.reconcile(file_gen)
                return
        self.rebuild(cancelled)

    def reconcile(self, since: int) -> int:
        """Make the store equal the catalog: drop slots of photos no longer searchable in this
        space, re-add descriptors written after `since` (their old slots die), and add any
        searchable photo the store lacks (e.g. back from missing while another space was active).
        Reads one consistent state of the catalog; returns its generation."""
        sid = self.space.id
        gen, live_ids, fresh = self.catalog.changes_since(sid, since)
        live = set(live_ids.tolist())
        have = set(self.store.live_ids().tolist())
        fresh_ids = {i for i, _ in fresh}
        lacking = sorted(live - have - fresh_ids)
        gone = have - live
        self.store.kill_ids(sorted(gone | (have & fresh_ids)))
        if fresh:
            self.store.append([i for i, _ in fresh], self.whitening.apply(np.stack([np.frombuffer(r, np.float32) for _, r in fresh])))
        for chunk in chunks(lacking, 5000):
            self.store.append(chunk, self.whitening.apply(self.catalog.raw_descriptors(chunk, sid, self.space.info.channels)))
        self.saved_generation = -1
        self.log(f"caught up with the library ({len(fresh) + len(lacking)} new, {len(gone)} gone)")
        return gen

    def rebuild(self, cancelled=None) -> None:
        """Every vector again from the catalog's raw descriptors (no CNN)."""
        store = self.build_store(self.whitening, cancelled)
        if store is None:
            raise Cancelled("rebuild cancelled")
        self.store = store
        self.saved_generation = -1

    def build_store(self, whitening: Whitening, cancelled=None) -> VectorStore | None:
        """A new store of every searchable photo's vector under `whitening` (None when cancelled)."""
        sid = self.space.id
        ids = self.catalog.live_ids(sid).tolist()
        store = VectorStore(whitening.dim, capacity=max(1024, len(ids)))
        for chunk in chunks(ids, 5000):
            if cancelled is not None and cancelled():
                return None
            store.append(chunk, whitening.apply(self.catalog.raw_descriptors(chunk, sid, self.space.info.channels)))
        if choose_backend(store.alive, store.dim) == "hnsw" and not store.build_graph(cancelled):
            return None
        return store

    # ---- changes after a commit ---------------------------------------------------------------------
    def apply(self, added: list[tuple[int, bytes]], killed: list[int]) -> None:
        """A committed batch: `killed` ids lose their slots, `added` (id, raw bytes) get new ones."""
        if killed:
            self.store.kill_ids(killed)
        if added:
            self.store.kill_ids([i for i, _ in added])  # never two live slots for one photo
            self.store.append([i for i, _ in added], self.whitening.apply(np.stack([np.frombuffer(r, np.float32) for _, r in added])))

    def hide(self, ids) -> None:
        self.store.kill_ids(ids)

    def restore(self, ids) -> None:
        """Photos searchable again: their vectors from the catalog (those with a descriptor here)."""
        have = sorted(set(int(i) for i in ids) & set(self.catalog.live_ids(self.space.id).tolist()))
        self.store.kill_ids(have)
        for chunk in chunks(have, 5000):
            self.store.append(chunk, self.whitening.apply(self.catalog.raw_descriptors(chunk, self.space.id, self.space.info.channels)))

    def refit(self, whitening: Whitening, cancelled=None) -> "LocalIndex | None":
        """A new index of the same space under another whitening (not yet committed)."""
        store = self.build_store(whitening, cancelled)
        if store is None:
            return None
        out = LocalIndex(self.catalog, self.prefix.parent, self.space, whitening, self.log)
        out.store = store
        return out

    def maintain(self, cancelled=None) -> None:
        """Compact a store with many dead slots; switch exact <-> HNSW as the library crosses the
        size where exact search gets slow."""
        st = self.store
        if st.n > COMPACT_MIN and st.n - st.alive > COMPACT_DEAD * st.n:
            graph = st.graph is not None
            self.store = st = st.compacted()
            self.saved_generation = -1
            if graph and not st.build_graph(cancelled):
                return
        want = choose_backend(st.alive, st.dim)
        if want == "hnsw" and st.graph is None:
            self.log(f"building the search graph for {st.alive} photos")
            st.build_graph(cancelled)
        elif want == "exact" and st.graph is not None:
            st.graph = None

    # ---- the files --------------------------------------------------------------------------------
    def save(self, generation: int, force: bool = False) -> bool:
        """Write the files when the catalog moved on since the last save. Returns whether it did."""
        if self.store is None or (self.saved_generation == generation and not force):
            return False
        self.store.save(self.prefix, {"generation": generation, "white_version": self.space.info.white_version,
                                      "space": self.space.key})
        self.saved_generation = generation
        return True

    def remove_files(self) -> None:
        remove_files(self.prefix)

    def with_space(self, space: SpaceRow) -> None:
        """The space row changed (a new whitening version committed)."""
        self.space = space

    # ---- reading ----------------------------------------------------------------------------------------
    @property
    def alive(self) -> int:
        return self.store.alive if self.store is not None else 0

    @property
    def backend(self) -> str:
        return "hnsw" if self.store is not None and self.store.graph is not None else "exact"

    def live_ids(self) -> np.ndarray:
        return self.store.live_ids() if self.store is not None else np.zeros(0, np.int64)

    def snapshot_parts(self) -> dict:
        vecs, ids = self.store.view()
        return {"vectors": vecs, "ids": ids, "graph": self.store.graph, "n_alive": int((ids >= 0).sum())}
