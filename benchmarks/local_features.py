"""Spatial verification with classical local features (measured, not shipped: README "Relevance").

Does a photo the library does not hold tell itself apart from one it holds by how many SIFT
matches one homography explains between the query and its first results? Every shared Paris
photo is searched (the shipped search, whole photo) in a library built by benchmarks/relevance.py
(e.g. `--landmarks louvre,defense,eiffel`: the other landmarks' photos are not held, and their
best matches are look-alikes); for each query, the most inliers over its first 10 results.

    pip install opencv-python-headless      # not a dependency of the app
    python benchmarks/local_features.py --home DIR [--side 640] [--features 1000] [--ratio 0.85]

Prints, per inlier threshold, the share of searches with a right result among their first 10
that reach it (kept) and of searches with none that stay below it (flagged), and the share of
right and wrong result pairs reaching 12 inliers. A right result is a photo of the same
landmark (the file name's landmark).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def landmark(path: str) -> str:
    return "_".join(Path(path).name.split("_")[:2])


def main() -> None:
    import cv2

    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.core.pipeline.search import SearchRequest, Searcher

    ap = argparse.ArgumentParser()
    ap.add_argument("--home", required=True)
    ap.add_argument("--side", type=int, default=640)
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--ratio", type=float, default=0.85)
    a = ap.parse_args()
    sift, matcher, cache = cv2.SIFT_create(nfeatures=a.features), cv2.BFMatcher(cv2.NORM_L2), {}

    def features(path: str):
        if path not in cache:
            im = ImageOps.exif_transpose(Image.open(path)).convert("L")
            im.thumbnail((a.side, a.side))
            kp, d = sift.detectAndCompute(np.asarray(im), None)
            d = np.zeros((0, 128), np.float32) if d is None else np.sqrt(d / (d.sum(1, keepdims=True) + 1e-7))  # RootSIFT
            cache[path] = (np.float32([k.pt for k in kp]).reshape(-1, 2), d.astype(np.float32))
        return cache[path]

    def inliers(q: str, r: str) -> int:
        (pq, dq), (pr, dr) = features(q), features(r)
        if len(dq) < 5 or len(dr) < 5:
            return 0
        good = [m[0] for m in matcher.knnMatch(dq, dr, k=2) if len(m) == 2 and m[0].distance < a.ratio * m[1].distance]
        if len(good) < 5:
            return 0
        _, mask = cv2.findHomography(pq[[g.queryIdx for g in good]], pr[[g.trainIdx for g in good]], cv2.USAC_MAGSAC, 8.0)
        return 0 if mask is None else int(mask.sum())

    svc = LibraryService(Path(a.home), Settings())
    svc.wait_ready()
    searcher = Searcher(svc)
    held, unheld, right_pairs, wrong_pairs = [], [], [], []
    for q in sorted(str(p.resolve()) for p in (SHARED / "paris250" / "jpg").glob("*.jpg")):
        hits = [str(Path(h.path).resolve()) for h in searcher.search(SearchRequest(path=q, top=12)).hits
                if not (h.duplicate or h.copy)]
        hits = [h for h in hits if h != q][:10]
        counts = [inliers(q, h) for h in hits]
        right = [landmark(h) == landmark(q) for h in hits]
        for c, r in zip(counts, right):
            (right_pairs if r else wrong_pairs).append(c)
        (held if any(right) else unheld).append(max(counts, default=0))
    svc.close()
    held, unheld = np.array(held), np.array(unheld)
    print(f"{len(held)} searches with a right result among their first 10, {len(unheld)} with none")
    print("| inliers | kept (right among first 10) | flagged (none right) |\n|---|---|---|")
    for t in (8, 10, 12, 15, 20, 25):
        print(f"| {t} | {(held >= t).mean():.3f} | {(unheld < t).mean() if len(unheld) else float('nan'):.3f} |")
    for name, x in (("right", right_pairs), ("wrong", wrong_pairs)):
        x = np.array(x)
        print(f"{name} results: {len(x)}, median {np.median(x):.0f} inliers, 12 or more: {(x >= 12).mean():.3f}")


if __name__ == "__main__":
    main()
