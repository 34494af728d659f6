"""Reduced precision, each its own descriptor space: "fastest" (bf16 on a CPU that has it) and
"int8" (a model quantised by NNCF on the library's own photos, stored with the library; issue 21)."""
import hashlib

import numpy as np
import pytest
from sqlalchemy import update

from app.core.catalog.models import Space
from app.core.errors import HeatSearchError
from app.core.features.engine import EngineChoice, cpu_has_bf16, create_engine, precision_of
from app.core.features.extractor import Extractor
from app.core.features.registry import load_backbone
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import shared_photos, write_photo
from tests.core.helpers import catalog_state, index, open_lib


@pytest.fixture
def photos(tmp_path):
    d = tmp_path / "photos"
    for i in range(24):
        write_photo(d / f"p{i:02d}.png", 500 + i, size=(160, 120))
    return d


def cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU has no bf16 (AVX512-BF16 or AMX)")
def test_reduced_precision_runs_bf16_where_the_cpu_has_it(models_cache):
    """On a bf16 CPU "fastest" is OpenVINO in bf16, close to exact on real photos. (The check of a
    loaded model once refused bf16's own rounding, so it fell back to PyTorch in float32, and the
    library then refused to search: "the engine runs at f32, the vectors were made at bf16".)"""
    bb = load_backbone("efficientnet-lite2")
    choice = EngineChoice("auto", "cpu", True)
    assert precision_of(choice) == "bf16"
    fast = Extractor(bb, create_engine(bb, choice, models_cache, log=lambda m: None), 512)
    exact = Extractor(bb, create_engine(bb, EngineChoice("openvino", "cpu"), models_cache, log=lambda m: None), 512)
    assert (fast.engine.name, fast.engine.precision) == ("openvino", "bf16")
    for p in shared_photos("ukbench", 2):
        a = exact.feature_maps([exact.prepare_path(p)])[0].features
        b = fast.feature_maps([fast.prepare_path(p)])[0].features
        assert not np.array_equal(a, b)  # really bf16
        assert cosine(a, b) > 0.99


def test_an_int8_library_tunes_its_own_model_once_and_keeps_it(tmp_path, photos, library):
    """precision "int8": the library's first run quantises the model on
    its photos, stores it in the catalog under its SHA-256, and describes every photo with it;
    reopened, it is read back (not tuned again) and searches find each photo first. Both backends
    (on PostgreSQL every desktop that searches reads the model from there)."""
    lines = []
    exact = open_lib(tmp_path / "exact")
    index(exact, [photos])
    want, _ = catalog_state(exact)
    exact.close()

    lib = open_lib(tmp_path / "h", library, precision="int8")
    lib.subscribe(lambda ev: ev.kind == "log" and lines.append(str(ev.data)))
    prog = index(lib, [photos])
    assert prog.phase == "done" and prog.done == 24 and prog.failed == 0
    sp = lib.snapshot().space
    assert sp.precision == "int8" and sp.key.endswith("|int8")
    blob = lib.catalog.space_model(sp.id)
    assert blob and hashlib.sha256(blob).hexdigest() == sp.model_digest
    assert b"FakeQuantize" in blob or b"fake_quantize" in blob.lower()  # a quantised graph, not the f32 one
    assert lib.extractor().engine.precision == "int8"
    assert sum("tuning the 8-bit model on 24 photos" in m for m in lines) == 1
    got, failed = catalog_state(lib)
    assert not failed and set(got) == set(want)
    close = [cosine(np.frombuffer(got[p], np.float32), np.frombuffer(want[p], np.float32)) for p in want]
    assert all(c < 0.99999 for c in close)  # int8's own vectors, not the exact ones relabelled
    assert min(close) > 0.9
    digest = sp.model_digest
    lib.close()

    again = open_lib(tmp_path / "other-desktop", library, precision="int8") if library else \
        open_lib(tmp_path / "h", precision="int8")
    lines.clear()
    again.subscribe(lambda ev: ev.kind == "log" and lines.append(str(ev.data)))
    assert index(again, [photos]).total == 0
    assert again.snapshot().space.model_digest == digest
    s = Searcher(again)
    for name in ("p03.png", "p17.png"):
        res = s.search(SearchRequest(path=str(photos / name), top=3, qe="off", her="off"))
        assert res.hits[0].path == str(photos / name) and res.hits[0].similarity > 0.999
    assert not any("tuning" in m for m in lines)
    again.close()


def test_a_damaged_int8_model_is_never_run(tmp_path, photos):
    """A stored model whose bytes no longer match their SHA-256 gives one line, never vectors."""
    lib = open_lib(tmp_path / "h", precision="int8")
    index(lib, [photos])
    sid = lib.snapshot().space.id
    blob = bytearray(lib.catalog.space_model(sid))
    blob[len(blob) // 2] ^= 0xFF
    with lib.catalog.engine.begin() as conn:
        conn.execute(update(Space).where(Space.id == sid).values(model=bytes(blob)))
    lib.close()
    lib = open_lib(tmp_path / "h", precision="int8")
    outside = write_photo(tmp_path / "query.png", 900, size=(160, 120))  # not in the library: the CNN must run
    with pytest.raises(HeatSearchError, match="8-bit model does not match its checksum") as e:
        Searcher(lib).search(SearchRequest(path=str(outside), top=3))
    assert "\n" not in str(e.value)
    write_photo(photos / "new.png", 901, size=(160, 120))
    with pytest.raises(HeatSearchError, match="8-bit model does not match its checksum"):
        index(lib)
    assert len(catalog_state(lib)[0]) == 24  # the new photo got no vector
    lib.close()


def test_ray_workers_run_the_library_int8_model(tmp_path, photos, ray_cluster, monkeypatch):
    """A Ray run of an int8 library: the workers get the library's own model (they have none), so
    their vectors are the ones this machine makes with it."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 8)  # most photos go to the cluster
    here = open_lib(tmp_path / "here", precision="int8")
    index(here, [photos])
    want = catalog_state(here)
    blob = here.catalog.space_model(here.snapshot().space.id)
    here.close()
    lib = open_lib(tmp_path / "h", precision="int8")
    prog = lib.run(lib.index([photos], ray="auto", workers=2), timeout=300)
    assert prog.phase == "done" and prog.done == 24 and prog.failed == 0
    assert lib.catalog.space_model(lib.snapshot().space.id) == blob  # the same photos tune the same model
    got = catalog_state(lib)
    assert set(got[0]) == set(want[0])
    for p, raw in want[0].items():
        assert cosine(np.frombuffer(got[0][p], np.float32), np.frombuffer(raw, np.float32)) > 0.9999
    lib.close()


def test_a_library_a_gpu_made_in_fp16_still_searches(tmp_path, photos):
    """"fastest" on a GPU was fp16 until it was dropped (its first input of each size cost seconds
    on an H100); a library made so has an f16 space. The float32 engine now serves it (within
    4e-5 in cosine) instead of refusing every search that runs the model ("the engine runs at f32,
    the library's vectors were made at f16"), while the library re-indexes."""
    lib = open_lib(tmp_path / "h", precision="fastest")
    index(lib, [photos])
    sid = lib.snapshot().space.id
    with lib.catalog.engine.begin() as conn:
        conn.execute(update(Space).where(Space.id == sid).values(precision="f16"))
    lib.close()
    lib = open_lib(tmp_path / "h", precision="fastest")
    try:
        outside = write_photo(tmp_path / "query.png", 900, size=(160, 120))  # not in the library: the CNN runs
        hits = Searcher(lib).search(SearchRequest(path=str(outside), top=3)).hits
        assert len(hits) == 3
        assert Searcher(lib).search(SearchRequest(path=str(photos / "p05.png"), top=1)).hits[0].path.endswith("p05.png")
    finally:
        lib.close()
