"""Shared helpers for core tests: a library on the tiny random CNN, run to completion."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import select

from app.core.catalog.models import Descriptor, Image as ImageRow
from app.core.config import Settings
from app.core import paths
from app.core.library.service import LibraryService


def tiny_settings(**kw) -> Settings:
    """A tiny random network at 128 px, on the default engine (OpenVINO on the CPU: the path users
    run; its export is made once per test session)."""
    return Settings(**{"backbone": "tiny-random", "max_side": 128, "batch_size": 4, "engine": "auto", **kw})


def open_lib(home: Path, library: str | None = None, **kw) -> LibraryService:
    """A library on the tiny CNN (in `home`, or at the PostgreSQL URL `library`); its settings are
    saved, so a CLI run on the same home matches."""
    settings = tiny_settings(**kw)
    settings.save(Path(home))
    svc = LibraryService(home, settings, library=library)
    svc.wait_ready(60)
    return svc


def index(svc: LibraryService, folders=(), **kw):
    """Index to the end; returns the last Progress."""
    return svc.run(svc.index(list(folders), **kw), timeout=300)


def catalog_state(svc: LibraryService):
    """path -> raw descriptor bytes of every indexed image, plus the failed paths."""
    with svc.catalog._read() as s:
        rows = s.execute(select(ImageRow.path, Descriptor.raw).join(Descriptor, Descriptor.image_id == ImageRow.id)
                         .where(ImageRow.status == "indexed")).all()
        failed = set(s.scalars(select(ImageRow.path).where(ImageRow.status == "failed")))
    return {paths.from_db(p): r for p, r in rows}, {paths.from_db(p) for p in failed}


def snapshot_matches_catalog(svc: LibraryService) -> None:
    """Every searchable vector of the snapshot is the whitened catalog descriptor of its image,
    and every indexed image has exactly one."""
    snap = svc.snapshot()
    ids, vecs = snap.all_vectors()
    with svc.catalog._read() as s:
        want = dict(s.execute(select(Descriptor.image_id, Descriptor.raw).join(ImageRow, ImageRow.id == Descriptor.image_id)
                              .where(Descriptor.space_id == snap.space.id, ImageRow.status == "indexed")).all())
    assert sorted(ids.tolist()) == sorted(want), "live vectors and indexed images differ"
    raws = np.stack([np.frombuffer(want[int(i)], np.float32) for i in ids])
    np.testing.assert_allclose(vecs, snap.whitening.apply(raws), rtol=1e-5, atol=1e-6)
