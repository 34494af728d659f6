"""The searched vectors of one descriptor space: write-once rows ("slots") and their search backend.

A slot holds one whitened unit vector (D float32) and the catalog image id it belongs to. A slot
is written once and never changed: a re-described photo gets a new slot and its old slot dies
(id -1). So a reader that holds `vectors[:n]` and a copy of `ids[:n]` (a Snapshot) sees one
consistent state while the writer appends, kills or rebuilds; a rebuild makes a new store.

Backends, chosen by library size (`choose_backend`):
- exact: one matrix-vector product over every slot (recall 1.0, no second copy of the vectors);
- hnsw: hnswlib's graph over the same vectors, for libraries where exact search gets slow.

Persistence (`save`/`load`): `<prefix>.vectors.f32` (rows, append-only: a save writes only the
slots added since the last one), `<prefix>.ids.npy` (small: rewritten), optional `<prefix>.hnsw`
(rewritten only when much of it is new: a graph saved for fewer slots is caught up at load), and
`<prefix>.json` (written last) with the catalog generation they reflect and CRC-32s. A file whose
CRC does not match is never trusted: the caller rebuilds (or catches up) from the catalog.
hnswlib never sees an unchecked file.
"""
from __future__ import annotations

import json
import math
import os
import threading
import uuid
import zlib
from contextlib import contextmanager
from pathlib import Path

import hnswlib
import numpy as np

FORMAT = 2
GRAPH_RESAVE = 0.05  # rewrite the graph file when this share of the slots is newer than it (or 10,000)
# Exact search costs ~0.2-0.4 ns per multiply-add here (100k x 512: 11-22 ms on 2 cores, before
# QE and HeR); above this many multiply-adds per query the library switches to HNSW, so that a
# search stays well under 25 ms up to ~500k photos (benchmarks/query_latency.py): 50k photos at
# D = 512, 20k at 1280. Beyond, recall wins over the 25 ms: ~25-29 ms p50 at a million photos.
EXACT_MAX_WORK = 26_000_000
# HNSW: a denser graph than hnswlib's default M = 16, built on the vectors' leading dimensions
# (graph_width: 256 of 512 for whitened descriptors, which hold 0.8 of their energy there) with
# ef_construction 100 (200 on all of them), whose beam is ranked again by all dimensions (Snapshot.search_slots); the
# beam (ef) widens with the library. Measured (benchmarks/query_latency.py --sweep, synthetic
# 512-d descriptors with the shared photos' whitened spectrum, 2 cores): a million photos graph
# in 452 s (the full 512 dimensions at ef_construction 200: 2,483 s) and find 0.977 / 0.981 of the
# exact top 200 / 800 at the beams below (2,400 / 6,480); at 100k photos a full graph's beam of 2k
# gave 0.98, at 1M the same beam 0.86 at 800. A k below 320 gets the beam of k = 320: a beam of a
# few dozen misses neighbours of even the best few. The widening was measured up to k = 864 (800
# + the snapshot's 64); a larger k (a narrow filter's retries) keeps 2k, or the widened beam of
# 864 when that is larger.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 200  # a graph on every dimension
PREFIX_EF_CONSTRUCTION = 100  # a graph on the leading dimensions
HNSW_EF_FACTOR = 2.0  # beam / k up to HNSW_WIDEN_FROM photos
HNSW_EF_PER_DECADE = 3.0  # added to the factor per tenfold growth above it
HNSW_WIDEN_FROM = 100_000
HNSW_MIN_K, HNSW_MAX_K = 320, 864  # the range of k the widening is applied to (measured)
GRAPH_ENERGY = 0.8  # graph_width: the share of the vectors' energy the graph's dimensions hold
MIN_GRAPH_WIDTH = 256  # ... and never fewer dimensions than this (so only from D = 512)
RERANK_WIDEN = 1.5  # the beam of a graph on fewer dimensions (ranked again by all of them), over a full one's


class RWLock:
    """Many readers or one writer; a waiting writer blocks new readers (no writer starvation).
    hnswlib answers knn_query safely beside other queries, but not during add_items/resize."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0

    @contextmanager
    def read(self):
        with self._cond:
            while self._writer or self._waiting:
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
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


def top_k(sims: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest of `sims`, best first (ties by index)."""
    k = min(int(k), len(sims))
    if k <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
    return part[np.lexsort((part, -sims[part]))]


def graph_width(vectors: np.ndarray) -> int:
    """How many leading dimensions of the (n, D) unit rows `vectors` the graph is built on: the
    fewest (a multiple of 32) that hold GRAPH_ENERGY of their squared length on average, when
    they are at most half of D; else all D. Whitened descriptors put their energy first (PCA
    order; the shrinkage damps the weak directions): on the shared photos at D = 512, 0.81 lies
    in the first 256. Where it is spread more evenly, a graph on most dimensions at the lower
    ef_construction missed too much (synthetic 512-d data with every dimension alike: 416
    dimensions, 0.845 of the exact top 800 at a million photos): the full graph, as before."""
    n, dim = vectors.shape
    if n == 0:
        return dim
    sample = vectors[:: max(1, n // 20_000)]
    energy = np.cumsum(np.einsum("ij,ij->j", sample, sample, dtype=np.float64))
    need = -(-(int(np.searchsorted(energy, GRAPH_ENERGY * energy[-1])) + 1) // 32) * 32
    need = max(need, MIN_GRAPH_WIDTH)  # measured at 256 of 512; fewer dimensions found less (128: 0.90 @800)
    return need if need <= dim // 2 else dim


class HnswGraph:
    """hnswlib inner-product graph over slots (labels = slot numbers), on the first `width` of
    the D dimensions (graph_width; the index's own dim when loaded): a graph on fewer dimensions
    is searched for its whole beam, which the caller ranks by the full vectors (Snapshot)."""

    def __init__(self, dim: int, capacity: int = 1024, index=None, width: int | None = None):
        self.dim = dim
        self.width = int(index.dim) if index is not None else int(width or dim)
        self.lock = RWLock()
        if index is None:
            index = hnswlib.Index(space="ip", dim=self.width)
            built = HNSW_EF_CONSTRUCTION if self.width == dim else PREFIX_EF_CONSTRUCTION
            index.init_index(max_elements=max(int(capacity), 1024), ef_construction=built, M=HNSW_M)
        self.index = index
        self.index.set_num_threads(1)  # the writer adds in small batches; searches run one query
        self._beam = threading.Lock()  # ef is one setting of the whole index: one search at a time

    def add(self, slots: np.ndarray, vectors: np.ndarray, cancelled=None, chunk: int = 2000) -> None:
        with self.lock.write():
            need = int(self.index.element_count) + len(slots)
            cap = self.index.get_max_elements()
            if need > cap:
                self.index.resize_index(max(need, 2 * cap))
        for s in range(0, len(slots), chunk):  # small chunks: searches interleave, a cancel is seen
            if cancelled is not None and cancelled():
                return
            with self.lock.write():
                self.index.add_items(np.ascontiguousarray(vectors[s: s + chunk, : self.width]), slots[s: s + chunk])

    def kill(self, slots) -> None:
        with self.lock.write():
            for s in slots:
                try:
                    self.index.mark_deleted(int(s))
                except RuntimeError:  # already deleted or never added
                    pass

    def search(self, q: np.ndarray, k: int, live: int | None = None) -> np.ndarray:
        """Up to k slots, best first by the graph's dimensions; a graph on fewer than D: its whole
        beam (up to `live`, the live elements the caller knows of), for the caller to rank by the
        full vectors. k must not exceed the live elements."""
        with self.lock.read(), self._beam:
            if k <= 0:
                return np.zeros(0, np.int64)
            n = int(self.index.element_count)
            ef = beam(k, n, self.width < self.dim)
            self.index.set_ef(ef)
            want = max(k, min(ef, n if live is None else live)) if self.width < self.dim else k
            q = np.ascontiguousarray(np.asarray(q, np.float32).ravel()[: self.width])
            while True:
                try:
                    labels, _ = self.index.knn_query(q.reshape(1, -1), k=want)
                    return labels[0].astype(np.int64)
                except RuntimeError:  # fewer reachable live elements than asked: the caller's k, then fewer
                    if want <= 1:
                        return np.zeros(0, np.int64)
                    want = k if want > k else want // 2


def beam(k: int, n: int, reranked: bool = False) -> int:
    """HNSW search beam (ef) for the top k of a graph over n elements: f k' with k' = k clamped
    to [320, 864] and f = 2 up to 100,000 elements, 3 more per tenfold growth above (5 at a
    million), RERANK_WIDEN times that for a graph on fewer dimensions than the vectors
    (`reranked`: its order is not the full vectors', its beam must hold their top k); never below 2k."""
    factor = HNSW_EF_FACTOR + HNSW_EF_PER_DECADE * max(0.0, math.log10(max(n, 1) / HNSW_WIDEN_FROM))
    if reranked:
        factor *= RERANK_WIDEN
    k = int(k)
    return max(int(HNSW_EF_FACTOR * k), int(factor * min(max(k, HNSW_MIN_K), HNSW_MAX_K)))


def choose_backend(n: int, dim: int) -> str:
    return "exact" if n * dim <= EXACT_MAX_WORK else "hnsw"


class VectorStore:
    """Slots of one space and whitening. Only the writer thread mutates it; readers use `view()`."""

    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = int(dim)
        self._buf = np.zeros((max(capacity, 16), self.dim), np.float32)
        self._ids = np.full(len(self._buf), -1, np.int64)
        self.n = 0
        self.graph: HnswGraph | None = None
        self._saved_n = 0  # rows already in the vectors file, and their running CRC
        self._saved_crc = 0
        self._graph_saved_n = -1  # slots the graph file covers (-1: no graph file)
        self._graph_crc = 0
        self.token = uuid.uuid4().hex  # names the files' content: another store's files are rewritten whole

    @property
    def alive(self) -> int:
        return int((self._ids[: self.n] >= 0).sum())

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (n, D) read-only view, ids (n,) copy): a consistent state for a snapshot."""
        v = self._buf[: self.n]
        v.flags.writeable = False
        return v, self._ids[: self.n].copy()

    def append(self, image_ids, vectors: np.ndarray) -> np.ndarray:
        """New slots for `image_ids` with `vectors` ((m, D) unit rows). Returns the slots."""
        image_ids = np.asarray(image_ids, np.int64)
        m = len(image_ids)
        if m == 0:
            return np.zeros(0, np.int64)
        if self.n + m > len(self._buf):  # geometric growth; old snapshots keep the old buffer
            cap = max(self.n + m, 2 * len(self._buf))
            buf = np.zeros((cap, self.dim), np.float32)
            buf[: self.n] = self._buf[: self.n]
            ids = np.full(cap, -1, np.int64)
            ids[: self.n] = self._ids[: self.n]
            self._buf, self._ids = buf, ids
        slots = np.arange(self.n, self.n + m, dtype=np.int64)
        self._buf[slots] = np.asarray(vectors, np.float32).reshape(m, self.dim)
        self._ids[slots] = image_ids
        self.n += m
        if self.graph is not None:
            self.graph.add(slots, self._buf[slots])
        return slots

    def kill_ids(self, image_ids) -> int:
        """Kill the live slots of `image_ids`. Returns how many died."""
        image_ids = np.asarray(list(image_ids), np.int64)
        if len(image_ids) == 0 or self.n == 0:
            return 0
        slots = np.nonzero(np.isin(self._ids[: self.n], image_ids))[0]
        self._ids[slots] = -1
        if self.graph is not None and len(slots):
            self.graph.kill(slots)
        return len(slots)

    def live_ids(self) -> np.ndarray:
        ids = self._ids[: self.n]
        return ids[ids >= 0]

    def build_graph(self, cancelled=None, threads: int | None = None) -> bool:
        """Build the HNSW graph over the live slots on `threads` threads (default: every core;
        searches meanwhile use the previous snapshot, and a whole build is worth the cores it
        can have); False when cancelled."""
        live = np.nonzero(self._ids[: self.n] >= 0)[0]
        sample = self._buf[live[:: max(1, len(live) // 20_000)]]  # not a copy of every row
        g = HnswGraph(self.dim, capacity=max(1024, int(self.n * 1.25)), width=graph_width(sample))
        g.index.set_num_threads(threads or os.cpu_count() or 1)
        try:
            g.add(live, self._buf[live], cancelled)
        finally:
            g.index.set_num_threads(1)
        if cancelled is not None and cancelled():
            return False
        self.graph = g
        self._graph_saved_n = -1  # a new graph: its file is written whole at the next save
        return True

    def compacted(self) -> "VectorStore":
        """A new store with only the live slots (renumbered); the graph is not carried over."""
        live = np.nonzero(self._ids[: self.n] >= 0)[0]
        out = VectorStore(self.dim, capacity=max(1024, len(live)))
        out.append(self._ids[live], self._buf[live])
        return out

    # ---- persistence ----------------------------------------------------------------------------
    def save(self, prefix: Path, meta: dict, force_graph: bool = False) -> None:
        """Bring the files up to date; `meta` (generation, whitening version...) goes in the
        sidecar, written last. Rows are appended (a store that is not the one the files were
        written from is written whole); the graph file is rewritten when much of it is new."""
        prefix = Path(prefix)
        vp, ip, hp, side = (_file(prefix, e) for e in (".vectors.f32", ".ids.npy", ".hnsw", ".json"))
        old = _read_meta(side)
        if not (old and old.get("store") == self.token and vp.exists() and vp.stat().st_size >= self._saved_n * 4 * self.dim):
            self._saved_n, self._saved_crc, self._graph_saved_n = 0, 0, -1
        rows = np.ascontiguousarray(self._buf[self._saved_n: self.n])
        if self._saved_n == 0:
            tmp = vp.with_name(vp.name + ".tmp")
            with open(tmp, "wb") as fh:
                fh.write(rows.tobytes())
            os.replace(tmp, vp)
        else:
            with open(vp, "r+b") as fh:
                fh.truncate(self._saved_n * 4 * self.dim)  # a crash may have left rows past the sidecar
                fh.seek(0, os.SEEK_END)
                fh.write(rows.tobytes())
        self._saved_crc = zlib.crc32(rows.tobytes(), self._saved_crc)
        self._saved_n = self.n
        tmp = ip.with_name(ip.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(self._ids[: self.n]))
        crcs = {"vectors": self._saved_crc, "ids": _crc(tmp)}
        os.replace(tmp, ip)
        if self.graph is not None:
            stale = self.n - max(self._graph_saved_n, 0)
            if force_graph or self._graph_saved_n < 0 or stale > max(10_000, GRAPH_RESAVE * self.n) or not hp.exists():
                tmp = hp.with_name(hp.name + ".tmp")
                with self.graph.lock.read():
                    self.graph.index.save_index(str(tmp))
                covered = self.n  # every live slot below n is in the graph (appends add to it)
                self._graph_crc = _crc(tmp)
                os.replace(tmp, hp)
                self._graph_saved_n = covered
            crcs[_graph_key(self.graph.width, self.dim)] = self._graph_crc
        elif hp.exists():
            hp.unlink()
            self._graph_saved_n = -1
        legacy = _file(prefix, ".vectors.npy")  # format 1 kept the rows in an .npy file
        if legacy.exists():
            legacy.unlink()
        tmp = side.with_name(side.name + ".tmp")
        width = {"graph_width": self.graph.width} if self.graph is not None else {}
        tmp.write_text(json.dumps({"format": FORMAT, "dim": self.dim, "n": self.n, "crc": crcs, "store": self.token,
                                   "graph_n": self._graph_saved_n, **width, **meta}))
        os.replace(tmp, side)

    @classmethod
    def load(cls, prefix: Path) -> tuple["VectorStore", dict] | None:
        """(store, meta) when every file is present and matches its CRC, else None. A graph saved
        for fewer slots is caught up (new live slots added, dead ones marked)."""
        prefix = Path(prefix)
        try:
            meta = _read_meta(_file(prefix, ".json"))
            if not meta or meta.get("format") != FORMAT:
                return None
            n, dim, crcs = int(meta["n"]), int(meta["dim"]), meta["crc"]
            vp, ip = _file(prefix, ".vectors.f32"), _file(prefix, ".ids.npy")
            if vp.stat().st_size < n * dim * 4 or _crc(ip) != crcs["ids"]:
                return None
            store = cls(dim, capacity=max(16, n))
            with open(vp, "rb") as fh:
                data = fh.read(n * dim * 4)
            if zlib.crc32(data) != crcs["vectors"]:
                return None
            ids = np.load(ip, allow_pickle=False)
            if ids.dtype != np.int64 or ids.shape != (n,):
                return None
            store._buf[:n] = np.frombuffer(data, np.float32).reshape(n, dim)
            store._ids[:n] = ids
            store.n = n
            store._saved_n, store._saved_crc = n, crcs["vectors"]
            width = int(meta.get("graph_width", dim))
            key = _graph_key(width, dim)
            if key in crcs:
                hp = _file(prefix, ".hnsw")
                if _crc(hp) != crcs[key] or not 0 < width <= dim:
                    return None
                index = hnswlib.Index(space="ip", dim=width)
                index.load_index(str(hp), max_elements=max(1024, int(n * 1.25)))
                store.graph = HnswGraph(store.dim, index=index)
                covered = int(meta.get("graph_n", n))
                dead = np.nonzero(store._ids[:covered] < 0)[0]
                if len(dead):
                    store.graph.kill(dead)
                new = np.arange(covered, n)[store._ids[covered:n] >= 0]
                if len(new):
                    store.graph.add(new, store._buf[new])
                store._graph_saved_n, store._graph_crc = covered, crcs[key]
            store.token = meta.get("store", store.token)
            return store, meta
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None


def _graph_key(width: int, dim: int) -> str:
    """The sidecar's CRC key of the graph file: a graph on fewer dimensions than the vectors has
    its own, so that a build from before them finds no graph (and searches exactly) rather than
    reading it as a graph of D dimensions."""
    return "hnsw" if width == dim else "hnsw_leading"


def _read_meta(side: Path) -> dict:
    try:
        return json.loads(side.read_text())
    except (OSError, ValueError):
        return {}


def _file(prefix: Path, ext: str) -> Path:
    return prefix.parent / (prefix.name + ext)


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            crc = zlib.crc32(chunk, crc)
    return crc


def remove_files(prefix: Path) -> None:
    for ext in (".vectors.f32", ".vectors.npy", ".ids.npy", ".hnsw", ".json"):
        p = _file(Path(prefix), ext)
        if p.exists():
            p.unlink()
