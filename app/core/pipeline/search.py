"""The search service: query -> descriptor -> shortlist -> QE -> HeR -> hits.

A request is an immutable snapshot with an id; its result carries the id, so a GUI can drop any
result that is not for its latest request. Boxes are (x1, y1, x2, y2) in original-image pixels
after EXIF orientation. Every search reads one library Snapshot taken at its start.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
import traceback
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
from PIL import Image as PILImage

from .. import policy, verification
from ..catalog.records import Filters, ImageRow
from ..describe import Described, HewParams, describe_features, describe_map, match_heat
from ..duplicates import CopyFilter, keeper
from ..errors import HeatSearchError, ImageError, InputError, StaleSnapshotError
from ..features.preprocess import FeatureMap, prepare
from ..heatmap import stretch_match
from ..imageio import check_box, decode, file_digest, image_size, open_oriented
from .. import paths
from ..library.snapshot import Shortlist
from ..rerank.her import her_rerank
from ..rerank.qe import expand_query
from ..signature import best_turns, content_of, frame_scores, inverse_turn, orient, thumb

STALE_RETRIES = 5  # searches run again on a fresh snapshot when a refit dropped the table they read

__all__ = ["Filters", "SearchRequest", "SearchResult", "Searcher", "SearchWorker", "Hit", "request_from_settings"]


@dataclass(frozen=True)
class SearchRequest:
    """path or image (RGB PIL, e.g. pasted pixels); box in original pixels or None.
    qe/her: auto | on | off; mode (box queries): auto | map | crop | hybrid. "auto" follows the
    library's policy (app.core.policy)."""

    id: int = 0
    path: str | None = None
    image: PILImage.Image | None = field(default=None, compare=False)
    box: tuple[float, float, float, float] | None = None
    top: int = 100
    qe: str = "auto"
    qe_n: int = 2
    qe_alpha: float = 3.0
    her: str = "auto"
    her_k: int = policy.HER_K
    mode: str = "auto"
    min_score: float = -1.0
    filters: Filters = Filters()
    hide_duplicates: bool = False


def _onoff(v) -> str:
    return v if isinstance(v, str) else ("on" if v else "off")


def request_from_settings(settings, **fields) -> SearchRequest:
    """A SearchRequest with the user's QE/HeR/box-mode settings; `fields` override (id, path, box, ...)."""
    base = dict(top=settings.top, qe=settings.qe, qe_n=settings.qe_n, qe_alpha=settings.qe_alpha, her=settings.her,
                her_k=settings.her_k, mode=settings.region_mode)
    merged = {**base, **fields}
    for k in ("qe", "her"):
        merged[k] = _onoff(merged[k])
    return SearchRequest(**merged)


def _described(d: Described, req) -> Described:
    """`d`, when it describes something: a query whose description is all zero (a box too small
    for the network to see anything in) would rank arbitrary photos first."""
    if not np.isfinite(d.raw).all() or not np.any(d.raw):
        what = "the box is too small" if req.box is not None else "the photo is too small or too plain"
        raise InputError(f"{what} to describe: nothing in it stands out (draw a larger box)")
    return d


@dataclass
class Hit:
    """score: the relevance shown (grid, viewer, --json, the cut-off), in (0, 1], each photo's own;
    the results are in its order (non-increasing with rank): policy.relevance of the similarity on
    the nearest-neighbour scale and the score the ranking used (cosine for a plain search, cosine to the expanded query with QE, with HeR the
    heat spread over the shortlist from 1 (best) to 0 (last)), times policy.match (a search whose best
    match is not close reads as no match) and, for HeR's warm results, policy.reciprocal (one
    far closer to its own nearest photo than to the query reads lower). similarity: plain cosine of the
    query and this photo (in the searched, whitened space). state: ok | offline (its folder is not reachable) |
    missing (the file is gone). duplicate: the same file as the query; copy: the same photo resized,
    re-encoded or turned (Duplicates' whole-photo rule): both ranked first, at 1."""

    image_id: int
    path: str
    score: float
    rank: int  # 1-based
    width: int = 0
    height: int = 0
    similarity: float = 0.0
    state: str = "ok"
    duplicate: bool = False  # byte-identical to the query
    copy: bool = False  # the same photo as the query, not the same file
    # One per duplicate: the other copies this result stands for (paths; not in the list)
    hidden_copies: list[str] = field(default_factory=list)
    turn: int = 0  # a copy: signature.ORIENTATIONS[turn] turns it onto the query (the query's heat onto it: `on_copy`)
    # One per duplicate: the photo whose place in the ranking this one holds (its set's best-ranked
    # copy; 0: its own), whose similarity and score it reads
    place: int = 0
    taken: float = 0.0  # when it was taken (EXIF, else the file's time; POSIX), for the preview's details
    camera: str = ""  # EXIF make and model, "" when none
    size: int = 0  # the file's bytes

    @property
    def ranked_id(self) -> int:
        return self.place or self.image_id


@dataclass
class SearchResult:
    request_id: int
    hits: list[Hit]
    query_weights: np.ndarray | None  # (H, W) share grid of the query (of the box's cells), max 1: describe.Described
    query_size: tuple[int, int]  # (w, h) of the oriented query image
    box: tuple | None
    used_cnn: bool
    timings: dict
    weights_box: tuple | None = None  # where query_weights lie (original px); None = whole image
    plan: policy.SearchPlan | None = None
    total: int = 0  # results before the cut-off
    generation: int = 0
    query_raw: np.ndarray | None = field(default=None, repr=False)  # (C,) float32 raw descriptor: match_grid's query
    space_id: int = 0  # the descriptor space that answered (another after a change of model)
    settled: bool = True  # False: the first results before their details are compared (`Searcher.search`'s early)
    query_cells: np.ndarray | None = field(default=None, repr=False)  # (N, C) float32: match_grid's cells (Described.cells)


RESULT_MAPS_BYTES = 48 << 20  # result photos' maps kept for match grids (~1.3 MB each at 512 px; more with larger models)


class Searcher:
    """Answers SearchRequests against a LibraryService's snapshots. Thread-safe: many searches may
    run at once, also while the writer changes the library."""

    def __init__(self, svc, cache_size: int = 8):
        self.svc = svc
        self._maps: OrderedDict[tuple, FeatureMap] = OrderedDict()
        self._result_maps: OrderedDict[tuple, FeatureMap] = OrderedDict()  # match grids' photos
        self._thumbs: OrderedDict[tuple, bytes] = OrderedDict()  # query photo -> its thumbnail (copies first)
        self._digests: OrderedDict[tuple, str | None] = OrderedDict()  # query photo outside the library -> its digest
        self._local: OrderedDict[tuple, tuple] = OrderedDict()  # photo -> its local features (verification)
        self._turns: OrderedDict[tuple, list[Described]] = OrderedDict()  # query photo -> its descriptions turned 90, 180, 270
        self._lock = threading.Lock()
        self._cache_size = cache_size
        self._enlarged: dict = {}  # One per duplicate: Duplicates' enlargement answers, by the files' identities

    # ---- query descriptor ---------------------------------------------------------------------
    def _library_row(self, path: str | None, snap) -> ImageRow | None:
        """The catalog row of an indexed, unchanged library photo at `path` that the snapshot can
        search."""
        if not path or snap.space is None:
            return None
        p = os.path.realpath(path)
        row = self.svc.catalog.guard(self.svc.catalog.library_row, p, snap.space.id)
        if row is None or not snap.contains([row.id])[0]:
            return None
        try:
            st = os.stat(p)
        except OSError:
            return None
        return row if (st.st_size, st.st_mtime_ns) == (row.size, row.mtime_ns) else None

    def _map_key(self, req: SearchRequest, snap) -> tuple:
        """Content key of the query's feature map: path + size + mtime, or a digest of the pixels
        (never the object's id: CPython reuses ids)."""
        if req.path:
            try:
                st = os.stat(req.path)
            except OSError as e:
                raise InputError(f"cannot read the query photo: {e.strerror or e}") from e
            return ("path", os.path.realpath(req.path), st.st_size, st.st_mtime_ns, snap.space.key)
        im = req.image
        return ("pixels", hashlib.sha1(im.tobytes()).hexdigest(), im.size, im.mode, snap.space.key)

    def feature_map(self, req: SearchRequest, snap, result: bool = False) -> tuple[FeatureMap, bool]:
        """(full-image feature map of the query, or with `result` of a result photo for its
        match grid, whether the CNN ran), cached (LRU) by content; results apart, so that looking
        at results never drops the map a box dragged over the query needs."""
        maps = self._result_maps if result else self._maps
        key = self._map_key(req, snap)
        with self._lock:
            if key in maps:
                maps.move_to_end(key)
                return maps[key], False
        ex = self.svc.extractor(snap.space)
        prepared = ex.prepare_path(req.path) if req.path else ex.prepare_image(req.image)
        with self.svc.interactive:
            fm = ex.feature_maps([prepared])[0]
        with self._lock:
            maps[key] = fm
            while len(maps) > 1 and (sum(m.features.nbytes for m in maps.values()) > RESULT_MAPS_BYTES if result
                                     else len(maps) > self._cache_size):
                maps.popitem(last=False)
        return fm, True

    def _best_turn(self, req: SearchRequest, snap, d: Described, params: HewParams
                   ) -> tuple[Described, list[Described], bool]:
        """(the description of the whole query photo in the turn it is searched in, those of its
        three other turns, closest first, whether the CNN ran): the photo as it is, or turned 90/180/270 degrees
        where that turn's first policy.TURN_TOP photos in this snapshot are closer by
        policy.TURN_MARGIN (a photo stored sideways; closeness: `closeness` below). The share grid
        is turned back onto the photo as shown. The turns' descriptions are kept per photo, as its
        feature map is; the choice is made on each snapshot."""
        key = self._map_key(req, snap)
        with self._lock:
            turns = self._turns.get(key)
            if turns is not None:
                self._turns.move_to_end(key)
        ran = turns is None
        if turns is None:
            ex = self.svc.extractor(snap.space)
            if req.path:
                img, orig = open_oriented(req.path, draft_side=ex.max_side)
            else:
                img, orig = req.image.convert("RGB"), req.image.size
            turns = []
            for deg in (90, 180, 270):
                size = orig if deg == 180 else (orig[1], orig[0])
                prepared = prepare(img.rotate(deg, expand=True), size, ex.max_side, ex.backbone.mean, ex.backbone.std)
                with self.svc.interactive:
                    fm = ex.feature_maps([prepared])[0]
                dt = describe_map(fm, snap.mu, None, params, cells=True)  # its cells as turned: results lie upright
                turns.append(Described(dt.raw, np.ascontiguousarray(np.rot90(dt.share, -deg // 90)), None, dt.cells))
            with self._lock:
                self._turns[key] = turns
                while len(self._turns) > self._cache_size:
                    self._turns.popitem(last=False)

        def closeness(raw: np.ndarray) -> float:
            # how far the first photos stand out from the next ones: the cosine level of a whole
            # list says little (a turned Eiffel Tower read its first ten at 0.714, upright 0.701),
            # a subject found stands out (0.104 upright, 0.056 turned)
            sl = snap.search(snap.whitening.apply(raw)[0], policy.TURN_REFERENCE, None)
            if len(sl) <= policy.TURN_TOP:
                return 0.0
            return float(np.mean(sl.sims[: policy.TURN_TOP]) - np.mean(sl.sims[policy.TURN_TOP:]))

        score = {id(t): closeness(t.raw) for t in (d, *turns)}
        score[id(d)] += policy.TURN_MARGIN
        best = max((d, *turns), key=lambda t: score[id(t)])  # (the photo as it is on a tie: first)
        return best, sorted((t for t in (d, *turns) if t is not best), key=lambda t: -score[id(t)]), ran

    def query_size(self, req: SearchRequest) -> tuple[int, int]:
        return image_size(req.path) if req.path else req.image.size

    def query_descriptor(self, req: SearchRequest, snap, plan: policy.SearchPlan
                         ) -> tuple[Described, tuple[int, int], bool, ImageRow | None, bool]:
        """(description of the photo as it is, oriented query size, used_cnn, library row or None,
        turnable: a whole photo described by the CNN, searched in its best turn: `_best_turn`)."""
        params = HewParams(snap.space.threshold, snap.space.z_ratio)
        own = self._library_row(req.path, snap)
        if req.box is None and own is not None:  # a library photo: its stored descriptor, no CNN
            stored = self.svc.catalog.descriptor(own.id, snap.space.id)
            if stored is not None:
                return Described(stored[0], stored[1]), (own.width, own.height), False, own, False
        crop = None
        if req.box is not None and plan.box_mode in ("crop", "hybrid"):
            ex = self.svc.extractor(snap.space)
            prepared = ex.prepare_path(req.path, req.box) if req.path else ex.prepare_image(req.image, req.box)
            with self.svc.interactive:
                m = ex.forward([prepared.array])[0]
            crop = describe_features(np.ascontiguousarray(m.transpose(1, 2, 0)), snap.mu, params, cells=True)
            fm = FeatureMap(m.transpose(1, 2, 0), prepared.scale, prepared.offset, prepared.orig_size, ex.stride)
            # the crop's cells start at the box; the network pads the last ones beyond it
            x1, y1, x2, y2 = fm.cells_rect(slice(0, m.shape[1]), slice(0, m.shape[2]))
            bx1, by1, bx2, by2 = req.box
            crop.where = (x1, y1, min(x2, float(bx2)), min(y2, float(by2)))
            if plan.box_mode == "crop":
                return _described(crop, req), prepared.orig_size, True, own, False
        fm, ran = self.feature_map(req, snap)
        d = describe_map(fm, snap.mu, req.box, params, cells=True)
        if crop is not None:  # hybrid: the map's cells and the crop's own pass, summed
            v = d.raw.astype(np.float64) + crop.raw
            # the overlay shows the crop pass's share grid: it covers the box as drawn, where the
            # map's cells stick out of it by up to half a cell (the heat read 6-12 px off the box)
            d = Described((v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32), crop.share, crop.where, crop.cells)
            ran = True
        return _described(d, req), fm.orig_size, ran, own, req.box is None and policy.TURN_QUERIES

    # ---- search ---------------------------------------------------------------------------------
    def search(self, req: SearchRequest, early: Callable[[SearchResult], None] | None = None) -> SearchResult:
        """Answer one request on the library's current snapshot. A snapshot of a shared library
        whose search table a refit replaced (and dropped) is refreshed and the search run again.
        While the library's server is known not to answer, fails at once with one line
        (ServerUnreachable); a database failure is the catalog's one-line error, never a driver's
        message. early: given the answer before its first results' details are compared (settled
        False), when they are: a new photo's first whole-photo search shows its results as the
        photo is in ~0.15 s, its best turn's if another (`_best_turn`, ~0.2 s), the comparison's
        ~0.6-0.9 s later (2 cores), which only lowers numbers and lifts the photos that share the
        query's details (`_verified`)."""
        self.svc.check_reachable()
        try:
            snap = self.svc.snapshot()
            for _ in range(STALE_RETRIES):
                try:
                    return self._search(req, snap, early)
                except StaleSnapshotError:  # refits in a row: each retry reads the newest table
                    snap = self.svc.fresh_snapshot()
            return self._search(req, snap, early)
        except HeatSearchError as e:
            self.svc.explain(e)  # a ServerUnreachable starts the outage state
            raise
        except Exception as e:
            err = self.svc.explain(e)
            if err is None:
                raise
            raise err from e

    def _search(self, req: SearchRequest, snap, early=None) -> SearchResult:
        t0 = time.perf_counter()
        if req.path is None and req.image is None:
            raise InputError("a search needs a photo")
        if req.path is not None and not os.path.isfile(req.path):
            raise InputError(f"no such photo: {paths.display(req.path)}")
        if not snap.ready:
            raise HeatSearchError("the library has no indexed photos yet" if snap.space is not None
                                  else "the library is not open yet")
        if req.top < 1:
            raise InputError(f"the number of results must be at least 1, got {req.top}")
        if req.box is not None:
            try:
                size = self.query_size(req)
            except ImageError as e:
                raise InputError(f"cannot read the query photo: {e}") from e
            req = _with_box(req, check_box(req.box, size))
        plan = policy.search_plan(snap.n_alive, req.box is not None, req.qe, req.her, req.mode, req.qe_n, req.qe_alpha, req.her_k)
        try:
            d, size, used_cnn, own, turnable = self.query_descriptor(req, snap, plan)
        except ImageError as e:
            raise InputError(f"cannot read the query photo: {e}") from e
        t1 = time.perf_counter()
        pinned, same = self._pinned(req, own, snap)
        thumb = self._query_thumb(req, own)

        first_shown = []  # ms from the request to its first early answer
        turns_ms = [0.0]  # describing the photo's turns: part of describing the query

        def result(d, hits, total, timings, plan, settled=True) -> SearchResult:
            timings.update(query_ms=(t1 - t0) * 1000 + turns_ms[0], elapsed_ms=(time.perf_counter() - t0) * 1000)
            if not settled and not first_shown:
                first_shown.append(timings["elapsed_ms"])
            if settled and first_shown:
                timings.update(shown_ms=first_shown[0])
            w = d.share / max(float(d.share.max()), 1e-12) if d.share is not None else None
            return SearchResult(req.id, hits, w, tuple(size), req.box, used_cnn, timings,
                                d.where if req.box is not None else None, plan, total, snap.generation, d.raw,
                                snap.space.id if snap.space is not None else 0, settled, d.cells)

        shown = False  # whether `early` has the answer for the description searched
        if turnable:
            # a whole photo as it is first, then its turns (three more CNN passes, ~0.2 s here)
            if early is not None:
                early(result(d, *self.rank(d.raw, req, snap, plan, pinned, thumb, same, verify=False), settled=False))
                shown = True
            t_turns = time.perf_counter()
            turned, others, ran = self._best_turn(req, snap, d, HewParams(snap.space.threshold, snap.space.z_ratio))
            turns_ms[0] = (time.perf_counter() - t_turns) * 1000
            used_cnn = used_cnn or ran
            if turned is not d:  # a photo stored sideways: its turn's first results, then their details
                d, shown = _described(turned, req), False
        told = None if early is None or shown else (lambda *answer: early(result(d, *answer, settled=False)))
        return result(d, *self.rank(d.raw, req, snap, plan, pinned, thumb, same, early=told,
                                    turns=[o.raw for o in others[: policy.TURN_JOINED]] if turnable else ()))

    def match_grid(self, query_raw: np.ndarray, path: str, cells: np.ndarray | None = None) -> np.ndarray:
        """What in the photo at `path` makes it like the query: (H, W) float32 in [0, 1] over the
        photo's cells as the stored share grid lies (the heat overlay of a result): each cell's
        positive part in the cosine of the searched vectors (describe.match_share), times how
        closely it resembles one of the query's strongest `cells` (SearchResult.query_cells or
        `query_cells`; None: the first alone; describe.match_heat), stretched
        (heatmap.stretch_match). One CNN pass per photo (its map kept, LRU), on the current
        snapshot's model, centring mean and whitening. Raises ImageError for an unreadable photo. (The query's own
        file and its copies show the query's own grid instead: `Hit.turn`.)"""
        snap = self._space_snapshot()
        fm, _ = self.feature_map(SearchRequest(path=path), snap, result=True)
        params = HewParams(snap.space.threshold, snap.space.z_ratio)
        return stretch_match(match_heat(fm.features, snap.mu, snap.whitening, snap.whitening.apply(query_raw)[0],
                                        cells, params))

    def query_cells(self, path: str) -> np.ndarray:
        """The match overlay's cells (describe.query_cells) of a whole library photo searched by
        its stored descriptor, which keeps no cells: one CNN pass (the map kept as a result's)."""
        snap = self._space_snapshot()
        fm, _ = self.feature_map(SearchRequest(path=path), snap, result=True)
        return describe_features(fm.features, snap.mu, HewParams(snap.space.threshold, snap.space.z_ratio),
                                 cells=True).cells

    def _space_snapshot(self):
        snap = self.svc.snapshot()
        if snap.space is None:
            raise HeatSearchError("the library is not open yet")
        return snap

    def _pinned(self, req: SearchRequest, own, snap) -> tuple[list[int], list[int]]:
        """(catalog ids byte-identical to the query photo (the photo itself first) that the
        filters admit: ranked first, with a box too (else the photo a box was drawn on came #20,
        below other photos of its subject); all of them, filter or not)."""
        if not req.path:
            return [], []
        digest = own.digest if own is not None else self._digest(req.path)
        if digest is None:
            return [], []
        ids = self.svc.catalog.guard(self.svc.catalog.ids_with_digest, digest)
        if ids:
            ids = [i for i, ok in zip(ids, snap.contains(ids).tolist()) if ok]
        if own is not None and own.id in ids:
            ids.remove(own.id)
            ids.insert(0, own.id)
        same = list(ids)
        if ids and req.filters.active:
            allowed = set(self._admitted(req.filters, ids).tolist())
            ids = [i for i in ids if i in allowed]
        return ids, same

    def _digest(self, path: str) -> str | None:
        """The file digest of a query photo outside the library (None: unreadable, or over 256 MB),
        kept while the file is unchanged: a box dragged over it searches many times a second."""
        try:
            st = os.stat(path)
            key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
            with self._lock:
                if key in self._digests:
                    return self._digests[key]
            digest = file_digest(path) if st.st_size <= (256 << 20) else None
        except (OSError, ImageError):
            return None
        with self._lock:
            self._digests[key] = digest
            while len(self._digests) > self._cache_size:
                self._digests.popitem(last=False)
        return digest

    def _admitted(self, filters: Filters, ids) -> np.ndarray:
        """Those of catalog `ids` that `filters` admit."""
        return self.svc.catalog.guard(self.svc.catalog.filter_ids, filters.folders, filters.after, filters.before,
                                      [int(i) for i in ids])

    def _query_thumb(self, req: SearchRequest, own) -> bytes:
        """The whole query photo's thumbnail as the catalog stores photos' (signature.thumb), to
        find its copies among the results; b"" for a box (a region has no copies) or an unreadable photo."""
        if req.box is not None:
            return b""
        if own is not None:
            return own.thumb or b""
        try:
            if req.image is not None:  # pasted pixels: no file to read again
                return thumb(content_of(req.image)[1])
            st = os.stat(req.path)
            key = (os.path.realpath(req.path), st.st_size, st.st_mtime_ns)
            with self._lock:
                if key in self._thumbs:  # the same photo searched again (a filter, the count): not decoded again
                    return self._thumbs[key]
            made = thumb(content_of(decode(req.path, draft_side=256).image)[1])
        except (ImageError, OSError, ValueError):
            return b""
        with self._lock:
            self._thumbs[key] = made
            while len(self._thumbs) > self._cache_size:
                self._thumbs.popitem(last=False)
        return made

    def _ranking(self, q: np.ndarray, k: int, filters, plan: policy.SearchPlan, snap, same=(), sl: Shortlist | None = None,
                 copies=()) -> tuple[Shortlist, np.ndarray, bool]:
        """The k best photos for the whitened query `q` (D,) among `filters`' photos (None: all),
        from their shortlist `sl` (searched when None), QE and HeR as `plan` says (its HeR
        decided; its ranking dropped for QE's when it lost the query's nearest photos, `same`: ids
        of the query's own file and its copies, left out of that check). `copies`: ids of the
        query's copies (not its own file), left out of QE's neighbours and HeR's graph and put
        first: they are the query again (with four copies, QE expanded the query with itself). Returns (shortlist in ranking order, scores (k,) float64 in [0, 1], the ranking's
        own: HeR's heat spread best 1, last 0, or cosines; whether HeR's ranking was kept)."""
        sl = snap.search(q, k, filters) if sl is None else sl
        scores = sl.sims.astype(np.float64)
        final = sl
        her = bool(plan.her)
        if len(sl):
            dup = np.isin(sl.ids, list(copies))
            order = np.flatnonzero(~dup)
            source = expand_query(q, sl.vectors, order, plan.qe_n, plan.qe_alpha) if plan.qe else q
            if her:
                # heat from the (QE) source over the original query's shortlist
                new, heat = her_rerank(source, sl.vectors, order, plan.her_k, return_heat=True)
                mine = np.isin(sl.ids, list(same))
                if policy.her_drifted(sl.ids[~mine], sl.ids[new][~mine[new]]):
                    her = False  # the heat went to another subject: QE's ranking
            if plan.qe and not her:  # with HeR the QE vector only serves as the heat source
                final = snap.search(source, k, filters)
                scores = final.sims.astype(np.float64)
            if her:
                new = np.concatenate([np.flatnonzero(dup), new])
                heat = None if heat is None else np.concatenate([np.full(int(dup.sum()), heat[0]), heat])
                final = Shortlist(sl.ids[new], sl.sims[new], sl.vectors[new])
                if heat is not None and float(heat[0]) > float(heat.min()):
                    # heat is compressed near its top (relevant 1.0-0.97, the rest ~0.94 on a
                    # Paris query): spread it over the shortlist, best 1, last 0, so that the
                    # relevance bars and the cut-off tell relevant from not
                    low = float(heat.min())
                    rel = np.clip((heat - low) / max(float(heat[0]) - low, 1e-300), 0.0, 1.0)
                    tail = np.minimum(final.sims[len(heat):], rel[-1]) if len(new) > len(heat) else np.zeros(0)
                    scores = np.concatenate([rel, tail])
                else:
                    scores = final.sims.astype(np.float64)
        return final, scores, her

    def _joined(self, final: Shortlist, scores: np.ndarray, rel: np.ndarray, n: int, q: np.ndarray,
                turns: list[np.ndarray], req: SearchRequest, snap, plan: policy.SearchPlan, own: list[int]
                ) -> tuple[Shortlist, np.ndarray, np.ndarray, int]:
        """(ranking, its scores, relevance (n',) of its first n', n') of the query: its ranking
        `final` (the first n with relevance `rel` (n,) float64) with the photos that the query's
        other turns (`turns`: raw descriptors, policy.TURN_JOINED of them) find, each read
        policy.TURN_PENALTY lower than that turn reads it where that beats its own relevance:
        library photos stored sideways, which the query as it is reads as nothing like it.
        Each turn's first policy.TURN_RESULTS count, as the whole library ranks them (`rank`'s
        relevance_only); the comparison of details that follows judges them as the others. `own`:
        the query's own file and copies, left as they are; q: the whitened query (D,)."""
        pos = {int(i): k for k, i in enumerate(final.ids[:n].tolist())}
        rel = rel.copy()
        extra: dict[int, tuple[float, np.ndarray]] = {}  # a photo not in the first n -> (relevance, vector)
        for raw in turns:
            ids, t_rel, vecs = self.rank(raw, req, snap, plan, same=own, relevance_only=True)
            m = policy.TURN_RESULTS
            for i, r, v in zip(ids[:m].tolist(), (t_rel[:m] - policy.TURN_PENALTY).tolist(), vecs[:m]):
                k = pos.get(i)
                if k is not None:
                    rel[k] = max(rel[k], r)
                elif r > extra.get(i, (-np.inf, None))[0]:
                    extra[i] = (r, v)
        if not extra:
            return final, scores, rel, n
        new = np.array(list(extra), np.int64)
        add_rel = np.array([extra[i][0] for i in extra])
        add_vecs = np.stack([extra[i][1] for i in extra]).astype(final.vectors.dtype)
        later = ~np.isin(final.ids[n:], new)  # beyond the first n: each photo once
        final = Shortlist(np.concatenate([final.ids[:n], new, final.ids[n:][later]]),
                          np.concatenate([final.sims[:n], add_vecs @ q, final.sims[n:][later]]),
                          np.concatenate([final.vectors[:n], add_vecs, final.vectors[n:][later]]))
        scores = np.concatenate([scores[:n], add_rel, scores[n:][later]])
        return final, scores, np.concatenate([rel, add_rel]), n + len(new)

    def rank(self, raw: np.ndarray, req: SearchRequest, snap, plan: policy.SearchPlan,
             pinned: list[int] = (), query_thumb: bytes = b"", same: list[int] = (), early=None, verify: bool = True,
             turns: list[np.ndarray] = (), relevance_only: bool = False
             ) -> tuple[list[Hit], int, dict, policy.SearchPlan] | tuple:
        """Shortlist (>= HeR's k) -> QE -> HeR on one snapshot's vectors. Returns (hits, results
        before the cut-off, timings, the plan as applied: HeR "auto" decided for this query, and
        off where its ranking drifted). pinned: ids ranked first (the query's own file and its
        byte-identical copies that the filters admit; `same`: all of these, filter or not).
        query_thumb: the query's thumbnail; its copies are ranked first (after its own file).
        early: called with the same four before the first results' details are compared
        (`_verified`, ~0.6 s for a new photo's first search on 2 cores), when they are; verify:
        whether they are. turns: raw descriptors (C,) of the query photo's other turns, whose
        photos join the ranking (`_joined`). relevance_only: (ids (n,) int64, relevance (n,)
        float64, vectors (n, D) float32) of the whole library's first results instead, in that
        order, the query's own file and copies left out, no filter applied, no hits built."""
        t0 = time.perf_counter()
        q = snap.whitening.apply(raw)[0]
        filters = req.filters if req.filters.active else None
        same = list(same or pinned)
        # the whole library's ranking is the same with or without a filter (its length too: the
        # first results are ordered by relevance within it)
        k = max(req.top + len(same), plan.her_k if plan.her else 0, plan.qe_n if plan.qe else 0)
        # the whole library's shortlist: HeR's decision, the ranking, and with a filter its scores
        # (room for the query's copies, which are left out of them)
        sl = snap.search(q, (max(k, policy.NEIGHBOURHOOD) if plan.her == "auto" else k) + self.COPY_CANDIDATES, None)
        copy_of = self._copies(sl, query_thumb, same)
        copies = same[1:] + [i for i, c in copy_of.items() if c]  # the query again, but for its own file
        # as many other photos in their place: HeR's graph is the same 200 photos whatever the
        # number of results asked (else a result read 0.35 with 100 asked, 0.50 with 200)
        k += len(copies)
        near = sl.sims[~np.isin(sl.ids, same + copies)]  # the query's neighbours in the whole library
        if plan.her == "auto":
            # the query's own file and its copies are not its neighbours, box or not: counted, a
            # box's own photo (0.87 against 0.76 for the next) left nothing standing out, and HeR
            # stayed off for a box on a landmark with 35 photos (benchmarks/policies.py --exp
            # boxown: Paris boxes +0.1 to +1.5, UKBench boxes -0 to -0.2), and four copies of a
            # photo did the same for its landmark
            plan = replace(plan, her=policy.use_her(near[: policy.NEIGHBOURHOOD], False))
        t1 = time.perf_counter()
        final, scores, her = self._ranking(q, k, None, plan, snap, same + copies,
                                           Shortlist(sl.ids[:k], sl.sims[:k], sl.vectors[:k]), copies)
        whole_scores = np.minimum.accumulate(np.clip(scores, 0.0, 1.0)) if len(scores) else scores
        mu, sd = snap.similarity_scale
        unit = sd * policy.neighbour_z(not snap.whitening.is_identity)  # the nearest-neighbour scale
        # how close its best match in the whole library is, filter or not (the query's own file
        # and copies left out): a photo the library does not hold reads as no match
        best = float(near[0]) if len(near) else None
        whole_photo = best is not None and req.box is None
        neighbour = self._nearest_other(sl, same + copies, snap) if whole_photo else None
        # a box's raw cosine from the photo's map alone (while the box is dragged) lies lower, as
        # close for a subject not held as for a held one (held boxes at 120 photos: 0.64 at the
        # 5th percentile): judged by u or cosine alone then, and by its raw cosine too on release
        by_raw = best is not None and snap.space.backbone in policy.MATCH_RAW_MODELS and (
            req.box is None or plan.box_mode != "map")
        best_raw = self._best_raw(raw, sl, same + copies, snap) if by_raw else None
        matched = policy.match(None if best is None else (best - mu) / unit, best,
                               None if neighbour is None else (neighbour - mu) / unit, best_raw, box=req.box is not None)
        # a whole photo whose best match is not sure by its raw cosine: its first results' details
        # decide whether the library holds its subject at all (`_verified`)
        unsure = (whole_photo and best_raw is not None and best_raw < policy.MATCH_RAW_SURE
                  and snap.space.backbone in policy.MATCH_RAW_SURE_MODELS)
        scale = (mu, unit, her, matched, req.box is None, not snap.whitening.is_identity)
        # Each photo reads its own relevance, as it stands in the whole library's ranking, filter
        # or not, and the list's first results are shown in that order: the ranking's order
        # capped by a running minimum made flat bands after a warm photo of another subject
        # (a dozen Eiffel photos at 0.47 after a photo of the Invalides) and read
        # photos below ones the list showed after them. The query's own file and copies read 1, first.
        n = min(len(final.ids), req.top + 200)
        w_rel = self._relevance(final.ids[:n], final.vectors[:n] @ q, whole_scores[:n], list(final.vectors[:n]),
                                scale, sl, same + copies)
        w_rel[np.isin(final.ids[:n], same + copies)] = 1.0
        turns_ms = 0.0  # the other turns' photos joining the ranking
        if relevance_only:
            order = np.argsort(-w_rel, kind="stable")
            order = order[~np.isin(final.ids[:n][order], same + copies)]
            return final.ids[:n][order], w_rel[order], final.vectors[:n][order]
        if len(turns):
            t_turns = time.perf_counter()
            final, scores, w_rel, n = self._joined(final, scores, w_rel, n, q, turns, req, snap, plan, same + copies)
            turns_ms = (time.perf_counter() - t_turns) * 1000

        def finish(w_rel, plan, verify_ms):
            """(hits, total, timings, plan) from the relevance `w_rel` (n,) of the ranking's first n
            results: ordered by it, the filter's photos, the pinned first, each hit's relevance."""
            ranked, sc = final, scores
            order = np.concatenate([np.argsort(-w_rel, kind="stable"), np.arange(n, len(ranked.ids))])
            ranked = Shortlist(ranked.ids[order], ranked.sims[order], ranked.vectors[order])
            sc, w_rel = sc[order], w_rel[order[:n]]
            at = {int(i): r for i, r in zip(ranked.ids[:n].tolist(), w_rel)}
            floor = float(w_rel[-1]) if n else 1.0
            if filters is not None and len(ranked):
                # A filter shows its photos in the whole library's order, each with its relevance
                # there: ranked among the filter's photos alone, the best of them scored 1 (HeR's
                # heat is spread best 1, last 0), so a search with no right answer in the filtered
                # folder read 0.55-0.66 for wrong photos that read 0.08 unfiltered. Then, in their own
                # ranking, the filter's photos beyond the whole library's shortlist.
                part, part_scores, _ = self._ranking(q, k, filters, plan, snap, same + copies, copies=copies)
                inside = np.isin(ranked.ids, self._admitted(filters, ranked.ids))
                rest = ~np.isin(part.ids, ranked.ids)
                tail = float(sc.min()) if len(sc) else 0.0
                ranked = Shortlist(np.concatenate([ranked.ids[inside], part.ids[rest]]),
                                   np.concatenate([ranked.sims[inside], part.sims[rest]]),
                                   np.concatenate([ranked.vectors[inside], part.vectors[rest]]))
                sc = np.concatenate([sc[inside], np.minimum(part_scores[rest], tail)])
            plan = replace(plan, her=her)  # as applied: HeR's ranking dropped when it drifted
            t2 = time.perf_counter()
            ids = ranked.ids
            vec_of = {int(i): v for i, v in zip(ranked.ids[: req.top + 200].tolist(), ranked.vectors[: req.top + 200])}
            if pinned:
                keep = ~np.isin(ids, pinned)
                ids = np.concatenate([np.asarray(pinned, np.int64), ids[keep]])
                sc = np.concatenate([np.ones(len(pinned)), sc[keep]])
                lacking = [i for i in pinned if i not in vec_of]
                if lacking:
                    got, vecs = snap.vectors_of(lacking)
                    vec_of.update({int(i): v for i, v in zip(got.tolist(), vecs)})
            hits = self._hits(ids, np.clip(sc, 0.0, 1.0), q, snap, req, set(pinned), vec_of, query_thumb, copy_of)
            if hits:
                # the query's own file and copies read 1; photos beyond the whole library's first
                # results (a filter's own), their own relevance, no more than the last of those
                rel = np.array([1.0 if h.duplicate or h.copy else at.get(h.ranked_id, np.nan) for h in hits])
                beyond = np.flatnonzero(np.isnan(rel))
                if len(beyond):
                    ids = np.array([hits[i].ranked_id for i in beyond], np.int64)
                    rel[beyond] = np.minimum(self._relevance(
                        ids, [hits[i].similarity for i in beyond], [hits[i].score for i in beyond],
                        [vec_of.get(int(i)) for i in ids], scale, sl, same + copies), floor)
                rel = np.minimum.accumulate(rel)  # a guarantee: already in order
                for h, r in zip(hits, rel):
                    h.score = float(r)
            total = len(hits)
            hits = [h for h in hits if h.score >= req.min_score][: req.top]
            for i, h in enumerate(hits):
                h.rank = i + 1
            return hits, total, {"ann_ms": (t1 - t0) * 1000, "rerank_ms": (t2 - t1) * 1000, "verify_ms": verify_ms,
                                 "turns_ms": turns_ms, "total_ms": (time.perf_counter() - t0) * 1000,
                                 "backend": snap.backend}, plan

        if not ((her or unsure) and whole_photo and verify):
            return finish(w_rel, plan, 0.0)
        if early is not None:
            early(*finish(w_rel, plan, 0.0))
        t_verify = time.perf_counter()
        w_rel, above, unmatched = self._verified(req, final.ids[:n], final.vectors[:n], q, w_rel, same + copies,
                                                 step=her, unsure=unsure)
        return finish(w_rel, replace(plan, verified=above, unmatched=unmatched), (time.perf_counter() - t_verify) * 1000)

    VERIFIED = 30  # the first results of a HeR search whose local features are matched with the query's (0: none,
    # and no look-alike test either)
    LOCAL_KEPT = 64  # photos whose local features are kept (up to 260 KB each): a search redone reads none again

    def _verified(self, req: SearchRequest, ids: np.ndarray, vectors: np.ndarray, q: np.ndarray, rel: np.ndarray,
                  own: list[int], step: bool = True, unsure: bool = False) -> tuple[np.ndarray, int | None, bool]:
        """The first results of a whole-photo search matched with the query part by part (SIFT
        inliers, in relevance order): (the relevance `rel` (n,) float64 of results `ids` (n,) int64
        as lowered, how many stood above the step (None: no step looked for, the query could not
        be read, or nothing shares its details), whether the search found nothing that shares the
        query's details).
        `unsure` (its best match not sure by its raw cosine: policy.MATCH_RAW_SURE): when none of
        the first verification.UNMATCHED_FIRST (a burst counted once; each read, and it and the
        query with details enough: verification.judged) shares verification.UNMATCHED_INLIERS, every result
        reads verification.BELOW_STEP of its relevance: a look-alike of the same kind, not the
        query's subject. `step` (a HeR search): every result below a step of inliers
        (verification.step, among the first VERIFIED) and every result after those times
        verification.BELOW_STEP: the query's object was found above the step, the heat spread over
        other things of its kind. `own` (the query's own file and its copies) and its
        near-identical shots (`vectors` (n, D) against the query `q` (D,): cosine
        verification.BURST or more) are left as they are (such a shot: the subject is held); a
        result's own near-identical shots count once, with it, and share its fate. A photo that
        cannot be read counts no inliers, but is not lowered among the first VERIFIED."""
        if not self.VERIFIED:
            return rel, None, False
        try:  # the verification only ever lowers numbers: whatever fails, the search keeps its own
            query = self._local_features(req.path) if req.path is not None else verification.features_of(req.image)
        except Exception:
            return rel, None, False
        kept = np.isin(ids, own) | (vectors @ q >= verification.BURST)
        # a near-identical shot of the query among the results: its subject is held; a query with
        # too few details to share UNMATCHED_INLIERS (sky, fog, a plain product shot) is not judged
        unsure = unsure and not kept[~np.isin(ids, own)].any() and verification.judged(query)
        if not (step or unsure):
            return rel, None, False
        # (a burst among the first three is one photo: three more leave room for three others)
        first = [int(j) for j in np.argsort(-rel, kind="stable") if not kept[j]][
            : self.VERIFIED if step else 3 * verification.UNMATCHED_FIRST]
        # a burst among the results is one photo: its shots would make a step of their own over the
        # other views of the same object (tests/core/test_policy.py, three near shots of a view)
        alike = vectors[first] @ vectors[first].T >= verification.BURST  # (m, m)
        lead = {j: first[int(np.argmax(alike[a]))] for a, j in enumerate(first)}  # the first of its burst
        leads = sorted(set(lead.values()), key=first.index)
        if not step:
            leads = leads[: verification.UNMATCHED_FIRST]
        rows = self.svc.image_rows([int(ids[j]) for j in leads])
        judged: dict[int, bool] = {}  # lead -> whether it has details enough to be judged by (`unsure`)

        def count(j: int) -> int | None:
            row = rows.get(int(ids[j]))
            if row is None or not verification.readable(row.path, row.width, row.height):
                return None
            try:
                theirs = self._local_features(row.path)
                judged[j] = verification.judged(theirs)
                return verification.inliers(query, theirs)
            except Exception:  # unreadable, gone, or OpenCV's own error: not counted, not lowered
                return None

        with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
            counts = dict(zip(leads, pool.map(count, leads)))
        if unsure:
            # only when each of the first photos was read and has details enough: one that could
            # not be judged might be the query's subject
            firsts = leads[: verification.UNMATCHED_FIRST]
            if firsts and all(counts[j] is not None and judged.get(j) for j in firsts) and \
                    max(counts[j] for j in firsts) < verification.UNMATCHED_INLIERS:
                return np.where(kept, rel, rel * verification.BELOW_STEP), None, True
        if not step:
            return rel, None, False
        cut = verification.step([c for c in counts.values() if c is not None])
        if cut is None:
            return rel, 0, False
        below = ~kept
        for j in first:
            c = counts[lead[j]]
            below[j] = c is not None and c < cut
        above = [counts[lead[j]] for j in first if counts[lead[j]] is not None and counts[lead[j]] >= cut]
        return np.where(below, rel * verification.BELOW_STEP, rel), len(above), False

    def _local_features(self, path: str) -> tuple:
        """verification.read_features of the photo at `path`, kept while the file is unchanged.
        Raises ImageError or OSError."""
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._local:
                self._local.move_to_end(key)
                return self._local[key]
        made = verification.read_features(path)
        with self._lock:
            self._local[key] = made
            while len(self._local) > self.LOCAL_KEPT:
                self._local.popitem(last=False)
        return made

    RAW_CANDIDATES = 20  # the shortlist's first photos whose raw descriptors `_best_raw` reads

    def _best_raw(self, raw: np.ndarray, sl: Shortlist, own: list[int], snap) -> float | None:
        """The best cosine, in the model's own space (raw descriptors, before whitening), of the
        query's raw descriptor `raw` (C,) and the first RAW_CANDIDATES photos of the shortlist
        `sl`, `own` (the query's own file and its copies) left out: policy.MATCH_RAW. Unwhitened,
        the shortlist's own cosines; whitened, their raw descriptors read from the catalog (photos
        gone from it since the snapshot passed over). None when there is none (then policy.match
        judges it as a box: every candidate's row gone at once, as when another writer purged the
        space)."""
        first = np.flatnonzero(~np.isin(sl.ids, own))[: self.RAW_CANDIDATES]
        if not len(first):
            return None
        if snap.whitening.is_identity:
            return float(sl.sims[first[0]])
        cat = self.svc.catalog
        rows = cat.guard(cat.descriptors_of, sl.ids[first].tolist(), snap.space.id)
        return max((float(np.frombuffer(b, np.float32) @ raw) for b in rows.values()), default=None)

    def _nearest_other(self, sl: Shortlist, own: list[int], snap, k: int = 12) -> float | None:
        """The cosine of the query's best match (the first of the shortlist `sl` not in `own`: the
        query's own file and its copies) and its own nearest other photo, passing over `own` and
        its near shots (cosine >= policy.NEAR_SHOT); None when its first k neighbours are all such."""
        first = np.flatnonzero(~np.isin(sl.ids, own))
        if not len(first):
            return None
        best_id, vec = int(sl.ids[first[0]]), sl.vectors[first[0]]
        nb = snap.search(vec, k + len(own) + 1, None)
        for i, sim in zip(nb.ids.tolist(), nb.sims.tolist()):
            if i != best_id and i not in own and sim < policy.NEAR_SHOT:
                return float(sim)
        return None

    @staticmethod
    def _relevance(ids, sims, scores, vectors, scale: tuple, sl: Shortlist, own: list[int]) -> np.ndarray:
        """(n,) float64: policy.relevance of results `ids` (n,) from their cosines to the query
        `sims` (n,) and ranking scores `scores` (n,), times policy.match and, for HeR's warm
        results of a whole-photo search (heat policy.HEAT_TOP or more; unwhitened
        policy.HEAT_WARM), policy.reciprocal against their own nearest photo
        (`_result_neighbours`; `vectors`: n of (D,) or None). scale: (mu, unit: the
        nearest-neighbour scale, her, matched, whole photo, whitened)."""
        mu, unit, her, matched, whole_photo, whitened = scale
        u = (np.asarray(sims, np.float64) - mu) / unit
        r = np.asarray(scores, np.float64)
        rel = policy.relevance(u, r if her else (r - mu) / unit, her, matched)
        warm = policy.HEAT_TOP if whitened else policy.HEAT_WARM
        hot = np.flatnonzero((r >= warm) & np.array([v is not None for v in vectors], bool)) \
            if her and whole_photo else np.zeros(0, np.int64)
        if len(hot):  # HeR's warm results against their own nearest photos (policy.HEAT_GAP)
            near = Searcher._result_neighbours(np.asarray(ids)[hot], np.stack([vectors[i] for i in hot]), sl, own)
            rel[hot] *= policy.reciprocal(u[hot], (near - mu) / unit)
        return rel

    @staticmethod
    def _result_neighbours(ids, vectors: np.ndarray, sl: Shortlist, own: list[int]) -> np.ndarray:
        """(n,) float64: the cosine of each result (`ids` (n,), `vectors` (n, D)) to its nearest
        other photo among the whole library's first policy.NEIGHBOURHOOD of the shortlist `sl`,
        passing over `own` (the query's own file and its copies) and the result's near shots
        (cosine >= policy.NEAR_SHOT); nan where there is none."""
        pool = np.flatnonzero(~np.isin(sl.ids, own))[: policy.NEIGHBOURHOOD]
        pool_ids, pool_vecs = sl.ids[pool], sl.vectors[pool]
        if not len(pool_ids):
            return np.full(len(ids), np.nan)
        sims = vectors @ pool_vecs.T  # (n, pool)
        sims[np.asarray(ids)[:, None] == pool_ids[None, :]] = -np.inf
        sims[sims >= policy.NEAR_SHOT] = -np.inf
        best = sims.max(axis=1)
        return np.where(np.isfinite(best), best, np.nan)

    COPY_CANDIDATES = 20  # the shortlist's first photos looked at for copies of the query before ranking

    def _copies(self, sl: Shortlist, query_thumb: bytes, same: list[int]) -> dict[int, bool]:
        """{id: whether it is a copy of the whole query photo by its thumbnail (resized,
        re-encoded, another format, turned: the finder's rule, as `Hit.copy`)} for the first
        COPY_CANDIDATES of the shortlist `sl`, `same` (its own file and byte-identical copies)
        left out; {} for a box or a query without a thumbnail."""
        if not query_thumb or not len(sl):
            return {}
        ids = [int(i) for i in sl.ids[: self.COPY_CANDIDATES] if int(i) not in same]
        rows = self.svc.image_rows(ids)
        original = CopyFilter()
        original.match(query_thumb)
        return {i: original.match(rows[i].thumb, keep=False) == 0 for i in ids if i in rows}

    def _hits(self, ids, scores, q, snap, req: SearchRequest, pinned: set, vec_of: dict,
              query_thumb: bytes = b"", copy_of: dict | None = None) -> list[Hit]:
        """copy_of: {id: whether a copy of the query} already found (`_copies`)."""
        copy_of = copy_of or {}
        ids = [int(i) for i in ids[: req.top + 200]]
        rows = self.svc.image_rows(ids)
        # One per duplicate: each set of copies keeps the place of its first copy in the list and shows
        # the photo Duplicates would keep (the original), unless the query's own photo is among them
        by_digest: dict[str, int] = {}  # digest -> its set
        copies = CopyFilter()  # one photo of each set shown so far, in the order shown
        original = CopyFilter()  # the query alone
        original.match(query_thumb)
        shown: dict[int, int] = {}  # set -> its index in hits
        sets: dict[int, list[tuple[Hit, ImageRow]]] = {}  # set -> its photos among the results (hit, catalog row)
        hits = []
        for i, sc in zip(ids, scores):
            r = rows.get(i)
            if r is None or r.status != "indexed":  # forgotten or missing since the snapshot
                continue
            state = snap.folder_state(r.folder_id)
            if state == "ok" and not os.path.exists(r.path):
                state = "missing"
            sim = float(vec_of[i] @ q) if i in vec_of else 0.0
            hit = Hit(i, r.path, float(sc), len(hits) + 1, r.width, r.height, sim, state, duplicate=i in pinned,
                      taken=r.taken or 0.0, camera=r.camera or "", size=r.size or 0)
            # a copy of the query (resized, re-encoded) is what a person looks for first: the
            # descriptor of a resized copy can fall below other views of the scene (one came #5)
            hit.copy = bool(query_thumb) and i not in pinned and (
                copy_of[i] if i in copy_of else original.match(r.thumb, keep=False) == 0)
            if hit.copy:
                hit.turn = copy_turn(query_thumb, r.thumb)
            if req.hide_duplicates:
                k = by_digest.get(r.digest) if r.digest else None
                if k is None:
                    k = copies.match(r.thumb)
                if k is not None:
                    sets[k].append((hit, r))
                    continue
                k = len(copies.grids) - 1 if r.thumb else -1 - len(hits)  # a photo without a thumbnail: its own set
                shown[k], sets[k] = len(hits), [(hit, r)]
                if r.digest:
                    by_digest[r.digest] = k
            hits.append(hit)
            if len(hits) >= req.top + 50:
                break
        for k, at in shown.items():
            ok = [(h, r) for h, r in sets[k] if h.state == "ok"]
            if len(ok) > 1 and not hits[at].duplicate:
                if len(self._enlarged) > 10_000:
                    self._enlarged.clear()
                best, first = ok[keeper([r for _, r in ok], self._enlarged)][0], hits[at]
                hits[at] = replace(best, score=first.score, rank=first.rank, similarity=first.similarity,
                                   place=first.image_id)
            hits[at].hidden_copies = [h.path for h, _ in sets[k] if h.image_id != hits[at].image_id]
        if any(h.copy for h in hits):  # the query's file, then its copies, then the rest in order
            hits = sorted(hits, key=lambda h: (not h.duplicate, not h.copy))
            for n, h in enumerate(hits):
                h.rank = n + 1
        return hits


def copy_turn(query_thumb: bytes, copy_thumb: bytes) -> int:
    """k such that signature.ORIENTATIONS[k] turns a copy (its `thumb`) onto the query; 0 where
    the photo looks the same turned (symmetric)."""
    return int(best_turns(frame_scores([query_thumb], [copy_thumb])[0])[0])


def on_copy(grid: np.ndarray, turn: int) -> np.ndarray:
    """The query's (H, W) grid as it lies on a copy that ORIENTATIONS[turn] turns onto the query:
    turned the other way."""
    return np.ascontiguousarray(orient(grid, inverse_turn(turn)))


def _with_box(req: SearchRequest, box) -> SearchRequest:
    return replace(req, box=tuple(box))


class SearchWorker:
    """Answers requests one at a time on its own thread, newest first: a request superseded before
    it started is skipped (box dragging sends many). Results and errors go to the callbacks, on
    this worker's thread (the GUI forwards them with a queued signal)."""

    def __init__(self, searcher: Searcher, on_result: Callable[[SearchResult], None],
                 on_error: Callable[[int, str], None]):
        self.searcher = searcher
        self.on_result, self.on_error = on_result, on_error
        self._cond = threading.Condition()
        self._pending: SearchRequest | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="heatsearch-search", daemon=True)
        self._thread.start()

    def submit(self, req: SearchRequest) -> None:
        with self._cond:
            self._pending = req
            self._cond.notify()

    def stop(self, timeout: float = 5.0) -> bool:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _early(self, req: SearchRequest) -> Callable[[SearchResult], None]:
        """The callback that shows `req`'s first results before their details are compared,
        unless another request has come since."""
        def show(res: SearchResult) -> None:
            with self._cond:
                newer = self._pending is not None or self._stop
            if not newer:
                self.on_result(res)
        return show

    def _run(self):
        while True:
            with self._cond:
                while self._pending is None and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                req, self._pending = self._pending, None
            try:
                self.on_result(self.searcher.search(req, self._early(req)))
            except HeatSearchError as e:
                self.on_error(req.id, str(e))
            except Exception as e:  # noqa: BLE001 - shown to the user, never a silent thread death
                traceback.print_exc()
                self.on_error(req.id, f"search failed: {type(e).__name__}: {e}")
