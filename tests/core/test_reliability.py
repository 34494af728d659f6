"""The library never serves a wrong answer (issue 18): a test per numbered item, each run through
the CLI or the service as a user would, each failing on the code before the fix (commit 33dfabb)."""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import index, open_lib, snapshot_matches_catalog, tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, home=None, env=None, **kw):
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    cmd = [sys.executable, "-m", "app", *map(str, args)] + (["--home", str(home)] if home else [])
    return subprocess.run(cmd, capture_output=True, text=True, cwd=kw.pop("cwd", ROOT), env=full, timeout=600, **kw)


def one_line(r, *words):
    """A failed run: non-zero exit, exactly one line on stderr starting 'heatsearch:', no traceback."""
    err = r.stderr.strip()
    assert r.returncode != 0, (r.stdout, err)
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, err
    assert err.startswith("heatsearch:"), err
    for w in words:
        assert w.lower() in err.lower(), (w, err)


def photos(d: Path, n: int, seed: int = 0, size=(96, 72)) -> Path:
    for i in range(n):
        write_photo(d / f"p{i:02d}.png", seed + i, size=size)
    return d


def tree_state(folder: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    tiny_settings().save(h)
    return h


def test_1_switching_the_model_and_back_never_serves_stale_vectors(tmp_path, home):
    """(1) index; replace p03 and delete p11; index under another photo size; back; index: a
    search with p03's old pixels finds p03 once (its new content), p11 never, and no stale vector
    at similarity 1."""
    d = photos(tmp_path / "photos", 14)
    assert cli("index", d, home=home).returncode == 0
    old = tmp_path / "old-p03.png"
    shutil.copy(d / "p03.png", old)
    write_photo(d / "p03.png", 777, size=(96, 72))
    (d / "p11.png").unlink()
    for size in (["--size", "96"], []):
        r = cli("index", d, *size, home=home)
        assert r.returncode == 0, r.stderr
    r = cli("search", old, "--top", "14", "--json", home=home)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)["results"]
    found = [Path(h["path"]).name for h in hits]
    assert found.count("p03.png") == 1 and "p11.png" not in found and len(found) == 13
    assert max(h["similarity"] for h in hits) < 0.9999  # the old pixels are in no vector any more
    svc = open_lib(home)
    snapshot_matches_catalog(svc)
    svc.close()


def test_3_forget_with_an_empty_path_or_a_root_forgets_nothing(tmp_path, home):
    """(3) `forget ""` (an unset shell variable) and `forget /` never mean "everything"."""
    d = photos(tmp_path / "photos", 6)
    assert cli("index", d, home=home).returncode == 0
    one_line(cli("forget", "", home=home), "empty")
    one_line(cli("forget", "/", home=home), "whole library")
    one_line(cli("forget", tmp_path, home=home), "not a library folder", "forget each by name")  # a folder above it
    r = cli("status", "--json", home=home)
    assert json.loads(r.stdout)["indexed"] == 6


def test_3_purge_refuses_while_the_settings_cannot_be_read(tmp_path, home):
    """(3) A damaged settings.json means the defaults stand in for it: an index then makes a space
    of the defaults, and purge must not take that for the library's settings."""
    d = photos(tmp_path / "photos", 6)
    assert cli("index", d, home=home).returncode == 0
    good = (home / "settings.json").read_text()
    (home / "settings.json").write_text(good[: len(good) // 2])
    cli("index", d, home=home)
    r = cli("purge", "--force", home=home)  # the settings' own warning, then the refusal
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "before purge" in r.stderr.splitlines()[-1] and "nothing was deleted" in r.stderr, r.stderr
    (home / "settings.json").write_text(good)
    r = cli("search", d / "p01.png", "--json", "--top", "6", home=home)
    assert r.returncode == 0 and len(json.loads(r.stdout)["results"]) == 6, r.stderr


def test_3_photos_whose_decoder_fails_to_load_are_kept(tmp_path, home):
    """(3) HEIC photos indexed, then a run where pi-heif cannot be imported (a broken install):
    they are "cannot be read here", never gone; their descriptors stay searchable."""
    d = photos(tmp_path / "photos", 6)
    src = Image.open(write_photo(tmp_path / "h.png", 40, size=(160, 120))).convert("RGB")
    src.save(d / "phone1.heic", quality=90)
    src.rotate(90, expand=True).save(d / "phone2.heic", quality=90)
    assert cli("index", d, home=home).returncode == 0
    broken = tmp_path / "broken"
    (broken / "pi_heif").mkdir(parents=True)
    (broken / "pi_heif" / "__init__.py").write_text("raise ImportError('libheif.so: cannot open shared object file')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(broken), str(ROOT)])}
    r = cli("index", d, home=home, env=env)
    assert r.returncode == 0, r.stderr
    assert "0 removed" in r.stdout
    st = json.loads(cli("status", "--json", home=home, env=env).stdout)
    assert st["indexed"] == 8
    r = cli("search", d / "p01.png", "--top", "8", "--json", home=home, env=env)
    assert {Path(h["path"]).name for h in json.loads(r.stdout)["results"]} >= {"phone1.heic", "phone2.heic"}


def test_3_unusable_weights_in_the_settings_never_replace_the_library(tmp_path):
    """(3) settings.json naming a file that is not weights ("/etc/passwd"): nothing is created,
    searches use the library as indexed (with one line saying why), purge keeps it."""
    home = tmp_path / "home"
    settings = tiny_settings(backbone="efficientnet-lite0", max_side=128)
    settings.save(home)
    d = photos(tmp_path / "photos", 6, size=(160, 120))
    assert cli("index", d, home=home).returncode == 0
    data = json.loads((home / "settings.json").read_text())
    data["weights"] = "/etc/passwd"
    (home / "settings.json").write_text(json.dumps(data))
    r = cli("status", "--json", home=home)
    assert r.returncode == 0 and json.loads(r.stdout)["indexed"] == 6
    assert "/etc/passwd" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("purge", home=home)
    assert r.returncode == 0 and "removed the descriptors of 0" in r.stdout
    r = cli("search", d / "p02.png", "--top", "3", "--json", home=home)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"].endswith("p02.png")
    one_line(cli("index", d, home=home), "passwd")  # indexing with it is refused, in one line


def test_3_a_weights_file_of_an_untrained_network_is_refused_in_words(tmp_path):
    """Trials 20-22 chose a ResNet50 file saved before any training (every batch norm at its
    start), indexed with it and judged the model by its meaningless results. Indexing with it is
    refused in one line that says so; the library keeps answering with its own descriptions."""
    import torch
    from torchvision.models import resnet50

    home = tmp_path / "home"
    d = photos(tmp_path / "photos", 6, size=(160, 120))
    tiny_settings(max_side=128).save(home)
    assert cli("index", d, home=home).returncode == 0
    weights = tmp_path / "resnet50-mine.pth"
    torch.save(resnet50(weights=None).state_dict(), weights)
    tiny_settings(backbone="resnet50", weights=str(weights), max_side=128).save(home)
    one_line(cli("index", d, home=home), "holds a network that was never trained")
    r = cli("search", d / "p02.png", "--top", "3", "--json", home=home)
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["path"].endswith("p02.png")
    assert "your settings ask for resnet50: the library's model is used" in r.stderr  # a search never switches it


def test_3_with_its_weights_file_away_a_model_that_runs_answers(tmp_path):
    """Trial 21: the settings' model (a weights file the user named) is away with its drive: no
    search worked, though the library also held another model's descriptions. The newest space
    whose model runs here answers, a photo the library does not hold included."""
    from app.core.features.registry import load_backbone

    home = tmp_path / "home"
    d = photos(tmp_path / "photos", 6, size=(160, 120))
    tiny_settings(max_side=128).save(home)
    assert cli("index", d, home=home).returncode == 0
    weights = tmp_path / "drive" / "lite0.pth"
    weights.parent.mkdir()
    shutil.copy(load_backbone("efficientnet-lite0").weights_path, weights)
    tiny_settings(backbone="efficientnet-lite0", weights=str(weights), max_side=128, engine="torch").save(home)
    assert cli("index", d, home=home).returncode == 0
    shutil.rmtree(weights.parent)  # the drive is unplugged
    other = photos(tmp_path / "other", 1, seed=5, size=(160, 120)) / "p00.png"
    r = cli("search", other, "--top", "3", "--json", home=home)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["results"]) == 3 and "lite0.pth" in r.stderr
    one_line(cli("index", d, home=home), "lite0.pth")  # indexing with it is still refused


@pytest.mark.parametrize("damage", ["middle", "empty"])
def test_4_a_damaged_catalog_is_one_line_and_left_untouched(tmp_path, home, damage):
    """(4) Garbage in the middle of the catalog, or a 0-byte catalog: every command says it is
    damaged and how to get out, and writes nothing to it."""
    d = photos(tmp_path / "photos", 30, size=(128, 96))
    assert cli("index", d, home=home).returncode == 0
    cat = home / "catalog.sqlite"
    con = sqlite3.connect(cat)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(cat.read_bytes())
    if damage == "middle":
        assert len(data) > 16384
        data[len(data) // 2: len(data) // 2 + 4096] = os.urandom(4096)
    else:
        data = bytearray()
    cat.write_bytes(bytes(data))
    before = hashlib.sha256(cat.read_bytes()).hexdigest()
    for args in (["status"], ["rebuild"], ["index", d], ["search", d / "p01.png"], ["duplicates"]):
        one_line(cli(*args, home=home), "damaged", "restore")
        assert hashlib.sha256(cat.read_bytes()).hexdigest() == before


def test_5_no_command_writes_into_a_photo_folder(tmp_path, home):
    """(5) search, status and duplicates with --home at or inside a photo folder: one line, and no
    file appears in the photo folder."""
    d = photos(tmp_path / "photos", 6)
    assert cli("index", d, home=home).returncode == 0
    before = tree_state(d)
    for h in (d, d / "sub"):
        one_line(cli("search", d / "p01.png", home=h))
        one_line(cli("status", home=h))
        one_line(cli("duplicates", home=h))
    assert tree_state(d) == before


def test_6_searches_answer_from_the_old_model_while_the_new_one_is_indexed(tmp_path, monkeypatch):
    """(6) A new photo size starts a re-index; until it is complete, every search answers from the
    previous descriptions, with the whole library (never "no indexed photos yet", never partial)."""
    import time

    monkeypatch.setattr("app.core.pipeline.indexer.CALIBRATION_IMAGES", 4)  # the first batch is 4 of 24
    d = photos(tmp_path / "photos", 24)
    svc = open_lib(tmp_path / "h")
    index(svc, [d])
    gate, seen = threading.Event(), []

    def hold(ev):
        if ev.kind == "progress" and ev.data.phase == "indexing" and ev.data.done > 0 and not gate.is_set():
            svc.running.control.pause()
            gate.set()

    svc.subscribe(hold)
    svc.run(svc.apply_settings(tiny_settings(max_side=96)))
    assert gate.wait(120), "the re-index did not start"
    for i in (0, 7, 23):
        res = Searcher(svc).search(SearchRequest(path=str(d / f"p{i:02d}.png"), top=50, qe="off", her="off"))
        seen.append(len(res.hits))
        assert res.hits[0].path.endswith(f"p{i:02d}.png") and res.hits[0].similarity > 0.9999
    assert seen == [24, 24, 24]
    svc.running.control.resume()
    deadline = time.time() + 120
    while svc.snapshot().space.max_side != 96 and time.time() < deadline:
        time.sleep(0.2)
    assert svc.snapshot().space.max_side == 96 and svc.snapshot().n_alive == 24
    svc.close()


def test_7_a_failed_commit_never_stamps_the_vector_files_ahead(tmp_path, monkeypatch):
    """(7) A commit that fails (disk error) must not move the library's generation in memory: files
    saved afterwards would claim a state the catalog never had, and after a crash a later batch
    would be missing from the vectors."""
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.orm.session import SessionTransaction

    from app.core.library import writer as writer_mod

    d = photos(tmp_path / "photos" / "a", 8)
    photos(tmp_path / "photos" / "b", 4, seed=50)
    home = tmp_path / "h"
    svc = open_lib(home)
    index(svc, [tmp_path / "photos"])
    real = SessionTransaction.commit
    fail = {"n": 1}

    def failing(self, *a, **k):
        if fail["n"]:
            fail["n"] -= 1
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))
        return real(self, *a, **k)

    monkeypatch.setattr(SessionTransaction, "commit", failing)
    with pytest.raises(Exception):
        svc.run(svc.forget(tmp_path / "photos" / "b"), timeout=60)
    monkeypatch.setattr(SessionTransaction, "commit", real)
    svc.run(svc.refit(force=False), timeout=60)  # an idle command: the writer saves its files after it
    monkeypatch.setattr(writer_mod.LibraryWriter, "save", lambda self, force=False: False)  # the crash: no more saves
    write_photo(d / "new.png", 999, size=(96, 72))
    index(svc)
    svc.close()
    monkeypatch.undo()
    svc = open_lib(home)
    snapshot_matches_catalog(svc)
    res = Searcher(svc).search(SearchRequest(path=str(d / "new.png"), top=1, qe="off", her="off"))
    assert res.hits[0].path.endswith("new.png")
    svc.close()


def test_8_every_skipped_file_is_reported_once_in_text_and_json(tmp_path, home):
    """(8) Twelve bad files among good ones: `index --json` lists each exactly once, and so does
    the text output."""
    d = photos(tmp_path / "photos", 10)
    bad = d / "bad"
    bad.mkdir()
    for i in range(12):
        (bad / f"b{i:02d}.jpg").write_bytes(b"not a photo %d" % i)
    r = cli("index", d, "--json", home=home)
    assert r.returncode == 0, r.stderr
    reported = [e["path"] for line in r.stdout.splitlines() for e in json.loads(line)["errors"]]
    assert sorted(Path(p).name for p in reported) == [f"b{i:02d}.jpg" for i in range(12)]
    home2 = tmp_path / "home2"
    tiny_settings().save(home2)
    r = cli("index", d, home=home2)
    skipped = [line for line in r.stderr.splitlines() if line.startswith("skipped ")]
    assert sorted(line.split()[1].rsplit("/", 1)[1].rstrip(":") for line in skipped) == [f"b{i:02d}.jpg" for i in range(12)]


def test_9_a_folder_link_to_the_system_is_not_followed(tmp_path, home):
    """(9) A symlink to /proc inside a photo folder: not followed (it indexed files from / before)."""
    d = photos(tmp_path / "photos", 4)
    os.symlink("/proc", d / "proc-link")
    os.symlink("/", d / "root-link")
    r = cli("index", d, "--json", home=home)
    assert r.returncode == 0, r.stderr
    st = json.loads(cli("status", "--json", home=home).stdout)
    assert st["images"] == 4 and st["indexed"] == 4
    errors = [e["reason"] for line in r.stdout.splitlines() for e in json.loads(line)["errors"]]
    assert sum("not followed" in e for e in errors) == 2


def test_9_bad_lines_and_values_are_one_line_each(tmp_path, home):
    """(9) A non-UTF-8 byte in --queries (the other lines still run), a box of booleans, a date in
    year 1, a settings file nested thousands deep: each a line, never "internal error"."""
    d = photos(tmp_path / "photos", 6)
    assert cli("index", d, home=home).returncode == 0
    q = tmp_path / "q.jsonl"
    q.write_bytes(json.dumps({"path": str(d / "p01.png")}).encode() + b"\n" + b'{"path": "\xff.png"}\n'
                  + json.dumps({"path": str(d / "p02.png"), "box": [True, False, 3, 4]}).encode() + b"\n")
    r = cli("search", "--queries", q, "--json", "--top", "2", home=home)
    assert r.returncode == 1 and "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert [json.loads(x)["line"] for x in r.stdout.splitlines()] == [1]
    assert "line 2: not UTF-8" in r.stderr and "line 3:" in r.stderr
    r = cli("search", d / "p01.png", "--after", "0001-01-01", "--top", "3", home=home)
    assert r.returncode == 0 and r.stdout.splitlines()[0].endswith("p01.png"), r.stderr
    one_line(cli("search", "--queries", d / "p01.png", home=home), "not a queries file")  # a photo, not thousands of lines
    q.write_bytes(b"x" * 200_000)
    one_line(cli("search", "--queries", q, home=home), "longer than")  # never read whole into memory
    (home / "settings.json").write_text("[" * 100_000 + "]" * 100_000)
    r = cli("status", home=home)
    assert r.returncode == 0 and "nested too deeply" in r.stderr and "Traceback" not in r.stderr


def test_9_a_corrupt_exif_block_prints_nothing_and_fine_noise_is_not_blank(tmp_path, home):
    """(9) A JPEG whose EXIF block is corrupt is indexed silently (Pillow printed 14 warnings per
    read); a 20000x50 strip of noise is a photo, not "blank"."""
    d = photos(tmp_path / "photos", 4)
    img = Image.open(write_photo(tmp_path / "e.png", 9, size=(200, 150))).convert("RGB")
    exif = b"MM\x00*\x00\x00\x00\x08\x00\x05" + b"\x01\x0f\x00\x02\x00\x00\xff\xff\x00\x00\x00\x40" * 5 + b"\x00" * 8
    img.save(d / "bad-exif.jpg", exif=exif)
    noise = np.random.default_rng(0).integers(0, 256, size=(50, 20000, 3), dtype=np.uint8)
    Image.fromarray(noise).save(d / "strip.png")
    r = cli("index", d, home=home)
    assert r.returncode == 0 and "indexed 6 of 6" in r.stdout, (r.stdout, r.stderr)
    assert "EXIF" not in r.stderr and "Warning" not in r.stderr


def test_9_a_forgotten_subfolder_stays_forgotten(tmp_path, home):
    """(9) `forget` of a folder inside a library folder: the next index does not bring it back;
    adding it again does."""
    root = tmp_path / "photos"
    photos(root / "keep", 4)
    photos(root / "drop", 3, seed=20)
    assert cli("index", root, home=home).returncode == 0
    assert "forgot 3 photos under" in cli("forget", root / "drop", home=home).stdout
    r = cli("index", root, home=home)
    assert r.returncode == 0 and "indexed 4 of 4" in r.stdout, r.stdout
    r = cli("index", root / "drop", home=home)
    assert r.returncode == 0 and "indexed 7 of 7" in r.stdout, r.stdout


def test_9_an_unreadable_photo_is_read_once_it_can_be(tmp_path, home):
    """(9) A photo that could not be opened (no permission) is tried again at the next index, not
    kept skipped until --verify. (Run as another user when the tests run as root, who may read
    anything.)"""
    base = Path("/tmp") / f"hs-perm-{os.getpid()}"
    shutil.rmtree(base, ignore_errors=True)
    d = photos(base / "photos", 4)
    h = base / "home"
    tiny_settings().save(h)
    for p in (base, d, h):
        p.chmod(0o777)
    for p in [*d.iterdir(), *h.iterdir()]:
        p.chmod(0o666)
    (d / "p02.png").chmod(0o000)
    as_user = {}
    if os.geteuid() == 0:  # root reads any file: drop the two capabilities that let it (PR_CAPBSET_DROP)
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        as_user = {"preexec_fn": lambda: [libc.prctl(24, cap, 0, 0, 0) for cap in (1, 2)]}
    env = {"HOME": str(base), "XDG_CACHE_HOME": str(base / "cache"), "TORCH_HOME": str(base / "torch"),
           "HEATSEARCH_MODELS": str(base / "models")}
    try:
        r = cli("index", d, home=h, env=env, **as_user)
        assert r.returncode == 0 and "indexed 3 of 4" in r.stdout, (r.stdout, r.stderr)
        (d / "p02.png").chmod(0o666)
        r = cli("index", d, home=h, env=env, **as_user)
        assert r.returncode == 0 and "indexed 4 of 4" in r.stdout, (r.stdout, r.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_9_the_model_export_ignores_the_current_folder(tmp_path, monkeypatch):
    """(9) The export child runs isolated: a `torch.py` in the folder HeatSearch was started from
    cannot replace PyTorch in it."""
    from app.core.features.engine import ensure_onnx
    from app.core.features.registry import load_backbone

    trap = tmp_path / "here"
    trap.mkdir()
    (trap / "torch.py").write_text("raise SystemExit('the wrong torch was imported')\n")
    monkeypatch.chdir(trap)
    path = ensure_onnx(load_backbone("tiny-random"), tmp_path / "models", lambda m: None)
    assert path.is_file()


def test_9_a_watcher_change_scans_only_the_folder_that_changed(tmp_path):
    """(9) A photo added to one folder: the next index (as the folder watcher asks for it) scans
    that folder, not the whole library."""
    root = tmp_path / "photos"
    photos(root / "a", 30)
    photos(root / "b", 30, seed=40)
    svc = open_lib(tmp_path / "h")
    index(svc, [root])
    write_photo(root / "a" / "new.png", 99, size=(96, 72))
    prog = svc.run(svc.index(only=[str(root / "a")]), timeout=120)
    assert prog.total == 1 and prog.done == 1 and prog.scanned == 31
    assert svc.stats()["indexed"] == 61
    svc.close()


def test_9_a_save_appends_only_what_is_new(tmp_path):
    """(9) Saving after one new photo writes its vector, not every vector again (4.5 GB at 1M)."""
    d = photos(tmp_path / "photos", 40)
    home = tmp_path / "h"
    svc = open_lib(home)
    index(svc, [d])
    svc.close()
    vec = next(home.glob("space-*.vectors*"))
    before = (vec.stat().st_ino, vec.stat().st_size, vec.read_bytes())
    svc = open_lib(home)
    write_photo(d / "new.png", 99, size=(96, 72))
    index(svc)
    svc.close()
    after = next(home.glob("space-*.vectors*"))
    assert after.stat().st_ino == before[0]  # the same file, appended to
    assert after.read_bytes()[: len(before[2])] == before[2] and after.stat().st_size > before[1]
