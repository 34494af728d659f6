"""Library service, indexing pipeline and search service, on a tiny random CNN for speed."""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.core.catalog.catalog import Catalog
from PIL import Image
from sqlalchemy import select

from app.core.catalog.models import Image as ImageRow
from app.core.library.service import JobControl
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import catalog_state, index, open_lib, snapshot_matches_catalog, tiny_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lib(tmp_path, library):
    """A library on each backend (SQLite in the data folder; PostgreSQL)."""
    svc = open_lib(tmp_path / "home", library)
    yield svc
    svc.close()


def test_index_search_and_incremental_rerun(lib, photo_dir):
    prog = index(lib, [photo_dir])
    assert prog.phase == "done" and prog.total == 12 and prog.done == 12 and prog.failed == 0
    st = lib.stats()
    assert st["images"] == 12 and st["indexed"] == 12 and st["folders"][0]["indexed"] == 12
    assert lib.snapshot().n_alive == 12
    # search by a library photo: reuses its stored descriptor (no CNN), finds itself first
    q = photo_dir / "scene2" / "img1.jpg"
    res = Searcher(lib).search(SearchRequest(id=7, path=str(q), top=5, qe="off", her="off"))
    assert res.request_id == 7 and not res.used_cnn
    assert res.hits[0].path == str(q.resolve()) and res.hits[0].rank == 1 and res.hits[0].duplicate
    assert res.hits[0].similarity == pytest.approx(1.0, abs=1e-4)
    assert [h.rank for h in res.hits] == [1, 2, 3, 4, 5]
    # the right answers: the two other views of scene 2 come next
    assert {Path(h.path).parent.name for h in res.hits[:3]} == {"scene2"}
    # second run touches nothing
    again = index(lib)
    assert again.total == 0 and again.done == 0
    snapshot_matches_catalog(lib)


def test_scores_follow_the_final_ranking(lib, photo_dir):
    index(lib, [photo_dir])
    for qe, her in [("off", "off"), ("on", "off"), ("off", "on"), ("on", "on")]:
        res = Searcher(lib).search(SearchRequest(path=str(photo_dir / "scene1" / "img1.jpg"), top=12, qe=qe, her=her))
        scores = [h.score for h in res.hits]
        assert scores == sorted(scores, reverse=True), (qe, her, scores)
        assert all(0.0 <= s <= 1.0 for s in scores) and scores[0] == 1.0  # the query's own file
        # the relevance tells the other views of the scene from the rest, whatever the refinement
        mates = [h.score for h in res.hits[1:] if Path(h.path).parent.name == "scene1"]
        others = [h.score for h in res.hits if Path(h.path).parent.name != "scene1"]
        assert mates and min(mates) > max(others), (qe, her, mates, others)
        assert res.plan.her == (her == "on")


def test_touched_file_is_reindexed_and_deleted_file_leaves(lib, photo_dir):
    index(lib, [photo_dir])
    before, _ = catalog_state(lib)
    target = photo_dir / "scene0" / "img0.jpg"
    write_photo(target, 999, size=(100, 75))  # new content
    gone = photo_dir / "scene3" / "img2.jpg"
    gone.unlink()
    prog = index(lib)
    assert prog.total == 1 and prog.removed == 1
    after, _ = catalog_state(lib)
    assert after[str(target.resolve())] != before[str(target.resolve())]
    assert str(gone.resolve()) not in after
    hits = Searcher(lib).search(SearchRequest(path=str(target), top=50)).hits
    assert str(gone.resolve()) not in [h.path for h in hits] and len(hits) == 11
    snapshot_matches_catalog(lib)


def test_moved_file_keeps_its_descriptor_without_cnn(lib, photo_dir):
    index(lib, [photo_dir])
    old = (photo_dir / "scene1" / "img0.jpg").resolve()
    with lib.catalog._read() as s:
        old_id = s.scalar(select(ImageRow.id).where(ImageRow.path == str(old)))
    before, _ = catalog_state(lib)
    new = photo_dir / "moved" / "renamed.jpg"
    new.parent.mkdir()
    shutil.move(old, new)
    calls = []
    ex = lib.extractor()
    real = ex.forward
    ex.forward = lambda ts: calls.append(len(ts)) or real(ts)
    prog = index(lib)
    assert prog.total == 1 and prog.reused == 1 and prog.removed == 0
    assert calls == []  # no CNN pass at all
    with lib.catalog._read() as s:
        assert s.scalar(select(ImageRow.id).where(ImageRow.path == str(new.resolve()))) == old_id
    after, _ = catalog_state(lib)
    assert after[str(new.resolve())] == before[str(old)]
    snapshot_matches_catalog(lib)


def test_cancel_then_resume_equals_uninterrupted(tmp_path, photo_dir, monkeypatch, library):
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)
    ref = open_lib(tmp_path / "ref")
    index(ref, [photo_dir])
    ref_state = catalog_state(ref)
    ref.close()
    lib = open_lib(tmp_path / "cut", library)
    ctl = JobControl()
    seen = []

    def watch(ev):
        if ev.kind == "progress":
            seen.append(ev.data.phase)
            if ev.data.phase == "indexing" and ev.data.done >= 4:
                ctl.cancel()

    lib.subscribe(watch)
    index(lib, [photo_dir], control=ctl)
    lib.unsubscribe(watch)
    assert seen[-1] == "cancelled"
    partial = catalog_state(lib)[0]
    assert 0 < len(partial) < 12
    prog = index(lib)
    assert prog.phase == "done" and prog.total == 12 - len(partial)
    assert catalog_state(lib) == ref_state
    snapshot_matches_catalog(lib)
    lib.close()


def test_pause_blocks_between_batches(lib, photo_dir):
    ctl = JobControl()
    seen = []
    paused = threading.Event()

    def watch(ev):
        if ev.kind == "progress" and ev.data.phase == "indexing":
            seen.append(ev.data.done)
            if ev.data.done > 0 and not paused.is_set():
                ctl.pause()
                paused.set()

    lib.subscribe(watch)
    cmd = lib.index([photo_dir], control=ctl)
    assert paused.wait(30)
    time.sleep(0.6)
    frozen = list(seen)
    time.sleep(0.6)
    assert seen == frozen and not cmd.future.done()  # paused: no progress
    ctl.resume()
    assert cmd.result(60).phase == "done"
    assert ctl.paused_s >= 1.0  # paused time is accounted (rates leave it out)


def test_bad_files_are_recorded_and_skipped(lib, photo_dir):
    bad = photo_dir / "bad"
    bad.mkdir()
    (bad / "empty.jpg").write_bytes(b"")
    (bad / "notimage.png").write_text("hello")
    data = (photo_dir / "scene0" / "img0.jpg").read_bytes()
    (bad / "truncated.jpg").write_bytes(data[:300])
    Image.new("1", (30000, 30000)).save(bad / "bomb.png")
    (bad / ".hidden.jpg").write_bytes(b"")  # hidden: not even scanned
    Image.new("RGB", (1, 1), (3, 4, 5)).save(bad / "dot.png")
    Image.new("RGB", (200, 100), (90, 90, 90)).save(bad / "blank.jpg")
    os.mkfifo(bad / "pipe.jpg")
    prog = index(lib, [photo_dir])
    assert prog.phase == "done" and lib.stats()["indexed"] == 12
    reasons = dict((Path(p).name, r) for p, r in lib.failures())
    assert set(reasons) == {"empty.jpg", "notimage.png", "truncated.jpg", "bomb.png", "dot.png", "blank.jpg", "pipe.jpg"}
    assert prog.failed == 7
    assert "empty" in reasons["empty.jpg"] and "not an image" in reasons["notimage.png"]
    assert "truncated" in reasons["truncated.jpg"] and "too large" in reasons["bomb.png"]
    assert "too small" in reasons["dot.png"] and "blank" in reasons["blank.jpg"] and "FIFO" in reasons["pipe.jpg"]
    assert index(lib).total == 0  # failures are not retried until the file changes
    # a zero vector never enters the search: the 1x1 photo is not a result
    res = Searcher(lib).search(SearchRequest(path=str(photo_dir / "scene0" / "img0.jpg"), top=50))
    assert {Path(h.path).parent.name for h in res.hits} <= {"scene0", "scene1", "scene2", "scene3"}


def test_a_decoder_crash_of_any_type_is_recorded_and_the_run_goes_on(lib, photo_dir, monkeypatch):
    import struct

    from app.core import imageio

    real = imageio.Image.open
    poison = str((photo_dir / "scene1" / "img1.jpg").resolve())

    def flaky_open(fp, *a, **k):
        if getattr(fp, "name", "") == poison:
            raise struct.error("unpack requires a buffer of 4 bytes")
        return real(fp, *a, **k)

    monkeypatch.setattr(imageio.Image, "open", flaky_open)
    prog = index(lib, [photo_dir])
    assert prog.phase == "done" and lib.stats()["indexed"] == 11
    assert dict(lib.failures())[poison].startswith("cannot decode: error: unpack requires")
    monkeypatch.setattr(imageio.Image, "open", real)
    assert index(lib).total == 0  # recorded: later runs do not die on it either


def test_search_while_indexing(lib, photo_dir, tmp_path):
    index(lib, [photo_dir])
    more = tmp_path / "more"
    for i in range(16):
        write_photo(more / f"m{i}.png", 500 + i, size=(110, 80))
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
    index(lib, [more])
    stop.set()
    t.join()
    assert not errors and results and all(n == 5 for n in results)
    assert lib.stats()["indexed"] == 28


def test_box_query_map_and_crop_modes(lib, photo_dir):
    index(lib, [photo_dir])
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
    # the overlay lies over exactly the cells that were aggregated (cells of 8 px at scale 1)
    assert a.weights_box == (8.0, 8.0, 56.0, 48.0)  # centres 12..52 inside x 10..60, 12..44 inside y 10..50
    # the photo the box was drawn on comes first, as in a search of the whole photo (trial 6: #20)
    assert all(r.hits[0].path == os.path.realpath(q) and r.hits[0].duplicate and r.hits[0].score == 1.0 for r in (a, b, c))


def test_a_box_on_a_large_photo_is_described_from_its_own_pixels(tmp_path, monkeypatch):
    """The crop pass of a box sees the photo's own pixels up to policy.BOX_SIDE, not the photo as
    the library describes it (128 px here): more cells of the box (the overlay's grid)."""
    from app.core import policy

    d = tmp_path / "photos"
    for i in range(3):
        write_photo(d / f"p{i}.jpg", i, size=(640, 480))
    lib = open_lib(tmp_path / "home")
    index(lib, [d])
    q = str(d / "p1.jpg")
    box = (160, 120, 480, 360)  # 320 x 240 of the photo's own pixels
    own = Searcher(lib).search(SearchRequest(path=q, box=box, mode="crop"))
    assert own.query_weights.shape == (30, 40)  # 240 / 8 by 320 / 8 cells of 8 px
    monkeypatch.setattr(policy, "BOX_SIDE", 0)
    lib.close()
    lib = open_lib(tmp_path / "home")
    scaled = Searcher(lib).search(SearchRequest(path=q, box=box, mode="crop"))
    assert scaled.query_weights.shape == (6, 8)  # at the library's 128 px: 0.2 of the pixels
    lib.close()


def test_whitening_follows_the_library_size_without_cnn(tmp_path, monkeypatch, library, postgres):
    from app.core import policy

    monkeypatch.setattr(policy, "MIN_WHITEN", 30)
    monkeypatch.setattr(policy, "PHOTOS_PER_DIM", 4)
    monkeypatch.setattr(policy, "MIN_DIM", 4)
    d = tmp_path / "many"
    for i in range(40):
        write_photo(d / f"p{i}.png", i, size=(90, 70))
    lib = open_lib(tmp_path / "h", library)
    index(lib, [d])
    sp = lib.writer.space
    assert sp.white_n == 40 and lib.snapshot().whitening.dim == 8 and lib.snapshot().all_vectors()[1].shape[1] == 8
    snapshot_matches_catalog(lib)
    lib.close()
    monkeypatch.setattr(policy, "MIN_WHITEN", 100)
    tiny = open_lib(tmp_path / "h3", postgres.database() if library else None)  # 40 < 100: stays unwhitened
    index(tiny, [d])
    assert tiny.writer.space.white_n == 0 and tiny.snapshot().whitening.is_identity
    assert tiny.snapshot().all_vectors()[1].shape[1] == 32
    tiny.close()


def test_new_backbone_means_new_space(tmp_path, photo_dir, library):
    lib = open_lib(tmp_path / "h", library)
    index(lib, [photo_dir])
    sid = lib.snapshot().space.id
    lib.close()
    lib2 = open_lib(tmp_path / "h", library, max_side=96)
    # opening with other settings changes nothing: the library's own model answers and is counted
    assert lib2.snapshot().space.id == sid and lib2.snapshot().pending is None and lib2.stats()["indexed"] == 12
    assert "96 px" in lib2.settings_note()
    # indexing with the settings' model (asked for) makes it the library's: the old space answers
    # until the new one is complete
    seen = []
    lib2.subscribe(lambda ev: ev.kind == "progress" and ev.data.phase == "indexing"
                   and seen.append((lib2.snapshot().space.id, getattr(lib2.snapshot().pending, "id", None))))
    prog = index(lib2)
    assert seen and all(s == sid and p not in (None, sid) for s, p in seen)
    assert prog.total == 12  # re-indexed in the new space, nothing mixed
    assert lib2.stats()["indexed"] == 12
    assert lib2.snapshot().space.id != sid and lib2.snapshot().pending is None
    snapshot_matches_catalog(lib2)
    lib2.close()


def test_while_a_new_model_indexes_the_space_searched_last_answers(tmp_path, photo_dir, library):
    """Trial 20: the built-in model, then another one, then back to the built-in; choosing a third
    served the other model's space (ready more recently) in place of the one in use."""
    spaces = {}
    for side in (128, 96, 128):
        lib = open_lib(tmp_path / "h", library, max_side=side)
        index(lib, [photo_dir])
        spaces[side] = lib.snapshot().space.id
        lib.close()
    assert spaces[128] != spaces[96]
    lib = open_lib(tmp_path / "h", library, max_side=128)
    new = lib.run(lib.apply_settings(tiny_settings(max_side=80), reindex=False), timeout=60)
    assert new and lib.snapshot().pending is not None
    assert lib.snapshot().space.id == spaces[128]  # in this window
    lib.close()
    lib = open_lib(tmp_path / "h", library, max_side=80)
    assert lib.snapshot().space.id == spaces[128] and lib.snapshot().pending is not None  # after a restart
    lib.close()
    # a photo added at 128 px, then back to 96 px: that space lacks it, so 128 px answers until
    # the run ends (the real window read "303 photos searchable" of 366)
    lib = open_lib(tmp_path / "h", library, max_side=128)
    write_photo(photo_dir / "scene0" / "added.png", 77)
    index(lib)
    assert lib.run(lib.apply_settings(tiny_settings(max_side=96), reindex=False), timeout=60)
    snap = lib.snapshot()
    assert snap.space.id == spaces[128] and snap.pending.id == spaces[96] and len(snap.all_vectors()[0]) == 13
    index(lib)
    assert lib.snapshot().space.id == spaces[96] and lib.snapshot().pending is None and lib.stats()["indexed"] == 13
    # the same through a space never completed: 96 px gets a photo, 80 px (not ready), then 128 px
    # lacks it: 96 px answers meanwhile
    write_photo(photo_dir / "scene1" / "added.png", 78)
    index(lib)
    for side in (80, 128):
        assert lib.run(lib.apply_settings(tiny_settings(max_side=side), reindex=False), timeout=60)
    snap = lib.snapshot()
    assert snap.space.id == spaces[96] and snap.pending.id == spaces[128] and len(snap.all_vectors()[0]) == 14
    # a run of one folder (a watcher's) does not make it ready while others lack their photos
    index(lib, only=[str(photo_dir / "scene2")])
    assert lib.snapshot().pending.id == spaces[128]
    index(lib)
    assert lib.snapshot().space.id == spaces[128] and lib.snapshot().pending is None
    lib.close()


def test_photos_are_never_modified(lib, photo_dir):
    def snapshot():
        return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in photo_dir.rglob("*") if p.is_file()}

    before = snapshot()
    names = sorted(p.name for p in photo_dir.rglob("*"))
    index(lib, [photo_dir])
    Searcher(lib).search(SearchRequest(path=str(photo_dir / "scene0" / "img0.jpg"), box=(0, 0, 40, 40)))
    lib.run(lib.forget(photo_dir / "scene1"))
    assert snapshot() == before
    assert sorted(p.name for p in photo_dir.rglob("*")) == names  # no file was added to a photo folder
    assert lib.stats()["images"] == 9


def test_a_folder_of_only_bad_files_is_recorded_and_later_photos_still_index(lib, tmp_path, photo_dir):
    bad = tmp_path / "allbad"
    bad.mkdir()
    (bad / "a.jpg").write_bytes(b"")
    (bad / "b.jpg").write_text("nope")
    prog = index(lib, [bad])
    assert prog.phase == "done" and prog.failed == 2 and lib.writer.mu is None
    prog = index(lib, [photo_dir])
    assert prog.failed == 0 and lib.stats()["indexed"] == 12 and lib.writer.mu.shape == (32,)


def test_the_centring_mean_comes_from_a_random_sample_across_folders(tmp_path, monkeypatch, library):
    """Not the first photos in scan order (a burst): the sample reaches every folder."""
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 8)
    for folder, base in (("a_burst", 0), ("b_other", 100), ("c_more", 200)):
        for i in range(12):
            write_photo(tmp_path / "photos" / folder / f"{i:02d}.png", base + (i if base else 0), size=(90, 70))
    lib = open_lib(tmp_path / "h", library)
    sampled = []
    real = lib.writer.set_mu

    def spy(mu, n):
        sampled.append(n)
        return real(mu, n)

    lib.writer.set_mu = spy
    seen_first = []
    ex_forward = None

    def watch(ev):
        nonlocal ex_forward
        if ev.kind == "progress" and ev.data.phase == "calibrating" and ex_forward is None:
            ex = lib.extractor()
            ex_forward = ex.forward
            ex.forward = lambda arrs: seen_first.append(len(arrs)) or ex_forward(arrs)

    lib.subscribe(watch)
    order = []
    from app.core.pipeline import indexer

    real_decode = indexer.decode_file
    monkeypatch.setattr(indexer, "decode_file", lambda info, *a: order.append(Path(info.path).parent.name) or real_decode(info, *a))
    index(lib, [tmp_path / "photos"])
    assert sampled == [8]
    assert set(order[:8]) == {"a_burst", "b_other", "c_more"}  # the calibration photos span the folders
    lib.close()


@pytest.mark.slow
def test_sigkill_mid_batch_resumes_to_the_same_catalog_and_answers(tmp_path, library):
    d = tmp_path / "photos"
    for i in range(60):
        write_photo(d / f"p{i:03d}.png", i, size=(160, 120))
    ref = open_lib(tmp_path / "ref")
    index(ref, [d])
    ref_state = catalog_state(ref)
    queries = [str(d / f"p{i:03d}.png") for i in (3, 30, 59)]
    ref_answers = [[h.path for h in Searcher(ref).search(SearchRequest(path=q, top=10)).hits] for q in queries]
    ref.close()
    home = tmp_path / "home"
    tiny_settings().save(home)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "app", "index", str(d), "--home", str(home), "--json"]
                            + (["--library", library] if library else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    for line in proc.stdout:
        if '"phase": "indexing"' in line and '"done": 0' not in line:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lib = open_lib(home, library)
    partial = lib.stats()["indexed"]
    assert partial < 60
    snapshot_matches_catalog(lib)  # the vectors agree with what was committed, whatever the files said
    prog = index(lib)
    assert prog.phase == "done" and lib.stats()["indexed"] == 60 and lib.stats()["images"] == 60
    assert catalog_state(lib) == ref_state
    answers = [[h.path for h in Searcher(lib).search(SearchRequest(path=q, top=10)).hits] for q in queries]
    assert answers == ref_answers
    snapshot_matches_catalog(lib)
    lib.close()


def test_a_resized_copy_of_the_query_comes_first(lib, tmp_path):
    """The trial: an exact copy of the query photo, resized, ranked #5 behind other views of the
    scene (its descriptor, from fewer pixels, drifts). A copy is the same photo: first, at 1. On
    the tiny test network a tenth-size copy ranked #3 before this."""
    from tests.conftest import shared_photos

    views = shared_photos("ukbench", 40)
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    query = views[20]  # one view of an object; its three other views stay in the library
    for p in views:
        if p != query:
            shutil.copy(p, lib_dir / p.name)
    with Image.open(query) as im:
        im.resize((im.width // 10, im.height // 10), Image.LANCZOS).save(lib_dir / "copy-small.jpg", quality=85)  # 64x48
    index(lib, [lib_dir])
    for qe, her in [("off", "off"), ("on", "on")]:
        res = Searcher(lib).search(SearchRequest(path=str(query), top=10, qe=qe, her=her))
        first = res.hits[0]
        assert Path(first.path).name == "copy-small.jpg" and first.copy and first.score == 1.0, \
            (qe, her, [(Path(h.path).name, round(h.similarity, 3)) for h in res.hits[:5]])
        assert not any(h.copy for h in res.hits[1:])  # the other views are not copies
    boxed = Searcher(lib).search(SearchRequest(path=str(query), box=(100, 100, 400, 300), top=10))
    assert not any(h.copy for h in boxed.hits)  # a region has no copies


def test_the_overlay_of_a_box_warms_the_object_not_the_plain_sky_around_it(lib, tmp_path):
    """The trial: inside a box around a building the overlay painted the building "repeated" and
    the sky corners "distinctive" (it showed HeW's weights, nearly flat and high on plain sky).
    It shows each cell's share of the description now: the object warm, the sky around it cool."""
    rng = np.random.default_rng(3)
    sky = np.empty((480, 640, 3), np.float64)
    sky[:] = (150, 190, 235)
    sky += rng.normal(0, 2, sky.shape)  # a plain sky, as a camera gives it
    obj = np.asarray(Image.open(write_photo(tmp_path / "obj.png", 5, size=(200, 160))), np.float64)
    sky[160:320, 220:420] = obj
    photo = tmp_path / "lib" / "tower.jpg"
    photo.parent.mkdir()
    Image.fromarray(np.clip(sky, 0, 255).astype(np.uint8)).save(photo, quality=95)
    for i in range(6):
        write_photo(tmp_path / "lib" / f"other{i}.png", 40 + i, size=(320, 240))
    index(lib, [tmp_path / "lib"])
    for mode in ("map", "crop", "hybrid"):
        res = Searcher(lib).search(SearchRequest(path=str(photo), box=(120, 60, 520, 420), mode=mode, top=5))
        g, (x1, y1, x2, y2) = res.query_weights, res.weights_box
        h, w = g.shape
        cx = x1 + (np.arange(w) + 0.5) * (x2 - x1) / w  # cell centres, photo pixels
        cy = y1 + (np.arange(h) + 0.5) * (y2 - y1) / h
        inside = ((cy[:, None] > 175) & (cy[:, None] < 305)) & ((cx[None] > 235) & (cx[None] < 405))
        outside = ((cy[:, None] < 145) | (cy[:, None] > 335)) | ((cx[None] < 205) | (cx[None] > 435))
        assert inside.any() and outside.any()
        assert g[inside].mean() > 1.5 * g[outside].mean(), (mode, g[inside].mean(), g[outside].mean())


def test_every_photo_is_decoded_once_in_a_first_run(lib, tmp_path, monkeypatch):
    """The calibration sample's decoding ran ahead past the sample; what it had decoded was thrown
    away and decoded again (the first run 5-7 % slower than 33dfabb: benchmarks/index_throughput.py)."""
    import app.core.pipeline.indexer as indexer

    monkeypatch.setattr(indexer, "CALIBRATION_IMAGES", 4)
    decoded = []
    real = indexer.decode_file

    def counted(info, *a, **kw):  # the real decoder, counted
        decoded.append(info.path)
        return real(info, *a, **kw)

    monkeypatch.setattr(indexer, "decode_file", counted)
    for i in range(40):
        write_photo(tmp_path / "many" / f"p{i:02d}.png", i, size=(160, 120))
    prog = index(lib, [tmp_path / "many"])
    assert prog.done == 40 and lib.stats()["indexed"] == 40
    twice = sorted(p for p in set(decoded) if decoded.count(p) > 1)
    assert len(decoded) == 40 and not twice, (len(decoded), twice[:5])


def test_the_years_that_hold_photos(lib, tmp_path):
    """The date filter offers only these (it offered every year between the first and the last)."""
    d = tmp_path / "lib"
    for i, year in enumerate((2005, 2012, 2012)):
        p = write_photo(d / f"p{i}.png", i, size=(120, 90))
        t = time.mktime((year, 6, 1, 12, 0, 0, 0, 0, -1))
        os.utime(p, (t, t))
    index(lib, [d])
    assert lib.catalog.taken_years() == [2005, 2012]


def test_a_parent_folder_added_takes_in_the_library_folders_inside_it(tmp_path, library):
    """Trial 6: adding the parent of library folders listed it with "0 photos" above them, and
    removing one of them then forgot photos the parent still held. The folders inside become part
    of the parent, their photos kept as described; a subfolder added again adds nothing."""
    root = tmp_path / "photos"
    for sub, base in (("a", 0), ("b", 20)):
        for i in range(4):
            write_photo(root / sub / f"p{i}.png", base + i, size=(96, 72))
    svc = open_lib(tmp_path / "h", library)
    try:
        index(svc, [root / "a", root / "b"])
        before = catalog_state(svc)
        index(svc, [root])
        stats = svc.stats()
        assert [(f["path"], f["indexed"]) for f in stats["folders"]] == [(str(root.resolve()), 8)]
        assert catalog_state(svc) == before  # the same photos, not described again
        index(svc, [root / "a"])  # inside a library folder: nothing added
        assert len(svc.stats()["folders"]) == 1
        svc.run(svc.forget(root / "b"))  # a subfolder forgotten: only its photos go
        assert svc.stats()["indexed"] == 4
    finally:
        svc.close()


def test_a_library_with_folders_inside_another_is_mended_when_it_opens(tmp_path, library):
    """Libraries where a parent was added over its folders before this was handled ("photos"
    listed above "objects", "paris"...): at the next indexing run (the window's rescan at start)
    the inner folders are taken in, their photos kept as described."""
    from app.core.catalog.models import Folder

    root = tmp_path / "photos"
    for sub, base in (("a", 0), ("a/deeper", 10), ("b", 20)):
        for i in range(3):
            write_photo(root / sub / f"p{i}.png", base + i, size=(96, 72))
    home = tmp_path / "h"
    svc = open_lib(home, library)
    index(svc, [root / "a" / "deeper", root / "a", root / "b"])
    before = catalog_state(svc)
    svc.close()
    old = Catalog.open(library or home / "catalog.sqlite")
    old._write(lambda s: s.add(Folder(path=str(root.resolve()), added_at=0.0, state="ok")))  # as it was
    old.close()
    svc = open_lib(home, library)
    index(svc)  # the window's rescan at start; opening alone writes nothing
    try:
        stats = svc.stats()
        assert [(f["path"], f["indexed"]) for f in stats["folders"]] == [(str(root.resolve()), 9)]
        assert catalog_state(svc) == before
    finally:
        svc.close()


def test_the_time_left_follows_a_pace_that_falls():
    """Trial 20: the time left was the run's average pace, so when photos got slower (large RAWs
    after small JPEGs) it promised an end that kept moving away."""
    from collections import deque

    from app.core.pipeline.indexer import seconds_left

    paces = deque()
    for t in range(1, 61):  # 10 photos/s for a minute
        paces.append((float(t), 10 * t))
        left = seconds_left(paces, 1600)
    assert abs(left - 1000 / 10) < 1e-6
    for t in range(61, 121):  # then 2 photos/s: the last minute's pace
        paces.append((float(t), 600 + 2 * (t - 60)))
        left = seconds_left(paces, 1600)
    assert abs(left - (1600 - 720) / 2) < 1e-6 and len(paces) <= 62
    for t in range(121, 181):  # faster again: never above the run's whole pace
        paces.append((float(t), 720 + 20 * (t - 120)))
        left = seconds_left(paces, 3000)
    assert abs(left - (3000 - 1920) / (1920 / 180)) < 1e-6
