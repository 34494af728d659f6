"""Library, indexing pipeline and search service (issue 3), on a tiny random CNN for speed."""
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import select

from app.core.catalog.models import Descriptor, Image as ImageRow
from app.core.config import Settings
from app.core.library import Library
from app.core.pipeline.indexer import JobControl, index_library, index_paths
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo

ROOT = Path(__file__).resolve().parents[2]


def tiny_settings(**kw):
    return Settings(**{"backbone": "tiny-random", "max_side": 128, "batch_size": 4, **kw})


def run(gen):
    last = None
    for last in gen:
        pass
    return last


def catalog_state(lib):
    """path -> raw descriptor bytes of every indexed image, plus the failed paths."""
    with lib.db() as s:
        rows = s.execute(select(ImageRow.path, Descriptor.raw).join(Descriptor, Descriptor.image_id == ImageRow.id)).all()
        failed = set(s.scalars(select(ImageRow.path).where(ImageRow.status == "failed")))
    return {p: r for p, r in rows}, failed


@pytest.fixture
def lib(tmp_path):
    lib = Library(tmp_path / "home", tiny_settings())
    yield lib
    lib.close()


def test_index_search_and_incremental_rerun(lib, photo_dir):
    prog = run(index_paths(lib, [photo_dir]))
    assert prog.phase == "done" and prog.total == 12 and prog.done == 12 and prog.failed == 0
    st = lib.status()
    assert st["images"] == 12 and st["indexed"] == 12
    assert len(lib.ann()) == 12
    # search by a library photo: reuses its stored descriptor (no CNN), finds itself first
    q = photo_dir / "scene2" / "img1.jpg"
    res = Searcher(lib).search(SearchRequest(id=7, path=str(q), top=5))
    assert res.request_id == 7 and not res.used_cnn
    assert res.hits[0].path == str(q.resolve()) and res.hits[0].rank == 1
    assert res.hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.rank for h in res.hits] == [1, 2, 3, 4, 5]
    # second run touches nothing
    again = run(index_library(lib))
    assert again.total == 0 and again.done == 0


def test_touched_file_is_reindexed_and_deleted_file_leaves(lib, photo_dir):
    run(index_paths(lib, [photo_dir]))
    before, _ = catalog_state(lib)
    target = photo_dir / "scene0" / "img0.jpg"
    write_photo(target, 999, size=(100, 75))  # new content
    gone = photo_dir / "scene3" / "img2.jpg"
    gone.unlink()
    prog = run(index_library(lib))
    assert prog.total == 1 and prog.removed == 1
    after, _ = catalog_state(lib)
    assert after[str(target.resolve())] != before[str(target.resolve())]
    assert str(gone.resolve()) not in after
    hits = Searcher(lib).search(SearchRequest(path=str(target), top=50)).hits
    assert str(gone.resolve()) not in [h.path for h in hits] and len(hits) == 11


def test_moved_file_keeps_its_descriptor_without_cnn(lib, photo_dir):
    run(index_paths(lib, [photo_dir]))
    old = (photo_dir / "scene1" / "img0.jpg").resolve()
    with lib.db() as s:
        old_id = s.scalar(select(ImageRow.id).where(ImageRow.path == str(old)))
    before, _ = catalog_state(lib)
    new = photo_dir / "moved" / "renamed.jpg"
    new.parent.mkdir()
    shutil.move(old, new)
    calls = []
    ex = lib.extractor()
    real = ex.forward
    ex.forward = lambda ts: calls.append(len(ts)) or real(ts)
    prog = run(index_library(lib))
    assert prog.total == 1 and prog.reused == 1 and prog.removed == 0
    assert calls == []  # no CNN pass at all
    with lib.db() as s:
        assert s.scalar(select(ImageRow.id).where(ImageRow.path == str(new.resolve()))) == old_id
    after, _ = catalog_state(lib)
    assert after[str(new.resolve())] == before[str(old)]


def test_cancel_then_resume_equals_uninterrupted(tmp_path, photo_dir, monkeypatch):
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    ref = Library(tmp_path / "ref", tiny_settings())
    run(index_paths(ref, [photo_dir]))
    ref_state = catalog_state(ref)
    lib = Library(tmp_path / "cut", tiny_settings())
    ctl = JobControl()
    seen = []
    for prog in index_paths(lib, [photo_dir], ctl):
        seen.append(prog.phase)
        if prog.phase == "indexing" and prog.done >= 4:
            ctl.cancel()
    assert seen[-1] == "cancelled"
    partial = catalog_state(lib)[0]
    assert 0 < len(partial) < 12
    prog = run(index_library(lib))
    assert prog.phase == "done" and prog.total == 12 - len(partial)
    assert catalog_state(lib) == ref_state
    ref.close()
    lib.close()


def test_pause_blocks_between_batches(lib, photo_dir):
    ctl = JobControl()
    gen = index_paths(lib, [photo_dir], ctl)
    for prog in gen:
        if prog.phase == "indexing" and prog.done > 0:
            break
    ctl.pause()
    got = []
    t = threading.Thread(target=lambda: got.append(next(gen)))
    t.start()
    t.join(0.5)
    assert t.is_alive() and not got  # paused: no progress
    ctl.resume()
    t.join(10)
    assert got
    run(gen)


def test_bad_files_are_recorded_and_skipped(lib, photo_dir):
    bad = photo_dir / "bad"
    bad.mkdir()
    (bad / "empty.jpg").write_bytes(b"")
    (bad / "notimage.png").write_text("hello")
    data = (photo_dir / "scene0" / "img0.jpg").read_bytes()
    (bad / "truncated.jpg").write_bytes(data[:300])
    Image.new("1", (30000, 30000)).save(bad / "bomb.png")
    (bad / ".hidden.jpg").write_bytes(b"")  # hidden: not even scanned
    prog = run(index_paths(lib, [photo_dir]))
    assert prog.phase == "done" and prog.failed == 4 and lib.status()["indexed"] == 12
    reasons = dict((Path(p).name, r) for p, r in lib.failures())
    assert set(reasons) == {"empty.jpg", "notimage.png", "truncated.jpg", "bomb.png"}
    assert "empty" in reasons["empty.jpg"] and "not an image" in reasons["notimage.png"]
    assert "truncated" in reasons["truncated.jpg"] and "too large" in reasons["bomb.png"]
    assert run(index_library(lib)).total == 0  # failures are not retried until the file changes


def test_search_while_indexing(lib, photo_dir, tmp_path):
    run(index_paths(lib, [photo_dir]))
    more = tmp_path / "more"
    for i in range(16):
        write_photo(more / f"m{i}.png", 500 + i, size=(110, 80))
    lib.add_folder(more)
    searcher = Searcher(lib)
    results, errors = [], []
    stop = threading.Event()

    def searching():
        while not stop.is_set():
            try:
                results.append(len(searcher.search(SearchRequest(path=str(photo_dir / "scene0" / "img1.jpg"), top=5)).hits))
            except Exception as e:  # noqa: BLE001 - the test reports it
                errors.append(e)

    t = threading.Thread(target=searching)
    t.start()
    run(index_library(lib))
    stop.set()
    t.join()
    assert not errors and results and all(n == 5 for n in results)
    assert lib.status()["indexed"] == 28


def test_box_query_map_and_crop_modes(lib, photo_dir):
    run(index_paths(lib, [photo_dir]))
    s = Searcher(lib)
    q = str(photo_dir / "scene1" / "img2.jpg")
    box = (10, 10, 60, 50)
    a = s.search(SearchRequest(path=q, box=box, mode="map"))
    assert a.used_cnn  # first time: full-image map computed
    b = s.search(SearchRequest(path=q, box=(20, 5, 70, 45), mode="map"))
    assert not b.used_cnn  # moved box: answered from the cached map
    c = s.search(SearchRequest(path=q, box=box, mode="crop"))
    assert c.used_cnn and c.hits and a.hits
    assert a.query_weights.shape != b.query_weights.shape or not np.allclose(a.query_weights, b.query_weights)


def test_index_mismatch_is_rebuilt(tmp_path, photo_dir):
    lib = Library(tmp_path / "h", tiny_settings())
    run(index_paths(lib, [photo_dir]))
    lib.close()
    for f in (tmp_path / "h").glob("index-*.hnsw"):
        f.write_bytes(b"garbage")
    lib2 = Library(tmp_path / "h", tiny_settings())
    assert len(lib2.ann()) == 12
    assert Searcher(lib2).search(SearchRequest(path=str(photo_dir / "scene0" / "img0.jpg"))).hits
    lib2.close()


def test_whitening_is_refit_without_cnn(tmp_path):
    d = tmp_path / "many"
    for i in range(40):
        write_photo(d / f"p{i}.png", i, size=(90, 70))
    lib = Library(tmp_path / "h", tiny_settings(dim=8))
    run(index_paths(lib, [d]))
    sp = lib.space()
    assert sp.white_n == 40 and lib.whitening().dim == 8 and lib.ann().dim == 8
    small = Library(tmp_path / "h2", tiny_settings(dim=16))  # 40 < 4 * 16: stays unwhitened
    run(index_paths(small, [d]))
    assert small.space().white_n == 0 and small.whitening().is_identity and small.ann().dim == 32
    small.close()
    lib.close()


def test_new_backbone_means_new_space(tmp_path, photo_dir):
    lib = Library(tmp_path / "h", tiny_settings())
    run(index_paths(lib, [photo_dir]))
    sid = lib.space().id
    lib.close()
    lib2 = Library(tmp_path / "h", tiny_settings(max_side=96))
    assert lib2.space().id != sid and lib2.status()["indexed"] == 0
    prog = run(index_library(lib2))
    assert prog.total == 12  # re-indexed in the new space, nothing mixed
    assert lib2.status()["indexed"] == 12 and lib2.ann().ids() == lib2.indexed_ids()
    lib2.close()


def test_photos_are_never_modified(lib, photo_dir):
    def snapshot():
        return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in photo_dir.rglob("*") if p.is_file()}

    before = snapshot()
    run(index_paths(lib, [photo_dir]))
    Searcher(lib).search(SearchRequest(path=str(photo_dir / "scene0" / "img0.jpg"), box=(0, 0, 40, 40)))
    lib.forget(photo_dir / "scene1")
    assert snapshot() == before
    assert lib.status()["images"] == 9


@pytest.mark.slow
def test_sigkill_mid_batch_resumes_cleanly(tmp_path):
    d = tmp_path / "photos"
    for i in range(60):
        write_photo(d / f"p{i:03d}.png", i, size=(160, 120))
    home = tmp_path / "home"
    Settings(backbone="tiny-random", max_side=128, batch_size=4).save(home)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "app", "index", str(d), "--home", str(home), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    for line in proc.stdout:
        if '"phase": "indexing"' in line and '"done": 0' not in line:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lib = Library(home)
    partial = lib.status()["indexed"]
    assert partial < 60
    prog = run(index_library(lib))
    assert prog.phase == "done" and lib.status()["indexed"] == 60 and lib.status()["images"] == 60
    assert lib.ann().ids() == lib.indexed_ids()
    lib.close()


def test_a_folder_of_only_bad_files_is_recorded_and_later_photos_still_index(lib, tmp_path, photo_dir):
    bad = tmp_path / "allbad"
    bad.mkdir()
    (bad / "a.jpg").write_bytes(b"")
    (bad / "b.jpg").write_text("nope")
    prog = run(index_paths(lib, [bad]))
    assert prog.phase == "done" and prog.failed == 2 and lib.mu() is None
    prog = run(index_paths(lib, [photo_dir]))
    assert prog.failed == 0 and lib.status()["indexed"] == 12 and lib.mu().shape == (32,)
