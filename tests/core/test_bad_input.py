"""Bad input never crashes and never loses data (issue 10): a test per item, on real files made here."""
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.core.errors import ImageError, InputError
from app.core.imageio import decode, open_oriented
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import index, open_lib, snapshot_matches_catalog, tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, home=None, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    cmd = [sys.executable, "-m", "app", *map(str, args)] + (["--home", str(home)] if home else [])
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, **kw)


def one_line_error(r, *words):
    """A failed run: non-zero exit, exactly one line on stderr, no traceback, with `words`."""
    err = r.stderr.strip()
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("heatsearch:"), err  # one line of ours (argparse's usage errors are two lines)
    for w in words:
        assert w.lower() in err.lower(), (w, err)


def photos(d: Path, names, seed=0, size=(96, 72)):
    for i, n in enumerate(names):
        write_photo(d / n, seed + i, size=size)
    return d


def test_forget_matches_whole_path_components(tmp_path):
    """(1) Forgetting /p/x_y forgets neither /p/xzy nor /p/x_yz (no LIKE wildcards, no prefixes)."""
    root = tmp_path / "p"
    for name in ("x_y", "xzy", "x_yz", "X_Y%"):
        photos(root / name, ["a.png", "b.png"], seed=hash(name) % 100)
    svc = open_lib(tmp_path / "h")
    index(svc, [root / n for n in ("x_y", "xzy", "x_yz", "X_Y%")])
    assert svc.stats()["indexed"] == 8
    assert svc.run(svc.forget(root / "x_y")) == 2
    left = {Path(f["path"]).name: f["indexed"] for f in svc.stats()["folders"]}
    assert left == {"xzy": 2, "x_yz": 2, "X_Y%": 2}
    snapshot_matches_catalog(svc)
    svc.close()


def test_names_that_are_not_utf8_index_search_and_print(tmp_path):
    """(2) A file name made of the bytes ff fe next to good photos: indexed, searchable, printed;
    three runs in a row."""
    d = photos(tmp_path / "photos", [f"good{i}.png" for i in range(10)])
    odd = os.fsdecode(bytes(d) + b"/\xff\xfe.jpg")
    odd_dir = os.fsdecode(bytes(d) + b"/caf\xe9")
    os.mkdir(odd_dir)
    Image.open(d / "good3.png").convert("RGB").save(odd, "JPEG", quality=95)
    shutil.copy(d / "good5.png", os.path.join(odd_dir, "x.png"))
    home = tmp_path / "h"
    tiny_settings().save(home)
    for _ in range(3):
        r = cli("index", d, home=home)
        assert r.returncode == 0, r.stderr
    assert "indexed 12 of 12" in r.stdout
    r = cli("search", odd, "--top", "3", "--json", home=home)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["results"][0]["path"] == odd  # JSON carries the surrogate escapes: the exact name
    r = cli("search", odd, "--top", "1", home=home)
    assert r.returncode == 0 and "photos/\ufffd\ufffd.jpg" in r.stdout  # text output: readable, never a crash
    svc = open_lib(home)
    assert svc.stats()["indexed"] == 12
    svc.close()


def test_moved_and_deleted_folders_leave_no_dead_or_double_results(tmp_path):
    """(3) Folder B moved into A, folder C deleted: no result shows a file that is gone, none twice;
    C's photos are kept as missing (out of the results) until forgotten."""
    root = tmp_path / "lib"
    a = photos(root / "A", [f"a{i}.png" for i in range(6)], seed=0)
    b = photos(root / "B", [f"b{i}.png" for i in range(6)], seed=10)
    c = photos(root / "C", [f"c{i}.png" for i in range(6)], seed=20)
    svc = open_lib(tmp_path / "h")
    index(svc, [a, b, c])
    shutil.move(str(b), str(a / "B"))
    shutil.rmtree(c)
    calls = []
    ex = svc.extractor()
    real = ex.forward
    ex.forward = lambda arrs: calls.append(1) or real(arrs)
    prog = index(svc)
    assert calls == []  # the moved photos were recognised by content: no CNN
    assert prog.reused == 6 and prog.removed == 0
    states = {Path(f["path"]).name: f["state"] for f in svc.stats()["folders"]}
    assert states == {"A": "ok", "C": "missing"}  # B's photos all moved into A: B is gone from the list
    assert svc.stats()["missing"] == 6  # C's photos: kept, marked missing
    res = Searcher(svc).search(SearchRequest(path=str(a / "B" / "b2.png"), top=50))
    found = [h.path for h in res.hits]
    assert len(found) == len(set(found)) == 12
    assert all(os.path.exists(p) for p in found)
    # the user confirms: missing photos are forgotten
    assert svc.run(svc.forget(root, missing_only=True)) == 6 and svc.stats()["missing"] == 0
    snapshot_matches_catalog(svc)
    svc.close()


def test_an_unreadable_subtree_is_not_a_deletion(tmp_path, monkeypatch):
    """(3) A subtree the scanner cannot list (unmounted, no permission) keeps its photos."""
    root = tmp_path / "lib"
    photos(root / "ok", ["a.png", "b.png"])
    photos(root / "locked", ["c.png", "d.png", "e.png"], seed=5)
    svc = open_lib(tmp_path / "h")
    index(svc, [root])
    real = os.scandir
    locked = str(root / "locked")

    def deny(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real(path)

    monkeypatch.setattr(os, "scandir", deny)
    prog = index(svc)
    assert prog.removed == 0 and svc.stats()["indexed"] == 5
    svc.close()


def test_ground_truth_is_read_without_running_code(tmp_path):
    """(4) A crafted "ground truth" pickle cannot run code; the shared one (plain data) loads."""
    from app.core.evaluation.datasets import load_plain_pickle, revisited_gnd

    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "gnd_roxford5k.pkl"
    evil.write_bytes(pickle.dumps({"gnd": [Evil()], "imlist": [], "qimlist": []}))
    with pytest.raises(InputError, match="refusing"):
        revisited_gnd(evil)
    assert not marker.exists()
    r = cli("eval", "roxford5k", "--images", tmp_path, "--gt", tmp_path)
    one_line_error(r, "refusing")
    assert not marker.exists()
    shared = ROOT.parent / "shared" / "data" / "gt" / "revisited" / "gnd_roxford5k.pkl"
    if shared.exists():
        imlist, qimlist, gnds, bbxs = revisited_gnd(shared)
        assert len(qimlist) == 70 and len(imlist) == 4993
        assert load_plain_pickle(shared)["qimlist"] == qimlist


@pytest.mark.slow
def test_the_size_cap_admits_200_megapixel_photos(tmp_path):
    """(6) 99 MP and 190 MP photos are decoded (Pillow's bomb check no longer refuses them);
    over 200 MP is refused before any pixel is decoded."""
    for w, h in ((10_000, 9_900), (16_000, 11_875)):
        f = tmp_path / f"{w}x{h}.png"
        Image.new("1", (w, h)).save(f)
        photo = decode(f, draft_side=640)
        assert photo.orig_size == (w, h)
    f = tmp_path / "too-big.png"
    Image.new("1", (20_001, 10_000)).save(f)
    with pytest.raises(ImageError, match="limit is 200 MP"):
        decode(f)


def test_a_huge_file_that_is_not_a_photo_costs_no_memory(tmp_path):
    """(7) A 1.5 GB video named .jpg is refused from its header, never read whole."""
    from app.core.pipeline.produce import decode_file
    from app.core.pipeline.scan import FileInfo

    f = tmp_path / "movie.jpg"
    with open(f, "wb") as fh:
        fh.write(b"\x00\x00\x00\x18ftypmp42")  # an MP4 header
        fh.truncate(1_500_000_000)  # sparse: nothing is written
    tracemalloc.start()
    d = decode_file(FileInfo(str(f), f.stat().st_size, 0, 1), 640, (0.5,) * 3, (0.5,) * 3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "not an image" in d.error
    assert peak < 20 << 20, peak


def test_sixteen_bit_and_odd_images(tmp_path):
    """(11) A 16-bit PNG is the photo it shows, not a white sheet."""
    base = write_photo(tmp_path / "p.png", 3, size=(120, 90))
    grey8 = np.asarray(Image.open(base).convert("L"), dtype=np.uint16)
    sixteen = Image.fromarray((grey8 * 257).astype(np.uint16))
    assert sixteen.mode.startswith("I;16")
    sixteen.save(tmp_path / "p16.png")
    img, _ = open_oriented(tmp_path / "p16.png")
    got = np.asarray(img.convert("L"), dtype=np.float64)
    assert np.abs(got - grey8).mean() < 1.5 and got.std() > 10


def test_a_photo_replaced_with_the_same_size_and_time_is_found_by_verify(tmp_path):
    """(11) Documented limit, with a cheap remedy: `index --verify` re-reads the bytes."""
    d = photos(tmp_path / "photos", [f"p{i}.png" for i in range(6)])
    svc = open_lib(tmp_path / "h")
    index(svc, [d])
    target = d / "p2.png"
    st = target.stat()
    other = Image.open(d / "p4.png")
    other.save(target)
    data = target.read_bytes()
    target.write_bytes(data[: st.st_size].ljust(st.st_size, b"\0") if len(data) >= st.st_size else data + b"\0" * (st.st_size - len(data)))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert index(svc).total == 0  # size and time match: not noticed
    prog = index(svc, verify=True)
    assert prog.total == 6 and prog.done == 6
    res = Searcher(svc).search(SearchRequest(path=str(d / "p4.png"), top=2, qe="off", her="off"))
    assert {Path(h.path).name for h in res.hits} == {"p2.png", "p4.png"}
    svc.close()


def test_pasted_pixels_are_cached_by_content_not_by_object_id(tmp_path, photo_dir):
    """(10) Two pasted images of the same size never share a cached feature map."""
    svc = open_lib(tmp_path / "h")
    index(svc, [photo_dir])
    s = Searcher(svc)
    a = Image.open(photo_dir / "scene0" / "img0.jpg").convert("RGB")
    first = s.search(SearchRequest(image=a, top=3))
    del a
    b = Image.open(photo_dir / "scene3" / "img0.jpg").convert("RGB")  # may reuse the freed id
    second = s.search(SearchRequest(image=b, top=3))
    assert second.used_cnn
    assert not np.allclose(first.query_weights, second.query_weights)
    assert Path(second.hits[0].path).parent.name == "scene3"
    again = s.search(SearchRequest(image=b.copy(), top=3))
    assert not again.used_cnn  # same pixels: the cache answers
    svc.close()


@pytest.fixture
def indexed_home(tmp_path, photo_dir):
    home = tmp_path / "cli-home"
    tiny_settings().save(home)
    r = cli("index", photo_dir, home=home)
    assert r.returncode == 0, r.stderr
    return home


def test_every_bad_input_gives_one_line_and_a_nonzero_exit(tmp_path, photo_dir, indexed_home):
    """(8) No traceback for a user's input: each case prints one line with a hint."""
    q = photo_dir / "scene0" / "img0.jpg"
    home = indexed_home
    one_line_error(cli("search", q, "--box", "nan,1,20,20", home=home), "--box")
    one_line_error(cli("search", q, "--box", "1,1,inf,20", home=home), "--box")
    one_line_error(cli("search", q, "--box", "500,500,600,600", home=home), "outside")
    from PIL import Image

    w, h = Image.open(q).size  # a box meant for a larger copy of the photo: not clipped to a sliver
    one_line_error(cli("search", q, "--box", f"{w - 8},{h - 8},{3 * w},{3 * h}", home=home), "reaches past")
    one_line_error(cli("search", q, "--box", "20,20,10,10", home=home), "x1 < x2")
    r = cli("search", q, "--top", "-5", home=home)
    assert r.returncode == 2 and "must be at least 1" in r.stderr and "Traceback" not in r.stderr
    one_line_error(cli("search", q, "--device", "cuda", home=home), "cuda", "not available")
    one_line_error(cli("status", home=photo_dir / "scene0" / "img0.jpg"), "is a file")
    one_line_error(cli("status", home="/proc/heatsearch"), "system folder")
    # settings.json of the wrong types: one line per bad field, defaults used, the command works
    (home / "settings.json").write_text(json.dumps({"version": 2, "backbone": "tiny-random", "max_side": 128, "engine": "torch",
                                                    "batch_size": 0, "top": "many", "qe": 3}))
    r = cli("search", q, "--top", "2", home=home)
    assert r.returncode == 0, r.stderr
    assert "batch_size" in r.stderr and "'top'" in r.stderr and "Traceback" not in r.stderr
    # a malformed queries file: bad lines are reported, the good ones run
    qf = tmp_path / "q.jsonl"
    qf.write_text("\n".join([json.dumps({"path": str(q)}), "{not json", json.dumps({"path": str(q), "box": [1, 2]}),
                             json.dumps({"nopath": 1}), json.dumps({"path": str(photo_dir / "scene1" / "img1.jpg")})]))
    r = cli("search", "--queries", qf, "--json", "--top", "2", home=home)
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 5] and all(o["results"] for o in out)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if "q.jsonl line" in x]
    assert [x.split(":")[1].split()[-1] for x in lines] == ["2", "3", "4"]


def test_a_damaged_or_locked_catalog_is_one_line_with_what_to_do(tmp_path, photo_dir, indexed_home):
    home = indexed_home
    # another program holds an exclusive lock that even readers wait for (a rollback-journal
    # database, e.g. a sqlite3 shell that switched it): after the busy timeout, one line
    con = sqlite3.connect(home / "catalog.sqlite", isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("BEGIN EXCLUSIVE")
    r = cli("status", home=home, env={"HEATSEARCH_BUSY_MS": "300"})
    con.execute("ROLLBACK")
    con.close()
    one_line_error(r, "locked by another program")
    cat = home / "catalog.sqlite"
    data = bytearray(cat.read_bytes())
    data[100:4196] = os.urandom(4096)
    cat.write_bytes(bytes(data))
    for p in home.glob("catalog.sqlite-*"):
        p.unlink()
    one_line_error(cli("status", home=home), "damaged", "move it aside")
    cat.write_bytes(b"this is not a database at all" * 100)
    one_line_error(cli("search", photo_dir / "scene0" / "img0.jpg", home=home), "damaged")


def test_home_inside_or_equal_to_a_photo_folder_is_refused_before_writing(tmp_path, photo_dir):
    """(9) Never a file in a photo folder: --home inside it, or equal to it, is refused first."""
    before = sorted(p.relative_to(photo_dir) for p in photo_dir.rglob("*"))
    one_line_error(cli("index", photo_dir, home=photo_dir / "scene0" / ".hs"), "inside")
    one_line_error(cli("index", photo_dir, home=photo_dir), "inside")
    assert sorted(p.relative_to(photo_dir) for p in photo_dir.rglob("*")) == before
    home = tmp_path / "h"
    tiny_settings().save(home)
    assert cli("index", photo_dir, home=home).returncode == 0
    r = cli("index", home.parent, home=home)
    one_line_error(r, "inside")


def test_the_data_folder_may_be_given_before_the_command(tmp_path):
    """`heatsearch --home DIR status` (the window takes --home first, so people write it there for
    commands too) ran the window's parser, which refused "status" as an unrecognized argument."""
    home = tmp_path / "h"
    r = cli("--home", home, "status")  # the status command's own answer about that folder
    assert r.stderr.strip() == f"heatsearch: no library in {home}: nothing is indexed there yet " \
                               f"(heatsearch index FOLDER --home {home})", r.stderr


def test_forget_missing_also_forgets_the_files_that_failed_with_a_vanished_folder(tmp_path):
    """Trial 12: a folder deleted while it was indexed left its files that failed to read (they
    vanished under the indexer) as "N unreadable" after Forget missing photos forgot the rest: no
    file of them is left, and the count never went away. The failed files of a folder that is gone
    are forgotten with its missing photos; those of a folder that is there stay (tried again at
    the next scan)."""
    root = tmp_path / "lib"
    gone = photos(root / "gone", [f"g{i}.png" for i in range(4)], seed=0)
    (gone / "broken.jpg").write_bytes(b"not a photo")
    kept = photos(root / "kept", [f"k{i}.png" for i in range(3)], seed=5)
    (kept / "broken.jpg").write_bytes(b"not a photo either")
    svc = open_lib(tmp_path / "h")
    index(svc, [gone, kept])
    shutil.rmtree(gone)
    index(svc)
    st = svc.stats()
    assert (st["missing"], st["failed"]) == (4, 2), st
    assert svc.run(svc.forget(None, missing_only=True)) == 5
    st = svc.stats()
    assert (st["missing"], st["failed"], st["indexed"]) == (0, 1, 3), st
    svc.close()


def index_until_paused(svc):
    """An indexing run of the whole library, paused once its first batch is in: (command, its
    JobControl), for the test to change the folders and resume or stop it."""
    import threading

    from app.core.library.service import JobControl

    ctl, paused = JobControl(), threading.Event()

    def watch(ev):
        if ev.kind == "progress" and ev.data.phase == "indexing" and ev.data.done > 0 and not paused.is_set():
            ctl.pause()
            paused.set()

    svc.subscribe(watch)
    cmd = svc.index(control=ctl)
    assert paused.wait(60)
    return cmd, ctl


@pytest.mark.parametrize("then", ["resume", "stop"])
def test_a_folder_deleted_while_it_is_indexed_is_gone_not_skipped(tmp_path, then, library):
    """Trial 16: a folder deleted while it was indexed read as "N photos missing, and M files
    skipped (could not be read)": the files that went before they were read are gone, not
    unreadable. The run itself finds them and every photo of the deleted folder, also in its
    subfolders indexed before (missing, out of the results), with no file skipped and no rescan,
    whether it is resumed or stopped."""
    root = tmp_path / "lib"
    photos(root / "keep", [f"k{i}.png" for i in range(4)], seed=0)
    photos(root / "2019" / "a", [f"a{i}.png" for i in range(6)], seed=5)
    svc = open_lib(tmp_path / "h", library)
    index(svc, [root])  # the centring mean is made: the next run describes in batches
    photos(root / "2019" / "b", [f"b{i:02d}.png" for i in range(40)], seed=10)
    cmd, ctl = index_until_paused(svc)
    shutil.rmtree(root / "2019")
    ctl.resume() if then == "resume" else ctl.cancel()
    prog = cmd.result(120)
    st = svc.stats()
    assert prog.failed == 0 and st["failed"] == 0, (prog, st)
    assert svc.failures() == []
    assert st["indexed"] == 4 and st["missing"] >= 6, st
    hits = Searcher(svc).search(SearchRequest(path=str(root / "keep" / "k0.png"), top=50)).hits
    assert hits and not any("/2019/" in h.path for h in hits)
    svc.close()


def test_a_library_folder_deleted_while_it_is_indexed_keeps_its_photos_as_missing(tmp_path, library):
    """A library folder of day folders (3 photos each) deleted while it is indexed: as a scan
    would, every photo of it is kept as missing (not removed for being few per folder), and the
    folder stays listed as missing (Forget missing photos or Remove take it away)."""
    lib = tmp_path / "Photos"
    for n in range(3):
        photos(lib / f"day{n}", [f"p{i}.png" for i in range(3)], seed=20 + 3 * n)
    keep = photos(tmp_path / "keep", [f"k{i}.png" for i in range(4)], seed=0)
    svc = open_lib(tmp_path / "h", library)
    index(svc, [lib, keep])
    photos(lib / "day9", [f"n{i:02d}.png" for i in range(40)], seed=40)
    cmd, ctl = index_until_paused(svc)
    shutil.rmtree(lib)
    ctl.resume()
    cmd.result(120)
    st = svc.stats()
    folder = next(f for f in st["folders"] if f["path"] == str(lib.resolve()))
    assert folder["state"] == "missing" and st["indexed"] == 4 and st["failed"] == 0, st
    days = {str((lib / f"day{n}" / f"p{i}.png").resolve()) for n in range(3) for i in range(3)}
    assert days <= set(map(str, svc.missing())), sorted(svc.missing())[:5]  # none removed for being 3 a folder
    svc.close()


def test_output_cut_short_by_its_reader_is_no_error(indexed_home, photo_dir):
    """Trial 17: `heatsearch status --json | head -c 600` ended with "heatsearch: internal error:
    BrokenPipeError". A reader that stops reading (head, less) ends the command quietly."""
    env = {k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT)}.items() if k != "PYTHONUNBUFFERED"}
    for args in (["status", "--json"], ["search", str(photo_dir / "scene0" / "img0.jpg"), "--json"]):
        p = subprocess.Popen([sys.executable, "-m", "app", *args, "--home", str(indexed_home)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # the reader is gone before the command writes
        err = p.stderr.read().decode()
        assert p.wait(120) == 0 and err == "", (args, err)


def test_indexing_a_subfolder_of_the_library_says_it_is_already_there(photo_dir, indexed_home):
    """Trial 15: `heatsearch index` of a folder inside a library folder printed the library's
    counts and nothing about the folder: it is already in the library, inside the other."""
    r = cli("index", photo_dir / "scene0", home=indexed_home)
    assert r.returncode == 0, r.stderr
    assert "already in the library, inside" in r.stderr and str(photo_dir.resolve()) in r.stderr, r.stderr
    assert len(json.loads(cli("status", "--json", home=indexed_home).stdout)["folders"]) == 1
    # forgotten, the subfolder added again is scanned again: not "already in the library"
    assert cli("forget", photo_dir / "scene0", home=indexed_home).returncode == 0
    r = cli("index", photo_dir / "scene0", home=indexed_home)
    assert r.returncode == 0 and "already in the library" not in r.stderr, r.stderr
