"""The catalog's seams with the outside world: a creation cut short, and reads that must see one
state of the library. Real SQLite and a real PostgreSQL server (the `library` fixture)."""
from __future__ import annotations

import time

import pytest

from app.core.catalog.catalog import Catalog
from app.core.catalog.models import SCHEMA_VERSION, Base, Folder, Image
from app.core.errors import HeatSearchError
from tests.core.helpers import index, open_lib


def _tables_only(home, library, with_photo: bool = False) -> None:
    """What a crash right after `create_all` left behind before the creation was one transaction:
    every table, no schema_version or library_state row (and, with_photo, a photo in it, as a
    catalog that lost its meta rows some other way)."""
    cat = Catalog.connect(library or home / "catalog.sqlite")
    try:
        Base.metadata.create_all(cat.engine)
        if with_photo:
            with cat._session.begin() as s:
                f = Folder(path="/nowhere", added_at=time.time())
                s.add(f)
                s.flush()
                s.add(Image(path="/nowhere/a.jpg", folder_id=f.id, size=1, mtime_ns=1))
    finally:
        cat.close()


def test_a_catalog_created_up_to_its_tables_is_finished_at_the_next_open(tmp_path, photo_dir, library):
    home = tmp_path / "h"
    home.mkdir()
    _tables_only(home, library)
    svc = open_lib(home, library)
    try:
        assert svc.catalog.schema_version() == SCHEMA_VERSION and svc.catalog.generation() == 0
        index(svc, [photo_dir])
        assert svc.stats()["indexed"] == 12
    finally:
        svc.close()


def test_a_catalog_with_photos_but_no_schema_row_is_one_line_saying_what_to_do(tmp_path, library):
    home = tmp_path / "h"
    home.mkdir()
    _tables_only(home, library, with_photo=True)
    with pytest.raises(HeatSearchError) as e:
        open_lib(home, library).close()
    msg = str(e.value)
    assert "\n" not in msg and "schema" in msg and "heatsearch index" in msg, msg


def test_a_creation_interrupted_before_its_meta_rows_leaves_no_table(tmp_path, library):
    """Tables, indexes and the meta rows are created in one transaction (both databases have
    transactional DDL; pysqlite needs its BEGIN said out loud, or each CREATE commits alone)."""
    from sqlalchemy import event, inspect

    home = tmp_path / "h"
    home.mkdir()
    cat = Catalog.connect(library or home / "catalog.sqlite")

    def crash(conn, cursor, statement, *a):
        if statement.lstrip().upper().startswith("INSERT INTO META"):
            raise RuntimeError("the power went")

    event.listen(cat.engine, "before_cursor_execute", crash)
    try:
        with pytest.raises(RuntimeError, match="power"):
            cat.prepare()
        assert not inspect(cat.engine).get_table_names()
    finally:
        cat.close()
    assert Catalog.open(library or home / "catalog.sqlite").schema_version() == SCHEMA_VERSION


def test_changes_since_reads_one_state_while_another_connection_commits(tmp_path, photo_dir, library):
    """A reader catching up (`changes_since`) reads the generation, the live ids and the new
    descriptors as one state, even when a writer commits between its SELECTs: here right after
    the first one, a photo is added and the generation bumped on another connection."""
    from sqlalchemy import event

    from app.core.catalog.models import Descriptor

    home = tmp_path / "h"
    home.mkdir()
    svc = open_lib(home, library)
    index(svc, [photo_dir])
    sid = svc.snapshot().space.id
    svc.close()
    location = library or home / "catalog.sqlite"
    reader, writer = Catalog.open(location), Catalog.open(location)
    try:
        gen0, live0, _ = reader.changes_since(sid, 0)
        assert len(live0) == 12
        added: list[int] = []

        def add_photo():
            with writer._session.begin() as s:
                gen = writer._bump(s)
                one = s.get(Image, int(live0[0]))
                row = Image(path=one.path + ".copy.jpg", folder_id=one.folder_id, size=1, mtime_ns=1, status="indexed")
                s.add(row)
                s.flush()
                old = s.get(Descriptor, (int(live0[0]), sid))
                s.add(Descriptor(image_id=row.id, space_id=sid, raw=old.raw, grid=old.grid, grid_h=old.grid_h,
                                 grid_w=old.grid_w, gen=gen))
                added.append(row.id)

        state_read = []

        def after(conn, cursor, statement, *a):
            if "library_state" in statement:
                state_read.append(True)

        def before(conn, cursor, statement, *a):
            if state_read and not added:  # the statement after the generation was read
                add_photo()

        event.listen(reader.engine, "after_cursor_execute", after)
        event.listen(reader.engine, "before_cursor_execute", before)
        gen, live, fresh = reader.changes_since(sid, gen0)
        event.remove(reader.engine, "before_cursor_execute", before)
        assert added, "the write ran"
        assert (gen, live.tolist(), fresh) == (gen0, live0.tolist(), [])  # the state before the write, whole
        gen, live, fresh = reader.changes_since(sid, gen0)
        assert gen == gen0 + 1 and added[0] in live.tolist() and [i for i, _ in fresh] == added
    finally:
        reader.close()
        writer.close()
