"""HeW speed: our batched Cholesky path against the literal procedure (full inverse of the
grounded random-walk matrix), and HeW as a share of the backbone's forward pass per image.

    python benchmarks/hew_speed.py

All figures from the same run on the same machine; the share is the ratio that matters.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from app.core.aggregate.hew import hew_weights, hew_weights_literal, hew_weights_torch
from app.core.features.registry import DEFAULT_BACKBONE, load_backbone


def best_of(fn, repeat=5):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), float(np.median(ts))


def main():
    rng = np.random.default_rng(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for n, c in ((768, 512), (3072, 512), (768, 1280)):
        x = np.maximum(rng.normal(size=(n, c)), 0)
        mu = x.mean(0)
        xt, mt = torch.from_numpy(x)[None], torch.from_numpy(mu)
        ours, ours_med = best_of(lambda: hew_weights_torch(xt, mt, gram_dtype=torch.float32))
        ref64, _ = best_of(lambda: hew_weights(x, mu), repeat=3)
        lit, _ = best_of(lambda: hew_weights_literal(x, mu), repeat=2 if n > 1000 else 3)
        print(f"N = {n:5d}, C = {c:4d}: HeW (app path: float32 Gram, float64 Cholesky) {1000 * ours:7.1f} ms "
              f"(median {1000 * ours_med:.1f}); all-float64 {1000 * ref64:7.1f} ms; literal inverse {1000 * lit:8.1f} ms "
              f"-> {lit / ours:.1f}x faster")
    bb = load_backbone(DEFAULT_BACKBONE)
    img = torch.randn(1, 3, 768, 1024)
    with torch.inference_mode():
        fwd, fwd_med = best_of(lambda: bb.module(img), repeat=5)
        fmap = bb.module(img)
    x = fmap[0].flatten(1).T.double()[None]
    mu = x[0].mean(0)
    hew, hew_med = best_of(lambda: hew_weights_torch(x, mu, gram_dtype=torch.float32), repeat=10)
    print(f"default settings ({DEFAULT_BACKBONE}, 1024x768 input -> {fmap.shape[2]}x{fmap.shape[3]} = {x.shape[1]} features "
          f"of {x.shape[2]} channels): forward {1000 * fwd:.0f} ms (median {1000 * fwd_med:.0f}), HeW {1000 * hew:.1f} ms "
          f"(median {1000 * hew_med:.1f}) -> HeW is {100 * hew / fwd:.1f}% of the forward time (median-based "
          f"{100 * hew_med / fwd_med:.1f}%)")


if __name__ == "__main__":
    main()
