"""Query expansion (docs/METHOD.md, "Query expansion")."""
from __future__ import annotations

import numpy as np

from ..aggregate.descriptor import l2n


def expand_query(query: np.ndarray, vectors: np.ndarray, ranking: np.ndarray, n: int = 10,
                 alpha: float = 0.0) -> np.ndarray:
    """Average query expansion. query (D,), vectors (M, D) unit rows, ranking (>= n,) 0-based ids.

    alpha = 0: q' = l2(mean(q, x_r1..x_rn)) (the paper's average QE).
    alpha > 0: alpha-QE, neighbours weighted by max(sim, 0)**alpha (query weight 1).
    Returns the (D,) float32 unit vector q'.
    """
    q = np.asarray(query, dtype=np.float64)
    top = np.asarray(vectors[np.asarray(ranking[:n])], dtype=np.float64)
    if len(top) == 0:
        return l2n(q).astype(np.float32)
    if alpha > 0:
        w = np.clip(top @ q, 0.0, None) ** alpha
        return l2n(q + w @ top).astype(np.float32)
    return l2n(q + top.sum(0)).astype(np.float32)
