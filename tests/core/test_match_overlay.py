"""The heat overlay of a result shows what in it matches the query (describe.match_share,
Searcher.match_grid), not what its own description is made of."""
import os

import numpy as np
import pytest

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
        assert res.query_cells is None  # a library photo, searched by its stored descriptor
        cells = searcher.query_cells(str(photo_dir / "scene2" / "img0.jpg"))
        assert cells.dtype == np.float32 and cells.shape[1] == res.query_raw.shape[0]
        for with_cells in (None, cells):  # the gradient alone, and times the likeness to the query's cells
            lefts = []
            for name in ("ab.png", "ba.png"):
                g = searcher.match_grid(res.query_raw, str(tmp_path / name), with_cells)
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


@pytest.mark.slow
def test_a_whole_photo_querys_heat_lies_on_the_subject_it_shares_with_the_result(tmp_path):
    """Issue 50, item 4: the overlay of a whole-photo search marked odd spots (a tent, a shelf
    edge) where a box's was right: the gradient alone warms what pulls a result toward the whole
    query, much of it merely salient. Weighted by how closely each cell resembles the query's
    strongest cells (describe.match_heat), the heat lies on the landmark the two photos share:
    the revisited Paris query photos, each landmark boxed, searched with other photos of their
    landmark (dropped: their cells from the search; and one photo of the library, searched by its
    stored descriptor: its cells made from its file). The gradient alone put 0.52 of the heat
    inside the boxes here, 0.57 of the pairs over half."""
    import json
    import shutil

    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import SHARED

    src = SHARED / "data" / "paris250"
    if not (src / "gt_revisited_subset.json").is_file():
        pytest.skip(f"shared photos not found in {src}")
    rev = json.loads((src / "gt_revisited_subset.json").read_text())["queries"]
    lib = tmp_path / "paris"
    lib.mkdir()
    boxes = {}
    for q in rev:  # the boxed photos (box: the landmark)
        boxes[str(lib / f"{q['query']}.jpg")] = q["bbx"]
        shutil.copy(src / q["query_file"], lib)
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    try:
        index(svc, [lib])
        s = Searcher(svc)
        queries = sorted({str(src / "jpg" / f"{q['easy'][i]}.jpg") for q in rev for i in (0, 1)})
        queries.append(str(lib / "paris_louvre_000081.jpg"))  # in the library: no cells kept
        inside = []
        for query in queries:
            res = s.search(SearchRequest(path=query, top=5))
            stored = query.startswith(str(lib))
            assert (res.query_cells is None) == stored
            cells = s.query_cells(query) if stored else res.query_cells
            landmark = os.path.basename(query).split("_")[1]
            for path, (x1, y1, x2, y2) in boxes.items():
                if path == query or os.path.basename(path).split("_")[1] != landmark:
                    continue
                grid = s.match_grid(res.query_raw, path, cells)
                xs, ys = s.feature_map(SearchRequest(path=path), svc.snapshot(), result=True)[0].cell_centres()
                box = (ys[:, None] >= y1) & (ys[:, None] < y2) & (xs[None] >= x1) & (xs[None] < x2)
                inside.append(float(grid[box].sum() / grid.sum()))
        assert len(inside) == 33
        assert np.mean(inside) >= 0.65 and np.mean(np.asarray(inside) > 0.5) >= 0.7, np.round(inside, 2)
    finally:
        svc.close()
