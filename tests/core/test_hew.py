import numpy as np
import pytest

from app.core.aggregate import hew as hew_mod
from app.core.aggregate.hew import affinity, hew_weights, hew_weights_literal


def random_map(n, c=512, seed=0, zero_rows=0):
    rng = np.random.default_rng(seed)
    # sparse, clustered non-negative features like ReLU outputs: a few "parts" shared by many cells
    parts = np.maximum(rng.normal(size=(8, c)), 0)
    x = parts[rng.integers(0, 8, n)] * rng.uniform(0.5, 1.5, (n, 1)) + 0.3 * np.maximum(rng.normal(size=(n, c)), 0)
    x[rng.choice(n, zero_rows, replace=False)] = 0
    return x


@pytest.mark.parametrize("n", [50, 768, 3072])
def test_hew_equals_literal_procedure(n):
    x = random_map(n, zero_rows=n // 10, seed=n)
    mu = x.mean(0)
    w = hew_weights(x, mu, precise=True)
    lit = hew_weights_literal(x, mu)
    assert isinstance(w, np.ndarray) and w.shape == (n,)
    assert np.isfinite(lit).all(), "this map has no isolated node: the literal weights are finite"
    np.testing.assert_allclose(w, lit, rtol=1e-6)
    # the fast float32 path (what indexing runs) stays within 2e-4 of the procedure, and the
    # descriptor it gives within 1e-6
    fast = hew_weights(x, mu)
    np.testing.assert_allclose(fast, lit, rtol=2e-4)
    d_fast, d_lit = fast @ x, lit @ x
    assert d_fast @ d_lit / np.linalg.norm(d_fast) / np.linalg.norm(d_lit) > 1 - 1e-6
    # the weights are not all equal (HeW is not SumA in disguise)
    assert w.std() / w.mean() > 0.05


def test_isolated_nodes_get_largest_finite_weight():
    x = random_map(60, seed=1)
    mu = x.mean(0)
    # two features equal to the mean: their centred vector is 0, so no edge above the threshold
    x[5] = mu
    x[9] = mu
    a = affinity(x, mu)
    assert a[5].sum() == 0 and a[9].sum() == 0
    lit = hew_weights_literal(x, mu)
    assert np.isinf(lit[5]) and np.isinf(lit[9])
    w = hew_weights(x, mu, precise=True)
    assert np.isfinite(w).all()
    finite = np.isfinite(lit)
    np.testing.assert_allclose(w[finite], lit[finite], rtol=1e-6)
    assert w[5] == w[9] == w[finite].max()


def test_all_zero_rows_never_make_nan():
    x = random_map(40, seed=3, zero_rows=20)
    w = hew_weights(x, x.mean(0))
    assert np.isfinite(w).all() and (w >= 0).all()
    v = w @ x
    assert np.isfinite(v).all()


def test_no_positive_affinity_falls_back_to_suma():
    x = np.abs(np.random.default_rng(4).normal(size=(1, 16)))
    np.testing.assert_array_equal(hew_weights(x, x[0] * 0.5), [1.0])
    zeros = np.zeros((6, 16))
    np.testing.assert_array_equal(hew_weights(zeros, np.ones(16)), np.ones(6))


def test_float32_path_matches_float64_and_its_guard_falls_back(monkeypatch):
    maps = [random_map(200, seed=s, zero_rows=10) for s in range(3)]
    mu = np.concatenate(maps).mean(0)
    for x in maps:
        np.testing.assert_allclose(hew_weights(x, mu), hew_weights(x, mu, precise=True), rtol=2e-4)
    # the guard: when float32 cannot be trusted, the solve is redone in float64
    calls = []
    real = hew_mod._diag_inverse

    def spy(lap):
        calls.append(lap.dtype)
        return None if lap.dtype == np.float32 else real(lap)  # a float32 factorisation that "fails"

    monkeypatch.setattr(hew_mod, "_diag_inverse", spy)
    np.testing.assert_allclose(hew_weights(maps[0], mu), hew_weights(maps[0], mu, precise=True), rtol=1e-6)
    assert calls[:2] == [np.float32, np.float64]
    monkeypatch.setattr(hew_mod, "GUARD", 1.0)  # every node "too close to 1": the guard trips
    calls.clear()
    monkeypatch.setattr(hew_mod, "_diag_inverse", lambda lap: calls.append(lap.dtype) or real(lap))
    hew_weights(maps[1], mu)
    assert calls == [np.float32, np.float64]


def test_threshold_and_z_ratio_are_parameters():
    x = random_map(80, seed=5)
    mu = x.mean(0)
    assert not np.allclose(hew_weights(x, mu, threshold=0.0), hew_weights(x, mu))
    np.testing.assert_allclose(hew_weights(x, mu, z_ratio=0.2, precise=True), hew_weights_literal(x, mu, z_ratio=0.2), rtol=1e-6)
