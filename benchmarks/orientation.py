"""Photos stored sideways (pixels turned, no orientation tag): how much of an upright query's
top 10 the same photo turned 90/180/270 degrees finds, and how often an upright query finds the
library's photos of its subject when those are stored turned. Today's search, and two ways of
searching a query in its four turns, so that a choice is made on figures (issue 50, item 1).

    python benchmarks/orientation.py                 # UKBench 600 + Paris 250, 40 queries (~10 min here)
    python benchmarks/orientation.py --queries 80
    python benchmarks/orientation.py --penalty 0.05    # the shipped rows with another policy.TURN_PENALTY
    python benchmarks/orientation.py --smoke         # a check that it runs: 40 UKBench photos, 4 queries

Two libraries of the same photos, indexed with the shipped defaults in a temp folder: "upright"
(the shared photos as they are) and "stored turned" (the other views of the queried UKBench
objects and every Paris photo but the queries written turned 90 degrees, JPEG quality 95, no tag;
the rest as they are). Queries: the
first view of UKBench objects and Paris photos, spread over each set.

Rows:
- "turned query": the query photo turned (pasted pixels, no file), top 10 against the upright
  query's top 10 (the query's own photo and its copies left out of both).
- "stored turned": an upright query in the second library: for UKBench the recall of its object's
  three other views in the top 10, for Paris the share of the top 10 from its landmark; against
  the same in the upright library. Beside the share of the upright query's top 10, "right": the
  share of right photos in the turned query's top 10 (UKBench: its object's other three views;
  Paris: photos of its landmark).
Policies: "as it is" (one search of the photo as it is: the app before policy.TURN_QUERIES);
"best turn alone" (the turn whose first ten photos stand out most, by a margin: the app before
policy.TURN_PENALTY); "shipped" (the app's search: that turn's results with the photos the other
three turns find, read policy.TURN_PENALTY lower); and two measured, not shipped: "best turn" (four whole searches, the list whose first ten read the
highest relevance kept) and "best of each" (the four lists merged, each photo at its best
relevance). Each costs three more query descriptors (the CNN).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
TURNS = (0, 90, 180, 270)  # degrees, counter-clockwise (PIL's rotate)


def library(home: Path, folder: Path):
    """A LibraryService on `home` with `folder` indexed at the shipped defaults."""
    from app.core.config import Settings
    from app.core.library.service import LibraryService

    settings = Settings()
    settings.save(home)
    svc = LibraryService(home, settings)
    svc.wait_ready(600)
    svc.run(svc.index([folder]), timeout=3600)
    return svc


def top(searcher, image: Image.Image | None, path: Path | None, leave: set[str], k: int = 10) -> list[tuple[str, float]]:
    """(path, relevance) of the first `k` results, the photos in `leave` (the query's own, its copies) left out."""
    from app.core.pipeline.search import SearchRequest

    res = searcher.search(SearchRequest(path=str(path) if path else None, image=image, top=k + 8))
    out = [(Path(h.path).name, float(h.score)) for h in res.hits if Path(h.path).name not in leave and not h.copy]
    return out[:k]


def turned_lists(searcher, image: Image.Image, leave: set[str]) -> list[list[tuple[str, float]]]:
    """The top 10 of `image` in each of its four turns, each searched as it is."""
    from app.core import policy

    policy.TURN_QUERIES = False
    try:
        return [top(searcher, image.rotate(t, expand=True) if t else image, None, leave) for t in TURNS]
    finally:
        policy.TURN_QUERIES = True


def shipped(searcher, image: Image.Image, leave: set[str], alone: bool = False) -> list[str]:
    """The top 10 of `image` as the app searches it (policy.TURN_QUERIES: its best turn by
    closeness, with the photos its other turns find, policy.TURN_PENALTY lower); alone: its best
    turn's photos alone (the app before policy.TURN_PENALTY)."""
    from app.core import policy

    penalty = policy.TURN_PENALTY
    policy.TURN_PENALTY = float("inf") if alone else penalty
    try:
        return [p for p, _ in top(searcher, image, None, leave)]
    finally:
        policy.TURN_PENALTY = penalty


def best_turn(lists) -> list[str]:
    """The list whose first ten read the highest mean relevance."""
    return [p for p, _ in max(lists, key=lambda hits: statistics.fmean([s for _, s in hits]) if hits else 0.0)]


def best_of_each(lists, k: int = 10) -> list[str]:
    """The lists merged, each photo at its best relevance."""
    best: dict[str, float] = {}
    for hits in lists:
        for p, s in hits:
            best[p] = max(best.get(p, 0.0), s)
    return sorted(best, key=lambda p: -best[p])[:k]


def landmark(name: str) -> str:
    """A Paris photo's landmark: 'paris_louvre_000123.jpg' -> 'louvre'."""
    return name.split("_")[1] if name.startswith("paris_") else name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=40, help="queries: UKBench first views and Paris photos, 3:2")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs: 40 UKBench photos, 4 queries")
    ap.add_argument("--penalty", type=float, help="policy.TURN_PENALTY for the shipped rows (default: the shipped one)")
    a = ap.parse_args()
    from app.core import policy

    if a.penalty is not None:
        policy.TURN_PENALTY = a.penalty
    print(f"policy.TURN_PENALTY {policy.TURN_PENALTY}")
    uk = sorted((SHARED / "ukbench").glob("*.jpg"))
    pa = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
    if a.smoke:
        uk, pa, a.queries = uk[:40], [], 4
    n_uk = a.queries if not pa else (a.queries * 3) // 5
    objects = len(uk) // 4
    uk_q = [uk[4 * (i * objects // n_uk)] for i in range(n_uk)]  # first views, spread over the objects
    pa_q = [pa[i * len(pa) // max(1, a.queries - n_uk)] for i in range(a.queries - n_uk)] if pa else []
    print(f"{len(uk) + len(pa)} photos, {len(uk_q)} UKBench and {len(pa_q)} Paris queries", flush=True)
    from app.core.pipeline.search import Searcher

    with tempfile.TemporaryDirectory(prefix="hs-orient-") as tmp:
        tmp = Path(tmp)
        up_dir, side_dir = tmp / "upright", tmp / "turned"
        up_dir.mkdir()
        side_dir.mkdir()
        turned_views = {uk[uk.index(q) + j].name for q in uk_q for j in (1, 2, 3)}
        turned_views |= {p.name for p in pa} - {q.name for q in pa_q}  # every other Paris photo
        for p in uk + pa:
            (up_dir / p.name).symlink_to(p)
            if p.name in turned_views:
                with Image.open(p) as im:
                    im.convert("RGB").rotate(90, expand=True).save(side_dir / p.name, quality=95)
            else:
                (side_dir / p.name).symlink_to(p)
        t = time.time()
        up = library(tmp / "home-upright", up_dir)
        side = library(tmp / "home-turned", side_dir)
        print(f"two libraries indexed in {time.time() - t:.0f} s", flush=True)
        s_up, s_side = Searcher(up), Searcher(side)

        # turned queries against the upright query's top 10
        policies = ("as it is", "best turn alone", "shipped", "best turn", "best of each")

        def each(searcher, image, leave):
            """(policy, its top 10) for the query `image`."""
            lists = turned_lists(searcher, image, leave)
            return (("as it is", [p for p, _ in lists[0]]), ("best turn alone", shipped(searcher, image, leave, alone=True)),
                    ("shipped", shipped(searcher, image, leave)), ("best turn", best_turn(lists)),
                    ("best of each", best_of_each(lists)))

        def right(q: Path, got: list[str]) -> float:
            """The share of right photos in `got`: a UKBench query's other three views, a Paris query's landmark."""
            if q in uk_q:
                i = uk.index(q)
                return len({uk[i + j].name for j in (1, 2, 3)} & set(got)) / 3
            return sum(landmark(p) == landmark(q.name) for p in got) / 10

        kept = {(pol, deg): [] for pol in policies for deg in TURNS}
        good = {(pol, deg): [] for pol in policies for deg in TURNS}
        for q in uk_q + pa_q:
            leave = {q.name}
            want = [p for p, _ in top(s_up, None, up_dir / q.name, leave)]
            with Image.open(q) as im:
                image = im.convert("RGB")
            for deg in TURNS:  # 0: what the policies cost an upright query
                for pol, got in each(s_up, image.rotate(deg, expand=True) if deg else image, leave):
                    kept[(pol, deg)].append(len(set(got) & set(want)) / max(1, len(want)))
                    good[(pol, deg)].append(right(q, got))
        print("\nA turned query: share of the upright query's top 10 in its own top 10 (mean over queries);"
              " right: share of right photos in its top 10")
        print("| policy | upright (pixels) | 90 | 180 | 270 | right, upright | right, 90 | right, 180 | right, 270 |\n"
              "|---|---|---|---|---|---|---|---|---|")
        for pol in policies:
            print(f"| {pol} | " + " | ".join(f"{statistics.fmean(kept[(pol, d)]):.3f}" for d in TURNS) + " | "
                  + " | ".join(f"{statistics.fmean(good[(pol, d)]):.3f}" for d in TURNS) + " |")

        # library photos stored turned, upright queries
        rows = {pol: [] for pol in ("upright library, shipped", *policies)}
        for q in uk_q:
            i = uk.index(q)
            views = {uk[i + j].name for j in (1, 2, 3)}
            leave = {q.name}
            rows["upright library, shipped"].append(len(views & {p for p, _ in top(s_up, None, up_dir / q.name, leave)}) / 3)
            with Image.open(q) as im:
                image = im.convert("RGB")
            for pol, got in each(s_side, image, leave):
                rows[pol].append(len(views & set(got)) / 3)
        # Paris: every other Paris photo stored turned; the share of the top 10 from the query's landmark
        prec = {pol: [] for pol in rows}
        for q in pa_q:
            leave = {q.name}
            same = lambda hits: sum(landmark(p) == landmark(q.name) for p in hits) / 10  # noqa: E731
            prec["upright library, shipped"].append(same([p for p, _ in top(s_up, None, up_dir / q.name, leave)]))
            with Image.open(q) as im:
                image = im.convert("RGB")
            for pol, got in each(s_side, image, leave):
                prec[pol].append(same(got))
        print("\nPhotos stored turned, upright queries: UKBench, recall of the object's three other views in the top 10;"
              " Paris, the share of the top 10 from the query's landmark")
        print("| library / policy | UKBench recall@10 | Paris precision@10 |\n|---|---|---|")
        for pol, r in rows.items():
            p10 = f"{statistics.fmean(prec[pol]):.3f}" if prec[pol] else "-"
            print(f"| {pol if pol.startswith('upright') else 'stored turned, ' + pol} | {statistics.fmean(r):.3f} | {p10} |")
        up.close()
        side.close()


if __name__ == "__main__":
    main()
