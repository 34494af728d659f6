"""HeW speed: the float32 path with its guard (what indexing runs), the float64 reference, the
literal procedure (full inverse of the grounded random-walk matrix), and HeW as a share of the
engine's forward pass per photo at the app's input size.

    python benchmarks/hew_speed.py
    python benchmarks/hew_speed.py --smoke     # a check that it runs: one map size, 2 repeats

All figures from the same run on the same machine; the share is the ratio that matters.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.aggregate.hew import hew_weights, hew_weights_literal  # noqa: E402


def best_of(fn, repeat=7):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def random_map(n, c, rng):
    parts = np.maximum(rng.normal(size=(8, c)), 0)
    return (parts[rng.integers(0, 8, n)] * rng.uniform(0.5, 1.5, (n, 1)) + 0.3 * np.maximum(rng.normal(size=(n, c)), 0)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): one map "
                                                           "size, 2 repeats")
    a = ap.parse_args()
    from app.core.config import DEFAULT_MAX_SIDE, models_dir
    from app.core.features.engine import EngineChoice
    from app.core.features.extractor import Extractor
    from app.core.features.registry import DEFAULT_BACKBONE, load_backbone

    rng = np.random.default_rng(0)
    repeat = 2 if a.smoke else 7
    for n, c in [(192, 1280)] if a.smoke else [(192, 1280), (300, 1280), (768, 1280), (3072, 512)]:
        x = random_map(n, c, rng)
        mu = x.mean(0)
        fast = best_of(lambda: hew_weights(x, mu), repeat)
        ref = best_of(lambda: hew_weights(x, mu, precise=True), repeat)
        lit = best_of(lambda: hew_weights_literal(x, mu), repeat=min(3, repeat))
        print(f"N = {n:5d}, C = {c}: float32 + guard {fast * 1000:6.1f} ms, float64 {ref * 1000:6.1f} ms, "
              f"literal inverse {lit * 1000:7.1f} ms ({lit / fast:.1f}x)")
    bb = load_backbone(DEFAULT_BACKBONE)
    ex = Extractor.create(bb, EngineChoice(), DEFAULT_MAX_SIDE, models_dir(), log=lambda m: None)
    w, h = DEFAULT_MAX_SIDE, DEFAULT_MAX_SIDE * 3 // 4
    arr = rng.normal(size=(1, 3, h, w)).astype(np.float32)
    fwd = best_of(lambda: ex.engine.run(arr), repeat)
    fmap = ex.engine.run(arr)[0].transpose(1, 2, 0).reshape(-1, ex.channels)
    hew = best_of(lambda: hew_weights(fmap, fmap.mean(0)), repeat)
    print(f"{DEFAULT_BACKBONE} at {w}x{h} on {ex.engine.label}: forward {fwd * 1000:.0f} ms, HeW {hew * 1000:.1f} ms "
          f"for {len(fmap)} features = {100 * hew / fwd:.1f} % of the forward pass")


if __name__ == "__main__":
    main()
