"""Retrieval metrics (the evaluation protocols of the paper and of the revisited Oxford and Paris sets): AP with junk (Philbin's compute_ap, as in cirtorch
and revisitop), mAP and mP@k over queries, UKBench N-S.

Rankings are 0-based database ids, best first. Ground truth per query: `ok` (positives) and
`junk` (ignored: removed from the ranking before AP is computed).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def compute_ap(pos_ranks: np.ndarray, n_pos: int) -> float:
    """AP from the sorted 0-based ranks of the positives in the junk-free ranking.

    For the j-th positive at rank r_j: p0 = 1 if r_j == 0 else j / r_j, p1 = (j+1)/(r_j+1);
    AP = sum((p0 + p1) / 2) / n_pos (trapezoidal rule, Philbin's compute_ap)."""
    ap = 0.0
    for j, r in enumerate(np.sort(np.asarray(pos_ranks))):
        p0 = 1.0 if r == 0 else j / r
        p1 = (j + 1) / (r + 1)
        ap += (p0 + p1) / 2
    return ap / n_pos if n_pos else float("nan")


@dataclass
class Gnd:
    """Ground truth of one query: positives and junk, as sets of 0-based database ids."""

    ok: set = field(default_factory=set)
    junk: set = field(default_factory=set)


def ap_of_ranking(ranking, gnd: Gnd, kappas=(1, 5, 10)) -> tuple[float, np.ndarray]:
    """AP and precision@k of one ranking, junk removed first. Returns (ap, (len(kappas),) prec)."""
    ranking = np.asarray(ranking)
    ok = np.fromiter(gnd.ok, dtype=np.int64, count=len(gnd.ok))
    junk = np.fromiter(gnd.junk, dtype=np.int64, count=len(gnd.junk))
    kept = ranking[~np.isin(ranking, junk)] if len(junk) else ranking
    pos_ranks = np.where(np.isin(kept, ok))[0]
    ap = compute_ap(pos_ranks, len(ok))
    # revisitop's mP@k: k is capped at the rank (1-based) of the last positive found.
    last = pos_ranks.max() + 1 if len(pos_ranks) else 0
    prec = np.array([((pos_ranks + 1) <= min(last, k)).sum() / min(last, k) if last else 0.0 for k in kappas])
    return ap, prec


def mean_ap(rankings, gnds: list[Gnd], kappas=(1, 5, 10)) -> dict:
    """mAP and mP@k over queries; queries without positives are skipped (revisited protocol).

    Returns {"mAP": float, "mP@k": float, ..., "queries": int}."""
    aps, precs = [], []
    for r, g in zip(rankings, gnds):
        if not g.ok:
            continue
        ap, p = ap_of_ranking(r, g, kappas)
        aps.append(ap)
        precs.append(p)
    out = {"mAP": float(np.mean(aps)) if aps else float("nan"), "queries": len(aps)}
    for i, k in enumerate(kappas):
        out[f"mP@{k}"] = float(np.mean([p[i] for p in precs])) if precs else float("nan")
    return out


def ukbench_ns(rankings, groups: np.ndarray) -> float:
    """UKBench N-S: mean number of the query's group (query included) in the top 4; max 4.

    rankings: per query, a ranking over all images including the query itself; groups: (M,) ids."""
    scores = [np.sum(groups[np.asarray(r[:4])] == groups[q]) for q, r in enumerate(rankings)]
    return float(np.mean(scores))
