"""Indexing as a generator of progress: scan -> decode ahead in a worker pool -> CNN batches ->
HeW -> one transaction per batch -> ANN add. Each `yield` is a point where the job may pause or
be cancelled; a killed process loses at most the batch in flight and the next run resumes.
"""
from __future__ import annotations

import hashlib
import io
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
from sqlalchemy import select

from ..catalog.models import Descriptor, Image
from ..describe import describe_tensors, mean_local_feature
from ..errors import HeatSearchError, ImageError
from ..features.extractor import prepare
from ..imageio import open_oriented, read_file
from ..library import Library
from .scan import FileInfo, diff_folders

CALIBRATION_IMAGES = 32  # images whose local features give the centring mean mu of a new space


@dataclass
class Progress:
    """A snapshot of an indexing run. rate: images per second (CNN-processed); eta_s: seconds left."""

    phase: str  # scanning | calibrating | indexing | finishing | done | cancelled
    done: int = 0
    total: int = 0
    failed: int = 0
    reused: int = 0
    removed: int = 0
    rate: float = 0.0
    eta_s: float | None = None
    last_errors: list[tuple[str, str]] = field(default_factory=list)


class JobControl:
    """Pause / resume / cancel from another thread; honoured between batches."""

    def __init__(self):
        self._run = threading.Event()
        self._run.set()
        self.cancelled = False

    def pause(self):
        self._run.clear()

    def resume(self):
        self._run.set()

    def cancel(self):
        self.cancelled = True
        self._run.set()

    @property
    def paused(self) -> bool:
        return not self._run.is_set()

    def wait(self):
        self._run.wait()


@dataclass
class _Decoded:
    info: FileInfo
    digest: str = ""
    prepared: object = None
    orig_size: tuple = (0, 0)
    reuse_of: int | None = None
    error: str = ""


def _decode(info: FileInfo, reuse: dict[str, int], max_side: int, mean, std) -> _Decoded:
    """Worker: read the bytes once (content digest), decode only when no stored descriptor has them."""
    try:
        data = read_file(info.path)
        digest = hashlib.sha1(data).hexdigest()
        if digest in reuse:
            return _Decoded(info, digest, reuse_of=reuse[digest])
        img, orig = open_oriented(io.BytesIO(data), draft_side=max_side)
        return _Decoded(info, digest, prepare(img, orig, max_side, mean, std), orig)
    except ImageError as e:
        return _Decoded(info, error=str(e))
    except MemoryError:
        return _Decoded(info, error="not enough memory to decode")


def index_library(lib: Library, control: JobControl | None = None, batch_size: int | None = None,
                  decode_workers: int = 2) -> Iterator[Progress]:
    """Index every folder of `lib`. Yields Progress after the scan and after every batch."""
    control = control or JobControl()
    if not lib.writer_lock.acquire(blocking=False):
        raise HeatSearchError("indexing is already running")
    try:
        yield from _run(lib, control, batch_size or lib.settings.batch_size, decode_workers)
    finally:
        lib.writer_lock.release()


def _known_rows(lib: Library, folder_ids) -> dict[str, tuple[int, int, int, str]]:
    sp = lib.space()
    with lib.db() as s:
        have = set(s.scalars(select(Descriptor.image_id).where(Descriptor.space_id == sp.id)))
        rows = s.execute(select(Image.id, Image.path, Image.size, Image.mtime_ns, Image.status)
                         .where(Image.folder_id.in_(list(folder_ids)))).all()
    # a row without a descriptor in this space (new space, or crash before its batch) counts as changed
    return {p: (i, sz, mt if (st == "failed" or i in have) else -1, st) for i, p, sz, mt, st in rows}


def _run(lib: Library, control: JobControl, batch_size: int, decode_workers: int) -> Iterator[Progress]:
    prog = Progress("scanning")
    yield prog
    ex = lib.extractor()
    sp = lib.space()
    folders = {f.id: f.path for f in lib.folders() if Path(f.path).is_dir()}  # an unplugged drive is left alone
    diff = diff_folders(folders, _known_rows(lib, folders))
    tasks = diff.new + [info for _, info in diff.changed]
    existing = {info.path: iid for iid, info in diff.changed}
    prog.total = len(tasks)
    with lib.db() as s:
        reuse = dict(s.execute(select(Image.digest, Image.id).join(Descriptor, Descriptor.image_id == Image.id)
                               .where(Descriptor.space_id == sp.id, Image.digest != "")).all())
    gone = dict(diff.gone)
    mu = lib.mu()
    ann = lib.ann()
    white = lib.whitening()
    t0 = time.time()
    cnn_done = 0
    pending: list[_Decoded] = []  # decoded images waiting for mu (calibration)
    prog.phase = "indexing" if mu is not None else "calibrating"
    yield prog

    def write_batch(items: list[_Decoded], described: dict[int, object]):
        """One transaction for the batch, then the ANN add."""
        nonlocal white
        add_ids, add_vecs = [], []
        with lib.db.begin() as s:
            for k, d in enumerate(items):
                info = d.info
                row_id = existing.get(info.path)
                if d.reuse_of is not None and d.reuse_of in gone and row_id is None:
                    # moved or renamed: the old row follows the file, descriptor and all
                    row = s.get(Image, d.reuse_of)
                    gone.pop(d.reuse_of)
                    prog.reused += 1
                    row.path, row.folder_id, row.size, row.mtime_ns = info.path, info.folder_id, info.size, info.mtime_ns
                    continue
                row = s.get(Image, row_id) if row_id is not None else None
                if row is None:
                    row = Image(path=info.path, folder_id=info.folder_id, size=0, mtime_ns=0)
                    s.add(row)
                row.size, row.mtime_ns, row.folder_id = info.size, info.mtime_ns, info.folder_id
                row.digest = d.digest
                if d.error:
                    row.status, row.error = "failed", d.error
                    old = s.get(Descriptor, (row.id, sp.id)) if row.id else None
                    if old is not None:
                        s.delete(old)
                        ann.delete([row.id])
                    prog.failed += 1
                    prog.last_errors.append((info.path, d.error))
                    continue
                row.status, row.error = "indexed", ""
                s.flush()
                if d.reuse_of is not None:
                    if d.reuse_of == row.id:
                        continue  # touched, same bytes: nothing to recompute
                    src = s.get(Descriptor, (d.reuse_of, sp.id))
                    raw, grid, gh, gw = src.raw, src.grid, src.grid_h, src.grid_w
                    row.width, row.height = s.get(Image, d.reuse_of).width, s.get(Image, d.reuse_of).height
                    prog.reused += 1
                else:
                    desc = described[k]
                    g = desc.weights / max(float(desc.weights.max()), 1e-12)
                    raw, grid, (gh, gw) = desc.raw.astype(np.float32).tobytes(), g.astype(np.float16).tobytes(), g.shape
                    row.width, row.height = d.orig_size
                dsc = s.get(Descriptor, (row.id, sp.id))
                if dsc is None:
                    s.add(Descriptor(image_id=row.id, space_id=sp.id, raw=raw, grid=grid, grid_h=gh, grid_w=gw))
                else:
                    dsc.raw, dsc.grid, dsc.grid_h, dsc.grid_w = raw, grid, gh, gw
                add_ids.append(row.id)
                add_vecs.append(np.frombuffer(raw, np.float32))
                existing[info.path] = row.id
        if add_ids:
            ann.add(add_ids, white.apply(np.stack(add_vecs)))

    def process(items: list[_Decoded]):
        nonlocal mu, cnn_done
        fresh = [k for k, d in enumerate(items) if d.prepared is not None]
        maps = ex.forward([items[k].prepared.tensor for k in fresh]) if fresh else []
        if mu is None:
            pending.extend((items[k], m.cpu()) for k, m in zip(fresh, maps))
            pending_other.extend(d for d in items if d.prepared is None)
            if len(pending) < CALIBRATION_IMAGES and not exhausted:
                return
            if not pending:  # nothing decodable yet: record the failures, calibrate later
                write_batch(pending_other, {})
                prog.done += len(pending_other)
                pending_other.clear()
                return
            mu = mean_local_feature([m.permute(1, 2, 0).numpy() for _, m in pending])
            lib.set_mu(mu)
            items = [d for d, _ in pending] + pending_other
            maps = [m.to(ex.device) for _, m in pending]
            fresh = list(range(len(pending)))
            pending.clear()
            pending_other.clear()
            prog.phase = "indexing"
        descs = describe_tensors(maps, mu, ex.hew_dtype, lib.hew_params()) if maps else []
        write_batch(items, dict(zip(fresh, descs)))
        cnn_done += len(fresh)
        prog.done += len(items)
        el = time.time() - t0
        prog.rate = prog.done / el if el > 0 else 0.0
        prog.eta_s = (prog.total - prog.done) / prog.rate if prog.rate > 0 else None

    pending_other: list[_Decoded] = []
    exhausted = False
    cancelled = False
    with ThreadPoolExecutor(max_workers=decode_workers, thread_name_prefix="heatsearch-decode") as pool:
        it = iter(tasks)
        window: deque = deque()

        def fill():
            while len(window) < 3 * batch_size:
                nxt = next(it, None)
                if nxt is None:
                    return
                window.append(pool.submit(_decode, nxt, reuse, ex.max_side, ex.backbone.mean, ex.backbone.std))

        fill()
        while window:
            batch = []
            while window and len(batch) < batch_size:
                batch.append(window.popleft().result())
                fill()
            exhausted = not window
            process(batch)
            yield prog
            prog.last_errors = []
            control.wait()
            if control.cancelled:
                cancelled = True
                for f in window:
                    f.cancel()
                break
        if mu is None and (pending or pending_other):  # tiny library: calibrate on what there is
            exhausted = True
            process([])
            yield prog
    # rows whose file is gone and that no moved file claimed
    if not cancelled and gone:
        ids = list(gone)
        with lib.db.begin() as s:
            for i in ids:
                row = s.get(Image, i)
                if row is not None:
                    s.delete(row)
        ann.delete(ids)
        prog.removed = len(ids)
    prog.phase = "finishing"
    yield prog
    if not cancelled:
        lib.maybe_refit_whitening()
    lib.save_index()
    prog.phase = "cancelled" if cancelled else "done"
    yield prog


def index_paths(lib: Library, paths, control: JobControl | None = None) -> Iterator[Progress]:
    """Add folders then index the whole library."""
    for p in paths:
        lib.add_folder(p)
    yield from index_library(lib, control)


__all__ = ["Progress", "JobControl", "index_library", "index_paths"]
