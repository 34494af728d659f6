"""The heat overlay of a result shows what in it matches the query (describe.match_share,
Searcher.match_grid), not what its own description is made of."""
import numpy as np

from app.core.aggregate.descriptor import Whitening, l2n, learn_whitening, normalize_raw
from app.core.aggregate.hew import hew_weights
from app.core.describe import match_share
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_pairs
from tests.core.helpers import index, open_lib


def test_match_share_is_each_cells_first_order_part_in_the_score():
    """Moving the sum along one cell's term changes the score by that cell's share (finite
    differences in float64), unwhitened and whitened."""
    rng = np.random.default_rng(0)
    c = 32
    feats = np.abs(rng.normal(size=(5, 6, c))).astype(np.float32)
    mu = np.abs(rng.normal(size=c))
    x = feats.reshape(-1, c).astype(np.float64)
    w = hew_weights(feats.reshape(-1, c), mu)
    for wh in (Whitening.identity(c), learn_whitening(normalize_raw(np.abs(rng.normal(size=(50, c)))), 16)):
        q = wh.apply(normalize_raw(rng.normal(size=c)))[0].astype(np.float64)  # not the same photo

        def score(v):
            r = l2n(np.sign(v) * np.abs(v) ** 0.5)
            return float(l2n(r if wh.is_identity else (r - wh.mean) @ wh.proj.T) @ q)

        v, eps = w @ x, 1e-5
        numeric = [(score(v + eps * w[k] * x[k]) - score(v - eps * w[k] * x[k])) / (2 * eps) for k in range(len(x))]
        share = match_share(feats, mu, wh, q)
        assert share.shape == (5, 6) and np.abs(share).max() > 1e-4
        np.testing.assert_allclose(share.ravel(), numeric, atol=1e-6 * np.abs(share).max() + 1e-9)


def test_a_results_match_grid_is_warm_on_the_part_that_holds_the_query(tmp_path, photo_dir):
    """A photo made of the query's scene (left) and another scene (right): the match grid puts
    most of its heat on the left, and on the right when the halves are swapped."""
    svc = open_lib(tmp_path / "home")
    try:
        index(svc, [photo_dir])
        searcher = Searcher(svc)
        res = searcher.search(SearchRequest(path=str(photo_dir / "scene2" / "img0.jpg"), top=5))
        assert res.query_raw is not None and res.query_raw.shape == (svc.snapshot().whitening.mean.shape[0],)
        write_pairs(photo_dir, tmp_path)
        lefts = []
        for name in ("ab.png", "ba.png"):
            g = searcher.match_grid(res.query_raw, str(tmp_path / name))
            assert g.dtype == np.float32 and g.min() >= 0 and g.max() == 1.0  # stretched: its warmest cells read 1
            half = g.shape[1] // 2
            lefts.append(float(g[:, :half].sum() / g.sum()))
        assert lefts[0] > 0.6 and lefts[1] < 0.4, lefts
    finally:
        svc.close()


def test_the_querys_copies_show_its_heat_turned_as_they_lie(tmp_path, photo_dir):
    """(trials 9 and 10) The query's own file showed noise (the gradient of the cosine vanishes
    where the photo's vector is the query's), its copy at a third of the size warm elsewhere. Its
    own file and its copies show the query's heat, turned as each lies (Hit.turn, on_copy)."""
    from PIL import Image

    from app.core.pipeline.search import on_copy

    src = photo_dir / "scene2" / "img0.jpg"
    img = Image.open(src).convert("RGB")
    img.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(photo_dir / "scene2" / "mirrored.png")
    img.transpose(Image.Transpose.ROTATE_90).save(photo_dir / "scene2" / "turned.png")
    svc = open_lib(tmp_path / "home")
    try:
        index(svc, [photo_dir])
        res = Searcher(svc).search(SearchRequest(path=str(src), top=6))
        hits = {h.path.rsplit("/", 1)[-1]: h for h in res.hits}
        assert hits["img0.jpg"].duplicate and hits["mirrored.png"].copy and hits["turned.png"].copy
        w = res.query_weights
        np.testing.assert_array_equal(on_copy(w, hits["mirrored.png"].turn), w[:, ::-1])
        np.testing.assert_array_equal(on_copy(w, hits["turned.png"].turn), np.rot90(w))  # PIL's ROTATE_90: left
    finally:
        svc.close()


def test_a_match_grid_is_stretched_to_a_high_percentile_not_its_single_warmest_cell():
    """Trial 13: a right result looked nearly all cool, stretched to its single warmest cell
    (another view of a UKBench object: 5 % of its cells at 0.5 or more; stretched to the 80th
    percentile of its positive cells, 22 %: benchmarks/match_overlay.py)."""
    from app.core.heatmap import MATCH_PERCENTILE, stretch_match

    rng = np.random.default_rng(0)
    match = rng.normal(size=(12, 16)).astype(np.float32)
    match[3, 4] = 40.0  # one cell far warmer than the rest
    g = stretch_match(match)
    assert g.dtype == np.float32 and g.shape == match.shape
    assert (g[match <= 0] == 0).all() and g.max() == 1.0
    positive = match[match > 0]
    assert abs(float(np.mean(g[match > 0] == 1.0)) - (1 - MATCH_PERCENTILE / 100)) < 0.05  # not one cell but a fifth
    assert np.mean(g[match > 0] >= 0.5) > 0.4 and np.mean(match[match > 0] / match.max() >= 0.5) < 0.05
    np.testing.assert_allclose(g[match > 0], np.clip(positive / np.percentile(positive, MATCH_PERCENTILE), 0, 1), rtol=1e-5)
    assert not stretch_match(-np.abs(match)).any()  # nothing matches: all cool
