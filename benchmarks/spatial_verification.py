"""Spatial verification of the top of a box query's list on the CNN's own cells (measured, not
shipped: README "Relevance"). Each query cell and result cell: sqrt, L2; mutual nearest cells;
the largest set agreeing with one similarity transform (2-point RANSAC, 1.5 cells); the top K
re-ranked by that count. Prints mAP of the Paris revisited box queries, shipped vs verified, and
how often right and wrong results reach each count.

    python benchmarks/spatial_verification.py [K] [library kind] [n]    # e.g. 30 union+dx 2703
    python benchmarks/spatial_verification.py --smoke     # a check that it runs: policies.py's few photos

Feature maps from the `heatsearch eval` cache, as benchmarks/policies.py.
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import policies as P  # noqa: E402
from app.core import policy  # noqa: E402
from app.core.evaluation.metrics import Gnd, mean_ap  # noqa: E402


def cells(fm):
    f = fm.features.reshape(-1, fm.features.shape[-1]).astype(np.float32)
    f = np.sqrt(f)
    f /= np.linalg.norm(f, axis=1, keepdims=True) + 1e-9
    xs, ys = fm.cell_centres()
    X, Y = np.meshgrid(xs, ys)
    cell = fm.stride / fm.scale
    return f, np.stack([X.ravel(), Y.ravel()], 1), cell


rng = np.random.default_rng(0)


def inliers(qf, qp, qcell, df, dp, dcell, iters=200):
    S = qf @ df.T
    a, b = S.argmax(1), S.argmax(0)
    m = np.where(b[a] == np.arange(len(a)))[0]
    if len(m) < 3:
        return 0
    A, B = qp[m], dp[a[m]]
    best = 0
    tol = 1.5 * dcell
    for _ in range(iters):
        i, j = rng.choice(len(m), 2, replace=False)
        dq, dd = A[j] - A[i], B[j] - B[i]
        nq = np.hypot(*dq)
        if nq < 1e-6:
            continue
        s = np.hypot(*dd) / nq
        if not (0.25 < s < 4):
            continue
        ang = np.arctan2(dd[1], dd[0]) - np.arctan2(dq[1], dq[0])
        c, si = np.cos(ang) * s, np.sin(ang) * s
        R = np.array([[c, -si], [si, c]])
        pred = (A - A[i]) @ R.T + B[i]
        k = int((np.hypot(*(pred - B).T) < tol).sum())
        best = max(best, k)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("K", type=int, nargs="?", default=20, help="results re-ranked per query")
    ap.add_argument("kind", nargs="?", default="pa", help="the library (policies.subsets): pa, union+dx, ...")
    ap.add_argument("n", type=int, nargs="?", default=250, help="its photos")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "policies.py's few photos (Data(smoke=True)), K 5, pa 25")
    a = ap.parse_args()
    if a.smoke:
        a.K, a.kind, a.n = 5, "pa", 25
    K, kind, n = a.K, a.kind, a.n
    data = P.Data(512, smoke=a.smoke)
    shipped = P.Config(whiten="policy", her="policy", her_k=policy.HER_K, box=policy.BOX_MODE,
                       drift_guard=(policy.DRIFT_KEEP, policy.DRIFT_WITHIN))
    rows = P.subsets(data, kind, n, 0)
    d = data.describe(rows, shipped.mu_from)
    rows = np.asarray(sorted(rows))
    pos = {int(r): k for k, r in enumerate(rows)}
    db_raw = np.stack([d["db"][int(r)] for r in rows])
    w = P.whitening(shipped, db_raw)
    db = w.apply(db_raw)
    n_uk = len(data.uk_images)
    pa_rows = [r for r in rows if n_uk <= r < n_uk + len(data.pa_images)]
    name_row = {Path(data.images[r]).stem: pos[int(r)] for r in pa_rows}
    own = {name_row[Path(q.path).stem] for q in data.rev.queries if Path(q.path).stem in name_row}
    raws = [a + b for a, b in zip(d["rev_map"], d[f"rev_crop{policy.BOX_SIDE}"])]
    gnds = {s: [] for s in ("Easy", "Medium", "Hard")}
    for q in data.rev.queries:
        for s in gnds:
            g = q.gnd[s]
            gnds[s].append(Gnd({name_row[data.rev_names[j]] for j in g.ok if data.rev_names[j] in name_row},
                               {name_row[data.rev_names[j]] for j in g.junk if data.rev_names[j] in name_row} | own))
    qs = w.apply(np.stack(raws))
    rk = P.rank(shipped, qs, db, [None] * len(qs))

    t = time.time()
    dbc = {}
    new = []
    right_in, wrong_in = [], []
    for qi, q in enumerate(data.rev.queries):
        qf, qp, qc = cells(data.box_sides[policy.BOX_SIDE][1][qi])
        top = rk[qi][:K]
        sc = []
        for r in top:
            if r not in dbc:
                dbc[r] = cells(data.maps[int(rows[r])])
            df, dp, dc = dbc[r]
            sc.append(inliers(qf, qp, qc, df, dp, dc))
            ok = r in gnds["Medium"][qi].ok
            if r not in gnds["Medium"][qi].junk:
                (right_in if ok else wrong_in).append(sc[-1])
        order = np.argsort(-np.array(sc), kind="stable")
        new.append(np.concatenate([top[order], rk[qi][K:]]))
    print(f"K={K} library {kind} n={n}: {time.time()-t:.0f} s")
    for s in ("Easy", "Medium", "Hard"):
        print(s, "shipped %.2f  sv %.2f" % (100 * mean_ap(rk, gnds[s])["mAP"], 100 * mean_ap(new, gnds[s])["mAP"]))
    ri, wi = np.array(right_in), np.array(wrong_in)
    for tq in (3, 4, 5, 6, 8, 10):
        print(f"inliers >= {tq}: right {np.mean(ri >= tq):.2f}, wrong {np.mean(wi >= tq):.2f} (Medium)")
    print("right median", np.median(ri), "wrong median", np.median(wi))
    print("queries whose top K changed:", sum(not np.array_equal(a[:K], b[:K]) for a, b in zip(new, rk)), "of", len(rk))


if __name__ == "__main__":
    main()
