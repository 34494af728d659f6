"""Spatial verification of a search's first results with local features (SIFT, OpenCV).

HeR's heat spreads over every photo of the query's kind: a held-out view of a book read 22-33
other covers 0.9+ in people's own libraries, which the CNN's descriptor places as close to
the query as the book's own views (cosine 0.80-0.87 against 0.82-0.96). Matching the photos' parts
tells them apart: one homography explains 15-100+ SIFT matches between two views of an object, and
5-8 between two covers. A search whose first results' counts fall sharply after a few photos found
the query's object; the photos below that step are other things (`step`).

Landmarks are not told apart this way (two photos of one building share a median of 6-9 inliers,
as many as two of different buildings), so the rule only ever lowers results, never raises them.
Photos are read, never written. README "Relevance".
"""
from __future__ import annotations

import threading

import numpy as np

from .imageio import decode

MAX_PIXELS = 50_000_000  # photos of other formats above this are not read (`readable`)
SIDE = 320  # px, the longer side the features are read at (640: 79 ms per photo, as separating)
FEATURES = 500  # the strongest keypoints kept per photo
RATIO = 0.85  # Lowe's ratio test on RootSIFT
REPROJECTION = 8.0  # px at SIDE: a match the homography places further off is an outlier
# The step (measured on the shared libraries and a person's own, benchmarks/local_features.py --objects):
# the other views of an object have a median of 30-64 inliers at 320 px (10th percentile 6-16),
# other photos 5 (90th percentile 8-9). Below the step nothing else may share the query's geometry: at
# most STEP_EXCEPTIONS results of CHANCE inliers or more (a landmark's near-identical shots make a
# step too, and its other photos below it still reach 15-35).
STEP_MIN, STEP_RATIO, STEP_ABOVE = 25, 2.5, 2
CHANCE, STEP_EXCEPTIONS = 15, 1
# Near-identical shots of the query (a burst: cosine BURST or more in the searched space) match it
# as an object's views do, but say nothing of the photos below them: a burst of a landmark made a
# step over its other photos (30 synthetic bursts of 3 shots in libraries of 464 and 1,590 photos: 4
# and 6 searches stepped, right results at 0.5 -15 % and -21 %). They are passed over. At NEAR_SHOT
# (0.93) a third of an object's own views would be too (held UKBench searches of that person's
# library: wrong results at 0.5 229 -> 112, against 67 at 0.96).
BURST = 0.96
# A whole photo whose best match is not sure by its raw cosine (policy.MATCH_RAW_SURE) and none of
# whose first UNMATCHED_FIRST results share UNMATCHED_INLIERS reads as not held: every result times
# BELOW_STEP. The first result of a search for a photo a 600-photo library does not hold shares a
# median of 5 inliers with it (at most 16); three results rather than one keep a landmark whose
# first photo was taken from afar (Paris searches not lowered 151 -> 153 of 155).
UNMATCHED_FIRST, UNMATCHED_INLIERS = 3, 10
# A photo with fewer features than this (of FEATURES) cannot show that it shares UNMATCHED_INLIERS
# (sky, fog, a plain product shot): such a query, or first result, is not judged by that test.
UNMATCHED_FEATURES = 5 * UNMATCHED_INLIERS
BELOW_STEP = 0.3  # a result below the step reads this share of its relevance (0.30 at most), its order kept


class Features(tuple):
    """(points (n, 2) float32 in pixels at SIDE, descriptors (n, 128) float32 RootSIFT)."""


def features_of(image) -> Features:
    """Local features of a PIL image (any mode, any size: read at SIDE px on its longer side)."""
    grey = image.convert("L")
    grey.thumbnail((SIDE, SIDE))
    kp, d = _sift().detectAndCompute(np.asarray(grey), None)
    if d is None or not len(kp):
        return Features((np.zeros((0, 2), np.float32), np.zeros((0, 128), np.float32)))
    d = np.sqrt(d / (d.sum(axis=1, keepdims=True) + 1e-7))  # RootSIFT: Hellinger on the histograms
    return Features((np.float32([k.pt for k in kp]).reshape(-1, 2), d.astype(np.float32)))


def judged(features: Features) -> bool:
    """Whether a photo has features enough (UNMATCHED_FEATURES) to be told not held by how few
    of them match (the look-alike test of a search whose best match is not sure)."""
    return len(features[1]) >= UNMATCHED_FEATURES


def readable(path: str, width: int | None, height: int | None) -> bool:
    """Whether a photo is read for its features: a JPEG is decoded at a reduced scale, other
    formats whole, so those over MAX_PIXELS are not (a 200 MP TIFF: 600 MB for a moment)."""
    return path.lower().endswith((".jpg", ".jpeg")) or (width or 0) * (height or 0) <= MAX_PIXELS


def read_features(path: str) -> Features:
    """Local features of the photo at `path` (JPEG decoded at a reduced scale). Raises ImageError."""
    return features_of(decode(path, draft_side=SIDE).image)


def inliers(a: Features, b: Features) -> int:
    """How many of the ratio-tested matches of `a` and `b` one homography explains (MAGSAC)."""
    import cv2  # here and in _sift: 0.04-0.06 s to import, for the searches that verify their first results

    (pa, da), (pb, db) = a, b
    if len(da) < 5 or len(db) < 5:
        return 0
    pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(da, db, k=2)
    good = [m[0] for m in pairs if len(m) == 2 and m[0].distance < RATIO * m[1].distance]
    if len(good) < 5:
        return 0
    _, mask = cv2.findHomography(pa[[g.queryIdx for g in good]], pb[[g.trainIdx for g in good]],
                                 cv2.USAC_MAGSAC, REPROJECTION)
    return 0 if mask is None else int(mask.sum())


def step(counts) -> float | None:
    """The fewest inliers above a step: a count of STEP_MIN or more with STEP_RATIO times fewer
    next, STEP_ABOVE or more results at or above it, and at most STEP_EXCEPTIONS below it with
    CHANCE or more; the lowest such step (views at 169, 164 and 64 inliers, the rest 8 or fewer:
    64); None when the counts fall evenly or the photos below still match (a landmark's photos),
    or nothing was found. counts: inliers of a search's first results, any order."""
    s = np.sort(np.asarray(counts, np.int64))[::-1]
    cut = None
    for i in range(STEP_ABOVE - 1, len(s) - 1):
        if s[i] >= STEP_MIN and s[i] >= STEP_RATIO * max(int(s[i + 1]), 1):
            cut, below = float(s[i]), s[i + 1:]
    if cut is None or int((below >= CHANCE).sum()) > STEP_EXCEPTIONS:
        return None
    return cut


_local = threading.local()


def _sift():
    """One SIFT detector per thread (OpenCV's objects are not shared across threads)."""
    import cv2

    if getattr(_local, "sift", None) is None:
        _local.sift = cv2.SIFT_create(nfeatures=FEATURES)
    return _local.sift
