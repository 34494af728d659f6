import numpy as np

from app.core.aggregate.descriptor import Whitening, learn_whitening, normalize_raw


def test_power_and_l2():
    v = normalize_raw(np.array([4.0, 0.0, 9.0, -16.0]))
    np.testing.assert_allclose(v, np.array([2, 0, 3, -4]) / np.sqrt(29), rtol=1e-6)
    assert normalize_raw(np.zeros(5)).sum() == 0


def test_plain_whitening_decorrelates_training_data():
    rng = np.random.default_rng(0)
    x = normalize_raw(np.abs(rng.normal(size=(400, 64)) @ rng.normal(size=(64, 64))))
    w = learn_whitening(x, dim=32, shrinkage=0.0)
    assert w.dim == 32
    proj = (x - w.mean) @ w.proj.T
    np.testing.assert_allclose(np.cov(proj.T), np.eye(32), atol=1e-6)
    out = w.apply(x)
    assert out.shape == (400, 32) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1, rtol=1e-5)


def test_small_libraries_shrink_or_skip():
    rng = np.random.default_rng(1)
    few = normalize_raw(np.abs(rng.normal(size=(5, 64))))
    assert learn_whitening(few, dim=32).is_identity
    assert learn_whitening(normalize_raw(np.abs(rng.normal(size=(50, 64)))), dim=0).is_identity
    some = normalize_raw(np.abs(rng.normal(size=(50, 64))))
    w = learn_whitening(some, dim=512, shrinkage=0.1)
    assert w.dim == 49  # at most n - 1 directions carry variance
    # shrinkage bounds the gain of the weakest direction
    gains = np.linalg.norm(w.proj, axis=1)
    plain = np.linalg.norm(learn_whitening(some, dim=512, shrinkage=0.0).proj, axis=1)
    assert gains.max() < plain.max()


def test_identity_whitening_is_l2_only():
    w = Whitening.identity(4)
    np.testing.assert_allclose(w.apply(np.array([3.0, 4.0, 0, 0]))[0], [0.6, 0.8, 0, 0], rtol=1e-6)
