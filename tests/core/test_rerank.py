import numpy as np

from app.core.aggregate.descriptor import l2n
from app.core.rerank.her import her_rerank
from app.core.rerank.qe import expand_query


def unit_rows(n, d, seed):
    return l2n(np.random.default_rng(seed).normal(size=(n, d))).astype(np.float32)


def literal_heat(source, shortlist):
    """Section 4 written out with a dense inverse."""
    t = np.vstack([shortlist, source[None]]).astype(np.float64)
    t = t - t.mean(0)
    a = t @ t.T
    np.fill_diagonal(a, 0)
    a[a < 0] = 0
    z = 0.1 * a[a > 0].mean()
    lap = np.diag(a.sum(1)) - a + z * np.eye(len(t))
    return np.linalg.inv(lap)[:, -1][:-1]


def test_her_reorders_shortlist_by_heat_and_keeps_the_tail():
    vecs = unit_rows(300, 32, 0)
    q = unit_rows(1, 32, 1)[0]
    ranking = np.argsort(-(vecs @ q))
    k = 50
    new = her_rerank(q, vecs, ranking, k=k)
    assert isinstance(new, np.ndarray) and sorted(new.tolist()) == list(range(300))
    np.testing.assert_array_equal(new[k:], ranking[k:])
    h = literal_heat(q, vecs[ranking[:k]])
    np.testing.assert_array_equal(new[:k], ranking[:k][np.argsort(-h, kind="stable")])
    assert not np.array_equal(new[:k], ranking[:k])


def test_her_k_is_clipped_and_tiny_inputs_are_safe():
    vecs = unit_rows(10, 8, 2)
    q = vecs[0]
    ranking = np.argsort(-(vecs @ q))
    assert len(her_rerank(q, vecs, ranking, k=800)) == 10
    np.testing.assert_array_equal(her_rerank(q, vecs, ranking[:1], k=800), ranking[:1])


def test_average_qe_matches_definition():
    vecs = unit_rows(20, 8, 4)
    q = vecs[3]
    ranking = np.argsort(-(vecs @ q))
    got = expand_query(q, vecs, ranking, n=5)
    want = l2n(q + vecs[ranking[:5]].sum(0))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert abs(np.linalg.norm(got) - 1) < 1e-5


def test_alpha_qe_weights_by_similarity_power():
    vecs = unit_rows(20, 8, 5)
    q = vecs[0]
    ranking = np.argsort(-(vecs @ q))
    got = expand_query(q, vecs, ranking, n=4, alpha=3.0)
    top = vecs[ranking[:4]].astype(np.float64)
    w = np.clip(top @ q, 0, None) ** 3
    np.testing.assert_allclose(got, l2n(q + w @ top), rtol=1e-5)
    assert not np.allclose(got, expand_query(q, vecs, ranking, n=4))
