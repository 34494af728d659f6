"""Duplicate groups, kept apart from "similar": exact copies (same bytes), near-duplicates
(recompressed, resized, slightly edited), rotated or mirrored copies, and crops of another photo.

Built from neighbours, never from all pairs:
- exact: photos with the same content digest;
- near: each photo's k nearest vectors (in a 32-d PCA projection: exact search in blocks up to
  20,000 photos, an HNSW graph above; then checked on the full vectors) with cosine >=
  `threshold` (the user's slider) and a perceptual hash within NEAR_HAMMING bits (the descriptor
  alone cannot tell a copy from another view of the same object);
- rotated/mirrored: the same dihedral perceptual hash (signature.py) up to MAX_HAMMING bits in
  another orientation (in the same orientation it is a re-encoded copy), found through 16-bit
  chunks of the hash (a pair within 3 bits shares a chunk);
- crop: neighbours (cosine >= CROP_FLOOR) whose pixel sizes fit a crop (neither side larger: a crop
  keeps its original's pixels) and whose tiny thumbnail matches the window of that size in the
  other's thumbnail; same-size photos are never checked, which keeps large libraries fast.
Members of a group are sorted best-to-keep first: most pixels, then largest file, then sharpest,
then oldest.
HeatSearch never deletes: the view offers Reveal, Copy paths and an export of the list.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .library import paths
from .signature import crop_scores, hamming, orientation

NEAR_DEFAULT = 0.95  # measured on benchmarks/duplicates.py (README, "Duplicates")
CROP_FLOOR = 0.70  # crop candidates: neighbours at or above this similarity, checked on thumbnails
CROP_MIN_SIDE = 0.5  # a crop keeps at least half of each side of its original
CROP_MAX_AREA = 0.92  # and at most 92 % of its area (more is a near-duplicate)
CROP_NCC = 0.94  # window correlation that makes a crop (true crops: all >= 0.94, median 0.98; other photos whose sizes fit: 3 of 258 above)
NEAR_HAMMING = 8  # perceptual-hash bits a near-duplicate may differ by (re-encoded copies: 90 % within 2;
#                   other views of the same object: 95 % beyond 10; benchmarks/duplicates.py)
MAX_HAMMING = 3  # bits: rotated / mirrored copies (chunks of 16 bits find every pair within 3)
K = 10
REDUCED = 32  # candidates come from a PCA projection: near-duplicates are near in any of them
EXACT_MAX = 20_000  # photos; above, the candidates come from an HNSW graph over the projection

RELATIONS = {"exact": "the same file (identical bytes)", "near": "the same photo re-encoded, resized or lightly edited",
             "dihedral": "the same photo rotated or mirrored", "crop": "a crop of the first photo"}
STRENGTH = {"exact": 0, "dihedral": 1, "near": 2, "crop": 3}


@dataclass
class Member:
    image_id: int
    path: str
    width: int
    height: int
    size: int
    taken: float
    sharpness: float
    relation: str = ""  # "" for the one to keep; else a key of RELATIONS
    similarity: float = 1.0
    why: str = ""  # for the one to keep: what put it first

    @property
    def reason(self) -> str:
        return f"best to keep: {self.why or 'most pixels, largest file, sharpest, oldest'}" if not self.relation \
            else RELATIONS[self.relation]


def kept_because(best: Member, other: Member) -> str:
    """The rule of the best-to-keep order that put `best` before `other`, in words."""
    if best.width * best.height != other.width * other.height:
        return f"most pixels ({best.width}x{best.height})"
    if best.size != other.size:
        return f"same pixels, largest file ({best.size / 1e6:.1f} MB)"
    if best.sharpness != other.sharpness:
        return "same pixels and file size, sharpest"
    if best.taken and best.taken != other.taken:
        return f"oldest ({time.strftime('%Y-%m-%d', time.localtime(best.taken))})"
    return "identical by every rule, first by name"


@dataclass
class Group:
    members: list[Member] = field(default_factory=list)

    @property
    def kind(self) -> str:
        rel = [m.relation for m in self.members[1:]]
        return max(rel, key=lambda r: STRENGTH[r]) if rel else "exact"


class _Union:
    def __init__(self):
        self.parent: dict[int, int] = {}
        self.edge: dict[tuple[int, int], tuple[str, float]] = {}

    def find(self, a: int) -> int:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def join(self, a: int, b: int, kind: str, sim: float) -> None:
        key = (min(a, b), max(a, b))
        old = self.edge.get(key)
        if old is None or STRENGTH[kind] < STRENGTH[old[0]]:
            self.edge[key] = (kind, sim)
        self.parent[self.find(a)] = self.find(b)


def crop_scale(big_row, small_row) -> tuple[float, float] | None:
    """(height, width) of the small photo over the big one's when it can be a crop of it: a crop
    keeps its original's pixels, so neither side is larger, each is at least CROP_MIN_SIDE of it
    and the area at most CROP_MAX_AREA. None otherwise (same-size photos, the common case, cost
    nothing)."""
    bw, bh, sw, sh = big_row[2], big_row[3], small_row[2], small_row[3]
    if not (bw and bh and sw and sh):
        return None
    fh, fw = sh / bh, sw / bw
    if min(fh, fw) < CROP_MIN_SIDE or max(fh, fw) > 1.0 or fh * fw > CROP_MAX_AREA:
        return None
    return fh, fw


def knn_pairs(vectors: np.ndarray, k: int = K, min_sim: float = 0.5, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (m, 2) row indices i < j, cosine (m,)) among each row's k nearest rows with full
    cosine >= min_sim. Candidates come from an exact search in a REDUCED-d PCA projection."""
    n, d = vectors.shape
    if n < 2:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.float32)
    x = np.ascontiguousarray(vectors, np.float32)
    if d > REDUCED:
        sample = x[np.random.default_rng(0).choice(n, min(n, 5000), replace=False)]
        mean = sample.mean(0)
        _, _, vt = np.linalg.svd(sample - mean, full_matrices=False)
        red = (x - mean) @ vt[:REDUCED].T
        red /= np.maximum(np.linalg.norm(red, axis=1, keepdims=True), 1e-12)
        red = red.astype(np.float32)
    else:
        red = x
    kk = min(k + 1, n)
    if n > EXACT_MAX:  # an HNSW graph over the projection: all-rows exact search grows as n^2
        import hnswlib

        g = hnswlib.Index(space="ip", dim=red.shape[1])
        g.init_index(max_elements=n, ef_construction=80, M=12)
        g.set_num_threads(os.cpu_count() or 1)
        g.add_items(red, np.arange(n))
        g.set_ef(max(40, 2 * kk))
        nb, _ = g.knn_query(red, k=kk)
        i, j = np.repeat(np.arange(n), kk), nb.ravel().astype(np.int64)
    else:
        out_i, out_j = [], []
        for s in range(0, n, block):
            sims = red[s: s + block] @ red.T
            rows = np.arange(s, min(n, s + block))
            sims[rows - s, rows] = -np.inf  # not oneself
            nb = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            out_i.append(np.repeat(rows, kk))
            out_j.append(nb.ravel())
        i, j = np.concatenate(out_i), np.concatenate(out_j)
    pairs = np.unique(np.stack([np.minimum(i, j), np.maximum(i, j)], 1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    cos = np.einsum("ij,ij->i", x[pairs[:, 0]], x[pairs[:, 1]])
    keep = cos >= min_sim
    return pairs[keep], cos[keep]


def find_duplicates(svc, threshold: float = NEAR_DEFAULT, crops: bool = True, log=None, cache: dict | None = None) -> list[Group]:
    """Duplicate groups of the library's searchable photos, best-to-keep first in each group.
    `cache` (a dict kept by the caller) keeps the neighbours and crop scores of this library
    version, so that moving the threshold only regroups."""
    t0 = time.perf_counter()
    snap = svc.snapshot()
    if cache is not None and cache.get("generation") != snap.generation:
        cache.clear()
        cache["generation"] = snap.generation
    ids, vecs = snap.all_vectors()
    rows = svc.catalog.guard(svc.catalog.duplicate_rows)
    groups = group_duplicates(ids, vecs, rows, threshold, crops, cache=cache,
                              log=(lambda m: log(f"{m}; {time.perf_counter() - t0:.1f} s with the catalog read")) if log else None)
    return groups


def group_duplicates(ids: np.ndarray, vecs: np.ndarray, rows: dict, threshold: float = NEAR_DEFAULT, crops: bool = True,
                     log=None, cache: dict | None = None) -> list[Group]:
    """The grouping itself. ids (n,) catalog ids, vecs (n, D) their unit vectors; rows: id ->
    (id, path, width, height, size, taken, sharpness, digest, phash, thumb). `cache`: reused
    neighbour pairs and crop scores for the same ids and vectors (any threshold)."""
    t0 = time.perf_counter()
    cache = {} if cache is None else cache
    u = _Union()
    # exact copies
    by_digest: dict[str, list[int]] = {}
    for i in ids.tolist():
        r = rows.get(i)
        if r is not None and r[7]:
            by_digest.setdefault(r[7], []).append(i)
    for group in by_digest.values():
        for other in group[1:]:
            u.join(group[0], other, "exact", 1.0)
    # near duplicates and crop candidates from the nearest neighbours
    floor = min(threshold, CROP_FLOOR)  # the same floor with or without crops: one cached neighbour set
    if ("pairs", floor) not in cache:
        cache[("pairs", floor)] = knn_pairs(vecs, K, floor)
    pairs, cos = cache[("pairs", floor)]
    t_knn = time.perf_counter() - t0
    candidates = []  # (big, small, scale, cosine): scored together below
    for (a, b), c in zip(pairs.tolist(), cos.tolist()):
        ia, ib = int(ids[a]), int(ids[b])
        if ia not in rows or ib not in rows:
            continue
        ha, hb = rows[ia][8], rows[ib][8]
        if c >= threshold and ha and hb and hamming(ha, hb) <= NEAR_HAMMING:
            # close in the searched space AND in the picture's perceptual hash: the same photo
            # (another view of the same object is as close in the descriptor, not in the hash)
            u.join(ia, ib, "near" if orientation(ha) == orientation(hb) else "dihedral", c)
        elif crops and rows[ia][9] and rows[ib][9]:
            big, small = (ia, ib) if rows[ia][2] * rows[ia][3] >= rows[ib][2] * rows[ib][3] else (ib, ia)
            scale = crop_scale(rows[big], rows[small])
            if scale is not None:
                candidates.append((big, small, scale, c))
    known = cache.setdefault("crop scores", {})  # (big, small) -> score
    todo = [(b, sm, sc) for b, sm, sc, _ in candidates if (b, sm) not in known]
    if todo:
        scores = crop_scores([rows[b][9] for b, _, _ in todo], [rows[sm][9] for _, sm, _ in todo], [sc for _, _, sc in todo])
        known.update(zip(((b, sm) for b, sm, _ in todo), scores.tolist()))
    for big, small, _, c in candidates:
        if known[(big, small)] >= CROP_NCC:
            u.join(big, small, "crop", c)
    checked = len(candidates)
    # rotated or mirrored copies: the dihedral hash, through 16-bit chunks
    buckets: dict[tuple[int, int], list[int]] = {}
    for i in ids.tolist():
        h = rows[i][8] if i in rows else 0
        if h:
            for c in range(4):
                buckets.setdefault((c, (h >> (16 * c + 3)) & 0xFFFF), []).append(i)
    seen = set()
    for members in buckets.values():
        if len(members) > 200:  # a degenerate bucket (flat images): skip
            continue
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                a, b = members[x], members[y]
                if (a, b) in seen:
                    continue
                seen.add((a, b))
                if hamming(rows[a][8], rows[b][8]) <= MAX_HAMMING:
                    same_way = orientation(rows[a][8]) == orientation(rows[b][8])
                    u.join(a, b, "near" if same_way else "dihedral", 1.0)
    groups = _groups(u, rows)
    if log:
        log(f"{len(groups)} duplicate groups among {len(ids)} photos in {time.perf_counter() - t0:.1f} s "
            f"(neighbours {t_knn:.1f} s: {len(pairs)} pairs; {checked} crop checks)")
    return groups


def _groups(u: _Union, rows) -> list[Group]:
    comps: dict[int, list[int]] = {}
    for i in list(u.parent):
        comps.setdefault(u.find(i), []).append(i)
    out = []
    for members in comps.values():
        if len(members) < 2:
            continue
        ms = [Member(i, paths.from_db(rows[i][1]), rows[i][2], rows[i][3], rows[i][4], rows[i][5] or 0.0, rows[i][6] or 0.0)
              for i in members if i in rows]
        if len(ms) < 2:
            continue
        # best to keep first: most pixels, then the largest file (least compressed: recompression
        # artefacts make a copy look "sharper"), then sharpest, then oldest
        ms.sort(key=lambda m: (-(m.width * m.height), -m.size, -m.sharpness, m.taken or float("inf"), m.path))
        keep = ms[0].image_id
        ms[0].why = kept_because(ms[0], ms[1])
        for m in ms[1:]:
            kind, sim = u.edge.get((min(keep, m.image_id), max(keep, m.image_id)), (None, 0.0))
            if kind is None:  # joined through another member: take its strongest edge in the group
                cand = [u.edge[(min(m.image_id, o.image_id), max(m.image_id, o.image_id))]
                        for o in ms if o is not m and (min(m.image_id, o.image_id), max(m.image_id, o.image_id)) in u.edge]
                kind, sim = min(cand, key=lambda e: STRENGTH[e[0]]) if cand else ("near", 0.0)
            m.relation, m.similarity = kind, sim
        out.append(Group(ms))
    out.sort(key=lambda g: (STRENGTH[g.kind], -len(g.members), g.members[0].path))
    return out


def to_records(groups: list[Group]) -> list[dict]:
    """JSON-able groups (for `heatsearch duplicates --json` and the export)."""
    return [{"group": n + 1, "kind": g.kind,
             "members": [{"path": m.path, "keep": not m.relation, "relation": m.relation or "keep", "reason": m.reason,
                          "similarity": round(m.similarity, 4), "width": m.width, "height": m.height, "bytes": m.size,
                          "taken": m.taken} for m in g.members]}
            for n, g in enumerate(groups)]
