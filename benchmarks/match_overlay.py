"""Does the heat overlay show what matched the query? Two photos side by side, one of the query's
subject (a right answer) and one of another, described as one photo: how much of the overlay's
heat lies on the right half, for the description's make-up (`describe_features` share, the
overlay of the first releases), the gradient alone (`match_share`, positive part: the overlay
until issue 50), the match (`match_heat`: the gradient times how closely each cell resembles the
query's strongest cells) and the match as the overlay draws it (`heatmap.stretch_match`); how
much heat lies inside a landmark's box on the Paris query photos, searched by a box or by a whole
photo of the landmark; and how much of another view of a UKBench object reads warm.

    python benchmarks/match_overlay.py [--distractors]
    python benchmarks/match_overlay.py --smoke     # a check that it runs: 4 UKBench objects, 2 Paris box queries

UKBench: each object's first view queries, its second view is the right half, the next object's
first view the other half (150 pairs). Paris: each revisited box query (the box, described as the
app does: hybrid of crop and map) with up to 8 of its Easy photos, each beside a photo of another
landmark (90 pairs); Paris whole photos: every 5th photo queries, another photo of its landmark
beside one of another. Each pair both ways round. The library for the centring mean and the
whitening: UKBench + the 238 revisited Paris photos (838: no whitening under 1,024), or with
--distractors 2,691 (whitened).
Prints per set: mean share of the heat on the right half, and the fraction of pairs where the right
half holds more than half of it; the same for the left and right halves swapped is averaged in.
Feature maps of the library from the `heatsearch eval` cache.
"""
import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.core import policy  # noqa: E402
from app.core.aggregate.descriptor import learn_whitening, Whitening  # noqa: E402
from app.core.config import models_dir  # noqa: E402
from app.core.describe import describe_features, describe_map, match_heat, match_share, mean_local_feature  # noqa: E402
from app.core.evaluation import datasets as ds  # noqa: E402
from app.core.evaluation.runner import MapCache, default_cache_dir  # noqa: E402
from app.core.features.engine import EngineChoice  # noqa: E402
from app.core.features.extractor import Extractor  # noqa: E402
from app.core.features.registry import DEFAULT_BACKBONE, load_backbone  # noqa: E402
from app.core.heatmap import normalise, stretch_match  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
SIDE = 400  # each half of a pair, its longer side


def side_by_side(a: Path, b: Path) -> Image.Image:
    ims = []
    for p in (a, b):
        im = Image.open(p).convert("RGB")
        im.thumbnail((SIDE, SIDE))
        ims.append(im.resize((SIDE, SIDE * 3 // 4)))  # the same frame for both: the halves are equal
    out = Image.new("RGB", (2 * SIDE, SIDE * 3 // 4))
    out.paste(ims[0], (0, 0))
    out.paste(ims[1], (SIDE, 0))
    return out


def left_share(grid: np.ndarray, fm) -> float:
    """Fraction of a non-negative (H, W) grid on the cells whose centres are in the left half."""
    xs, _ = fm.cell_centres()
    g = np.maximum(grid, 0)
    return float(g[:, xs < SIDE].sum() / max(float(g.sum()), 1e-12))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--distractors", action="store_true", help="the library's whitening from the distractors too")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "4 UKBench objects, every 5th Paris photo, 2 box queries")
    a = ap.parse_args()
    ex = Extractor.create(load_backbone(DEFAULT_BACKBONE), EngineChoice(), 512, models_dir(), log=lambda m: None)
    cache = MapCache(ex, default_cache_dir(), log=lambda m: print(m, file=sys.stderr))
    uk = ds.ukbench(SHARED / "ukbench", 16 if a.smoke else None)
    rev, _ = ds.paris250(SHARED / "paris250")
    if a.smoke:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from policies import fewer

        rev = fewer(rev, rev.images[::5], queries=2)
    objects = len(uk.images) // 4
    lib = [Path(p) for p in uk.images] + [Path(p) for p in rev.images]
    if a.distractors:
        lib += sorted((SHARED / "distractors").rglob("*.jpg"))[: 8 if a.smoke else None]
    maps = cache.get_many([(p, None) for p in lib])
    rng = np.random.default_rng(1)
    mu = mean_local_feature([maps[i].features for i in rng.choice(len(maps), min(48, len(maps)), replace=False)])
    raw = np.stack([describe_features(m.features, mu).raw for m in maps])
    dim = policy.whitening_dim(len(raw), raw.shape[1])
    wh = learn_whitening(raw, dim, policy.SHRINKAGE) if dim else Whitening.identity(raw.shape[1])
    print(f"library {len(lib)} photos, whitening {'D=' + str(wh.dim) if not wh.is_identity else 'none'}")

    def box_query(q):
        """(raw descriptor, cells) of a box query as the app describes it (hybrid: the map's box
        cells and the crop's own pass, the crop's cells)."""
        fm_full, crop_fm = cache.get_many([(q.path, None), (q.path, q.box)])
        crop = describe_features(crop_fm.features, mu, cells=True)
        v = describe_map(fm_full, mu, q.box).raw.astype(np.float64) + crop.raw
        return v / np.linalg.norm(v), crop.cells

    def grids(fm, raw_q, cells):
        """The overlays compared, on one (H, W, C) map, for a query (raw descriptor, cells)."""
        qv = wh.apply(raw_q)[0]
        heat = match_heat(fm.features, mu, wh, qv, cells)
        gradient = match_share(fm.features, mu, wh, qv)
        return {"make-up": normalise(describe_features(fm.features, mu).share),  # as the overlay stretched it
                "gradient": np.maximum(gradient, 0), "gradient, as shown": stretch_match(gradient),
                "match": heat, "match, as shown": stretch_match(heat)}

    pairs = {"UKBench objects": [], "Paris box queries": [], "Paris whole photos": []}
    for g in range(objects):  # (query description, its cells, right photo, wrong photo)
        d = describe_features(maps[4 * g].features, mu, cells=True)
        pairs["UKBench objects"].append((d.raw, d.cells, uk.images[4 * g + 1], uk.images[(4 * g + 4) % len(uk.images)]))
    landmark = [Path(p).stem.split("_")[1] for p in rev.images]
    first = len(uk.images)  # the Paris photos' maps follow UKBench's
    for q in rev.queries:
        mine = Path(q.path).stem.split("_")[1]
        right = sorted(q.gnd["Easy"].ok)[:8]
        others = [i for i, m in enumerate(landmark) if m != mine]
        for r in right:
            pairs["Paris box queries"].append((*box_query(q), rev.images[r], rev.images[int(rng.choice(others))]))
    for i in range(0, len(rev.images), 5):
        same = [j for j, m in enumerate(landmark) if m == landmark[i] and j != i]
        others = [j for j, m in enumerate(landmark) if m != landmark[i]]
        if same:
            d = describe_features(maps[first + i].features, mu, cells=True)
            pairs["Paris whole photos"].append((d.raw, d.cells, rev.images[int(rng.choice(same))],
                                                rev.images[int(rng.choice(others))]))

    # within a photo: the query photos of a landmark hold a box around it; another box query of
    # the same landmark (and the photo's own), or a whole photo of the landmark (up to 3 Easy
    # photos of each box query), against the whole photo: heat inside that box
    boxed = [(q, Path(q.path).stem.split("_")[1]) for q in rev.queries]
    by_box = [(box_query(qa), la, None) for qa, la in boxed]
    by_photo = [((d.raw, d.cells), la, rev.images[r]) for qa, la in boxed for r in sorted(qa.gnd["Easy"].ok)[:3]
                for d in [describe_features(maps[first + r].features, mu, cells=True)]]
    for what, queries in (("box queries", by_box), ("whole photos", by_photo)):
        inside = {"box area": []}
        for query, la, own in queries:
            for qb, lb in boxed:
                if lb != la or Path(qb.path) == own:
                    continue
                fm = cache.get_many([(qb.path, None)])[0]
                xs, ys = fm.cell_centres()
                x1, y1, x2, y2 = qb.box
                cells = (ys[:, None] >= y1) & (ys[:, None] < y2) & (xs[None] >= x1) & (xs[None] < x2)
                inside["box area"].append(cells.mean())
                for key, grid in grids(fm, *query).items():
                    inside.setdefault(key, []).append(float(grid[cells].sum() / max(float(grid.sum()), 1e-12)))
        print(f"Paris query photos, heat inside the landmark's box ({len(inside['box area'])} pairs of {what} "
              "and photos of the same landmark): " + ", ".join(f"{k} {np.mean(v):.3f}" for k, v in inside.items()))

    # how much of a right photo reads warm (0.5 or more), shown alone: another view of a UKBench object
    warm = {"the match stretched to its largest": [], "the gradient as shown": [], "the match as shown": []}
    for g in range(objects):
        raw_q, cells = pairs["UKBench objects"][g][:2]
        fm = maps[4 * g + 1]
        match = match_heat(fm.features, mu, wh, wh.apply(raw_q)[0], cells)
        top = max(float(match.max()), 1e-30)
        warm["the match stretched to its largest"].append(float(np.mean(match / top >= 0.5)))
        warm["the gradient as shown"].append(float(np.mean(stretch_match(match_share(fm.features, mu, wh, wh.apply(raw_q)[0])) >= 0.5)))
        warm["the match as shown"].append(float(np.mean(stretch_match(match) >= 0.5)))
    print("UKBench other views alone, cells at 0.5 or more: " + ", ".join(f"{k} {np.mean(v):.3f}" for k, v in warm.items()))

    for name, items in pairs.items():
        got = {}
        for raw_q, cells, right, wrong in items:
            for flip in (False, True):
                im = side_by_side(wrong, right) if flip else side_by_side(right, wrong)
                fm = ex.feature_maps([ex.prepare_image(im)])[0]
                for key, grid in grids(fm, raw_q, cells).items():
                    s = left_share(grid, fm)
                    got.setdefault(key, []).append(1 - s if flip else s)
        for key, vals in got.items():
            vals = np.asarray(vals)
            print(f"{name:18s} {key:8s} heat on the right photo: mean {vals.mean():.3f}, "
                  f"more than half in {np.mean(vals > 0.5):.2f} of {len(vals)} pairs")


if __name__ == "__main__":
    main()
