"""Describing photos on a real (local) Ray cluster: the same records as on one machine, a worker
killed mid-batch loses nothing, photos mounted elsewhere on the workers (issue 17)."""
import os
import signal
from pathlib import Path

import psutil
import pytest

from app.core.pipeline.distributed import map_path, parse_path_map
from tests.conftest import write_photo
from tests.core.helpers import catalog_state, index, open_lib, snapshot_matches_catalog


@pytest.fixture
def photos(tmp_path):
    d = tmp_path / "photos"
    for i in range(60):
        write_photo(d / ("a" if i % 2 else "b") / f"p{i:02d}.png", i, size=(160, 120))
    return d


@pytest.fixture
def few_calibration(monkeypatch):
    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 8)  # most photos go to the cluster


def reference(tmp_path, photos):
    ref = open_lib(tmp_path / "ref")
    index(ref, [photos])
    state = catalog_state(ref)
    ref.close()
    return state


def test_ray_workers_write_the_records_one_machine_writes(tmp_path, photos, few_calibration, ray_cluster, library):
    """The same catalog, byte for byte, whether the photos were described here or by Ray actors,
    into either backend; the progress says how many workers ran."""
    want = reference(tmp_path, photos)
    lib = open_lib(tmp_path / "h", library)
    progress = []
    lib.subscribe(lambda ev: ev.kind == "progress" and progress.append(ev.data))
    prog = lib.run(lib.index([photos], ray="auto", workers=2), timeout=300)
    assert prog.phase == "done" and prog.done == 60 and prog.failed == 0
    assert max(p.workers for p in progress) == 2
    assert catalog_state(lib) == want
    snapshot_matches_catalog(lib)
    assert index(lib, ray="auto").total == 0  # a second run has nothing to do
    lib.close()


def _actors():
    return [p for p in psutil.process_iter(["cmdline"]) if any("RecordMaker" in c for c in (p.info["cmdline"] or []))]


@pytest.mark.slow
def test_a_worker_killed_mid_batch_loses_nothing(tmp_path, few_calibration, ray_cluster):
    """SIGKILL of a Ray actor while it describes a batch: Ray restarts it and retries the batch;
    the catalog ends exactly as a run that was not disturbed (nothing lost, nothing twice)."""
    d = tmp_path / "big"
    for i in range(90):
        write_photo(d / f"p{i:02d}.png", 300 + i, size=(1400, 1000))  # slow enough to kill one in the act
    want = reference(tmp_path, d)
    lib = open_lib(tmp_path / "h")
    killed = []

    def watch(ev):
        if ev.kind == "progress" and ev.data.phase == "indexing" and ev.data.done >= 16 and not killed:
            victims = _actors()
            if victims:
                os.kill(victims[0].pid, signal.SIGKILL)
                killed.append(victims[0].pid)

    lib.subscribe(watch)
    prog = lib.run(lib.index([d], ray="auto", workers=2), timeout=600)
    assert killed, "no Ray actor was found to kill"
    assert prog.phase == "done" and prog.done == 90 and prog.failed == 0
    assert catalog_state(lib) == want
    assert lib.stats()["images"] == 90
    snapshot_matches_catalog(lib)
    lib.close()


def test_workers_find_the_photos_where_they_mount_them(tmp_path, few_calibration, ray_cluster, photos):
    """--path-map LOCAL=REMOTE: the workers read REMOTE/... and the catalog keeps the driver's
    paths. The "other machine's" copy has the same pixels in other bytes (PNG re-compressed), so
    the digests the catalog records say which copy each photo was read from."""
    import hashlib

    from PIL import Image

    remote = tmp_path / "mnt" / "photos"
    for p in photos.rglob("*.png"):
        (remote / p.relative_to(photos)).parent.mkdir(parents=True, exist_ok=True)
        Image.open(p).save(remote / p.relative_to(photos), compress_level=1)
    pm = parse_path_map([f"{photos}={remote}"])
    assert map_path(str(photos / "a" / "p01.png"), pm) == f"{remote}/a/p01.png"
    assert map_path(str(photos) + "x/p.png", pm) == str(photos) + "x/p.png"  # by whole components
    lib = open_lib(tmp_path / "h")
    prog = lib.run(lib.index([photos], ray="auto", path_map=pm), timeout=300)
    assert prog.phase == "done" and prog.done == 60 and prog.failed == 0
    rows = lib.catalog.duplicate_rows()
    digests = {r.path: r.digest for r in rows.values()}
    assert len(digests) == 60 and all(p.startswith(str(photos)) for p in digests)  # the driver's paths

    def sha1(p):
        return hashlib.sha1(Path(p).read_bytes()).hexdigest()

    from_remote = [p for p, d in digests.items() if d == sha1(map_path(p, pm)) and d != sha1(p)]
    assert len(from_remote) == 60 - 8  # all but the calibration sample (described by the driver)
    lib.close()
    with pytest.raises(Exception, match="LOCAL=REMOTE"):
        parse_path_map(["nonsense"])


def test_a_path_map_that_misses_photos_says_so_and_fails_the_command(tmp_path, few_calibration, ray_cluster, photos,
                                                                      capsys):
    """A --path-map whose REMOTE holds only half the photos: the workers' misses are counted on the
    run's last Progress (`unmapped`), one line names how many and the map to check, and
    `heatsearch index` exits 1. With the map right, the next run reads them and exits 0."""
    import json
    import shutil

    from app.cli import main
    from tests.core.helpers import tiny_settings

    remote = tmp_path / "mnt" / "photos"
    shutil.copytree(photos / "a", remote / "a")  # "b" (30 photos) is not where the map says
    home = tmp_path / "h"
    tiny_settings().save(home)
    args = ["index", str(photos), "--home", str(home), "--ray", "auto", "--path-map", f"{photos}={remote}", "--json"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    in_b = [ln for ln in out.splitlines() for e in json.loads(ln)["errors"] if "/b/" in e["path"]]
    assert last["phase"] == "done" and last["unmapped"] == last["failed"] and 30 - 8 <= last["unmapped"] <= 30
    assert len(in_b) >= last["unmapped"]
    said = [ln for ln in err.splitlines() if "not found by the Ray workers" in ln]
    assert len(said) == 1 and f"{last['unmapped']} of " in said[0] and f"--path-map {photos}={remote}" in said[0], err
    shutil.copytree(photos / "b", remote / "b")
    assert main(args) == 0
    out, err = capsys.readouterr()
    last = json.loads(out.splitlines()[-1])
    assert last["unmapped"] == 0 and last["failed"] == 0 and "not found" not in err
    assert main(["status", "--json", "--home", str(home)]) == 0
    st = json.loads(capsys.readouterr().out)
    assert (st["indexed"], st["failed"]) == (60, 0)
