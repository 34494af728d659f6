"""The search service: query -> descriptor -> ANN shortlist -> QE -> HeR -> hits.

A request is an immutable snapshot with an id; its result carries the id, so a GUI can drop any
result that is not for its latest request. Boxes are (x1, y1, x2, y2) in original-image pixels
after EXIF orientation.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image as PILImage
from sqlalchemy import select

from ..catalog.models import Descriptor, Image
from ..describe import describe_map, describe_tensors
from ..errors import HeatSearchError
from ..features.extractor import FeatureMap
from ..imageio import clip_box
from ..library import Library, f32
from ..rerank.her import her_rerank
from ..rerank.qe import expand_query


@dataclass(frozen=True)
class SearchRequest:
    """path or image (RGB PIL, e.g. pasted pixels); box in original pixels or None."""

    id: int = 0
    path: str | None = None
    image: PILImage.Image | None = field(default=None, compare=False)
    box: tuple[float, float, float, float] | None = None
    top: int = 100
    qe: bool = False
    qe_n: int = 2
    qe_alpha: float = 3.0
    her: bool = True
    her_k: int = 800
    mode: str = "map"  # "map": box from the cached full-image feature map; "crop": CNN on the crop
    min_score: float = -1.0


def request_from_settings(settings, **fields) -> SearchRequest:
    """A SearchRequest with the user's QE/HeR/box-mode settings; `fields` override (id, path, box, ...)."""
    base = dict(top=settings.top, qe=settings.qe, qe_n=settings.qe_n, qe_alpha=settings.qe_alpha, her=settings.her,
                her_k=settings.her_k, mode=settings.region_mode)
    return SearchRequest(**{**base, **fields})


@dataclass
class Hit:
    image_id: int
    path: str
    score: float  # cosine similarity of the (whitened) query and this image, in [-1, 1]
    rank: int  # 1-based
    width: int = 0
    height: int = 0


@dataclass
class SearchResult:
    request_id: int
    hits: list[Hit]
    query_weights: np.ndarray | None  # (H, W) HeW weights of the query (of the box when there is one), max 1
    query_size: tuple[int, int]  # (w, h) of the oriented query image
    box: tuple | None
    used_cnn: bool
    timings: dict


class Searcher:
    """Answers SearchRequests against a Library. Thread-safe: many searches may run at once,
    also while an indexing job writes."""

    def __init__(self, lib: Library, cache_size: int = 8):
        self.lib = lib
        self._maps: OrderedDict[tuple, FeatureMap] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size

    # ---- query descriptor ---------------------------------------------------------------------
    def _library_image(self, path: str | None) -> int | None:
        if not path:
            return None
        p = str(Path(path).expanduser().resolve())
        sp = self.lib.space()
        with self.lib.db() as s:
            row = s.execute(select(Image.id, Image.size, Image.mtime_ns).join(Descriptor, Descriptor.image_id == Image.id)
                            .where(Image.path == p, Descriptor.space_id == sp.id)).first()
        if row is None:
            return None
        st = Path(p).stat()
        return row[0] if (st.st_size, st.st_mtime_ns) == (row[1], row[2]) else None

    def feature_map(self, req: SearchRequest) -> FeatureMap:
        """The full-image feature map of the query, cached (LRU) by path + mtime (or pixels id)."""
        key = self._map_key(req)
        with self._lock:
            if key in self._maps:
                self._maps.move_to_end(key)
                return self._maps[key]
        ex = self.lib.extractor()
        prepared = ex.prepare_path(req.path) if req.path else ex.prepare_image(req.image)
        fm = ex.feature_maps([prepared])[0]
        with self._lock:
            self._maps[key] = fm
            while len(self._maps) > self._cache_size:
                self._maps.popitem(last=False)
        return fm

    def query_descriptor(self, req: SearchRequest) -> tuple[np.ndarray, np.ndarray | None, tuple, bool]:
        """(raw (C,), weights grid or None, oriented query size, used_cnn)."""
        mu = self.lib.mu()
        if mu is None:
            raise HeatSearchError("the library has no indexed photos yet")
        params = self.lib.hew_params()
        if req.box is None:
            own = self._library_image(req.path)
            if own is not None:  # a library photo: its stored descriptor, no CNN
                with self.lib.db() as s:
                    d = s.get(Descriptor, (own, self.lib.space().id))
                    im = s.get(Image, own)
                    grid = np.frombuffer(d.grid, np.float16).reshape(d.grid_h, d.grid_w).astype(np.float32)
                    return f32(d.raw), grid, (im.width, im.height), False
        if req.box is not None and req.mode == "crop":
            ex = self.lib.extractor()
            prepared = ex.prepare_path(req.path, req.box) if req.path else ex.prepare_image(req.image, req.box)
            m = ex.forward([prepared.tensor])[0]
            d = describe_tensors([m], mu, ex.hew_dtype, params)[0]
            return d.raw, d.weights, prepared.orig_size, True
        had = self._cached(req)
        fm = self.feature_map(req)
        mask = fm.box_mask(clip_box(req.box, fm.orig_size)) if req.box is not None else None
        d = describe_map(fm, mu, mask, params)
        return d.raw, d.weights, fm.orig_size, not had

    @staticmethod
    def _map_key(req: SearchRequest) -> tuple:
        if req.path:
            st = Path(req.path).stat()
            return ("path", str(Path(req.path).resolve()), st.st_size, st.st_mtime_ns)
        return ("pixels", id(req.image), req.image.size)

    def _cached(self, req) -> bool:
        try:
            key = self._map_key(req)
        except OSError:
            return False
        with self._lock:
            return key in self._maps

    # ---- search ---------------------------------------------------------------------------------
    def search(self, req: SearchRequest) -> SearchResult:
        t0 = time.perf_counter()
        if req.path is None and req.image is None:
            raise HeatSearchError("a search needs an image")
        raw, weights, size, used_cnn = self.query_descriptor(req)
        t1 = time.perf_counter()
        hits, timings = self.rank(raw, req)
        timings.update(query_ms=(t1 - t0) * 1000)
        if weights is not None:
            weights = weights / max(float(weights.max()), 1e-12)
        return SearchResult(req.id, hits, weights, tuple(size), req.box, used_cnn, timings)

    def rank(self, raw: np.ndarray, req: SearchRequest) -> tuple[list[Hit], dict]:
        """ANN shortlist (>= HeR's k) -> QE -> HeR, on the whitened descriptors held by the index."""
        t0 = time.perf_counter()
        ann = self.lib.ann()
        q = self.lib.whitening().apply(raw)[0]
        k = max(req.top, req.her_k if req.her else 0, req.qe_n if req.qe else 0)
        ids, sims = ann.search(q, k)
        t1 = time.perf_counter()
        source = q
        final = ids
        if len(ids):
            vecs = ann.vectors(ids)
            order = np.arange(len(ids))
            if req.qe:
                source = expand_query(q, vecs, order, req.qe_n, req.qe_alpha)
                if not req.her:  # with HeR the QE vector only serves as the heat source
                    final, _ = ann.search(source, k)
            if req.her:
                # QE+HeR: heat from the QE vector over the original query's shortlist
                final = ids[her_rerank(source, vecs, order, req.her_k)]
        t2 = time.perf_counter()
        final = final[: req.top]
        fvecs = ann.vectors(final) if len(final) else np.zeros((0, len(q)), np.float32)
        scores = fvecs @ q
        hits = self._hits(final, scores, req.min_score)
        return hits, {"ann_ms": (t1 - t0) * 1000, "rerank_ms": (t2 - t1) * 1000, "total_ms": (time.perf_counter() - t0) * 1000}

    def _hits(self, ids, scores, min_score) -> list[Hit]:
        ids = [int(i) for i in ids]
        with self.lib.db() as s:
            rows = {i: (p, w, h) for i, p, w, h in s.execute(select(Image.id, Image.path, Image.width, Image.height).where(Image.id.in_(ids)))}
        hits = []
        for i, sc in zip(ids, scores):
            if i in rows and sc >= min_score:  # an id the catalog no longer has is dropped
                p, w, h = rows[i]
                hits.append(Hit(i, p, float(sc), len(hits) + 1, w, h))
        return hits

    def heat_grid(self, image_id: int) -> np.ndarray | None:
        """The stored (H, W) float32 heat grid of a library image (max 1), or None."""
        with self.lib.db() as s:
            d = s.get(Descriptor, (image_id, self.lib.space().id))
            if d is None:
                return None
            return np.frombuffer(d.grid, np.float16).reshape(d.grid_h, d.grid_w).astype(np.float32)
