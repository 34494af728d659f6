"""Duplicate groups, kept apart from "similar": the same photo as another file, re-encoded,
resized or stretched, turned, mirrored, edited (brightness, contrast, colour), framed by a border
or shown in a drawn frame (a screenshot), or cropped (and resized after the crop).

Built from neighbours, never from all pairs:
- exact: photos with the same content digest;
- candidates: each photo's K nearest descriptors (cosine >= CANDIDATE_FLOOR: in a REDUCED-d PCA
  projection, exact search in blocks up to EXACT_MAX photos, an HNSW graph above; checked on the
  full vectors), and pairs whose perceptual hashes (signature.py) are close in any of the 8
  orientations (a turned copy's descriptor can be far);
- each candidate is compared on its pixels (the thumbnails of the photos' content, borders left
  out): whole, in the orientation that fits best, and, failing that, as a window of the other at
  any scale (a crop, resized or not). The pixel correlation of that comparison is the pair's
  similarity, one quantity for every relation; two photos are the same photo when it reaches the
  user's `threshold` (the slider: how different two copies may be) and their hashes are within
  HASH_BITS, and a crop when its window reaches CROP_NCC (a window searched at many scales fits
  by chance more often).
Descriptors find candidates; pixels decide. Another view of the same object is as close in the
descriptor as a re-encode, but not in the pixels.

Members of a group are sorted with the original first (`keep_order`): no added border, not a
crop, not enlarged from a smaller copy (`_mark_enlarged`), most pixels, the camera's file (EXIF
camera), the original format over a conversion, the oldest file (to the minute), the largest file,
the sharpest, the older file (by its exact time).
Relations are stated against that photo.
HeatSearch never deletes: the view offers Reveal, Copy paths and an export of the list.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import partial

import hnswlib
import numpy as np

from . import paths
from .catalog.records import ImageRow
from .errors import ImageError
from .imageio import colour_of, open_oriented, stored_orientation
from .signature import (ASPECT_TOL, ENLARGED_DETAIL, FRAMED, ORIENTATION_NAMES, ORIENTATIONS, STRAIGHT_DETAIL,
                        STRETCH_TOL, best_turns, straighten_scores,
                        crop_search, detail_grid, detail_scores, enlargement_residual, frame_grid, frame_scores,
                        frame_share, hamming, inverse_turn, orient, variants)

NEAR_DEFAULT = 0.92  # pixel correlation; measured on benchmarks/duplicates.py (README, "Duplicates")
SLIDER_RANGE = (0.80, 0.99)  # what the view's slider offers
CANDIDATE_FLOOR = 0.50  # descriptor cosine of a candidate pair (a crop of half the side: down to ~0.5)
CROP_MIN_SIDE = 0.5  # a crop keeps at least half of each side of its original
CROP_MAX_AREA = 0.92  # and at most 92 % of its area (more is the whole photo)
# A photo with at most this share of another's pixels is searched for as a window of it when the two
# do not pass as the whole photo. Was CROP_MAX_AREA: a trim of 97 % of each side, shifted by 1.5 %
# of a side, fitted neither (24 shared photos trimmed so at a corner: 10 not grouped, now
# all; benchmarks/duplicates.py pair precision unchanged). Such a trim's windows reach TRIM_MAX_AREA
# of the photo; windows that large for every pair joined other photos of a building (pair precision
# 1.00 -> 0.86).
TRIM_MAX_AREA = 0.97
# A copy with fewer pixels that passes as the whole photo is still a crop when a window fits it
# better than the whole photo by this much, both at 64 px (a 93 % trim was told "the same photo with
# its brightness or contrast changed"; on 24 shared photos a trim of 1.5 % a side fits a
# window 0.004-0.05 better, a resize or a brightness edit the whole photo 0.011 or more better).
CROP_BETTER = 0.002
ENLARGED = 1.15  # pixels a crop may have over its window's (window sizes are whole thumbnail pixels)
# Fine-structure correlation (signature.detail_scores) a whole-photo pair needs besides the
# threshold: on benchmarks/duplicates.py every source-edit pair reaches 0.72 (a border or a
# brightness edit; re-encodes, resizes and turns 0.88-1.00), every look-alike that passed the
# coarse grid stays below 0.47 (UKBench 61/62, two shots from a step aside: 0.46, coarse 0.96).
DETAIL_MIN = 0.60
# ... and with which a pair is the same photo whatever its tones or a band drawn along one edge,
# coarse grid and hash aside: a vignette (corners darkened by half) left the coarse grid at
# 0.60-0.92 and the hash up to 10 bits off while its fine structure stayed at 0.98-0.995; a caption
# band, with the band left out, 0.99-1.00 (signature.detail_scores banded; benchmarks/duplicates.py
# --quality). Asked of candidates whose coarse grid reaches TONAL_FLOOR; the slider still applies.
DETAIL_SAME, TONAL_FLOOR = 0.95, 0.55
# A straightened copy (signature.straighten_scores) is looked for among candidates this alike by
# their descriptors (the copies: 0.71 and up, 53 of 65 pairs at 0.80) whose grids, as they are,
# are somewhat alike (at 0.55 one copy of 22 was missed; unrelated pictures read ~0) but not the
# same photo whole. It is one at this frame correlation, or the slider's where higher, with its
# fine structure at STRAIGHT_DETAIL (other photos: up to 0.965 on the grid, 0.41 in the detail)
STRAIGHT_COS, STRAIGHT_FLOOR, STRAIGHT_NCC = 0.80, 0.40, 0.97
CROP_NCC = 0.95  # window correlation that makes a crop (a window searched at many scales fits look-alikes more often)
# ... and that makes a photo drawn in a frame (a screenshot: signature.frame_share) its copy: the
# photo is scaled into the frame off the thumbnails' pixel grid, so a textured one (the Eiffel
# Tower's ironwork) read its window at 0.935-0.946 (3 of 17 screenshots lost at CROP_NCC); a frame
# is never a crop's surround (<= 0.11), and a screenshot joins only the photo it shows best
FRAMED_NCC = 0.92
HASH_BITS = 8  # hash bits (in the best orientation) two photos may differ by to be the same photo (edits: <= 7;
#               other views of one object or building: mostly 9-22; benchmarks/duplicates.py)
BORDER_ADDED = 0.01  # area share of a border above the group's least that marks a border as added
EDITED_MEAN = 4.0  # grey levels of mean, and
EDITED_SPREAD = 0.06  # relative contrast, past which a copy is "edited" rather than "re-encoded"
# Colour, read from the files (imageio.colour_of: the thumbnails compared are grey), on
# benchmarks/duplicates.py --quality's copies: black and white conversions read a chroma of 0.0,
# colour photos 3-150; saturation edits changed it 1.10-1.90 times, brightness edits and vignettes
# 0.81-1.12 times, re-encodes 0.96-1.04; sepia and "vintage" moved the mean colour by 0.2-1.7 of
# the chroma, brightness edits and vignettes by 0.2 at most
GREY_CHROMA = 1.5  # mean chroma below which a photo is black and white
COLOUR_RATIO = 1.3  # times a copy's chroma may differ from the photo's and keep its colours
COLOUR_SHIFT = 0.25  # share of the chroma the mean colour may move by
COLOURS_CHANGED = "with its colours changed"
K = 10
# a photo with at most SMALL_AREA of another's pixels (a crop, a crop exported smaller) looks less
# like it to the CNN: such pairs are candidates among K_SMALL neighbours down to cosine SMALL_FLOOR
# (crops-then-resized of the benchmark: cosine down to 0.43, 24th neighbour)
SMALL_AREA, K_SMALL, SMALL_FLOOR = 0.5, 30, 0.40
REDUCED = 32  # candidates come from a PCA projection: near-duplicates are near in any of them
EXACT_MAX = 20_000  # photos; above, the candidates come from an HNSW graph over the projection
ENLARGED_CHECK = 6.25  # pixels over a group's smallest photo (2.5x the side) that make a photo checked for an enlargement

RAW_FORMATS = {".dng", ".cr2", ".cr3", ".nef", ".arw", ".raf", ".orf", ".rw2", ".pef", ".srw"}
CAMERA_FORMATS = {".jpg", ".jpeg", ".heic", ".heif"}  # what cameras and phones write; PNG/TIFF/WebP... are conversions

RELATIONS = {"exact": "the same file (identical bytes)", "reencoded": "the same photo re-encoded",
             "format": "the same photo in another format", "resized": "the same photo resized",
             "edited": "the same photo with its brightness, contrast or colours changed",
             "turned": "the same photo turned or mirrored", "bordered": "the same photo with a border added",
             "crop": "a crop of the photo to keep", "similar": "the same photo as another in this group"}
FRAMED_WORDS = "the same photo inside a drawn frame (a screenshot, a mount)"  # a "bordered" copy's words
STRENGTH = {"exact": 0, "format": 1, "reencoded": 1, "resized": 2, "turned": 3, "edited": 4, "bordered": 5, "crop": 6,
            "similar": 7}


@dataclass
class Member:
    image_id: int
    path: str
    width: int
    height: int
    size: int
    taken: float
    sharpness: float
    mtime: float = 0.0
    camera: str = ""
    border: float = 0.0
    relation: str = ""  # "" for the one to keep; else a key of RELATIONS
    detail: str = ""  # the relation in full words (turned how, resized how much)
    similarity: float = 1.0  # pixel correlation with the one to keep (1 = the same pixels)
    why: str = ""  # for the one to keep: what put it first
    enlarged: bool = False  # made larger from a smaller photo of its group: more pixels, no more detail
    # a symbolic link with the same bytes as a file of its group (`_mark_shadowed`): removing it frees
    # nothing and loses nothing, so it is never the one to keep; a link to a better photo than the
    # group's files is (else a half-size copy was kept over the original a link led to)
    shadowed: bool = False
    # size and sharpness as keep_order weighs them: those within EVEN of the group's largest (its
    # sharpest) count as it (`_even_out`); None: as they are
    size_rank: float | None = None
    sharp_rank: float | None = None

    @property
    def reason(self) -> str:
        return f"best to keep: {self.why}" if not self.relation else (self.detail or RELATIONS[self.relation])

    @property
    def link(self) -> bool:
        """Whether the library's file is a symbolic link (to a photo that is elsewhere)."""
        return os.path.islink(self.path)

    @property
    def format_rank(self) -> int:
        ext = os.path.splitext(self.path)[1].lower()
        return 0 if ext in RAW_FORMATS else 1 if ext in CAMERA_FORMATS else 2


def keep_order(m: Member, added_border: bool, cropped: bool, turned: bool = False) -> tuple:
    """Sort key: the original first; a symbolic link to the same bytes as a file of the group last
    of all (`Member.shadowed`: else a link was kept and the photo it points to offered as the copy
    to delete). turned: the photo is turned or mirrored against most of its group
    (`turned_from_most`). When every rule ties, the older file (exact time), then the name."""
    return (m.shadowed, added_border, cropped, m.enlarged, -(m.width * m.height), not m.camera, m.format_rank,
            _minute(m.mtime), turned, -_ranked(m.size_rank, m.size), -_ranked(m.sharp_rank, m.sharpness),
            m.mtime or float("inf"), m.path)


SIZE_RULE = 9  # keep_order's rules before the file's size


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def _ranked(rank, value):
    return value if rank is None else rank


# A file a few bytes larger, or a photo a hair sharper, is not the better copy: a turned copy
# re-saved at the same quality was kept over its original for 174 bytes (0.7 %). Sizes
# and sharpnesses within EVEN of the group's best count as the best, and the next rules decide
# (the older file). A re-encode at a lower quality is 10 % smaller and more.
EVEN = 0.02


def _even_out(ms: list[Member], flags: dict) -> None:
    """Set each member's size_rank and sharp_rank: the largest size (sharpness) of the members that
    tie on every rule of keep_order before size, where it is within EVEN of it, else its own. Only
    those: an enlargement or a bordered copy, larger but put after by an earlier rule, set no bar.
    flags: {image_id: keep_order's flags (added_border, cropped, turned)}."""
    head = {m.image_id: keep_order(m, *flags[m.image_id])[:SIZE_RULE] for m in ms}
    first = min(head.values())
    tied = [m for m in ms if head[m.image_id] == first]
    big, sharp = max(m.size for m in tied), max(m.sharpness for m in tied)
    for m in ms:
        m.size_rank = big if head[m.image_id] == first and m.size >= (1 - EVEN) * big else m.size
        m.sharp_rank = sharp if head[m.image_id] == first and m.sharpness >= (1 - EVEN) * sharp else m.sharpness


def turned_from_most(thumbs: list[bytes]) -> list[bool]:
    """Which photos of a group (their `thumb` bytes; b"": unknown) are turned or mirrored against
    the orientation most of them share; none when no orientation has the most. Without it a
    mirrored copy re-saved larger was kept over the original (the same pixels, the same minute),
    and the original and its three other copies were called "mirrored"."""
    known = [i for i, t in enumerate(thumbs) if t]
    out = [False] * len(thumbs)
    if len(known) < 3:
        return out
    ref = thumbs[known[0]]
    ks = best_turns(frame_scores([ref] * len(known), [thumbs[i] for i in known])[0])
    values, counts = np.unique(ks, return_counts=True)
    order = np.argsort(-counts)
    if len(values) > 1 and counts[order[0]] == counts[order[1]]:
        return out
    for i, k in zip(known, ks):
        out[i] = bool(k != values[order[0]])
    return out


def _minute(mtime: float) -> float:
    """A file's time to the minute (inf: unknown): files written within a minute of each other
    (copied together) are as old as each other: "the oldest file" by milliseconds says nothing."""
    return mtime // 60 if mtime else float("inf")


def kept_because(best: Member, other: Member, best_flags=(False, False, False), other_flags=(False, False, False)) -> str:
    """The rule of `keep_order` that put `best` before `other`, in words."""
    if best.shadowed != other.shadowed:
        return "the file itself, not a link to the same bytes"
    if best_flags[0] != other_flags[0]:
        return "no border added"
    if best_flags[1] != other_flags[1]:
        return "the whole photo, not a crop"
    if best.enlarged != other.enlarged:
        return "not enlarged from a smaller copy"
    if best.width * best.height != other.width * other.height:
        return f"most pixels ({best.width}x{best.height})"
    if bool(best.camera) != bool(other.camera):
        return f"the camera's file ({best.camera})"
    if best.format_rank != other.format_rank:
        return f"the original format ({os.path.splitext(best.path)[1].lower() or 'no extension'})"
    if _minute(best.mtime) != _minute(other.mtime):
        return f"the oldest file ({time.strftime('%Y-%m-%d %H:%M', time.localtime(best.mtime))})"
    if best_flags[2:] != other_flags[2:]:
        return "turned as most of its copies"
    if _ranked(best.size_rank, best.size) != _ranked(other.size_rank, other.size):
        # against the next, which is all the rule compared ("largest file (373 KB)" read wrong beside
        # a mirrored copy of 374 KB, put after by an earlier rule)
        return f"the larger file ({_size(best.size)} against {_size(other.size)})"
    if _ranked(best.sharp_rank, best.sharpness) != _ranked(other.sharp_rank, other.sharpness):
        return "sharpest"
    if best.mtime != other.mtime and best.mtime and other.mtime:
        # the last word, not the minute's: a copy made seconds after its original (else the copy in
        # "copies/" was kept over the photo, "first by name"); gaps under 0.05 s in ms (not "0.0 s")
        gap = other.mtime - best.mtime
        when = f"{gap:.1f} s" if gap >= 0.05 else f"{gap * 1000:.0f} ms" if gap >= 0.001 else "less than 1 ms"
        return f"the older file (written {when} before the other)"
    return "identical by every rule, first by name"


@dataclass
class Group:
    members: list[Member] = field(default_factory=list)

    @property
    def kind(self) -> str:
        rel = [m.relation for m in self.members[1:]]
        return max(rel, key=lambda r: STRENGTH[r]) if rel else "exact"


def components(edges: list[tuple[int, int]]) -> list[list[int]]:
    """The connected components of the graph of `edges` (pairs of catalog ids), each a list of
    ids in the order the edges first name them; components in the order of their first id."""
    order = list(dict.fromkeys(i for edge in edges for i in edge))
    if not order:
        return []
    from scipy.sparse import coo_matrix  # 0.05-0.1 s on top of the search's imports, for the duplicates view only
    from scipy.sparse.csgraph import connected_components

    at = {i: k for k, i in enumerate(order)}
    a = np.array([at[x] for x, _ in edges], np.int64)
    b = np.array([at[y] for _, y in edges], np.int64)
    _, label = connected_components(coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(len(order), len(order))),
                                    directed=False)
    comps: dict[int, list[int]] = {}
    for i, lab in zip(order, label.tolist()):
        comps.setdefault(lab, []).append(i)
    return list(comps.values())


def knn_pairs(vectors: np.ndarray, k: int = K, min_sim: float = 0.5, block: int = 2048) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pairs (m, 2) row indices i < j, cosine (m,), rank (m,): j's place among i's neighbours or
    i's among j's, whichever is nearer, 0 = the nearest) among each row's k nearest rows with full
    cosine >= min_sim. Candidates come from an exact search in a REDUCED-d PCA projection."""
    n, d = vectors.shape
    if n < 2:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64)
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
        g = hnswlib.Index(space="ip", dim=red.shape[1])
        g.init_index(max_elements=n, ef_construction=80, M=12)
        g.set_num_threads(os.cpu_count() or 1)
        g.add_items(red, np.arange(n))
        g.set_ef(max(40, 2 * kk))
        nb, _ = g.knn_query(red, k=kk)  # nearest first, usually oneself first
        is_self = nb == np.arange(n)[:, None]
        place = (np.arange(kk) - (np.cumsum(is_self, axis=1) - is_self)).ravel()  # places counted without oneself
        i, j = np.repeat(np.arange(n), kk), nb.ravel().astype(np.int64)
    else:
        out_i, out_j = [], []
        for s in range(0, n, block):
            sims = red[s: s + block] @ red.T
            rows = np.arange(s, min(n, s + block))
            sims[rows - s, rows] = -np.inf  # not oneself
            nb = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            nb = np.take_along_axis(nb, np.argsort(-np.take_along_axis(sims, nb, 1), axis=1), 1)  # nearest first
            out_i.append(np.repeat(rows, kk))
            out_j.append(nb.ravel())
        i, j = np.concatenate(out_i), np.concatenate(out_j)
        place = np.tile(np.arange(kk), n)  # oneself is never listed
    both = np.stack([np.minimum(i, j), np.maximum(i, j)], 1)
    order = np.lexsort((place, both[:, 1], both[:, 0]))  # per pair, its nearest place first
    both, place = both[order], place[order]
    first = np.r_[True, (both[1:] != both[:-1]).any(axis=1)]
    pairs, rank = both[first], place[first]
    other = pairs[:, 0] != pairs[:, 1]
    pairs, rank = pairs[other], rank[other]
    cos = np.einsum("ij,ij->i", x[pairs[:, 0]], x[pairs[:, 1]])
    keep = cos >= min_sim
    return pairs[keep], cos[keep], rank[keep]


def hash_pairs(hashes: np.ndarray, max_bits: int = HASH_BITS, max_bucket: int = 200) -> np.ndarray:
    """(m, 2) row indices i < j whose hashes differ by at most `max_bits` in the best of the 8
    orientations. Found through 16-bit chunks (a pair within 3 bits shares a chunk exactly;
    most pairs within `max_bits` do); rows with hash 0 (no signature) take no part."""
    has = np.flatnonzero(hashes != 0)
    if len(has) < 2:
        return np.zeros((0, 2), np.int64)
    h = hashes[has].astype(np.int64)
    var = variants(h)  # (m, 8)
    found = []
    for c in range(4):
        key = (h >> (16 * c)) & 0xFFFF
        vkey = (var >> (16 * c)) & 0xFFFF
        order = np.argsort(key, kind="stable")
        skey = key[order]
        lo = np.searchsorted(skey, vkey.ravel(), "left")
        hi = np.searchsorted(skey, vkey.ravel(), "right")
        size = hi - lo
        ok = (size > 0) & (size <= max_bucket)  # a degenerate bucket (flat images): skipped
        src = np.repeat(np.arange(len(h)).repeat(8)[ok], size[ok])
        starts = np.repeat(lo[ok], size[ok])
        offs = np.arange(len(starts)) - np.repeat(np.cumsum(size[ok]) - size[ok], size[ok])
        found.append(np.stack([src, order[starts + offs]], 1))
    pairs = np.concatenate(found)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    if len(pairs):
        bits = hamming(var[pairs[:, 0]], h[pairs[:, 1], None]).min(axis=1)
        pairs = pairs[bits <= max_bits]
    return has[pairs] if len(pairs) else np.zeros((0, 2), np.int64)


def hash_close(pairs: np.ndarray, rows: dict[int, ImageRow]) -> np.ndarray:
    """(P,) bool: whether each pair's hashes differ by at most HASH_BITS in the best orientation
    (True where either photo's signature predates schema 5: their thumbnails alone decide)."""
    if not len(pairs):
        return np.zeros(0, bool)
    h = np.array([[rows[a].phash, rows[b].phash] for a, b in pairs.tolist()], np.int64)
    old = np.array([rows[a].border < 0 or rows[b].border < 0 for a, b in pairs.tolist()], bool)
    return old | (hamming(variants(h[:, 0]), h[:, 1, None]).min(axis=1) <= HASH_BITS)


def _content_area(row: ImageRow) -> float:
    return row.width * row.height * (1.0 - max(row.border, 0.0))


def window_scales(H: int, W: int, h: int, w: int, max_area: float = CROP_MAX_AREA) -> list[tuple[float, float]]:
    """Window sizes ((height, width) as fractions of an H x W big thumbnail) at which an h x w
    small thumbnail may be a crop of it: the small one's own aspect ratio, each side at least
    CROP_MIN_SIDE and the area at most `max_area`. A crop that was not resized fits one size
    exactly; a crop resized afterwards any: one window per pixel of width of the big thumbnail."""
    ratio = (w / h) / (W / H)  # the window's width fraction over its height fraction
    out = []
    for ww in range(int(np.ceil(CROP_MIN_SIDE * W)), W + 1):
        fw = ww / W
        fh = fw / ratio
        if CROP_MIN_SIDE <= fh <= 1.0 and fw * fh <= max_area:
            out.append((fh, fw))
    return out


def _scored_windows(rows, pairs: list[tuple[int, int]], known: dict) -> None:
    """(best window correlation, that window's width fraction, the small photo's turn) of each
    (big, small) pair, into `known` (the window range follows from the two photos alone, so a
    pair's score is the same whoever asks: grouping or `relation`)."""
    todo = [(b, s) for b, s in pairs if (b, s) not in known and rows[b].thumb and rows[s].thumb]
    known.update({p: (0.0, 0.0, 0) for p in pairs if p not in known and not (rows[p[0]].thumb and rows[p[1]].thumb)})
    if not todo:
        return
    # a trim (more than CROP_MAX_AREA of the other's pixels, at most TRIM_MAX_AREA) is looked for in
    # windows as large as it; every other pair in windows of at most CROP_MAX_AREA
    trims = [p for p in todo if _is_trim(rows, *p)]
    crops = [p for p in todo if not _is_trim(rows, *p)]
    for some, scales in ((crops, window_scales), (trims, partial(window_scales, max_area=TRIM_MAX_AREA))):
        if some:
            best, width, turn = crop_search([rows[b].thumb for b, _ in some], [rows[s].thumb for _, s in some], scales)
            known.update(zip(some, zip(best.tolist(), width.tolist(), turn.tolist())))


def _framed(rows, big: int, small: int, known: dict) -> bool:
    """Whether photo `big` shows `small` in a drawn frame (signature.frame_share: a screenshot of
    it in an app, a mount) rather than `small` being cut from it; `known` holds the pair's window
    (`_scored_windows`) and keeps the answer."""
    key = ("framed", big, small)
    if key not in known:
        _, fw, turn = known[(big, small)]
        known[key] = frame_share(rows[big].thumb, rows[small].thumb, fw, int(turn)) >= FRAMED
    return known[key]


def _is_trim(rows, big: int, small: int) -> bool:
    """Whether photo `small` has more than CROP_MAX_AREA and at most TRIM_MAX_AREA of `big`'s pixels."""
    share = _content_area(rows[small]) / max(_content_area(rows[big]), 1e-9)
    return CROP_MAX_AREA < share <= TRIM_MAX_AREA


def find_duplicates(svc, threshold: float = NEAR_DEFAULT, crops: bool = True, log=None, cache: dict | None = None) -> list[Group]:
    """Duplicate groups of the library's searchable photos, the original first in each group.
    `cache` (a dict kept by the caller) keeps the candidates and pixel scores of this library
    version, so that moving the threshold only regroups."""
    t0 = time.perf_counter()
    snap = svc.snapshot()
    if cache is not None and cache.get("generation") != snap.generation:
        enlarged = cache.get("enlarged", {})  # by the files' identities: still true of unchanged files
        cache.clear()
        cache.update(generation=snap.generation, enlarged=enlarged)
    ids, vecs = snap.all_vectors()
    rows = svc.catalog.guard(svc.catalog.duplicate_rows)
    groups = group_duplicates(ids, vecs, rows, threshold, crops, cache=cache,
                              log=(lambda m: log(f"{m}; {time.perf_counter() - t0:.1f} s with the catalog read")) if log else None)
    return groups


def _candidates(ids: np.ndarray, vecs: np.ndarray, rows: dict, cache: dict):
    """(pairs (P, 2) catalog ids, cosine (P,), frame ncc (P, 8), change (P, 2), detail (P,)):
    every candidate pair and its whole-photo pixel scores, independent of the threshold (cached);
    detail (`detail_scores` in the best orientation) only where the slider could join the pair,
    else NaN (filled in later where a lower threshold asks)."""
    if "candidates" in cache:
        return cache["candidates"]
    knn, cos, rank = knn_pairs(vecs, K_SMALL, SMALL_FLOOR)
    if len(knn):
        area = np.array([_content_area(rows[i]) if i in rows else 0.0 for i in ids.tolist()])
        a, b = area[knn[:, 0]], area[knn[:, 1]]
        near = (rank <= K) & (cos >= CANDIDATE_FLOOR)
        small = np.minimum(a, b) <= SMALL_AREA * np.maximum(a, b)
        knn, cos = knn[near | small], cos[near | small]
    hashes = np.array([rows[i].phash if i in rows and rows[i].border >= 0 else 0 for i in ids.tolist()], np.int64)
    hp = hash_pairs(hashes)
    seen = {(int(a), int(b)) for a, b in knn.tolist()}
    extra = np.array([p for p in hp.tolist() if tuple(p) not in seen], np.int64).reshape(-1, 2)
    if len(extra):
        cos = np.concatenate([cos, np.einsum("ij,ij->i", vecs[extra[:, 0]], vecs[extra[:, 1]])])
        knn = np.concatenate([knn, extra])
    pairs = ids[knn] if len(knn) else np.zeros((0, 2), np.int64)
    ok = np.array([a in rows and b in rows and bool(rows[a].thumb) and bool(rows[b].thumb) for a, b in pairs.tolist()], bool)
    pairs, cos = pairs[ok], cos[ok]
    ncc, change = frame_scores([rows[int(a)].thumb for a, _ in pairs.tolist()], [rows[int(b)].thumb for _, b in pairs.tolist()],
                               tol=STRETCH_TOL)
    detail = np.full(len(pairs), np.nan, np.float32)
    if len(pairs):
        _fill_detail(detail, np.flatnonzero(ncc.max(axis=1) >= min(SLIDER_RANGE[0], TONAL_FLOOR)), pairs, ncc, rows)
    # with a band along one edge left out, where the whole fine structure falls short of DETAIL_SAME
    banded = detail.copy()
    _fill_detail(banded, np.flatnonzero(banded < DETAIL_SAME), pairs, ncc, rows, banded=True)
    cache["banded"] = banded
    cache["straight"] = _straight(pairs, cos, ncc, rows)
    cache["candidates"] = (pairs, cos, ncc, change, detail)
    return cache["candidates"]


def _straight(pairs: np.ndarray, cos: np.ndarray, ncc: np.ndarray, rows: dict) -> tuple[np.ndarray, np.ndarray]:
    """(score (P, 3): straighten_scores of the better way round, -1 where not asked; from_first
    (P,) bool: whether the pair's first photo is the one straightened into the second) for the
    candidate pairs alike enough by descriptor and not the same photo whole."""
    score = np.tile(np.array([-1.0, -1.0, 0.0], np.float32), (len(pairs), 1))
    from_first = np.ones(len(pairs), bool)
    best = ncc.max(axis=1) if len(pairs) else np.zeros(0)
    idx = np.flatnonzero((cos >= STRAIGHT_COS) & (best >= STRAIGHT_FLOOR) & (best < STRAIGHT_NCC))
    if len(idx):
        a = [rows[int(pairs[i, 0])].thumb for i in idx]
        b = [rows[int(pairs[i, 1])].thumb for i in idx]
        ab, ba = straighten_scores(a, b, STRAIGHT_NCC), straighten_scores(b, a, STRAIGHT_NCC)
        first = ab[:, 0] >= ba[:, 0]
        score[idx] = np.where(first[:, None], ab, ba)
        from_first[idx] = first
    return score, from_first


def _fill_detail(detail: np.ndarray, idx: np.ndarray, pairs: np.ndarray, ncc: np.ndarray, rows: dict,
                 banded: bool = False) -> None:
    """detail[idx] = the fine-structure correlation of those candidate pairs, in their best
    orientation (banded: a band along one edge left out; in place: the cached candidates keep what
    is computed once)."""
    if len(idx):
        detail[idx] = detail_scores([rows[int(pairs[i, 0])].thumb for i in idx], [rows[int(pairs[i, 1])].thumb for i in idx],
                                    ncc[idx].argmax(axis=1), banded)


def group_duplicates(ids: np.ndarray, vecs: np.ndarray, rows: dict[int, ImageRow], threshold: float = NEAR_DEFAULT,
                     crops: bool = True, log=None, cache: dict | None = None) -> list[Group]:
    """The grouping itself. ids (n,) catalog ids, vecs (n, D) their unit vectors; rows: id ->
    ImageRow (`Catalog.duplicate_rows`). `threshold`: the pixel correlation two photos need
    to be the same photo. `cache`: the candidates and pixel scores of the same ids and vectors
    (any threshold)."""
    t0 = time.perf_counter()
    cache = {} if cache is None else cache
    by_digest: dict[str, list[int]] = {}
    for i in ids.tolist():
        r = rows.get(i)
        if r is not None and r.digest:
            by_digest.setdefault(r.digest, []).append(i)
    same = [(group[0], other) for group in by_digest.values() for other in group[1:]]  # photos found the same
    pairs, cos, ncc, _, detail = _candidates(ids, vecs, rows, cache)
    t_cand = time.perf_counter() - t0
    best = ncc.max(axis=1) if len(ncc) else np.zeros(0)
    close = hash_close(pairs, rows)
    if threshold < SLIDER_RANGE[0] and len(pairs):  # below the slider (the CLI): the fine check there too
        _fill_detail(detail, np.flatnonzero((best >= threshold) & close & np.isnan(detail)), pairs, ncc, rows)
    windows = []
    for (a, b), s, near, fine, band in zip(pairs.tolist(), best.tolist(), close.tolist(), detail.tolist(),
                                           cache["banded"].tolist()):
        # NaN (no fine structure stored, or not asked): the coarse grid and the hash alone
        if (s >= threshold and near and not fine < DETAIL_MIN) or band >= max(DETAIL_SAME, threshold):
            same.append((a, b))
        elif crops:
            big, small = (a, b) if _content_area(rows[a]) >= _content_area(rows[b]) else (b, a)
            if _content_area(rows[small]) <= TRIM_MAX_AREA * _content_area(rows[big]):
                windows.append((big, small))  # a crop, resized or not, has fewer pixels: same-size photos cost nothing
    known = cache.setdefault("window scores", {})  # (big, small) -> best window correlation
    _scored_windows(rows, windows, known)
    # a crop is never enlarged: a window is refused when the small photo, or a copy of it already
    # grouped, has more pixels than the window it would be cut from (a photo zoomed in from the
    # same place looks like a crop of a wider one, and its full-size copies give it away)
    most: dict[int, float] = {}  # a photo grouped as the whole photo -> the most pixels of its group's photos
    for comp in components(same):
        area = max(_content_area(rows[i]) for i in comp)
        most.update(dict.fromkeys(comp, area))
    crop_of: dict[int, int] = {}
    frames: dict[int, tuple[float, int]] = {}  # a photo showing another in a drawn frame -> (score, that photo)
    for big, small in windows:
        score, fw, turn = known[(big, small)]
        if score >= max(threshold, FRAMED_NCC) and _framed(rows, big, small, known):
            # a screenshot of the photo: its copy, whatever its pixels
            frames[big] = max(frames.get(big, (-1.0, 0)), (score, small))
            continue
        if score >= max(threshold, CROP_NCC):
            r = rows[small]
            w, h = (r.height, r.width) if ORIENTATIONS[turn][0] else (r.width, r.height)
            window = (fw * rows[big].width) ** 2 * (h / w) * (1.0 - max(rows[big].border, 0.0))
            if max(most.get(small, 0.0), _content_area(rows[small])) <= ENLARGED * window:
                same.append((big, small))
                crop_of[small] = big
    # a straightened copy: cut from its photo, as a crop is
    straight, from_first = cache["straight"]
    for i in np.flatnonzero((straight[:, 0] >= max(threshold, STRAIGHT_NCC)) & (straight[:, 1] >= STRAIGHT_DETAIL)):
        src, dst = (pairs[i] if from_first[i] else pairs[i, ::-1]).tolist()
        same.append((src, dst))
        crop_of.setdefault(dst, src)
    # a screenshot shows one photo: joined to the one it fits best, never a bridge to another view
    # of it (a screenshot of one UKBench view joined the next view's group)
    same += [(big, small) for big, (_, small) in frames.items()]
    groups = _groups(components(same), rows, crop_of, threshold, known, cache.setdefault("enlarged", {}), crops, set(frames))
    if log:
        log(f"{len(groups)} duplicate groups among {len(ids)} photos in {time.perf_counter() - t0:.1f} s "
            f"(candidates {t_cand:.1f} s: {len(pairs)} pairs; {len(windows)} window searches)")
    return groups


def _mark_enlarged(ms: list[Member], crop_of: dict, answers: dict) -> None:
    """Mark the members that are enlargements of a smaller whole photo of their group: ENLARGED_CHECK
    times its pixels and more, made after it (`_made_from`), and that photo enlarged gives it back
    (signature.enlargement_residual): they hold no more of the photo than it. The larger file is
    decoded once, whole (a JPEG's draft mode at half size hid a fifth of 4x enlargements:
    benchmarks/enlarged.py); each answer is kept in `answers` by the files' identities (path,
    size, mtime), across library versions. RAW files are never enlargements, nor photos
    with a border added."""
    least = min(m.border for m in ms)
    whole = sorted((m for m in ms if m.image_id not in crop_of and m.border <= least + BORDER_ADDED),
                   key=lambda m: -m.width * m.height)
    # a copy stretched to another shape with more pixels (a 1.3x stretch was kept for its pixels
    # over its source: benchmarks/duplicates.py --quality): of a shape fewer of the group's photos
    # share than another (a slight trim keeps its photo's), it is an enlargement; of two shapes as
    # common, the pixels decide, whatever its size
    logs = np.log([_shape(m) for m in ms])
    share = [int((np.abs(logs - np.log(_shape(m))) <= ASPECT_TOL).sum()) for m in whole]
    for i, m in enumerate(whole):
        if m.format_rank == 0:
            continue
        picture = None
        for small in whole[i + 1:]:  # the largest smaller photo first: the one it was most likely made from
            stretched = abs(np.log(_shape(m)) - np.log(_shape(small))) > ASPECT_TOL
            if (m.width * m.height < (1.0 if stretched else ENLARGED_CHECK) * small.width * small.height
                    or not _made_from(m, small)):
                continue
            if stretched and share[i] < max(share):
                m.enlarged = True
                break
            key = (m.path, m.size, m.mtime, small.path, small.size, small.mtime)
            if key not in answers:
                try:
                    if picture is None:
                        picture = open_oriented(m.path)[0]
                    answers[key] = enlargement_residual(picture, open_oriented(small.path)[0],
                                                        stretched=stretched) < ENLARGED_DETAIL
                except (ImageError, OSError):  # unreadable now: counted as it is
                    answers[key] = False
            if answers[key]:
                m.enlarged = True
                break


def _shape(m: Member) -> float:
    """A member's longer side over its shorter (turned copies alike)."""
    return max(m.width, m.height) / max(min(m.width, m.height), 1)


def _made_from(big: Member, small: Member) -> bool:
    """Whether the files allow `big` to have been made from `small`: unless they show that `big`
    came first, being older by a minute and more (copies made together have about the same time),
    or the camera's file beside a copy without its camera. A soft camera original (many 12-48 MP
    files hold less detail than their pixels) next to its later, smaller web copy looks enlarged
    to the pixels alone (a reviewer's blurred Paris photo and its 6x smaller copy: residual
    0.11-0.13). Where the files tell nothing (a photo and its copies written in the same minute,
    no camera tags), the pixels decide: a 3x enlargement was kept for its pixels. Where
    both name a camera (an export keeps the tags), the larger must be the later by a minute, as
    before: a soft original beside its export copied in the same minute is not judged by pixels."""
    if big.mtime + 60 < small.mtime or (big.camera and not small.camera):
        return False
    if big.camera and small.camera:
        return small.mtime + 60 < big.mtime
    return True


def _mark_shadowed(ms: list[Member], digests: dict[int, str]) -> None:
    """Set `shadowed` on the symbolic links of a group that have the same bytes (`digests`:
    {image_id: file digest}) as a file of it that is not a link."""
    files = {digests.get(m.image_id) for m in ms if not m.link} - {None, ""}
    for m in ms:
        m.shadowed = m.link and digests.get(m.image_id) in files


def _member(row: ImageRow, image_id: int | None = None) -> Member:
    """The member of a group that `row` is (image_id: another id to know it by)."""
    return Member(row.id if image_id is None else image_id, row.path, row.width, row.height, row.size or 0,
                  row.taken or 0.0, row.sharpness or 0.0, (row.mtime_ns or 0) / 1e9, row.camera or "",
                  max(row.border or 0.0, 0.0))


def relation(keep: Member, keep_row: ImageRow, m: Member, m_row: ImageRow, threshold: float, known: dict,
             crops: bool = True) -> tuple[str, str, float]:
    """(relation key, words, pixel similarity) of member `m` against the photo to keep, by the
    grouping's rules: the whole photo (threshold, hashes, fine structure), else a window of it.
    crops: whether a copy that passes as the whole photo may still be told a crop (CROP_BETTER)."""
    if keep_row.digest and keep_row.digest == m_row.digest:
        if m.link:  # removing the link frees nothing and loses nothing
            target = os.path.realpath(m.path)
            # (of two links to one file, one read "best to keep", the other "a link to it": both are links)
            also = keep.link and os.path.realpath(keep.path) == target
            return "exact", f"{'another link' if also else 'a link'} to {paths.display(target)}, not a copy", 1.0
        return "exact", RELATIONS["exact"], 1.0
    ncc, change = frame_scores([keep_row.thumb], [m_row.thumb], tol=STRETCH_TOL)
    k = int(best_turns(ncc)[0])
    sim = float(ncc[0, k])
    pair = {keep.image_id: keep_row, m.image_id: m_row}
    whole = sim >= threshold and hash_close(np.array([[keep.image_id, m.image_id]]), pair)[0]
    band = False  # the same photo by its fine structure with a band along one edge left out
    if keep_row.thumb and m_row.thumb and (whole or sim >= TONAL_FLOOR):  # the fine structure, as grouping asks
        fine = detail_scores([keep_row.thumb], [m_row.thumb], np.array([k]))[0]
        if whole:
            whole = not fine < DETAIL_MIN  # (a trim often fails it)
        elif fine >= max(DETAIL_SAME, threshold):  # a tonal edit: its similarity is its fine structure's
            whole, sim = True, float(fine)
        else:
            banded = detail_scores([keep_row.thumb], [m_row.thumb], np.array([k]), banded=True)[0]
            if banded >= max(DETAIL_SAME, threshold):
                whole, sim, band = True, float(banded), True
    if not whole or (crops and _content_area(m_row) <= TRIM_MAX_AREA * _content_area(keep_row)):
        key = (keep.image_id, m.image_id)
        if key not in known:
            _scored_windows({keep.image_id: keep_row, m.image_id: m_row}, [key], known)
        win, fw, turn = known[key]
    else:
        win = fw = turn = 0
    if whole and win >= max(threshold, CROP_NCC):
        # compared at the window's resolution (64 px): on the 32 px frames a trim of 1.5 % a side
        # still reads 0.99, as a resize does
        key = ("whole", keep.image_id, m.image_id)
        if key not in known:
            known[key] = float(crop_search([keep_row.thumb], [m_row.thumb], lambda *shapes: [(1.0, 1.0)])[0][0])
        whole = win <= known[key] + CROP_BETTER
    if win >= max(threshold, CROP_NCC) and not whole:
        window_px = fw * keep.width * np.sqrt(1 - keep.border)  # the window's width in the keep's pixels
        across = (m.height if ORIENTATIONS[turn][0] else m.width) * np.sqrt(1 - m.border)  # the crop's side along it
        words = [RELATIONS["crop"]]
        if turn:  # `turn` turns the member onto the keep: the member is the crop turned the other way
            words.append(ORIENTATION_NAMES[inverse_turn(turn)])
        if across < 0.9 * window_px:
            words.append(f"resized to {100 * across / window_px:.0f} %")
        return "crop", ", ".join(words), win
    if not whole and crops and _content_area(keep_row) <= TRIM_MAX_AREA * _content_area(m_row):
        # the photo to keep as a window of the member: the member shows it in a drawn frame
        key = (m.image_id, keep.image_id)
        if key not in known:
            _scored_windows({keep.image_id: keep_row, m.image_id: m_row}, [key], known)
        if known[key][0] >= max(threshold, FRAMED_NCC) and _framed({keep.image_id: keep_row, m.image_id: m_row},
                                                                  m.image_id, keep.image_id, known):
            return "bordered", FRAMED_WORDS, known[key][0]
    if not whole:
        key = ("straight", keep.image_id, m.image_id)
        if key not in known:
            known[key] = straighten_scores([keep_row.thumb], [m_row.thumb])[0] if keep_row.thumb and m_row.thumb else None
        st = known[key]
        if st is not None and st[0] >= max(threshold, STRAIGHT_NCC) and st[1] >= STRAIGHT_DETAIL:
            return "crop", f"{RELATIONS['crop']}, straightened by {abs(float(st[2])):.1f}°", float(st[0])
        return "similar", RELATIONS["similar"], max(sim, win)
    words = []
    if k:  # k turns the member back onto the keep: the member is the keep turned the other way
        words.append(ORIENTATION_NAMES[inverse_turn(k)])
    px_keep, px_m = keep.width * keep.height * (1 - keep.border), m.width * m.height * (1 - m.border)
    if px_m < 0.9 * px_keep:
        words.append(f"resized to {100 * np.sqrt(px_m / px_keep):.0f} %")
    elif px_m > 1.1 * px_keep:
        words.append(f"enlarged to {100 * np.sqrt(px_m / px_keep):.0f} %")
    mw, mh = (m.height, m.width) if ORIENTATIONS[k][0] else (m.width, m.height)
    stretched = abs(np.log(keep.width / max(keep.height, 1)) - np.log(mw / max(mh, 1))) > ASPECT_TOL
    if stretched:
        words.append("stretched to another shape")
    if m.border > keep.border + BORDER_ADDED:
        words.append("with a border added")
    if band:
        words.append("with a caption or a band drawn along an edge")
    dmean, spread = change[0]
    tonal = abs(dmean) > EDITED_MEAN or abs(spread - 1) > EDITED_SPREAD
    # colours are read from the files (~9 ms each) where the pixels tell no other change: the first
    # grouping of benchmarks/duplicates.py --quality took 11.6 s so, 15.5 s reading them for every
    # copy, 9.4 s without (a black and white copy also resized is told "resized" alone)
    colour = "" if words else _colour_words(keep.path, m.path, known)
    if tonal and not band:
        words.append("with its brightness or contrast" + (" and its colours changed" if colour == COLOURS_CHANGED
                                                          else " changed"))
    if colour and not (tonal and not band and colour == COLOURS_CHANGED):
        words.append(colour)
    edited = band or tonal or bool(colour)
    other_format = m.format_rank != keep.format_rank or os.path.splitext(m.path)[1].lower() != os.path.splitext(keep.path)[1].lower()
    if not words:
        words.append("in another format" if other_format else "re-encoded")
        for path in (m.path, keep.path):  # a file's header, read once per library version (the cache)
            if ("orientation", path) not in known:
                known[("orientation", path)] = stored_orientation(path)
        stored = known[("orientation", m.path)]
        if stored != 1 and stored != known[("orientation", keep.path)]:  # (e.g. a TIFF stored turned)
            how = "mirrored" if stored in (2, 4) else "turned and mirrored" if stored in (5, 7) else "turned"
            words.append(f"its pixels stored {how} (a rotation tag shows it the same way)")
    key = ("bordered" if m.border > keep.border + BORDER_ADDED else "resized" if stretched else "edited" if edited
           else "turned" if k else "resized" if not 0.9 * px_keep <= px_m <= 1.1 * px_keep
           else "format" if other_format else "reencoded")
    return key, "the same photo " + ", ".join(words), sim


def _colour_words(keep_path: str, path: str, known: dict) -> str:
    """How the photo at `path` changed the colours of the photo at `keep_path`, its whole copy:
    "in black and white", "with its colours changed" (a cast, sepia, saturation) or "" (as they
    were, or a file that cannot be read). Each file read once per library version (`known`)."""
    for p in (keep_path, path):
        if ("colour", p) not in known:
            known[("colour", p)] = colour_of(p)
    was, now = known[("colour", keep_path)], known[("colour", path)]
    if was is None or now is None or was[0] < 2 * GREY_CHROMA:  # (a black and white photo, tinted: not told)
        return ""
    if now[0] < GREY_CHROMA:
        return "in black and white"
    ratio = (now[0] + 1) / (was[0] + 1)
    shift = np.hypot(now[1] - was[1], now[2] - was[2]) / max(was[0], now[0], 10.0)
    if shift >= COLOUR_SHIFT or not 1 / COLOUR_RATIO <= ratio <= COLOUR_RATIO:
        return COLOURS_CHANGED
    return ""


def _groups(comps: list[list[int]], rows, crop_of: dict, threshold: float, known: dict, enlarged: dict,
            crops: bool = True, framed: set = frozenset()) -> list[Group]:
    """Groups of the components `comps`, the photo to keep first; `framed`: photos showing another
    in a drawn frame, ranked as a border added."""
    out = []
    for members in comps:
        ms = [_member(rows[i]) for i in members if i in rows]
        if len(ms) < 2:
            continue
        _mark_enlarged(ms, {**crop_of, **dict.fromkeys(framed, 0)}, enlarged)
        _mark_shadowed(ms, {m.image_id: rows[m.image_id].digest for m in ms})
        least = min(m.border for m in ms)
        turned = dict(zip([m.image_id for m in ms],
                          turned_from_most([b"" if m.image_id in crop_of or m.image_id in framed else rows[m.image_id].thumb
                                            for m in ms])))
        flags = {m.image_id: (m.border > least + BORDER_ADDED or m.image_id in framed, m.image_id in crop_of,
                              turned[m.image_id]) for m in ms}
        _even_out(ms, flags)
        ms.sort(key=lambda m: keep_order(m, *flags[m.image_id]))
        keep = ms[0]
        keep.why = kept_because(keep, ms[1], flags[keep.image_id], flags[ms[1].image_id])
        # said against a link to its bytes too (not "most pixels" beside such a link of equal size)
        digest = rows[keep.image_id].digest
        if not keep.shadowed and not ms[1].shadowed and digest and any(
                m.shadowed and rows[m.image_id].digest == digest for m in ms[2:]):
            keep.why += "; the file itself, not a link to the same bytes"
        # the window searches `relation` asks for, in one batch (a search alone costs ~15 times more)
        _scored_windows(rows, [(keep.image_id, m.image_id) for m in ms[1:]
                               if _content_area(rows[m.image_id]) <= TRIM_MAX_AREA * _content_area(rows[keep.image_id])
                               and not (rows[m.image_id].digest and rows[m.image_id].digest == rows[keep.image_id].digest)],
                       known)
        for m in ms[1:]:
            m.relation, m.detail, m.similarity = relation(keep, rows[keep.image_id], m, rows[m.image_id], threshold, known,
                                                          crops)
        out.append(Group(ms))
    out.sort(key=lambda g: (STRENGTH[g.kind], -len(g.members), g.members[0].path))
    return out


def to_records(groups: list[Group]) -> list[dict]:
    """JSON-able groups (for `heatsearch duplicates --json` and the export). `similarity`: the
    pixel correlation with the photo to keep, after turning and scaling onto it (1 = the same
    pixels)."""
    return [{"group": n + 1, "kind": g.kind,
             "members": [{"path": m.path, "keep": not m.relation, "relation": m.relation or "keep", "reason": m.reason,
                          "similarity": round(m.similarity, 4), "width": m.width, "height": m.height, "bytes": m.size,
                          "taken": m.taken, "camera": m.camera} for m in g.members]}
            for n, g in enumerate(groups)]


class CopyFilter:
    """One of each photo, by the finder's whole-photo rule (any orientation or size, re-encoded or
    lightly edited): `match(thumb)` gives the photo let through before (0, 1, ... in the order they
    were let through) that a photo is the same photo as, or None when it is a new one (then it is
    let through: it is number `len(grids) - 1`)."""

    def __init__(self, threshold: float = NEAR_DEFAULT):
        self.threshold = threshold
        self.grids: list[np.ndarray] = []
        self.details: list[np.ndarray | None] = []
        self.aspects: list[float] = []

    def match(self, thumb: bytes, digest: str = "", keep: bool = True) -> int | None:
        """keep=False: a new photo is not let through (only compared with those before)."""
        if not thumb:
            return None
        g, aspect, _, _ = frame_grid(thumb)
        fine = None  # the fine structure only for a photo whose coarse grid matches one (it costs)
        if self.grids:
            shown, aspects = np.stack(self.grids).reshape(len(self.grids), -1), np.asarray(self.aspects)
            for k, (transpose, _, _) in enumerate(ORIENTATIONS):
                fits = np.flatnonzero(np.abs(aspects - (-aspect if transpose else aspect)) <= ASPECT_TOL)
                if len(fits):
                    sims = shown[fits] @ orient(g, k).ravel()
                    for j in fits[sims >= self.threshold]:  # the coarse grid, then the fine structure
                        fine = detail_grid(thumb) if fine is None else fine
                        other = self.details[j]
                        if fine is None or other is None or float((other * orient(fine, k)).sum()) >= DETAIL_MIN:
                            return int(j)
        if not keep:
            return None
        self.grids.append(g)
        self.details.append(detail_grid(thumb) if fine is None else fine)
        self.aspects.append(aspect)
        return None


def keeper(rows: list[ImageRow], answers: dict) -> int:
    """Index of the photo Duplicates would keep among `rows`, the catalog rows of one photo's
    copies, by `keep_order` after the enlargement check (`_mark_enlarged`, its answers kept in
    `answers`)."""
    ms = [_member(r, i) for i, r in enumerate(rows)]
    _mark_enlarged(ms, {}, answers)
    _mark_shadowed(ms, {i: r.digest for i, r in enumerate(rows)})
    least = min(m.border for m in ms)
    turned = turned_from_most([r.thumb or b"" for r in rows])
    flags = {m.image_id: (m.border > least + BORDER_ADDED, False, turned[m.image_id]) for m in ms}
    _even_out(ms, flags)
    return min(ms, key=lambda m: keep_order(m, *flags[m.image_id])).image_id
