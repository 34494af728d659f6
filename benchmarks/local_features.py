"""Spatial verification with classical local features (README "Relevance").

Does a photo the library does not hold tell itself apart from one it holds by how many SIFT
matches one homography explains between the query and its first results? Every shared Paris
photo is searched (the shipped search, whole photo) in a library built by benchmarks/relevance.py
(e.g. `--landmarks louvre,defense,eiffel`: the other landmarks' photos are not held, and their
best matches are look-alikes); for each query, the most inliers over its first 10 results.
(Measured, not shipped: landmarks are not told apart this way.)

    python benchmarks/local_features.py --home DIR [--side 640] [--features 1000] [--ratio 0.85]

Prints, per inlier threshold, the share of searches with a right result among their first 10
that reach it (kept) and of searches with none that stay below it (flagged), and the share of
right and wrong result pairs reaching 12 inliers. A right result is a photo of the same
landmark (the file name's landmark).

    python benchmarks/local_features.py --home DIR --objects [--queries FILE]

--objects: the shipped verification (app/core/verification.py: a HeR search's first 30 results
matched with the query; below a step of inliers after an object's own views, the rest read 0.3
of their relevance). Every 5th UKBench photo and every 2nd Paris photo the library holds are searched (or
the photos a --queries file lists, one path per line, e.g. held-out views), each twice: without
the verification (before) and with it (after). Prints, per set, the HeR searches and those that
stepped, right and wrong results' inliers (the first 30) and how many of the first 100 read 0.5
or more before and after, and what the verification cost. A right UKBench result is a view of the
same object.

    python benchmarks/local_features.py --smoke     # a check that it runs: a library of 18 shared photos
                                                    # (a temp folder), 6 searches, then --objects on it
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def landmark(path: str) -> str:
    return "_".join(Path(path).name.split("_")[:2])


def main(argv=None) -> None:
    import cv2

    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.core.pipeline.search import SearchRequest, Searcher

    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=640)
    ap.add_argument("--features", type=int, default=1000)
    ap.add_argument("--ratio", type=float, default=0.85)
    ap.add_argument("--objects", action="store_true", help="the HeR step rule on UKBench and Paris searches")
    ap.add_argument("--queries", default=None, help="with --objects: a file of query paths (photos not held too)")
    ap.add_argument("--limit", type=int, default=None, help="without --objects: this many Paris photos searched, spread "
                                                            "over the set (default: all)")
    ap.add_argument("--home", required="--smoke" not in (argv if argv is not None else sys.argv))
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): a library of "
                                                           "8 UKBench and 10 Paris photos in a temp folder, --limit 6, "
                                                           "then --objects")
    a = ap.parse_args(argv)
    if a.smoke:
        tmp = Path(tempfile.mkdtemp(prefix="hs-local-smoke-"))
        photos = tmp / "photos"
        photos.mkdir()
        paris = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
        for p in sorted((SHARED / "ukbench").glob("*.jpg"))[:8] + paris[::25]:
            (photos / p.name).symlink_to(p)
        subprocess.run([sys.executable, "-m", "app", "index", str(photos), "--home", str(tmp / "home")], check=True,
                       stdout=subprocess.DEVNULL)
        main(["--home", str(tmp / "home"), "--limit", "6"])
        main(["--home", str(tmp / "home"), "--objects"])
        shutil.rmtree(tmp, ignore_errors=True)
        return
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
    if a.objects:
        objects(svc, searcher, a.queries)
        svc.close()
        return
    held, unheld, right_pairs, wrong_pairs = [], [], [], []
    searched = sorted(str(p.resolve()) for p in (SHARED / "paris250" / "jpg").glob("*.jpg"))
    if a.limit:
        searched = searched[:: max(1, len(searched) // a.limit)][: a.limit]
    for q in searched:
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


def subject(path: str) -> str:
    """A UKBench photo's object (4 views each), else the Paris landmark or the file itself."""
    name = Path(path).name
    return f"ukbench{int(name[7:12]) // 4}" if name.startswith("ukbench") else landmark(path)


def objects(svc, searcher, queries_file) -> None:
    """The shipped verification (app/core/verification.py) on the search's own first results."""
    from app.core import verification
    from app.core.pipeline.search import SearchRequest

    cat = svc.catalog
    held = sorted(p for _, p, _ in cat.guard(cat.image_paths, [f.id for f in cat.guard(cat.folders)]))
    if queries_file:
        queries = [line.strip() for line in open(queries_file) if line.strip()]
    else:
        queries = [p for p in held if Path(p).name.startswith("ukbench")][::5] + \
                  [p for p in held if Path(p).name.startswith("paris_")][::2]
    rows = []  # (set, right, relevance before, after, inliers: -1 past the first 30)
    her_searches, stepped, ms = {}, {}, []
    for q in queries:
        kind = "UKBench" if Path(q).name.startswith("ukbench") else "Paris" if Path(q).name.startswith("paris_") else "other"
        searcher.VERIFIED = 0  # before: nothing matched part by part
        before = {h.path: h.score for h in searcher.search(SearchRequest(path=q, top=100)).hits}
        del searcher.VERIFIED
        res = searcher.search(SearchRequest(path=q, top=100))
        hits = [h for h in res.hits if not (h.duplicate or h.copy) and Path(h.path).resolve() != Path(q).resolve()]
        query = verification.read_features(q)
        counts = [verification.inliers(query, verification.read_features(h.path)) if i < 30 else -1 for i, h in enumerate(hits)]
        her = bool(res.plan and res.plan.her)
        her_searches[kind] = her_searches.get(kind, 0) + her
        stepped[kind] = stepped.get(kind, 0) + bool(res.plan and res.plan.verified)
        if her:
            ms.append(res.timings["verify_ms"])
        rows += [(kind, subject(h.path) == subject(q), before.get(h.path, 0.0), h.score, c) for h, c in zip(hits, counts)]
    print(f"{len(queries)} searches, first 100 results each (inliers: the first 30); verification: {verification.SIDE} px, "
          f"{verification.FEATURES} features; a step of x{verification.STEP_RATIO} after {verification.STEP_ABOVE} "
          f"or more results of {verification.STEP_MIN}+ inliers, at most {verification.STEP_EXCEPTIONS} of "
          f"{verification.CHANCE}+ below it, lowers the rest to {verification.BELOW_STEP} of their relevance")
    print("| set | HeR searches / stepped | right: median inliers, 10th pct | wrong: median, 90th pct | "
          "right at 0.5+ before -> after | wrong at 0.5+ before -> after |\n|---|---|---|---|---|---|")
    for kind in sorted({r[0] for r in rows}):
        right = [r for r in rows if r[0] == kind and r[1]]
        wrong = [r for r in rows if r[0] == kind and not r[1]]
        ri = np.array([r[4] for r in right if r[4] >= 0] or [0])
        wi = np.array([r[4] for r in wrong if r[4] >= 0] or [0])
        print(f"| {kind} | {her_searches[kind]} / {stepped[kind]} | {np.median(ri):.0f}, {np.percentile(ri, 10):.0f} | "
              f"{np.median(wi):.0f}, {np.percentile(wi, 90):.0f} | "
              f"{sum(r[2] >= .5 for r in right)} -> {sum(r[3] >= .5 for r in right)} | "
              f"{sum(r[2] >= .5 for r in wrong)} -> {sum(r[3] >= .5 for r in wrong)} |")
    if ms:
        print(f"verification per HeR search: median {np.median(ms):.0f} ms, 90th percentile {np.percentile(ms, 90):.0f} ms")


if __name__ == "__main__":
    main()
