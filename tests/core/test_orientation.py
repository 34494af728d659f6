"""Photos stored sideways (pixels turned, no orientation tag): a whole-photo query is searched in
the turn that finds its subject (policy.TURN_QUERIES), so a turned query finds what the upright
one does, and an upright query finds library photos stored turned."""
import os

import pytest
from PIL import Image

from app.core.pipeline.search import Searcher, SearchRequest
from tests.conftest import SHARED
from tests.core.helpers import index, open_lib

LANDMARKS = ("louvre", "defense", "eiffel")
QUERIES = ("paris_louvre_000015.jpg", "paris_eiffel_000004.jpg", "paris_defense_000005.jpg")


def landmark_library(tmp_path, turned=()):
    """A library of the Paris photos of three landmarks, the QUERIES left out; the photos of the
    landmarks or with the file names in `turned` written turned 90 degrees (JPEG, no tag), as a
    scanner or an old camera leaves them."""
    from app.core.config import DEFAULT_MAX_SIDE
    from app.core.features.registry import DEFAULT_BACKBONE

    src = SHARED / "data" / "paris250" / "jpg"
    if not src.is_dir():
        pytest.skip(f"shared photos not found in {src}")
    d = tmp_path / "paris"
    d.mkdir()
    for p in sorted(src.glob("paris_*.jpg")):
        if p.name.split("_")[1] not in LANDMARKS or p.name in QUERIES:
            continue
        if p.name.split("_")[1] in turned or p.name in turned:
            with Image.open(p) as im:
                im.convert("RGB").rotate(90, expand=True).save(d / p.name, quality=95)
        else:
            (d / p.name).write_bytes(p.read_bytes())
    svc = open_lib(tmp_path / "h", backbone=DEFAULT_BACKBONE, max_side=DEFAULT_MAX_SIDE, batch_size=8)
    index(svc, [d])
    return svc, src


def same_landmark(res, name: str) -> float:
    """The share of the first 10 results that show the landmark of the photo `name`."""
    want = name.split("_")[1]
    return sum(f"_{want}_" in h.path for h in res.hits[:10]) / 10


@pytest.mark.slow
def test_a_photo_turned_sideways_finds_its_landmark_as_the_upright_photo_does(tmp_path):
    """A Louvre photo whose pixels are turned 90 degrees read every other photo at 0.02: searched as
    it is, the turned photo's description matches nothing. Pasted turned (pixels, no file), each
    query finds its landmark as the upright photo does."""
    svc, src = landmark_library(tmp_path)
    s = Searcher(svc)
    for name in QUERIES:
        with Image.open(src / name) as im:
            upright = im.convert("RGB")
        want = same_landmark(s.search(SearchRequest(image=upright, top=20)), name)
        for deg in (90, 270):
            got = same_landmark(s.search(SearchRequest(image=upright.rotate(deg, expand=True), top=20)), name)
            assert got >= 0.8 * want and got >= 0.7, (name, deg, got, want)
    svc.close()


@pytest.mark.slow
def test_library_photos_stored_sideways_are_found_by_an_upright_photo(tmp_path):
    """Every Louvre photo of the library stored turned 90 degrees: an upright Louvre photo from
    outside the library still finds them first."""
    svc, src = landmark_library(tmp_path, turned=("louvre",))
    res = Searcher(svc).search(SearchRequest(path=str(src / QUERIES[0]), top=20))
    svc.close()
    assert same_landmark(res, QUERIES[0]) >= 0.8, [h.path for h in res.hits[:10]]


@pytest.mark.slow
def test_a_few_library_photos_stored_sideways_are_found_by_an_upright_photo(tmp_path):
    """A third of the library's Louvre photos stored turned among upright ones: an upright Louvre
    photo found 0-3 of those 15 in its first 50 results, none at 0.5 or more, as its upright
    Louvre photos came first. The photos its closest other turn finds join its results: the
    turned ones now follow the upright ones."""
    src = SHARED / "data" / "paris250" / "jpg"
    louvre = sorted(p.name for p in src.glob("paris_louvre_*.jpg") if p.name not in QUERIES)
    sideways = set(louvre[1::3])
    svc, src = landmark_library(tmp_path, turned=sideways)
    res = Searcher(svc).search(SearchRequest(path=str(src / QUERIES[0]), top=50))
    svc.close()
    found = [h for h in res.hits if os.path.basename(h.path) in sideways]
    assert same_landmark(res, QUERIES[0]) == 1.0
    assert len(found) >= 0.8 * len(sideways) and sum(h.score >= 0.5 for h in found) >= len(sideways) // 2, \
        (len(sideways), [(os.path.basename(h.path), h.rank, round(h.score, 2)) for h in found])
