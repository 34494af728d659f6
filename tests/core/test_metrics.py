from pathlib import Path

import numpy as np
import pytest

from app.core.evaluation.datasets import holidays_gnd, read_classic_gt, revisited_gnd
from app.core.evaluation.metrics import Gnd, ap_of_ranking, compute_ap, mean_ap, ukbench_ns

GT = Path(__file__).resolve().parents[3] / "shared" / "data" / "gt"
needs_gt = pytest.mark.skipif(not GT.exists(), reason="shared ground truth not present")


def test_hand_computed_ap():
    # positives at ranks 0 and 2 of 2 positives: p = (1+1)/2 + (1/2 + 2/3)/2 -> AP = (1 + 0.5833) / 2
    assert compute_ap(np.array([0, 2]), 2) == pytest.approx((1 + (0.5 + 2 / 3) / 2) / 2)
    # single positive at rank 3: p0 = 0/3, p1 = 1/4 -> 0.125
    assert compute_ap(np.array([3]), 1) == pytest.approx(0.125)
    # a positive never retrieved counts as 0
    assert compute_ap(np.array([0]), 2) == pytest.approx(0.5)


def test_junk_is_removed_before_ranking():
    g = Gnd({5}, {1, 2})
    ap, _ = ap_of_ranking([1, 2, 5, 0], g)
    assert ap == 1.0  # 5 is first once junk 1, 2 are gone
    ap_nojunk, _ = ap_of_ranking([1, 2, 5, 0], Gnd({5}, set()))
    assert ap_nojunk == pytest.approx((0 / 2 + 1 / 3) / 2)  # p0 = j / r = 0, p1 = 1/3


def test_precision_at_k_follows_revisitop():
    _, p = ap_of_ranking([7, 0, 8, 1, 2], Gnd({7, 8}, set()), kappas=(1, 5))
    assert p[0] == 1.0
    assert p[1] == pytest.approx(2 / 3)  # k capped at the rank of the last positive (3)


@needs_gt
@pytest.mark.parametrize("name", ["oxford5k", "paris6k"])
def test_classic_perfect_and_reversed_rankings(name):
    names, recs = read_classic_gt(GT / name)
    assert len(names) == 55
    allnames = sorted({n for r in recs for k in ("good", "ok", "junk") for n in r[k]} | {r["image"] for r in recs})
    idx = {n: i for i, n in enumerate(allnames)}
    gnds = [Gnd({idx[n] for n in r["good"] + r["ok"]}, {idx[n] for n in r["junk"]}) for r in recs]
    perfect, worst = [], []
    for g in gnds:
        rest = [i for i in range(len(allnames)) if i not in g.ok]
        # junk interleaved in front must not hurt
        perfect.append(list(g.junk) + sorted(g.ok) + [i for i in rest if i not in g.junk])
        worst.append(rest + sorted(g.ok))
    assert mean_ap(perfect, gnds)["mAP"] == pytest.approx(1.0)
    assert mean_ap(worst, gnds)["mAP"] < 0.2


@needs_gt
def test_revisited_settings_and_perfect_rankings():
    imlist, qimlist, gnds, bbx = revisited_gnd(GT / "revisited" / "gnd_roxford5k.pkl")
    assert len(imlist) == 4993 and len(qimlist) == 70 and len(bbx) == 70
    for setting in ("Easy", "Medium", "Hard"):
        gs = [g[setting] for g in gnds]
        rankings = [sorted(g.ok) + [i for i in range(len(imlist)) if i not in g.ok] for g in gs]
        assert mean_ap(rankings, gs)["mAP"] == pytest.approx(1.0)
    g = gnds[0]
    assert g["Medium"].ok == g["Easy"].ok | g["Hard"].ok
    assert g["Hard"].junk >= g["Easy"].ok
    # medium: hard images placed after easy ones and behind 3 negatives lowers AP below 1 exactly as computed
    med = g["Medium"]
    negatives = [i for i in range(len(imlist)) if i not in med.ok and i not in med.junk][:3]
    easy, hard = sorted(g["Easy"].ok), sorted(g["Hard"].ok)
    ranking = easy + negatives + hard
    ap, _ = ap_of_ranking(ranking, med)
    want = compute_ap(np.array(list(range(len(easy))) + [len(easy) + 3 + j for j in range(len(hard))]), len(med.ok))
    assert ap == pytest.approx(want) and ap < 1


def test_ukbench_ns_and_holidays():
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    perfect = [np.argsort(groups != groups[q], kind="stable") for q in range(8)]
    assert ukbench_ns(perfect, groups) == 4.0
    bad = [np.array([q, 4 - 4 * (q >= 4), 5 - 4 * (q >= 4), 6, 7]) for q in range(8)]
    assert ukbench_ns(bad, groups) < 4.0
    qs = holidays_gnd(["100000", "100001", "100100", "100101", "100102"])
    assert [q for q, _ in qs] == [0, 2]
    assert qs[1][1].ok == {3, 4} and qs[1][1].junk == {2}
