"""Heat overlay pixels (docs/METHOD.md, "The heat overlay"): a grid of heat in [0, 1], upsampled
and colour-mapped, cool (blue) to warm (yellow/red).

On the query: what its description is made of (HeW weight x feature length, stretched per photo by
`normalise`); on a result: what in it matches the query, as warm as the result is relevant.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

# A perceptual blue -> cyan -> yellow -> red ramp (control points, linearly interpolated).
_STOPS = np.array([
    [0.00, 20, 30, 140],
    [0.25, 30, 120, 220],
    [0.50, 60, 200, 200],
    [0.75, 250, 210, 40],
    [1.00, 230, 30, 20],
])
LUT = np.stack([np.interp(np.linspace(0, 1, 256), _STOPS[:, 0], _STOPS[:, c]) for c in (1, 2, 3)], 1).astype(np.uint8)


def normalise(weights: np.ndarray) -> np.ndarray:
    """(H, W) weights -> [0, 1] float32 by the image's own min and max (flat maps become 0.5)."""
    w = np.asarray(weights, dtype=np.float32)
    lo, hi = float(w.min()), float(w.max())
    return np.full_like(w, 0.5) if hi - lo < 1e-12 else (w - lo) / (hi - lo)


# A result's match grid is stretched so that this percentile of its positive cells reads warmest (1),
# not its single largest: stretched to the largest, a right result read mostly cool (a true first
# result nearly all blue beside a wrong one; UKBench other views: 5 % of cells at 0.5 or more,
# 22 % over the 80th percentile), while the heat stays where it was. Since the grid is weighted
# by the query's cells (describe.match_heat) its heat gathers on fewer cells: the 65th, which
# keeps 14 % of a right photo at 0.5 or more (10 % at the 80th) and more of the drawn heat on
# the landmark than the gradient alone at the 80th (benchmarks/match_overlay.py, as shown: inside
# a landmark's box 0.581 -> 0.677 for whole photos, 0.860 -> 0.868 for boxes).
MATCH_PERCENTILE = 65


def stretch_match(match: np.ndarray) -> np.ndarray:
    """(H, W) match shares (describe.match_share, signed) -> [0, 1] float32: the positive part over
    the MATCH_PERCENTILE-th percentile of its positive cells, clipped at 1 (all 0 when none is
    positive)."""
    m = np.maximum(np.asarray(match, np.float32), 0.0)
    pos = m[m > 0]
    if not len(pos):
        return m
    return np.clip(m / float(np.percentile(pos, MATCH_PERCENTILE)), 0.0, 1.0).astype(np.float32)


def overlay_rgba(heat: np.ndarray, size: tuple[int, int], alpha: int = 140) -> np.ndarray:
    """(h, w, 4) uint8 RGBA picture of `heat` (H, W) in [0, 1] (0 cool, 1 warm; clipped) stretched
    to `size` = (w, h), bilinear, constant alpha."""
    w, h = max(1, int(size[0])), max(1, int(size[1]))
    n = np.round(np.clip(np.asarray(heat, np.float32), 0.0, 1.0) * 255).astype(np.uint8)
    up = np.asarray(Image.fromarray(n, "L").resize((w, h), Image.BILINEAR))
    rgba = np.empty((h, w, 4), np.uint8)
    rgba[..., :3] = LUT[up]
    rgba[..., 3] = alpha
    return rgba


def legend_rgb(width: int = 256, height: int = 12) -> np.ndarray:
    """(height, width, 3) uint8 colour bar from cool (left) to warm (right)."""
    idx = np.linspace(0, 255, width).astype(np.uint8)
    return np.repeat(LUT[idx][None], height, axis=0)
