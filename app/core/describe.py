"""Feature maps -> HeW weights -> raw global descriptors. Shared by indexing, search and evaluation.

The "raw descriptor" is the aggregated vector after power 0.5 and L2, before whitening:
(C,) float32. The weight grid is the (H, W) float32 HeW weights (ALGORITHM.md section 5).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .aggregate.descriptor import normalize_raw
from .aggregate.hew import THRESHOLD, Z_RATIO, hew_weights_torch
from .features.extractor import FeatureMap


@dataclass
class Described:
    """raw: (C,) float32 unit vector (HeW, or SumA when weights are all 1); weights: (H, W) float32."""

    raw: np.ndarray
    weights: np.ndarray


@dataclass(frozen=True)
class HewParams:
    threshold: float = THRESHOLD
    z_ratio: float = Z_RATIO


def describe_tensors(maps: list[torch.Tensor], mu: np.ndarray, dtype: torch.dtype = torch.float64,
                     params: HewParams = HewParams(), suma: bool = False) -> list[Described]:
    """Describe (C, H, W) maps on any device; same-shape maps run as one batch.

    dtype: float64 on the CPU (exact), float32 on accelerators. suma=True skips HeW (weights 1).
    """
    out: list[Described | None] = [None] * len(maps)
    groups: dict[tuple, list[int]] = {}
    for i, m in enumerate(maps):
        groups.setdefault(tuple(m.shape), []).append(i)
    for idx in groups.values():
        c, h, w = maps[idx[0]].shape
        x = torch.stack([maps[i] for i in idx]).to(dtype).flatten(2).transpose(1, 2)  # (B, N, C)
        if suma:
            wts = torch.ones(x.shape[:2], dtype=dtype, device=x.device)
        else:
            mu_t = torch.as_tensor(mu, dtype=dtype, device=x.device)
            # On the CPU the Gram product runs in float32 (2x faster, cosines exact to ~1e-7) and the
            # SPD solve in float64; see benchmarks/hew_speed.py for the figures.
            wts = hew_weights_torch(x, mu_t, params.threshold, params.z_ratio, gram_dtype=torch.float32)
        vecs = torch.einsum("bn,bnc->bc", wts, x).double().cpu().numpy()
        wts_np = wts.float().cpu().numpy().reshape(len(idx), h, w)
        for j, i in enumerate(idx):
            out[i] = Described(normalize_raw(vecs[j]), wts_np[j])
    return out  # type: ignore[return-value]


def describe_map(fm: FeatureMap, mu: np.ndarray, mask: np.ndarray | None = None,
                 params: HewParams = HewParams(), suma: bool = False) -> Described:
    """Describe one FeatureMap on the CPU in float64, optionally only the cells of `mask` ((H, W)
    bool, a rectangle for a box: *map mode*, no new CNN pass). Weights cover the mask's rectangle."""
    f = fm.features
    if mask is not None:
        rows, cols = np.where(mask.any(1))[0], np.where(mask.any(0))[0]
        f = f[rows[0]: rows[-1] + 1, cols[0]: cols[-1] + 1]
    t = torch.from_numpy(np.ascontiguousarray(f)).permute(2, 0, 1)
    return describe_tensors([t], mu, torch.float64, params, suma)[0]


def mean_local_feature(maps: list[np.ndarray]) -> np.ndarray:
    """mu: (C,) float64 mean of all local features of (H, W, C) maps (the centring mean of HeW)."""
    total = sum(m.reshape(-1, m.shape[-1]).sum(0, dtype=np.float64) for m in maps)
    count = sum(m.shape[0] * m.shape[1] for m in maps)
    return total / max(count, 1)
