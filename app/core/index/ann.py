"""hnswlib wrapper: inner-product HNSW over whitened unit descriptors, labels = catalog image ids.

Thread rules: hnswlib must not answer `knn_query` while `add_items`/`resize_index` runs, so every
call goes through a readers-writer lock (many searches at once, one writer alone). `ef` is not
saved with an index: it is set after every load and kept >= k. Saving is atomic (temp file +
rename); a sidecar JSON records what the file holds so a mismatch with the catalog is detected and
the index rebuilt from stored descriptors.
"""
from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import hnswlib
import numpy as np

M = 16
EF_CONSTRUCTION = 200
EF_SEARCH = 256


class RWLock:
    """Many readers or one writer; a waiting writer blocks new readers (no writer starvation)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    @contextmanager
    def read(self):
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class AnnIndex:
    """ids: int64 catalog ids; vectors: (n, dim) float32 unit rows; similarity = inner product."""

    def __init__(self, dim: int, capacity: int = 1024, tag: str = ""):
        self.dim = int(dim)
        self.tag = tag  # what the vectors are (space id + whitening version): checked on load
        self.lock = RWLock()
        self._index = hnswlib.Index(space="ip", dim=self.dim)
        self._index.init_index(max_elements=max(int(capacity), 16), ef_construction=EF_CONSTRUCTION, M=M)
        self._index.set_ef(EF_SEARCH)
        self._alive: set[int] = set()
        self._vecs = np.zeros((0, self.dim), np.float32)  # row = catalog id: QE/HeR read vectors here

    def __len__(self) -> int:
        return len(self._alive)

    def ids(self) -> set[int]:
        return set(self._alive)

    def add(self, ids, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self.lock.write():
            need = self._index.get_current_count() + len(ids)
            cap = self._index.get_max_elements()
            if need > cap:  # geometric growth: amortised O(1) per add
                self._index.resize_index(max(need, 2 * cap))
            self._index.add_items(vectors, ids)
            self._alive.update(int(i) for i in ids)
            self._store(ids, vectors)

    def delete(self, ids) -> None:
        """Idempotent: unknown or already deleted ids are ignored."""
        with self.lock.write():
            for i in ids:
                i = int(i)
                if i in self._alive:
                    self._index.mark_deleted(i)
                    self._alive.discard(i)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (ids (k',), similarities (k',)) for one (dim,) query, best first; k' = min(k, len)."""
        with self.lock.read():
            k = min(int(k), len(self._alive))
            if k == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            if self._index.ef < k:
                self._index.set_ef(k)
            labels, dist = self._index.knn_query(np.asarray(query, np.float32).reshape(1, -1), k=k)
        return labels[0].astype(np.int64), (1.0 - dist[0]).astype(np.float32)

    def _store(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        top = int(ids.max()) + 1
        if top > len(self._vecs):  # geometric growth, rows indexed by catalog id
            grown = np.zeros((max(top, 2 * len(self._vecs), 1024), self.dim), np.float32)
            grown[: len(self._vecs)] = self._vecs
            self._vecs = grown
        self._vecs[ids] = vectors

    def vectors(self, ids) -> np.ndarray:
        """(len(ids), dim) float32 vectors of `ids`. A plain array lookup: hnswlib's get_items
        builds Python lists and took ~40 ms for 800 vectors."""
        ids = np.asarray(ids, dtype=np.int64)
        with self.lock.read():
            return self._vecs[ids]

    def save(self, path: Path) -> None:
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with self.lock.read():
            self._index.save_index(str(tmp))
            meta = {"dim": self.dim, "tag": self.tag, "alive": sorted(self._alive)}
        side_tmp = path.with_suffix(".json.tmp")
        side_tmp.write_text(json.dumps(meta))
        os.replace(tmp, path)
        os.replace(side_tmp, path.with_suffix(".json"))

    @classmethod
    def load(cls, path: Path, dim: int, tag: str) -> "AnnIndex | None":
        """The saved index if it exists, was made for `tag` and `dim`, and is readable; else None."""
        path = Path(path)
        side = path.with_suffix(".json")
        try:
            meta = json.loads(side.read_text())
            if meta["dim"] != dim or meta["tag"] != tag:
                return None
            obj = cls.__new__(cls)
            obj.dim, obj.tag, obj.lock = dim, tag, RWLock()
            obj._index = hnswlib.Index(space="ip", dim=dim)
            obj._index.load_index(str(path))
            obj._index.set_ef(EF_SEARCH)  # ef is not saved with the index
            obj._alive = set(meta["alive"])
            obj._vecs = np.zeros((0, dim), np.float32)
            alive = np.array(sorted(obj._alive), dtype=np.int64)
            for s in range(0, len(alive), 10000):
                chunk = alive[s: s + 10000]
                obj._store(chunk, np.asarray(obj._index.get_items(chunk.tolist(), return_type="numpy"), np.float32))
            return obj
        except (OSError, ValueError, KeyError, RuntimeError):
            return None
