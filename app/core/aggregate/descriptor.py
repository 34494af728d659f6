"""From an aggregated vector to the global descriptor (docs/METHOD.md, "The global descriptor").

raw (C,) -> power 0.5 -> L2   : `normalize_raw`, stored in the catalog ("raw descriptor")
          -> PCA-whitening -> L2 : `Whitening.apply`, stored in the ANN index
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POWER = 0.5


def l2n(v: np.ndarray, axis: int = -1) -> np.ndarray:
    """L2-normalise along `axis`; a zero vector stays zero."""
    n = np.linalg.norm(v, axis=axis, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def normalize_raw(v: np.ndarray) -> np.ndarray:
    """Signed power (alpha = 0.5) then L2. v: (C,) or (n, C). Returns float32 of the same shape."""
    v = np.asarray(v, dtype=np.float64)
    return l2n(np.sign(v) * np.abs(v) ** POWER).astype(np.float32)


@dataclass
class Whitening:
    """Learned PCA-whitening. mean: (C,) float64; proj: (D, C) float64 = diag(lambda')^-1/2 V^T.

    `apply` maps (n, C) power-normalised descriptors to (n, D) float32 unit vectors.
    An identity whitening (mean 0, proj I) is used until a library has enough images
    (app.core.policy.whitening_dim).
    """

    mean: np.ndarray
    proj: np.ndarray
    is_identity: bool = False  # set by identity(): apply() is then a plain L2

    @property
    def dim(self) -> int:
        return int(self.proj.shape[0])

    def apply(self, v: np.ndarray) -> np.ndarray:
        v = np.atleast_2d(np.asarray(v, dtype=np.float64))
        if self.is_identity:
            return l2n(v).astype(np.float32)
        return l2n((v - self.mean) @ self.proj.T).astype(np.float32)

    @classmethod
    def identity(cls, channels: int) -> "Whitening":
        return cls(np.zeros(channels), np.eye(channels), True)

    @classmethod
    def stored(cls, mean: np.ndarray | None, proj: np.ndarray | None, channels: int) -> "Whitening":
        """The whitening a library stores for a space: mean (C,) and proj (D, C), or None and None
        for none yet (the identity)."""
        return cls.identity(channels) if proj is None else cls(mean, proj)


MIN_TRAIN = 8  # fewer descriptors than this: no whitening (identity)


def learn_whitening(train: np.ndarray, dim: int = 512, shrinkage: float = 1.0) -> Whitening:
    """Learn PCA-whitening from (n, C) power-normalised descriptors, keeping D = min(dim, C, n-1).

    Eigenvalue shrinkage: lambda' = lambda + shrinkage * mean(lambda_kept), which bounds how much
    the weakest kept directions (noisy when n is close to D) are amplified. shrinkage=0 is the
    paper's plain whitening. With n < MIN_TRAIN (or dim <= 0), returns the identity.
    """
    x = np.asarray(train, dtype=np.float64)
    n, c = x.shape
    if n < MIN_TRAIN or dim <= 0:
        return Whitening.identity(c)
    m = x.mean(0)
    xc = x - m
    # Eigenvectors of the covariance from the SVD of the centred data (stable, no C x C product when n < C).
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    lam = s**2 / max(n - 1, 1)
    d = int(min(dim, c, n - 1, int((lam > lam[0] * 1e-12).sum())))
    lam, vt = lam[:d], vt[:d]
    lam = lam + shrinkage * lam.mean()
    return Whitening(m, vt / np.sqrt(lam)[:, None])
