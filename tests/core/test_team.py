"""A library a team shares (issue 46): the library service's seams, each test seen failing before
27c655d/cb38ff1. The writer lock only while a write runs, reads that never write, a dropped lock
that stops the writer, an outage that is a state, never a half-finished space, a tampered 8-bit
model refused, and the review's seam defects 1, 2, 4, 6 and 8."""
import hashlib
import inspect
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from app.core import errors
from app.core.errors import HeatSearchError, LibraryBusyError, ReadOnlyError
from app.core.library.service import LibraryService
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import catalog_state, index, open_lib, snapshot_matches_catalog, tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def submit_write(svc, name, fn):
    """A command that writes (it runs under the writer lock). Before issue 46 there was no such
    flag: every command of a writing service ran under the lock it took at opening."""
    if "writes" in inspect.signature(svc.submit).parameters:
        return svc.submit(name, fn, writes=True)
    return svc.submit(name, fn)


def settle(svc) -> None:
    """Wait until the writer thread is past every command queued so far (a write's end, which
    lets the lock go, runs just after its result is set)."""
    svc.run(svc.submit("settle", lambda c: None), 60)


def cli(*args, home, env=None):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app", *map(str, args), "--home", str(home)], capture_output=True,
                          text=True, cwd=ROOT, env=full_env, timeout=300)


def library_rows(home: Path, library: str | None) -> tuple:
    """What catalog.version() compares, read without HeatSearch: the generation, the spaces' rows
    (with their model digests) and the folders."""
    queries = ("SELECT generation FROM library_state",
               "SELECT id, key, active, ready, white_version, model_digest, mu_n, white_n FROM spaces ORDER BY id",
               "SELECT id, path, state FROM folders ORDER BY id")
    if library is None:
        con = sqlite3.connect(f"file:{home / 'catalog.sqlite'}?mode=ro", uri=True)
        try:
            return tuple(tuple(map(tuple, con.execute(q).fetchall())) for q in queries)
        finally:
            con.close()
    import psycopg

    with psycopg.connect(library, autocommit=True) as con:
        return tuple(tuple(map(tuple, con.execute(q).fetchall())) for q in queries)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the review's seam defects -------------------------------------------------------------------

def test_caches_that_failed_to_follow_a_commit_are_never_saved_as_current(tmp_path, monkeypatch):
    """(defect 1) A folder's photos are marked missing while the vector cache's hide raises: the
    vector files are never labelled with the generation of that commit, so after a restart the
    missing photos' vectors are out of the searched index and out of every result. (Before, the
    files claimed the new generation while still holding those vectors: the restart trusted them
    and searched them; only the results' catalog check kept them off the list.)"""
    from app.core.index.local import LocalIndex

    keep, gone = tmp_path / "lib" / "keep", tmp_path / "lib" / "gone"
    for i in range(6):
        write_photo(keep / f"k{i}.png", 10 + i, size=(96, 72))
        write_photo(gone / f"g{i}.png", 20 + i, size=(96, 72))
    home = tmp_path / "h"
    svc = open_lib(home)
    index(svc, [keep, gone])
    assert svc.snapshot().n_alive == 12
    shutil.rmtree(gone)  # the folder went: its photos are marked missing at the next scan

    real = LocalIndex.hide
    calls = []

    def hide_once(self, ids):
        calls.append(list(ids))
        if len(calls) == 1:
            raise RuntimeError("the cache could not follow")
        return real(self, ids)

    monkeypatch.setattr(LocalIndex, "hide", hide_once)
    with pytest.raises(Exception, match="the cache could not follow"):
        svc.run(svc.index(), timeout=120)
    assert calls and len(calls[0]) == 6  # the six photos of the gone folder
    svc.close()
    monkeypatch.setattr(LocalIndex, "hide", real)

    con = sqlite3.connect(home / "catalog.sqlite")
    try:
        generation = con.execute("SELECT generation FROM library_state").fetchone()[0]
        missing = {i for (i,) in con.execute("SELECT id FROM images WHERE status = 'missing'")}
    finally:
        con.close()
    assert len(missing) == 6  # the catalog committed them missing
    saved = [json.loads(p.read_text())["generation"] for p in home.glob("space-*.json")]

    svc = open_lib(home)
    try:
        snap = svc.snapshot()
        searched = set(snap.ids[snap.ids >= 0].tolist())
        assert not searched & missing, f"the vectors of {len(searched & missing)} missing photos are searched"
        res = Searcher(svc).search(SearchRequest(path=str(keep / "k0.png"), top=50, qe="off", her="off"))
        found = [h.path for h in res.hits]
        assert len(found) == 6 and not [p for p in found if os.sep + "gone" + os.sep in p], found
        snapshot_matches_catalog(svc)
    finally:
        svc.close()
    assert saved and all(g < generation for g in saved), (saved, generation)  # never the new one


def test_a_close_that_could_not_wait_still_lets_the_library_go(tmp_path, many, library):
    """(defect 2) close(timeout=0.1) while a write command is busy returns False; once that
    command ends the writer thread itself lets go of the lock and the catalog, so another service
    on the same library in the same process indexes at once (it was "in use by HeatSearch (pid
    <own pid>)" until the process ended)."""
    home = tmp_path / "h"
    svc = open_lib(home, library)
    index(svc, [many])
    started = threading.Event()
    slow = submit_write(svc, "slow", lambda c: (started.set(), time.sleep(2.0)))
    assert started.wait(30)
    t = time.monotonic()
    assert svc.close(timeout=0.1) is False
    assert time.monotonic() - t < 1.0
    slow.result(30)  # the command ran to its end
    svc._thread.join(30)
    assert not svc._thread.is_alive()

    write_photo(many / "added.png", 4040, size=(200, 150))
    logs = []
    try:
        again = LibraryService(home, tiny_settings(), library=library)
    except LibraryBusyError as e:
        pytest.fail(f"the closed service still holds the library: {e}")
    try:
        again.subscribe(lambda ev: ev.kind == "log" and logs.append(str(ev.data)))
        again.wait_ready(60)
        prog = index(again)
        assert prog.phase == "done" and prog.done == 1, prog
        assert again.stats()["indexed"] == 41
        assert not [m for m in logs if "in use" in m or "waiting" in m], logs
    finally:
        again.close()


def test_a_copy_of_bytes_described_again_meanwhile_gets_its_own_descriptor(tmp_path, monkeypatch, library):
    """(defect 4) Photo A (bytes X) is in the library. Then A is rewritten (bytes Y) and a new file
    B holds X: B's plan reuses A's descriptor. The batches commit out of order (as Ray Data's do;
    here the producer is handed its tasks reversed, batch_size 1): A is described as Y first, and
    B's batch must then not copy A's new descriptor: B gets X's own (it got Y's before)."""
    from app.core.pipeline import indexer

    lib = tmp_path / "lib"
    a = write_photo(lib / "a.png", 7, size=(120, 90))
    for i in range(3):
        write_photo(lib / f"o{i}.png", 30 + i, size=(96, 72))
    x_bytes = a.read_bytes()
    svc = open_lib(tmp_path / "h", library, batch_size=1)
    try:
        index(svc, [lib])
        desc_x = np.frombuffer(catalog_state(svc)[0][str(a)], np.float32).copy()

        write_photo(a, 8, size=(110, 80))  # A's new content Y (another size: the scan sees a change)
        st = a.stat()
        os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
        b = lib / "b.png"
        b.write_bytes(x_bytes)
        assert hashlib.sha256(b.read_bytes()).digest() == hashlib.sha256(x_bytes).digest()

        real = indexer.LocalProducer.run
        order = []

        def reversed_run(self, tasks, reuse, *a_, **k):
            order.append([Path(t.path).name for t in tasks])
            return real(self, list(reversed(tasks)), reuse, *a_, **k)

        monkeypatch.setattr(indexer.LocalProducer, "run", reversed_run)
        prog = index(svc)
        assert prog.phase == "done" and prog.failed == 0, prog
        assert order[0] == ["b.png", "a.png"]  # reversed: A's batch commits before B's
        state, failed = catalog_state(svc)
        assert not failed
        desc_y = np.frombuffer(state[str(a)], np.float32)
        desc_b = np.frombuffer(state[str(b)], np.float32)
        assert not np.allclose(desc_y, desc_x, atol=1e-4)  # A really is described anew
        assert not np.allclose(desc_b, desc_y, atol=1e-4), "B got the descriptor of A's new bytes"
        np.testing.assert_allclose(desc_b, desc_x, rtol=1e-4, atol=1e-5)
        snapshot_matches_catalog(svc)
    finally:
        svc.close()


def test_refreshes_asked_while_the_writer_is_busy_are_coalesced(tmp_path, many, monkeypatch, library):
    """(defect 6) 100 refreshes asked while a write command keeps the writer thread busy are one
    queued refresh: at most 2 syncs of the library (there were 100 back-to-back reloads)."""
    svc = open_lib(tmp_path / "h", library)
    try:
        index(svc, [many])
        settle(svc)
        counts = []
        for name in ("sync", "reload"):  # reload: the name of a refresh's re-read before issue 46
            real = getattr(svc.writer, name, None)
            if real is not None:
                def counted(*a, _real=real, **k):
                    counts.append(1)
                    return _real(*a, **k)

                monkeypatch.setattr(svc.writer, name, counted)
        started, release = threading.Event(), threading.Event()
        busy = submit_write(svc, "busy", lambda c: (started.set(), release.wait(30)))
        assert started.wait(30)
        cmds = [svc.refresh() for _ in range(100)]
        release.set()
        busy.result(30)
        for c in cmds:
            try:
                c.result(60)
            except Exception:  # noqa: BLE001 - counted below, whatever each ended with
                pass
        assert len(counts) <= 2, f"{len(counts)} syncs for 100 refreshes"
        assert len({id(c) for c in cmds}) == 1  # the queued one, returned again
        assert cmds[-1].result(0) in (True, False)  # it ran (nothing had changed: no sync needed)
    finally:
        svc.close()


def test_a_writer_whose_lock_connection_drops_stops_and_resumes_once_it_holds_it_again(tmp_path, postgres, pg_url):
    """(defect 8, PostgreSQL) During an indexing run the lock's connection is terminated and
    another writer takes the advisory lock at once: while that one holds it, this writer commits
    nothing (it went on writing without the lock); once it is let go the run resumes by itself
    and every photo ends indexed."""
    import psycopg

    from app.core.catalog.postgres import LOCK_KEY

    d = tmp_path / "sixty"
    for i in range(60):
        write_photo(d / f"p{i:02d}.png", 600 + i, size=(96, 72))
    dbname = pg_url.split("?", 1)[0].rsplit("/", 1)[1]
    svc = open_lib(tmp_path / "h", pg_url, batch_size=2)
    mine: list = []
    taken, errors_ = threading.Event(), []
    finished = []

    def take_over():
        """On the writer thread, just after a batch committed: what a dropped connection and a
        quicker second writer do between two batches."""
        with postgres._admin() as admin:
            pid = admin.execute(
                "SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' "
                "AND l.granted AND l.objid = %s AND d.datname = %s", (LOCK_KEY, dbname)).fetchone()
            assert pid is not None, "nobody holds the writer lock during the run"
            admin.execute("SELECT pg_terminate_backend(%s)", (pid[0],))
        con = psycopg.connect(pg_url, autocommit=True)
        deadline = time.monotonic() + 10
        while not con.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the terminated backend's lock was never let go"
            time.sleep(0.02)
        mine.append(con)

    def watch(ev):
        if ev.kind == "progress" and ev.data.phase == "indexing" and ev.data.done >= 6 and not taken.is_set():
            try:
                take_over()
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors_.append(repr(e))
            taken.set()
        if ev.kind == "done" and getattr(ev.data, "phase", "") == "done":
            finished.append(ev.data)

    svc.subscribe(watch)
    try:
        first = svc.index([d])
        assert taken.wait(120), "the run ended before it was 6 photos in"
        assert not errors_, errors_
        con = mine[0]
        gen = lambda: con.execute("SELECT generation FROM library_state").fetchone()[0]  # noqa: E731
        held_at = gen()
        seen = set()
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            seen.add(gen())
            time.sleep(0.05)
        assert seen == {held_at}, f"the library changed while another writer held its lock: {sorted(seen)}"
        try:
            first.result(30)
        except Exception as e:  # noqa: BLE001
            assert "lock" in str(e) and "\n" not in str(e), e
        else:
            pytest.fail("the run went on without the lock")
        con.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        con.close()
        deadline = time.monotonic() + 120
        while not finished and time.monotonic() < deadline:
            time.sleep(0.1)
        assert finished, "the run did not resume once the lock was free"
        settle(svc)
        state, failed = catalog_state(svc)
        assert len(state) == 60 and not failed
        assert svc.stats()["indexed"] == 60
        snapshot_matches_catalog(svc)
    finally:
        for c in mine:
            c.close()
        svc.close()


# ---- never a half-finished space -------------------------------------------------------------------

def test_a_new_space_is_never_served_before_its_whitening(tmp_path, many, monkeypatch, library):
    """A re-index after a change of photo size: every snapshot published by the writer, and every
    one a second, read-only service on the same library refreshes to meanwhile, serves either the
    old space or the new one whitened, never the new one unwhitened (it was served for a moment
    between its last batch and its whitening)."""
    from app.core import policy

    monkeypatch.setattr(policy, "MIN_WHITEN", 16)
    home = tmp_path / "h"
    svc = open_lib(home, library)
    reader = None
    try:
        index(svc, [many])
        first = svc.snapshot()
        assert not first.whitening.is_identity
        reader = LibraryService(home, tiny_settings(), library=library, read_only=True)
        reader.wait_ready(60)
        seen: list[tuple] = []

        def look(who, snap):
            if snap.space is not None:
                seen.append((who, snap.space.key, snap.whitening is None or snap.whitening.is_identity, snap.n_alive))

        svc.subscribe(lambda ev: ev.kind == "snapshot" and look("writer", svc.snapshot()))
        stop, problems = threading.Event(), []

        def poll():
            while not stop.is_set():
                try:
                    reader.run(reader.refresh(), 30)
                except Exception as e:  # noqa: BLE001 - reported below
                    problems.append(repr(e))
                look("reader", reader.snapshot())

        t = threading.Thread(target=poll)
        t.start()
        try:
            svc.run(svc.apply_settings(tiny_settings(max_side=96)), 120)
            index(svc)  # after the run apply_settings queued
        finally:
            stop.set()
            t.join(60)
        final = svc.snapshot()
        new = final.space.key
        assert new != first.space.key and not final.whitening.is_identity and final.n_alive == 40
        half = [s for s in seen if s[1] == new and s[2]]
        assert not half, f"the new space was served unwhitened: {half[:3]}"
        assert not problems, problems[:3]
        assert any(s[0] == "writer" and s[1] == new for s in seen)
        reader.run(reader.refresh(), 30)
        assert reader.snapshot().space.key == new and not reader.snapshot().whitening.is_identity
        assert any(s[0] == "reader" for s in seen)
    finally:
        if reader is not None:
            reader.close()
        svc.close()


# ---- reads never write --------------------------------------------------------------------------------

def test_reading_commands_with_other_settings_change_no_row(tmp_path, photo_dir, library):
    """`status` and `search` from a data folder whose settings ask for another photo size (on
    SQLite: --size on the library's own data folder) change no row of the library (they created
    a space and made it the active one) and say that the library's model is used."""
    home = tmp_path / "h"
    svc = open_lib(home, library)
    index(svc, [photo_dir])
    svc.close()
    if library:
        reader_home = tmp_path / "other"
        tiny_settings(max_side=1024).save(reader_home)
        where, extra = ["--library", library], []
    else:
        reader_home, where, extra = home, [], ["--size", "1024"]
    before = library_rows(home, library)
    query = photo_dir / "scene1" / "img0.jpg"
    for args in (["status", *where, *extra], ["search", query, "--top", "3", *where, *extra]):
        r = cli(*args, home=reader_home)
        assert r.returncode == 0, r.stderr
        assert library_rows(home, library) == before, f"`heatsearch {args[0]}` changed the library"
        assert "the library's model is used" in r.stderr, r.stderr
    check = LibraryService(home, tiny_settings(), library=library, read_only=True)
    try:
        check.wait_ready(60)
        assert len(check.catalog.spaces()) == 1
    finally:
        check.close()


def test_indexing_keeps_the_librarys_model_unless_the_settings_are_asked_for(tmp_path, photo_dir, library):
    """A service whose settings ask for another photo size opens the library without a change
    (it made its own space the active one at opening) and says so (settings_note); an automatic
    run (model="library") indexes new photos with the library's model; a run that asks for the
    settings' model (model="settings") makes it the library's and indexes every photo with it."""
    home = tmp_path / "h"
    svc = open_lib(home, library)
    index(svc, [photo_dir])
    key = svc.snapshot().space.key
    svc.close()
    other_home = tmp_path / "other" if library else home
    before = library_rows(home, library)
    other = LibraryService(other_home, tiny_settings(max_side=96), library=library)
    try:
        other.wait_ready(60)
        settle(other)
        assert library_rows(home, library) == before, "opening changed the library"
        assert "96 px" in other.settings_note() and "the library's model is used" in other.settings_note()
        write_photo(photo_dir / "scene0" / "new.png", 4242, size=(100, 75))
        prog = other.run(other.index(model="library"), 120)
        assert prog.phase == "done" and prog.done == 1
        assert [s.key for s in other.catalog.spaces()] == [key] and other.snapshot().space.key == key
        prog = other.run(other.index(model="settings"), 120)
        assert prog.phase == "done" and prog.done == 13
        assert other.snapshot().space.key != key and other.snapshot().space.max_side == 96
        assert other.settings_note() == ""
    finally:
        other.close()


def test_a_refit_drops_every_older_vector_table_of_the_space(tmp_path, many, monkeypatch, pg_url):
    """(PostgreSQL) After a whitening refit the space keeps one vector table, the new whitening's
    (the one before it was kept as well, and so one table too many stayed for good)."""
    import psycopg

    from app.core import policy

    monkeypatch.setattr(policy, "MIN_WHITEN", 16)
    svc = open_lib(tmp_path / "h", pg_url)
    try:
        index(svc, [many])
        for dim in (8, 16):
            svc.run(svc.apply_settings(tiny_settings(dim=dim)), 120)
        settle(svc)
        sp = svc.snapshot().space
        with psycopg.connect(pg_url, autocommit=True) as con:
            tables = sorted(t for (t,) in con.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE %s",
                (f"vec\\_s{sp.id}\\_w%",)))
        assert tables == [f"vec_s{sp.id}_w{sp.white_version}"], tables
        hits = Searcher(svc).search(SearchRequest(path=str(many / "p05.png"), top=3, qe="off", her="off")).hits
        assert hits[0].path.endswith("p05.png")
    finally:
        svc.close()


def test_a_write_outside_a_write_command_is_refused(tmp_path, photo_dir, library):
    """An open, idle service holds no lock, and its catalog refuses a write made outside a write
    command (a caller reaching past the service): nothing changes."""
    home = tmp_path / "h"
    svc = open_lib(home, library)
    try:
        index(svc, [photo_dir / "scene0"])
        settle(svc)
        before = library_rows(home, library)
        other = tmp_path / "elsewhere"
        other.mkdir()
        with pytest.raises(ReadOnlyError):
            svc.catalog.add_folder(str(other))
        assert library_rows(home, library) == before
        assert [f.path for f in svc.catalog.folders()] == [str(photo_dir / "scene0")]
    finally:
        svc.close()


# ---- the model is the library's -----------------------------------------------------------------------

def test_an_8bit_model_changed_under_the_same_space_is_refused(tmp_path, pg_url):
    """A client (its own data folder) searched an 8-bit library and so knows its model; then the
    row's model is replaced and its digest recomputed beside it, as anyone who could write the row
    would. The client's next search is refused in one line naming the change; nothing is
    returned (the changed model ran, and answered as if nothing had happened)."""
    from sqlalchemy import select, update

    from app.core.catalog.models import Space
    from app.core.features.engine import pack, unpack

    photos = tmp_path / "photos"
    for i in range(12):
        write_photo(photos / f"p{i:02d}.png", 500 + i, size=(160, 120))
    outside = write_photo(tmp_path / "query.png", 900, size=(160, 120))  # not in the library: the model runs
    owner = open_lib(tmp_path / "indexer", pg_url, precision="int8")
    try:
        prog = index(owner, [photos])
        assert prog.phase == "done" and prog.done == 12
        sid = owner.snapshot().space.id
    finally:
        owner.close()

    client_home = tmp_path / "client"
    client = open_lib(client_home, pg_url, precision="int8")
    try:
        hits = Searcher(client).search(SearchRequest(path=str(outside), top=3)).hits
        assert hits
    finally:
        client.close()

    from app.core.catalog.catalog import Catalog

    cat = Catalog.connect(pg_url)
    try:
        with cat.engine.begin() as conn:
            blob = conn.execute(select(Space.model).where(Space.id == sid)).scalar()
            xml, weights = unpack(blob)
            changed = pack(xml + b"\n<!-- another model -->\n", weights)  # still a model that loads
            conn.execute(update(Space).where(Space.id == sid).values(
                model=changed, model_digest=hashlib.sha256(changed).hexdigest()))
    finally:
        cat.close()

    client = open_lib(client_home, pg_url, precision="int8")
    try:
        got = None
        with pytest.raises(HeatSearchError, match="changed") as e:
            got = Searcher(client).search(SearchRequest(path=str(outside), top=3))
        assert got is None
        assert "\n" not in str(e.value) and "8-bit model" in str(e.value)
    finally:
        client.close()


# ---- an outage is a state -----------------------------------------------------------------------------

def test_the_servers_memory_holds_a_large_librarys_graph(tmp_path):
    """`heatsearch server start` gives its PostgreSQL a quarter of this computer's memory for its
    buffers: at the wheel's 128 MB a 300,000-photo library's graph and vectors are read from the
    operating system at each search (106 ms against 55-74 ms; docs/large-libraries.md)."""
    import psycopg

    from app.core.catalog import pgserver

    data = tmp_path / "server"
    state = pgserver.start(data)
    try:
        role = "heatsearch_searcher"
        url = state.local["searcher"].replace(f"{role}@", f"{role}:{quote(state.passwords[role], safe='')}@")
        with psycopg.connect(url) as con:
            got = con.execute("SHOW shared_buffers").fetchone()[0]
        want = pgserver.shared_buffers_mb()
        assert want >= 128 and got in (f"{want}MB", f"{want // 1024}GB"), (got, want)
    finally:
        pgserver.stop(data)


def test_an_administrators_shared_buffers_is_kept(tmp_path):
    """The server's memory is raised only from initdb's 128 MB: a value an administrator wrote in
    postgresql.conf stays the one that counts (a line appended after it would replace it)."""
    from app.core.catalog import pgserver

    for before, ours in (("shared_buffers = 128MB\t\t\t# min 128kB\n", True), ("shared_buffers = '2GB'\n", False)):
        (tmp_path / "pg_hba.conf").write_text("")
        (tmp_path / "postgresql.conf").write_text(before)
        pgserver._configure(tmp_path, False, "heatsearch")
        after = (tmp_path / "postgresql.conf").read_text()
        assert after.startswith(before) and (f"shared_buffers = '{pgserver.shared_buffers_mb()}MB'" in after) == ours, after


def test_a_stopped_server_is_one_state_and_the_library_comes_back(tmp_path, capfd):
    """A server (`heatsearch server start --listen`) stops under an open library: the first search
    fails in one line (ServerUnreachable), one "connection" event says so however many refreshes
    follow, searches meanwhile fail at once and nothing is printed; once the server is back, a
    refresh says so in one "connection" event, the outage is over and searches answer again.
    (Before: each search raised the driver's multi-line OperationalError.)"""
    from app.core.catalog import pgserver

    unreachable = getattr(errors, "ServerUnreachable", HeatSearchError)
    data = tmp_path / "server"
    listen = f"127.0.0.1:{free_port()}"
    state = pgserver.start(data, listen)
    if isinstance(state.remote, str):  # before issue 46: the superuser's URL, its password inside
        url = state.remote
    else:
        role = "heatsearch_indexer"
        url = state.remote["indexer"].replace(f"{role}@", f"{role}:{quote(state.passwords[role], safe='')}@")
    photos = tmp_path / "photos"
    for i in range(6):
        write_photo(photos / f"p{i}.png", 70 + i, size=(96, 72))
    svc = None
    try:
        svc = open_lib(tmp_path / "h", url)
        index(svc, [photos])
        settle(svc)
        searcher = Searcher(svc)
        req = SearchRequest(path=str(photos / "p2.png"), top=3, qe="off", her="off")
        assert searcher.search(req).hits[0].path.endswith("p2.png")
        events = []
        svc.subscribe(lambda ev: ev.kind == "connection" and events.append(dict(ev.data)))

        pgserver.stop(data)
        capfd.readouterr()  # what pg_ctl said
        with pytest.raises(unreachable) as e:
            searcher.search(req)
        assert "\n" not in str(e.value) and "reach" in str(e.value), str(e.value)
        for _ in range(20):
            cmd = svc.refresh()
            try:
                cmd.result(30)
            except Exception:  # noqa: BLE001 - a refresh during the outage reports it as events
                pass
        for _ in range(5):
            t = time.monotonic()
            with pytest.raises(unreachable, match="not answering"):
                searcher.search(req)
            assert time.monotonic() - t < 1.0
        assert svc.outage is not None
        assert [ev["down"] for ev in events] == [True] and "not answering" in events[0]["message"], events
        assert capfd.readouterr().err == ""

        pgserver.start(data, listen)
        capfd.readouterr()
        svc.run(svc.refresh(), 60)
        assert [ev["down"] for ev in events] == [True, False], events
        assert svc.outage is None
        assert searcher.search(req).hits[0].path.endswith("p2.png")
        assert capfd.readouterr().err == ""
    finally:
        if svc is not None:
            svc.close()
        pgserver.stop(data)
