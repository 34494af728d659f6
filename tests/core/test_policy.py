"""The library policies (issue 11): their edge cases, and what they do inside a real search."""
import itertools
import os
import numpy as np
import pytest

from app.core import policy
from app.core.index import vectors as vectors_mod
from app.core.pipeline.search import Filters, SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import index, open_lib


def test_whitening_dimension_grows_with_the_library_without_a_cliff():
    dims = [policy.whitening_dim(n, 1280) for n in (0, 10, 500, 1023, 1024, 2047, 2048, 4096, 100_000)]
    assert dims == [0, 0, 0, 0, 128, 128, 256, 512, 512]
    assert policy.whitening_dim(5000, 64) == 64  # never more than the channels
    assert policy.whitening_dim(5000, 1280, requested=96) == 96  # the user's D, when it can be fitted
    assert policy.whitening_dim(150, 1280, requested=96) == 0  # ... and not before


def test_refits_are_due_when_the_library_crosses_a_size():
    assert not policy.refit_due(500, 0, 0, 1280)  # small: nothing to fit
    assert policy.refit_due(1024, 0, 0, 1280)  # crossing 1,024: fit at D = 128
    assert not policy.refit_due(1500, 1024, 128, 1280)  # grown, not doubled, same D
    assert policy.refit_due(2048, 1024, 128, 1280)  # doubled: D = 256
    assert policy.refit_due(700, 1024, 128, 1280)  # shrunk below: back to no whitening


def test_heat_reranking_is_decided_by_the_query_neighbourhood():
    few = np.r_[1.0, 0.9, 0.88, 0.85, np.linspace(0.4, 0.3, 196)]  # the photo, 3 close views, background
    many = np.r_[1.0, np.linspace(0.9, 0.75, 30), np.linspace(0.4, 0.3, 169)]  # a landmark: 30 close
    assert policy.close_neighbours(few, True) == 3 and not policy.use_her(few, True)
    assert policy.close_neighbours(many, True) == 30 and policy.use_her(many, True)
    assert policy.close_neighbours([0.9], False) == 1  # a tiny library is safe
    assert policy.search_plan(10, True).box_mode == "hybrid" and policy.search_plan(10, False, her="off").her is False


@pytest.fixture
def small_lib(tmp_path):
    d = tmp_path / "photos"
    for f in ("x", "y"):
        for i in range(30):
            write_photo(d / f / f"p{i:02d}.png", i + (100 if f == "y" else 0), size=(96, 72))
    svc = open_lib(tmp_path / "h")
    index(svc, [d])
    yield svc, d
    svc.close()


def test_a_tiny_library_searches_with_every_refinement_safely(tmp_path):
    d = tmp_path / "two"
    write_photo(d / "a.png", 1, size=(96, 72))
    write_photo(d / "b.png", 2, size=(96, 72))
    svc = open_lib(tmp_path / "h")
    index(svc, [d])
    for qe, her in (("on", "on"), ("auto", "auto"), ("off", "on")):
        res = Searcher(svc).search(SearchRequest(path=str(d / "a.png"), qe=qe, her=her, top=10))
        assert [h.path.endswith("a.png") for h in res.hits] == [True, False]
    svc.close()


def test_a_narrow_filter_still_fills_the_page_with_the_graph(small_lib, monkeypatch):
    """With the HNSW backend, a filter that admits few photos still returns all of them (the
    search goes exact over the allowed rows), and only them."""
    svc, d = small_lib
    monkeypatch.setattr(vectors_mod, "EXACT_MAX_WORK", 0)
    monkeypatch.setattr("app.core.library.snapshot.EXACT_MAX_WORK", 0)
    svc.run(svc.rebuild())
    assert svc.snapshot().graph is not None
    only = str((d / "y").resolve())
    res = Searcher(svc).search(SearchRequest(path=str(d / "x" / "p03.png"), top=25, filters=Filters((only,))))
    assert len(res.hits) == 25 and all(h.path.startswith(only) for h in res.hits)
    res = Searcher(svc).search(SearchRequest(path=str(d / "x" / "p03.png"), top=100, filters=Filters((only,))))
    assert len(res.hits) == 30


def test_a_filter_leaves_each_photos_relevance_as_it_is_in_the_whole_library(small_lib):
    """The trial: searched with a photo whose subject the filtered folder does not hold, every
    result read 0.55-0.66 (0.08 unfiltered): the ranking's score was spread best 1 over the
    filter's photos alone. A photo's relevance is now the same with the filter as without."""
    svc, d = small_lib
    only = str((d / "y").resolve())
    query = str(d / "x" / "p03.png")
    whole = Searcher(svc).search(SearchRequest(path=query, her="on", top=60))
    within = Searcher(svc).search(SearchRequest(path=query, her="on", top=60, filters=Filters((only,))))
    before = {h.path: h.score for h in whole.hits}
    assert within.hits and all(h.path.startswith(only) for h in within.hits)
    ys = [h.path for h in whole.hits if h.path.startswith(only)]
    assert [h.path for h in within.hits][: len(ys)] == ys  # in the whole library's order
    # each relevance as in the whole library: each photo's own, filter or not
    assert within.hits[0].score == pytest.approx(max(before[p] for p in ys[:1]), abs=1e-6)
    assert all(h.score == pytest.approx(before[h.path], abs=1e-9) for h in within.hits if h.path in before)


# the ten Louvre photos of trial 5's library (its 2019 folder)
LOUVRE = (371, 391, 410, 446, 448, 452, 454, 461, 462, 472)


@pytest.mark.slow
def test_heat_reranking_never_buries_the_query_among_a_larger_subject(tmp_path):
    """Trial 5: in a library with 10 photos of the Louvre beside 50 each of the Invalides, the
    Eiffel tower and the Moulin Rouge, a Louvre photo's search put three Louvre photos first, then
    about 50 Invalides; its other nearest Louvre photos went to #54-#57 (HeR's heat flowed to the
    larger subject). The query's nearest photos now stay at the top."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import SHARED

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    d = tmp_path / "paris"
    d.mkdir()
    names = [f"paris_louvre_{i:06d}.jpg" for i in LOUVRE]
    names += sorted(p.name for p in src.glob("paris_*.jpg") if p.name.split("_")[1] in ("invalides", "eiffel", "moulinrouge"))
    for n in names:
        (d / n).write_bytes((src / n).read_bytes())
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])
    searcher = Searcher(svc)
    res = searcher.search(SearchRequest(path=str(d / names[0]), top=20))
    top = [h.path.split("/")[-1].split("_")[1] for h in res.hits[:6]]
    assert top == ["louvre"] * 6, top
    # and a cut-off of 0.5 tells right from wrong over every photo's search (trial 6, a library of
    # this kind: 40 Eiffel photos ranked first read 0.34 at the median; the relevance of one
    # scale for every library kept 0.70 of the right photos here)
    kept, hidden = [], []
    for name in names:
        for h in searcher.search(SearchRequest(path=str(d / name), top=100)).hits[1:]:
            right = h.path.split("/")[-1].split("_")[1] == name.split("_")[1]
            (kept if right else hidden).append(h.score >= 0.5 if right else h.score < 0.5)
    svc.close()
    assert np.mean(kept) >= 0.85 and np.mean(hidden) >= 0.95, (np.mean(kept), np.mean(hidden))


@pytest.mark.parametrize("qe,her", [("on", "off"), ("on", "on"), ("off", "off")])
def test_a_filter_shows_every_photo_of_its_folder_that_the_whole_library_ranks(small_lib, qe, her):
    """A review: a filtered search took, of the whole library's ranking, only the photos its own
    filtered ranking also held; where the two rankings differ (QE's vector is made from each
    ranking's own first photos) a folder's photo ranked in the whole library was dropped while
    lower ones were shown. Every query, a short list: the folder's photos that the search
    without the filter shows come first, in its order, at its relevance."""
    svc, d = small_lib
    only = str((d / "y").resolve())
    searcher = Searcher(svc)
    for query in sorted(d.rglob("*.png")):
        whole = searcher.search(SearchRequest(path=str(query), qe=qe, her=her, top=8))
        within = searcher.search(SearchRequest(path=str(query), qe=qe, her=her, top=8, filters=Filters((only,))))
        ys = [(h.path, h.score) for h in whole.hits if h.path.startswith(only)]
        assert all(h.path.startswith(only) for h in within.hits)
        got = [(h.path, h.score) for h in within.hits][: len(ys)]
        assert [p for p, _ in got] == [p for p, _ in ys], query.name
        assert all(a == pytest.approx(b, abs=1e-9) for (_, a), (_, b) in zip(got, ys)), query.name



@pytest.mark.slow
def test_a_box_on_a_landmark_reads_its_photos_as_relevant(tmp_path):
    """Trial 10: a box on the Louvre pyramid (paris_louvre_000015) listed 35 Louvre photos first
    but read them 1.00, 0.69, 0.46 ... 0.07, so a cut-off of 0.5 kept 2 of them. HeR was decided
    with the boxed photo itself counted as the box's nearest neighbour (similarity 0.87 against
    0.76 for the next), so almost nothing stood out from the background and HeR stayed off; the
    benchmarks that chose the rule leave the query's own photo out for boxes too."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import SHARED

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    d = tmp_path / "paris"
    d.mkdir()
    names = sorted(p.name for p in src.glob("paris_*.jpg") if p.name.split("_")[1] in ("louvre", "defense", "eiffel"))
    for n in names:
        (d / n).write_bytes((src / n).read_bytes())
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])
    query = d / "paris_louvre_000015.jpg"
    res = Searcher(svc).search(SearchRequest(path=str(query), box=(86, 62, 665, 510), top=100))
    svc.close()
    assert res.plan.her is True
    others = [h for h in res.hits if h.path != str(query)]
    right = [h.score >= 0.5 for h in others if "_louvre_" in h.path]
    hidden = [h.score < 0.5 for h in others if "_louvre_" not in h.path]
    assert np.mean(right) >= 0.8 and np.mean(hidden) >= 0.9, (np.mean(right), np.mean(hidden))


@pytest.mark.slow
def test_a_small_library_reads_other_views_of_an_object_as_relevant(tmp_path):
    """A first library of 12 photos (three UKBench objects, four views each): another view of the
    searched object read 0.06. The library's similarity scale was the mean and standard deviation
    of its pairs, and there the pairs of one object's photos are 18 of 66, at 0.9 against 0.5:
    they tripled the standard deviation. The scale is now robust to them (median, MAD)."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import shared_photos

    d = tmp_path / "objects"
    d.mkdir()
    for p in shared_photos("ukbench", 12):
        (d / p.name).write_bytes(p.read_bytes())
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=4)
    index(svc, [d])
    right, wrong = [], []
    for q in sorted(d.iterdir()):
        group = int(q.stem[7:]) // 4
        for h in Searcher(svc).search(SearchRequest(path=str(q), top=12)).hits[1:]:
            (right if int(h.path[-9:-4]) // 4 == group else wrong).append(h.score)
    svc.close()
    assert min(right) >= 0.5 and max(wrong) < 0.5, (min(right), max(wrong))


def test_the_similarity_scale_is_not_undone_by_copies_or_a_few_subjects():
    """The library's similarity scale (median and MAD of its pairs): pairs of copies are left out,
    and the spread never collapses (a review: two copies and a third photo gave a deviation of 0, and every
    result read 0 or 1)."""
    from app.core.library.snapshot import _Common

    class Sample(_Common):
        def __init__(self, v):
            object.__setattr__(self, "v", v)

        def _sample(self, n):
            return self.v

    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 64))
    spread = base / np.linalg.norm(base, axis=1, keepdims=True)
    copies = np.concatenate([spread[:1].repeat(8, 0), spread[1:2]])  # 8 copies of one photo and another
    centre, unit = Sample(copies).similarity_scale
    assert centre == pytest.approx(float(spread[0] @ spread[1])) and unit >= 0.01


@pytest.mark.slow
def test_copies_of_the_query_do_not_change_how_the_other_photos_read(tmp_path):
    """Trial 11: with a TIFF, a PNG and a re-encoded copy of the searched photo in the library, the
    other Moulin Rouge photos read 0.74, 0.71, 0.58, 0.51 ... against 0.99, 0.98, 0.98 without them
    (the CLI: 47 right results at 0.5 -> 14). The copies were the query's nearest neighbours: QE
    expanded the query with itself, and HeR's decision saw nothing else stand out. (Trial 12: left
    out of HeR's graph, they made it smaller by as many photos when fewer results were asked.)"""
    from PIL import Image

    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import SHARED

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    d = tmp_path / "paris"
    d.mkdir()
    for p in src.glob("paris_*.jpg"):  # 250 photos: more than HeR's shortlist
        (d / p.name).write_bytes(p.read_bytes())
    query = d / "paris_moulinrouge_000006.jpg"
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])

    def read():
        res = Searcher(svc).search(SearchRequest(path=str(query), top=100))
        # (trial 12) and each result reads the same whatever the number of results asked
        more = {h.path: h.score for h in Searcher(svc).search(SearchRequest(path=str(query), top=300)).hits}
        assert all(more[h.path] == pytest.approx(h.score, abs=1e-9) for h in res.hits)
        others = [h for h in res.hits if "moulinrouge" in h.path and not (h.duplicate or h.copy)]
        return res.plan.her, [h.path for h in others], np.mean([h.score >= 0.5 for h in others])

    her, right, kept = read()
    edits = tmp_path / "edits"
    edits.mkdir()
    photo = Image.open(query).convert("RGB")
    photo.save(edits / "copy.tif")
    photo.save(edits / "copy.png")
    photo.save(edits / "copy-q30.jpg", quality=30)
    photo.resize((photo.width // 2, photo.height // 2)).save(edits / "copy-half.jpg", quality=90)
    index(svc, [d, edits])
    her_after, right_after, kept_after = read()
    svc.close()
    # (one photo of 49 either side of 0.5 is 0.02)
    assert her_after == her and kept_after >= kept - 0.03 and kept >= 0.75, (her, her_after, kept, kept_after)
    assert len(set(right_after[:30]) & set(right[:30])) >= 28  # the same photos first


@pytest.mark.slow
def test_a_photo_the_library_does_not_hold_reads_as_no_match(tmp_path):
    """Trial 12: a receipt searched in a library of landmarks and objects read a telephone at 0.99
    and 74 results at 0.5 or more. With HeR the ranking's score is the heat spread over the
    shortlist, best 1 whatever that photo is, so the best result of any search read ~1. Now every
    result is weighed by how close the best match is (policy.MATCH_U). In a library of one kind of
    subject (the 250 Paris photos), photos it does not hold (unrelated photos, UKBench objects) read
    as no match, and its landmarks' photos still read as relevant."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import SHARED, shared_photos

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    d = tmp_path / "paris"
    d.mkdir()
    for p in src.glob("paris_*.jpg"):  # a subfolder per landmark (for the filter below)
        (d / p.name.split("_")[1]).mkdir(exist_ok=True)
        (d / p.name.split("_")[1] / p.name).write_bytes(p.read_bytes())
    from PIL import Image

    (d / "copies").mkdir()  # half-size copies of a few Eiffel photos (for One per duplicate below)
    for n, p in enumerate(sorted((d / "eiffel").glob("*.jpg"))[:6]):
        im = Image.open(p).convert("RGB")
        im.resize((im.width // 2, im.height // 2)).save(d / "copies" / f"c{n}.jpg", quality=85)
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])
    searcher = Searcher(svc)
    outside = shared_photos("distractors", 8) + shared_photos("ukbench", 32)[::4]
    firsts, hers = [], []
    for q in outside:
        res = searcher.search(SearchRequest(path=str(q), top=20))
        firsts.append(res.hits[0].score)
        hers.append(res.plan.her)
    # a filter leaves each photo's relevance as in the whole library, no-match factor included
    scores = {h.path: h.score for h in searcher.search(SearchRequest(path=str(outside[0]), top=250)).hits}
    within = searcher.search(SearchRequest(path=str(outside[0]), top=20, filters=Filters(folders=(str(d / "louvre"),))))
    assert within.hits and all("/louvre/" in h.path for h in within.hits)
    assert all(h.score == pytest.approx(scores[h.path], abs=1e-9) for h in within.hits)
    query = d / "eiffel" / "paris_eiffel_000045.jpg"
    res = searcher.search(SearchRequest(path=str(query), top=100))
    # and a landmark's search filtered to the other landmarks' folders (trial 15: a painting read
    # 0.00 at rank 48 of a search, 0.975 first of a filter's photos): each reads as unfiltered
    # (within the first 200, the shortlist every search ranks; beyond it a filter's photos follow
    # in their own order, below its last)
    scores = {h.path: h.score for h in searcher.search(SearchRequest(path=str(query), top=200)).hits}
    moved, compared = [], 0
    for other in ("louvre", "invalides", "defense", "pompidou"):
        within = searcher.search(SearchRequest(path=str(query), top=30, filters=Filters(folders=(str(d / other),))))
        compared += sum(h.path in scores for h in within.hits)
        moved += [(h.path, round(scores[h.path], 3), round(h.score, 3)) for h in within.hits
                  if h.path in scores and h.score != pytest.approx(scores[h.path], abs=1e-9)]
    assert compared >= 60, compared
    # One per duplicate shows each set's original in its best copy's place, filter or not: a
    # filter that holds every photo changes nothing (the copies it hides held the list down only
    # with a filter)
    one = {h.path: h.score for h in searcher.search(SearchRequest(path=str(query), top=100, hide_duplicates=True)).hits}
    every = searcher.search(SearchRequest(path=str(query), top=100, hide_duplicates=True, filters=Filters(folders=(str(d),))))
    moved += [(h.path, round(one[h.path], 4), round(h.score, 4)) for h in every.hits
              if h.score != pytest.approx(one.get(h.path, -1), abs=1e-9)]
    svc.close()
    assert not moved, moved
    right = [h.score >= 0.5 for h in res.hits if "_eiffel_" in h.path and h.path != str(query)]
    assert sum(hers) >= 3, hers  # HeR ranked some of them: its spread is what read them ~1
    # (before: 9 of these 16 read 0.98-0.99; one UKBench object, whose best match lies just past
    # both of policy.match's thresholds, still reads 0.81)
    assert sum(f >= 0.5 for f in firsts) <= 2, [round(f, 2) for f in firsts]
    assert res.plan.her and len(right) >= 10 and np.mean(right) >= 0.8, (res.plan.her, len(right), np.mean(right))


def test_a_match_is_judged_by_the_closer_of_its_two_measures():
    """policy.match: 1 where there is nothing to judge; for a box one half at either threshold with
    the other far, and either measure alone enough (the scale fails in a library of one kind of
    subject, the cosine leans on the model), times its raw cosine's rule given one; for a whole photo
    the raw cosine alone."""
    assert policy.match(None, None) == 1.0
    assert policy.match(policy.MATCH_U, -1.0) == pytest.approx(0.5)
    assert policy.match(-5.0, policy.MATCH_COSINE) == pytest.approx(0.5)
    assert policy.match(policy.MATCH_U + 0.3, 0.0) > 0.99 and policy.match(-5.0, policy.MATCH_COSINE + 0.1) > 0.99
    assert policy.match(policy.MATCH_U - 0.3, policy.MATCH_COSINE - 0.1) < 0.001
    # a whole photo (best_raw given): its cosine in the model's own space alone, half at MATCH_RAW
    assert policy.match(policy.MATCH_U + 0.3, 1.0, None, policy.MATCH_RAW) == pytest.approx(0.5)
    assert policy.match(-5.0, -1.0, None, policy.MATCH_RAW + 0.05) > 0.99
    assert policy.match(policy.MATCH_U + 0.3, 1.0, None, policy.MATCH_RAW - 0.05) < 0.01
    # a box with its raw cosine: both rules, the raw one half at MATCH_RAW_BOX
    assert policy.match(policy.MATCH_U + 0.3, 1.0, None, policy.MATCH_RAW_BOX, box=True) == pytest.approx(0.5)
    assert policy.match(policy.MATCH_U, -1.0, None, policy.MATCH_RAW_BOX + 0.1, box=True) == pytest.approx(0.5, abs=1e-3)
    assert policy.match(policy.MATCH_U + 0.3, 1.0, None, policy.MATCH_RAW_BOX - 0.05, box=True) < 0.01
    u = np.array([1.0, 0.5])
    assert np.allclose(policy.relevance(u, u, False, 0.25), 0.25 * policy.relevance(u, u, False))
    # the best match's own nearest photo much closer to it than the query: half at RECIPROCAL_GAP
    base = policy.match(1.0, 0.9)
    assert policy.match(1.0, 0.9, 1.0 - policy.RECIPROCAL_GAP) == pytest.approx(0.5 * base)
    assert policy.match(1.0, 0.9, 1.2) > 0.99 * base and policy.match(1.0, 0.9, 2.0) < 0.01
    # HeR's warmest results, each against its own nearest photo: half at HEAT_GAP, 1 with none
    f = policy.reciprocal([1.0, 1.0, 1.0, 1.0], [1.0 - policy.HEAT_GAP, 1.0, 2.0, np.nan])
    assert f[0] == pytest.approx(0.5) and f[1] > 0.99 and f[2] < 0.01 and f[3] == 1.0


@pytest.mark.slow
def test_an_object_the_library_does_not_hold_reads_as_no_match_among_other_objects(tmp_path):
    """Trial 14: in a library of a few hundred photos, many of them objects shot from four sides,
    a poster the library does not hold found twelve other toys at 0.99-1.00: its best match was
    close enough on both of policy.match's measures. That match's own other views lie far closer
    to it than the poster does (policy.RECIPROCAL_GAP). Photos it does hold still find their
    other views, also beside near shots (a burst) of one of them."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE
    from tests.conftest import shared_photos

    uk = shared_photos("ukbench", 432)
    d = tmp_path / "photos"
    d.mkdir()
    for p in uk[:60] + shared_photos("distractors", 30):
        (d / p.name).write_bytes(p.read_bytes())
    for obj in range(5):  # three near shots of each held object's second view
        write_burst(uk[4 * obj + 1], d, f"burst{obj}")
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    try:
        index(svc, [d])
        searcher = Searcher(svc)
        firsts = [searcher.search(SearchRequest(path=str(q), top=10)).hits[0].score for q in uk[400:432:4]]
        kept = []
        for obj in range(5):
            res = searcher.search(SearchRequest(path=str(d / uk[4 * obj].name), top=20))
            mine = {p.name for p in uk[4 * obj + 1: 4 * obj + 4]} | {f"burst{obj}_{n}.jpg" for n in range(3)}
            kept += [h.score >= 0.5 for h in res.hits if os.path.basename(h.path) in mine]
    finally:
        svc.close()
    # before: 5 of the 8 first results at 0.5 or more (0.99, 1.00, 0.98, ...), mean 0.66; now 4, 0.49
    assert sum(f >= 0.5 for f in firsts) <= 4 and np.mean(firsts) < 0.55, [round(f, 2) for f in firsts]
    # the held objects' other views and near shots: 0.63 of them at 0.5 or more before the
    # verification, 0.5 since: in a HeR search, a view of the object from its other side (7-10
    # SIFT inliers, where its other two views share 50) and that view's three near shots read 0.3
    assert len(kept) == 30 and np.mean(kept) >= 0.5, kept


def write_burst(photo, folder, stem: str) -> list:
    """Three near shots of `photo` (a burst: shifted by 2-4 %, brighter or darker), written into
    `folder` as `stem`_0.jpg to _2.jpg; their paths."""
    from PIL import Image, ImageEnhance, ImageOps

    src = ImageOps.exif_transpose(Image.open(photo)).convert("RGB")
    w, h = src.size
    shots = []
    for n, (dx, gain) in enumerate(((0.02, 1.05), (0.04, 0.95), (0.03, 1.0))):
        shot = src.crop((round(w * dx), 0, w - round(w * (0.05 - dx)), h)).resize((w, h))
        shots.append(folder / f"{stem}_{n}.jpg")
        ImageEnhance.Brightness(shot).enhance(gain).save(shots[-1], quality=90)
    return shots


def shipped_library(tmp_path, photos):
    """A library of copies of `photos` (real shared photos) in one folder, indexed with the
    shipped model and size: (the service, open; the folder)."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE

    d = tmp_path / "photos"
    d.mkdir()
    for p in photos:
        (d / p.name).write_bytes(p.read_bytes())
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])
    return svc, d


@pytest.mark.slow
def test_heat_does_not_read_the_next_object_as_right(tmp_path):
    """Trial 14: in a library of objects of one kind (the first UKBench objects: CD covers and
    books, among unrelated photos and landmarks) searched with a view it does not hold, HeR's heat
    read the three other views as right and then the next objects' views at 0.99. Those each far
    closer to their own other views than to the query (policy.HEAT_GAP) read lower; the right views
    still read as right and come first. What stays: covers whose views are no closer to each other
    than to the query read 0.99 (0.86-0.93 while the list was the ranking's order capped by a
    running minimum; a cut-off of 0.5 showed them either way)."""
    from tests.conftest import shared_photos

    uk = shared_photos("ukbench", 60)
    queries = uk[3:60:4]  # each object's fourth view, not in the library
    svc, _ = shipped_library(tmp_path, [p for p in uk if p not in queries] + shared_photos("distractors", 150)
                             + shared_photos("paris250", 45))
    try:
        searcher = Searcher(svc)
        right, wrong, her_wrong, her_searches = [], [], [], 0
        for n, q in enumerate(queries):
            early = []
            res = searcher.search(SearchRequest(path=str(q), top=40), early.append)
            mine = {p.name for p in uk[4 * n: 4 * n + 3]}
            # a photo not in the library shows its first results as it is, before its turns are
            # searched and before the results' details are compared (issue 48, 8b: ~0.9 s of a
            # new photo's first search here); with the heat, the turn kept's, numbers no lower than after
            assert res.settled and early and not any(e.settled for e in early), (q.name, len(early))
            assert all(e.plan.verified is None and e.timings["verify_ms"] == 0 for e in early)
            if res.plan.her:
                assert np.array_equal(early[-1].query_raw, res.query_raw)
                before = {h.path: h.score for h in early[-1].hits}
                assert all(before.get(h.path, 1.0) >= h.score - 1e-9 for h in res.hits), q.name
            assert {os.path.basename(h.path) for h in res.hits[:3]} == mine, q.name  # the right views first
            right += [h.score for h in res.hits if os.path.basename(h.path) in mine]
            wrong += [h.score for h in res.hits[:8] if os.path.basename(h.path) not in mine]
            if res.plan.her:  # the heat's searches: every other photo of the 40
                her_searches += 1
                assert res.plan.verified == 3, (q.name, res.plan)  # the three views matched part by part
                her_wrong += [h.score for h in res.hits if os.path.basename(h.path) not in mine]
    finally:
        svc.close()
    assert len(right) == 45 and min(right) >= 0.9, np.round(right, 3)
    # wrong results of the first 8 reading 0.5 or more: 12 of 75 (the same in the ranking's order)
    assert sum(w >= 0.5 for w in wrong) <= 12, np.round(wrong, 3)
    # HeR's searches: other objects' views read 0.99 before their local features were matched
    assert her_searches >= 2 and sum(w >= 0.5 for w in her_wrong) <= 2, (her_searches, np.round(her_wrong, 2))


@pytest.mark.slow
def test_a_burst_of_a_landmark_leaves_its_other_photos_reading_as_right(tmp_path):
    """A burst (three near shots) of a landmark photo matches it part by part as an object's own
    views do, far above the landmark's other photos (117-374 inliers against 6-14), and the
    verification lowered those to 0.3 (30 synthetic bursts: 4 and 6 searches, right results at 0.5
    -15 % and -21 %). Near-identical shots of the query (verification.BURST) are passed over, and
    near-identical shots among the results count once: a closer framing of the photo with a burst
    of its own is one match, not four."""
    from PIL import Image

    from tests.conftest import SHARED, shared_photos

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    # the four photos whose bursts made a step in the 464-photo study library
    queries = [src / f"paris_{n}.jpg" for n in ("eiffel_000224", "invalides_000195", "moulinrouge_000017",
                                                "moulinrouge_000283")]
    landmarks = [p for n in ("eiffel", "invalides", "moulinrouge") for p in sorted(src.glob(f"paris_{n}_*.jpg"))[:18]]
    svc, d = shipped_library(tmp_path, sorted(set(landmarks + queries)) + shared_photos("ukbench", 60)
                             + shared_photos("distractors", 150))
    try:
        for q in queries:
            write_burst(q, d, q.stem + "_burst")
            # a closer framing of the same view (the scene again, a moment later) and its own burst
            im = Image.open(q).convert("RGB")
            w, h = im.size
            im.crop((w // 6, h // 6, w - w // 6, h - h // 6)).resize((w, h)).save(d / f"{q.stem}_burstx.jpg", quality=90)
            write_burst(d / f"{q.stem}_burstx.jpg", d, q.stem + "_burstx")
        index(svc, [d])
        searcher, unverified = Searcher(svc), Searcher(svc)
        unverified.VERIFIED = 0  # nothing matched part by part: the numbers as before the verification
        her, stepped, lowered = 0, 0, []
        for q in queries:
            res = searcher.search(SearchRequest(path=str(d / q.name), top=60))
            her += bool(res.plan.her)
            stepped += bool(res.plan.verified)
            landmark = q.name.split("_")[1]
            plain = {h.path: h.score for h in unverified.search(SearchRequest(path=str(d / q.name), top=60)).hits}
            lowered += [os.path.basename(h.path) for h in res.hits if f"_{landmark}_" in os.path.basename(h.path)
                        and h.score < plain.get(h.path, 0.0) - 1e-9]
    finally:
        svc.close()
    # without verification.BURST, 3 of the 4 searches stepped over the query's burst; with every
    # result's shots counted, 4 of 4 over the closer framing's; their landmark's photos read 0.3 of their number
    assert her >= 3 and stepped == 0 and not lowered, (her, stepped, lowered)


@pytest.fixture(scope="module")
def three_landmarks(tmp_path_factory):
    """Trial 16's library: 18 photos each of the Eiffel tower, the Invalides and the Moulin Rouge
    among 60 UKBench photos and 150 unrelated ones: (the service, its folder, {landmark: its
    shared photos, the first 18 in the library})."""
    from tests.conftest import SHARED, shared_photos

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    landmarks = {n: sorted(src.glob(f"paris_{n}_*.jpg")) for n in ("eiffel", "invalides", "moulinrouge")}
    svc, d = shipped_library(tmp_path_factory.mktemp("three"), [p for ps in landmarks.values() for p in ps[:18]]
                             + shared_photos("ukbench", 60) + shared_photos("distractors", 150))
    yield svc, d, landmarks
    svc.close()


@pytest.mark.slow
def test_heat_that_went_to_another_landmark_leaves_the_right_photos_first(three_landmarks):
    """Trial 16: an Eiffel photo the library does not hold: HeR's heat went to the Invalides'
    domes (5th to 15th), each far closer to its own other photos than to the query, and the Eiffel
    photos after them read what the running minimum left (0.00). Those warm results fail the
    reciprocal test (policy.HEAT_GAP), and the list is in the order of its relevance."""
    svc, _, landmarks = three_landmarks
    searcher = Searcher(svc)
    first, kept = [], []
    for q in landmarks["eiffel"][18:20]:  # not in the library
        res = searcher.search(SearchRequest(path=str(q), top=100))
        first.append(sum("_eiffel_" in h.path for h in res.hits[:18]))
        kept.append(sum(h.score >= 0.5 for h in res.hits if "_eiffel_" in h.path))
    # before: 8 and 11 of the first 18 were Eiffel photos, 4 and 7 of the 18 read 0.5 or more; now 14, 14
    assert min(first) >= 12 and min(kept) >= 10, (first, kept)


@pytest.mark.slow
def test_a_landmark_search_reads_the_other_landmarks_as_wrong(three_landmarks):
    """Trial 18: in a small library of three landmarks among other photos, an Eiffel search read
    the Invalides and the Moulin Rouge 0.92-0.98 right after its own photos (HeR's heat, spread over
    a shortlist that is most of the library, puts every building above the rest), and a dozen
    photos read 0.47 together: the ranking's order, capped by a running minimum after a photo of
    another landmark. In a library too small to be whitened the lukewarm results are now judged
    against their own nearest photo too (policy.HEAT_WARM), and the list is in the order of each
    photo's own relevance."""
    svc, d, landmarks = three_landmarks
    searcher = Searcher(svc)
    right, wrong, bands = [], [], 0
    for name, photos in landmarks.items():
        for p in photos[:18:3]:  # six of each landmark, searched from the library as "Find similar" does
            hits = searcher.search(SearchRequest(path=str(d / p.name), top=60)).hits[1:]
            for h in hits:
                other = [n for n in landmarks if f"_{n}_" in h.path]
                if other:
                    (right if other[0] == name else wrong).append(h.score)
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)  # the numbers fall down the list
            # runs of four or more results that read the same number (above 0.05)
            bands += sum(len(list(run)) >= 4 for value, run in itertools.groupby(np.round(scores, 9)) if value > 0.05)
    # before: 0.77 of the right photos among the first 60 read 0.5 or more, 100 photos of the
    # other landmarks did, and 38 runs of four or more results read one number
    assert np.mean(np.array(right) >= 0.5) >= 0.85, np.round(right, 2)
    assert sum(w >= 0.5 for w in wrong) <= 65, np.round(wrong, 2)
    assert bands == 0


@pytest.mark.slow
def test_a_box_on_a_landmark_the_library_does_not_hold_reads_as_no_match(three_landmarks):
    """Trial 20: boxes on the Moulin Rouge and the Invalides, in a library without them, read La
    Defense and the Louvre 0.99-1.00 (33-93 wrong results at 0.5 or more), where the same photos
    searched whole read 0.72 at most. A box is now judged by its raw cosine too
    (policy.MATCH_RAW_BOX). Here the library holds the Eiffel tower, the Invalides and the Moulin
    Rouge: the shared box queries on La Defense and the Louvre are boxes on subjects it does not
    hold; those on its three landmarks still find them, read as right."""
    import json

    from tests.conftest import SHARED

    svc, _, landmarks = three_landmarks
    gt = json.loads((SHARED / "data" / "paris250" / "gt_revisited_subset.json").read_text())["queries"]
    searcher = Searcher(svc)
    firsts, held = [], []
    for q in gt:
        name = q["query"].split("_")[1]
        res = searcher.search(SearchRequest(path=str(SHARED / "data" / "paris250" / q["query_file"]),
                                            box=tuple(q["bbx"]), top=20))
        first = next(h for h in res.hits if not h.duplicate)
        if name in landmarks:
            held.append(f"_{name}_" in first.path and first.score >= 0.5)
        else:
            firsts.append(first.score)
    # before: none of the 7 boxes not held read its first result below 0.5 (0.68-1.00); now 6
    assert len(firsts) == 7 and sum(f < 0.5 for f in firsts) >= 5, np.round(firsts, 2)
    assert len(held) == 5 and all(held), held


def held_subjects_read(searcher, d, landmarks: dict, uk: list, objects, top: int) -> list:
    """What the searches of a library's own subjects read: for each photo of a held landmark that
    the library does not hold (`landmarks`: {name: paths}), its first result's relevance (None when
    of another landmark); for each held UKBench object (`objects`: numbers; `uk`: the UKBench photos,
    copied into `d`), its first view searched from the library, the lowest of its first `top`
    results' (None when one is of another object)."""
    right = []
    for n, photos in landmarks.items():
        for q in photos:
            h = searcher.search(SearchRequest(path=str(q), top=10)).hits[0]
            right.append(round(h.score, 2) if f"_{n}_" in h.path else None)
    for obj in objects:
        res = searcher.search(SearchRequest(path=str(d / uk[4 * obj].name), top=top))
        right.append(round(min(h.score for h in res.hits), 2) if all(
            int(h.path[-9:-4]) // 4 == obj for h in res.hits) else None)
    return right


@pytest.mark.slow
def test_a_photo_of_a_kind_the_library_holds_but_not_of_its_subject_reads_as_no_match(tmp_path):
    """Trials 13-17: in a library of a few hundred mixed photos, photos it does not hold read a
    look-alike of the same kind 0.9-1.0 (a skateboarder -> a tennis player, a camera -> another
    camera, La Defense -> the Louvre pyramid): their best match was as far out on the library's
    scale as a held subject's. A whole photo's best match is now judged by its cosine in the
    model's own space (policy.MATCH_RAW); photos of the subjects it holds still read high."""
    from tests.conftest import SHARED, shared_photos

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    landmarks = {n: sorted(src.glob(f"paris_{n}_*.jpg")) for n in ("eiffel", "louvre", "invalides", "defense", "moulinrouge")}
    uk = shared_photos("ukbench", 600)
    extra = shared_photos("distractors", 1853)  # every kind: BSDS, cameras, COCO, ImageNet
    held = [p for n in ("eiffel", "louvre", "invalides") for p in landmarks[n][:16]]
    svc, d = shipped_library(tmp_path, held + uk[:60] + extra[::12])
    try:
        searcher = Searcher(svc)
        first = lambda q: searcher.search(SearchRequest(path=str(q), top=10)).hits[0]
        outside = (landmarks["defense"][:4] + landmarks["moulinrouge"][:2] + uk[400:416:4] + extra[6::116])
        wrong = [round(first(q).score, 2) for q in outside]
        right = held_subjects_read(searcher, d, {n: landmarks[n][16:20] for n in ("eiffel", "louvre", "invalides")},
                                   uk, range(0, 15, 3), 3)
    finally:
        svc.close()
    print("not held:", wrong, "held:", right)
    assert np.mean([s < 0.5 for s in wrong]) >= 0.8, wrong
    assert np.mean([s is not None and s >= 0.5 for s in right]) >= 0.85, right


def test_a_whitened_library_judges_a_whole_photo_by_its_raw_cosine(tmp_path, monkeypatch, library):
    """In a whitened library the searched cosines are not the model's own: policy.match is given
    the best raw cosine of the shortlist's first photos (their raw descriptors read from the
    catalog, either backend), the query's own file left out. A spy on policy.match (the real one
    runs) records what it was given."""
    monkeypatch.setattr(policy, "MIN_WHITEN", 16)
    monkeypatch.setattr(policy, "MATCH_RAW_MODELS", ("tiny-random",))  # measured for the shipped models only
    d = tmp_path / "many"
    for i in range(40):
        write_photo(d / f"p{i:02d}.png", i, size=(96, 72))
    svc = open_lib(tmp_path / "h", library)
    given, real = [], policy.match
    monkeypatch.setattr(policy, "match", lambda *a, **k: given.append((a, k)) or real(*a, **k))
    try:
        index(svc, [d])
        snap = svc.snapshot()
        assert not snap.whitening.is_identity
        searcher = Searcher(svc)
        res = searcher.search(SearchRequest(path=str(d / "p07.png"), top=40, qe="off", her="off"))
        whole = given[-1]
        own = [h.image_id for h in res.hits if h.path.endswith("p07.png")]
        sl = snap.search(snap.whitening.apply(res.query_raw)[0], 21, None)  # the shortlist's first 20 others
        raws = svc.catalog.raw_descriptors([i for i in sl.ids.tolist() if i not in own][:20], snap.space.id,
                                           len(res.query_raw))
        # a box (trial 20) takes its raw cosine too, but not from the photo's map alone (a dragged box)
        boxes = {}
        for mode in ("hybrid", "map"):
            searcher.search(SearchRequest(path=str(d / "p07.png"), box=(10, 10, 70, 60), top=10, mode=mode))
            boxes[mode] = given[-1]
    finally:
        svc.close()
    (best_u, best_cosine, _, best_raw), k = whole
    expected = float((raws @ res.query_raw).max())
    assert len(own) == 1 and len(raws) == 20 and not k.get("box")
    assert best_raw == pytest.approx(expected, abs=1e-6) and best_raw != pytest.approx(best_cosine, abs=1e-3)
    assert boxes["hybrid"][1] == {"box": True} and boxes["hybrid"][0][3] is not None
    assert boxes["map"][0][3] is None


# Issue 50, item 3: every search of an unrelated photo a 600-photo library did not hold whose first
# result read 0.5 or more (benchmarks/relevance.py --sample 600), with that first result: a look-alike
# of the same kind (people in a kitchen -> a lab photo, a man on a train -> a couple in a car)
LOOK_ALIKES = {
    "coco/000000535506.jpg": "imagenet/n03630383_lab_coat.jpg",
    "coco/000000350679.jpg": "imagenet/n03630383_lab_coat.jpg",
    "coco/000000109313.jpg": "imagenet/n03630383_lab_coat.jpg",
    "imagenet/n03355925_flagpole.jpg": "camera/Canon_PowerShot_S30.jpg",
    "camera/Ricoh_RDC5300.jpg": "coco/000000069468.jpg",
    "camera/Nikon_E885.jpg": "camera/Issue_177.jpg",
    "camera/Sanyo_SR6.jpg": None,  # -> a Louvre photo
    "bsds/102061.jpg": "camera/HP_PhotoSmart_C812.jpg",
    "bsds/175083.jpg": "imagenet/n01629819_European_fire_salamander.jpg",
    "coco/000000442450.jpg": "coco/000000037666.jpg",
    "bsds/15004.jpg": "bsds/15011.jpg",
    "bsds/159091.jpg": "imagenet/n02133161_American_black_bear.jpg",
    "bsds/145059.jpg": "camera/metadata-extractor-dotnet_issue_51.jpg",
    "camera/Kodak_DX6490.jpg": "camera/JVC_GR-DC2000.jpg",
    "coco/000000536038.jpg": "camera/Sony_Cybershot__5_.jpg",
    "imagenet/n04285008_sports_car.jpg": "bsds/29030.jpg",
    "imagenet/n02493793_spider_monkey.jpg": "imagenet/n02488702_colobus.jpg",
    "camera/Canon_IXUS_750.jpg": "bsds/15011.jpg",
    "camera/Samsung_GT-I9000__Galaxy_S_.jpg": "camera/Kodak_DC3400.jpg",
    "coco/000000022192.jpg": "camera/Issue_177.jpg",
    "bsds/227046.jpg": "bsds/33044.jpg",
}


@pytest.mark.slow
def test_a_look_alike_that_shares_few_of_the_photos_details_reads_as_no_match(tmp_path):
    """Issue 50, item 3: photos the library does not hold read a look-alike of the same kind
    0.5-0.99 (19 % of such searches in a 600-photo library): close enough by the raw cosine to
    pass policy.MATCH_RAW, but sharing few of the photo's details (4-11 SIFT inliers). A whole
    photo whose best match is not sure by its raw cosine (policy.MATCH_RAW_SURE) has its first
    results matched part by part, and reads as no match when none shares
    verification.UNMATCHED_INLIERS. Photos of the subjects the library holds (a landmark from
    another spot, an object's other view) still read high."""
    from tests.conftest import SHARED, shared_photos

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    dx = SHARED / "data" / "distractors"
    queries = [dx / q for q in LOOK_ALIKES]
    alike = {dx / p for p in LOOK_ALIKES.values() if p}
    landmarks = {n: sorted(src.glob(f"paris_{n}_*.jpg")) for n in ("eiffel", "louvre", "invalides")}
    uk = shared_photos("ukbench", 600)
    extra = [p for p in shared_photos("distractors", 1853)[::10] if p not in queries]
    held = [p for n in landmarks for p in landmarks[n][:16]] + uk[:100] + sorted(alike | set(extra))
    svc, d = shipped_library(tmp_path, held)
    try:
        searcher = Searcher(svc)
        wrong, plans = [], []
        for q in queries:
            res = searcher.search(SearchRequest(path=str(q), top=10))
            wrong.append(round(res.hits[0].score, 2))
            plans.append(res.plan.unmatched)
        right = held_subjects_read(searcher, d, {n: landmarks[n][16:22] for n in landmarks}, uk, range(0, 25, 2), 4)
    finally:
        svc.close()
    print("not held:", wrong, "unmatched:", plans, "held:", right)
    # 16 of the 21 in the 600-photo library (five share 11 details or read a raw cosine of 0.78+)
    assert np.mean([s < 0.5 for s in wrong]) >= 0.65, wrong
    assert sum(plans) >= 14, plans
    assert np.mean([s is not None and s >= 0.5 for s in right]) >= 0.85, right


def test_the_look_alike_test_judges_only_photos_with_details_enough(tmp_path, monkeypatch):
    """The look-alike test (Searcher._verified, `unsure`) lowers a search whose first three results
    share few of the query's details. A query with almost no features (a plain grey photo) shares
    few with anything: it is not judged (before, it read as not held whatever the library held).
    Here every search is unsure (policy.MATCH_RAW_SURE above any cosine; the shipped model): an
    object's view the library does not hold reads as not held, a held object's view does not."""
    from PIL import Image

    from tests.conftest import shared_photos

    monkeypatch.setattr(policy, "MATCH_RAW_SURE", 1.01)
    uk = shared_photos("ukbench", 16)
    plain = tmp_path / "plain.png"
    Image.new("RGB", (640, 480), (128, 128, 128)).save(plain)
    svc, d = shipped_library(tmp_path, uk[:12])  # three objects, four views each
    try:
        searcher = Searcher(svc)
        plan = {name: searcher.search(SearchRequest(path=str(q), top=10)).plan
                for name, q in (("not held", uk[12]), ("held", d / uk[0].name), ("plain", plain))}
    finally:
        svc.close()
    assert plan["not held"].unmatched and not plan["held"].unmatched, plan
    assert not plan["plain"].unmatched, plan["plain"]
