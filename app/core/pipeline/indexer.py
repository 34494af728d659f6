"""Indexing as a generator of progress, run by the library's writer thread:
scan -> decode ahead in a worker pool -> engine -> HeW -> one transaction per batch -> vectors.

Each `yield` is a point where the job may pause or be cancelled; a killed process loses at most
the batch in flight and the next run resumes (the catalog commits per batch; the vector files
catch up from it).

The centring mean of HeW comes from a random sample of the photos to index (not the first ones
in scan order, which are often one burst of one scene): the sample is run through the CNN first,
its maps give the mean, then they are described like every other photo.
"""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import numpy as np
from PIL import Image as PILImage
from sqlalchemy import delete, select, update

from ..catalog.models import Descriptor, Folder, Image
from ..describe import describe_features, mean_local_feature
from ..errors import Cancelled, ImageError
from ..features.preprocess import prepare
from ..imageio import MAX_PIXELS, check_content, decode, file_digest, image_size, sharpness
from ..library import paths
from ..library.writer import f32
from ..signature import dihedral_phash, thumb
from .scan import FileInfo, Known, diff_folders

if TYPE_CHECKING:
    from ..library.service import JobControl, LibraryService

CALIBRATION_IMAGES = 48  # photos (a random sample) whose local features give the centring mean mu
HEADER_FIRST = 16 << 20  # files larger than this are checked from their header before being read
_big = threading.Semaphore(1)  # decodes of files over 8 MB run one at a time (memory)


@dataclass
class Progress:
    """A snapshot of an indexing run. rate: photos per second, paused time excluded; eta_s:
    seconds left; message: what the run is waiting for, if anything."""

    phase: str  # scanning | calibrating | indexing | finishing | done | cancelled
    done: int = 0
    total: int = 0
    failed: int = 0
    reused: int = 0
    removed: int = 0
    missing: int = 0
    restored: int = 0
    rate: float = 0.0
    eta_s: float | None = None
    message: str = ""
    last_errors: list[tuple[str, str]] = field(default_factory=list)
    folder_totals: dict[int, int] = field(default_factory=dict)  # photos found per folder by the scan


@dataclass
class _Decoded:
    info: FileInfo
    digest: str = ""
    prepared: object = None
    orig_size: tuple = (0, 0)
    taken: float = 0.0
    sharp: float = 0.0
    phash: int = 0
    thumb: bytes = b""
    reuse_of: int | None = None
    error: str = ""


def _decode(info: FileInfo, reuse: dict[str, int], max_side: int, mean, std) -> _Decoded:
    """Worker: stream the file's digest; decode only when no stored descriptor has these bytes.
    Never raises: every failure becomes a reason."""
    try:
        if info.size > HEADER_FIRST:
            image_size(info.path)  # the header first: a huge file that is not a photo is never read whole
        digest = file_digest(info.path)
        if digest in reuse:
            return _Decoded(info, digest, reuse_of=reuse[digest], taken=info.mtime_ns / 1e9)
        big = info.size > 8 << 20
        if big:
            _big.acquire()
        try:
            photo = decode(info.path, MAX_PIXELS, draft_side=max_side)
        finally:
            if big:
                _big.release()
        small = photo.image.copy()
        small.thumbnail((256, 256), PILImage.BILINEAR)  # one small copy for the cheap signatures
        check_content(small)
        prepared = prepare(photo.image, photo.orig_size, max_side, mean, std)
        return _Decoded(info, digest, prepared, photo.orig_size, photo.taken or info.mtime_ns / 1e9, sharpness(small),
                        dihedral_phash(small), thumb(small))
    except ImageError as e:
        return _Decoded(info, error=str(e))
    except MemoryError:
        return _Decoded(info, error="not enough memory to decode this image")
    except Exception as e:  # noqa: BLE001 - whatever a decoder throws, the run goes on
        return _Decoded(info, error=f"cannot decode: {type(e).__name__}: {str(e)[:160]}")


def _known_rows(svc: "LibraryService", folder_ids) -> dict[str, Known]:
    sp = svc.writer.space
    with svc.db() as s:
        have = set(s.scalars(select(Descriptor.image_id).where(Descriptor.space_id == sp.id)))
        rows = s.execute(select(Image.id, Image.path, Image.size, Image.mtime_ns, Image.status)
                         .where(Image.folder_id.in_(list(folder_ids)))).all()
    # a row without a descriptor in this space (new space, or crash before its batch) counts as changed
    return {paths.from_db(p): Known(i, sz, mt if (st == "failed" or i in have) else -1, st) for i, p, sz, mt, st in rows}


def index_library(svc: "LibraryService", control: "JobControl", batch_size: int | None = None,
                  decode_workers: int = 2, verify: bool = False) -> Iterator[Progress]:
    """Index every reachable folder of the library. Yields Progress after the scan and every batch.
    verify: re-read every file's bytes (finds a photo replaced by one of the same size and time)."""
    w = svc.writer
    batch_size = batch_size or svc.settings.batch_size
    prog = Progress("scanning")
    yield prog
    w.refresh_folders()
    reachable = {f.id: f.path for f in w.folders if f.state == "ok"}
    _mark_missing_folders(svc, [f.id for f in w.folders if f.state == "missing"], prog)
    known = _known_rows(svc, reachable)
    diff = diff_folders(reachable, known, lambda: control.cancelled, verify)
    if control.cancelled:
        prog.phase = "cancelled"
        yield prog
        return
    prog.folder_totals = dict(diff.per_folder)
    for d, why in diff.unreadable:
        prog.last_errors.append((d, f"folder cannot be read ({why}); its photos are kept as they were"))
    _record_special(svc, diff.special, known, prog)
    _restore(svc, diff.restored, prog)
    tasks = diff.new + [info for _, info in diff.changed]
    existing = {info.path: iid for iid, info in diff.changed}
    prog.total = len(tasks)
    if not tasks:
        yield from _finish(svc, control, diff, prog)
        return
    sp = w.space
    with svc.db() as s:
        known_content = s.execute(select(Image.digest, Image.id, Image.status).join(Descriptor, Descriptor.image_id == Image.id)
                                  .where(Descriptor.space_id == sp.id, Image.digest != "",
                                         Image.status.in_(("indexed", "missing")))).all()
    reuse = {dg: i for dg, i, st in known_content if st == "missing"}
    reuse.update({dg: i for dg, i, st in known_content if st == "indexed"})  # a present copy wins
    gone = dict(diff.gone)
    claim = dict(gone)  # rows a moved file may take over: gone ones, and missing ones
    claim.update({i: "" for _, i, st in known_content if st == "missing"})
    prog.phase = "loading the model"
    yield prog
    ex = svc.extractor(svc.snapshot().space if svc.snapshot().space and svc.snapshot().space.id == sp.id else None)
    control.wait()
    if control.cancelled:  # cancelled while the model loaded
        prog.phase = "cancelled"
        yield prog
        return
    if w.mu is None:  # calibration sample first, drawn at random from every folder
        sample = set(random.Random(0).sample(range(len(tasks)), min(CALIBRATION_IMAGES, len(tasks))))
        tasks = [tasks[i] for i in sorted(sample)] + [t for i, t in enumerate(tasks) if i not in sample]
        prog.phase = "calibrating"
    else:
        prog.phase = "indexing"
    yield prog
    params = (sp.threshold, sp.z_ratio)
    t0 = time.monotonic()
    paused0 = control.paused_s
    pending: list[tuple[_Decoded, np.ndarray]] = []  # decoded + CNN'd, waiting for mu (calibration)
    pending_bad: list[_Decoded] = []

    def describe(maps):
        from ..describe import HewParams

        return [describe_features(np.ascontiguousarray(m.transpose(1, 2, 0)), w.mu, HewParams(*params)) for m in maps]

    def process(items: list[_Decoded], exhausted: bool):
        fresh = [k for k, d in enumerate(items) if d.prepared is not None]
        others = [d for k, d in enumerate(items) if k not in set(fresh)]
        maps = []
        for k in fresh:  # one photo per engine call on the CPU; a search that needs the engine goes first
            svc.interactive.wait_idle()
            maps.append(ex.forward([items[k].prepared.array])[0])
            items[k].prepared = None  # the input array is no longer needed
        if w.mu is None:
            pending.extend((items[k], m) for k, m in zip(fresh, maps))
            pending_bad.extend(others)
            if len(pending) < min(CALIBRATION_IMAGES, prog.total) and not exhausted:
                return 0
            if not pending:  # nothing decodable yet: record the failures, calibrate later
                n = len(pending_bad)
                _write_batch(svc, pending_bad, {}, existing, gone, claim, prog, control)
                pending_bad.clear()
                return n
            w.set_mu(mean_local_feature([m.transpose(1, 2, 0) for _, m in pending]), len(pending))
            items = [d for d, _ in pending] + pending_bad
            maps = [m for _, m in pending]
            fresh = list(range(len(pending)))
            pending.clear()
            pending_bad.clear()
            prog.phase = "indexing"
        descs = describe(maps)
        _write_batch(svc, items, dict(zip(fresh, descs)), existing, gone, claim, prog, control)
        return len(items)

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
            try:
                prog.done += process(batch, exhausted=not window)
            except Cancelled:
                cancelled = True
                break
            el = time.monotonic() - t0 - (control.paused_s - paused0)
            prog.rate = prog.done / el if el > 0 else 0.0
            prog.eta_s = (prog.total - prog.done) / prog.rate if prog.rate > 0 else None
            w.save_if_due()
            yield prog
            prog.last_errors = []
            prog.message = ""
            control.wait()
            if control.cancelled:
                cancelled = True
                for f in window:
                    f.cancel()
                break
    if cancelled:
        prog.phase = "cancelled"
        w.save()
        yield prog
        return
    yield from _finish(svc, control, diff, prog, gone)


def _finish(svc, control, diff, prog: Progress, gone: dict | None = None) -> Iterator[Progress]:
    """Rows whose file is gone (and that no moved file claimed): removed, or marked missing when
    their whole directory vanished; then the whitening policy, the search backend, the files."""
    w = svc.writer
    gone = diff.gone if gone is None else gone
    if gone:
        missing_ids = [i for i, p in gone.items() if any(paths.is_within(p, d) for d in diff.vanished_dirs)]
        removed_ids = [i for i in gone if i not in set(missing_ids)]

        def write(s):
            for chunk in _chunks(removed_ids, 500):
                s.execute(delete(Image).where(Image.id.in_(chunk)))
            for chunk in _chunks(missing_ids, 500):
                s.execute(update(Image).where(Image.id.in_(chunk)).values(status="missing"))
            w.generation = w.bump(s)

        w.transaction(write, lambda: control.cancelled)
        w.store.kill_ids(list(gone))
        prog.removed += len(removed_ids)
        prog.missing += len(missing_ids)
        for d in sorted(diff.vanished_dirs):
            prog.last_errors.append((d, "this folder is gone: its photos are kept as missing until you forget them"))
    _drop_empty_missing_folders(svc)
    prog.phase = "finishing"
    yield prog
    if not control.cancelled:
        w.refit_whitening(cancelled=lambda: control.cancelled)
        w.maintain_backend(lambda: control.cancelled)
    w.publish()
    w.save()
    prog.phase = "cancelled" if control.cancelled else "done"
    yield prog


def _write_batch(svc, items: list[_Decoded], described: dict, existing: dict, gone: dict, claim: dict,
                 prog: Progress, control) -> None:
    """One transaction for the batch (with the space's generation bumped), then the vectors."""
    w = svc.writer
    sid = w.space.id
    added: list[tuple[int, bytes]] = []
    killed: list[int] = []
    moved: list[int] = []

    def write(s):
        added.clear()
        killed.clear()
        moved.clear()
        errors = []
        reused = 0
        gen = w.bump(s)
        for k, d in enumerate(items):
            info = d.info
            row_id = existing.get(info.path)
            if d.reuse_of is not None and d.reuse_of in claim and d.reuse_of not in moved and row_id is None:
                # moved or renamed: the old row follows the file, descriptor and all (same slot)
                row = s.get(Image, d.reuse_of)
                row.path, row.folder_id, row.size, row.mtime_ns = paths.to_db(info.path), info.folder_id, info.size, info.mtime_ns
                moved.append(d.reuse_of)
                reused += 1
                if row.status == "missing":  # back from a vanished folder: into the results again
                    row.status = "indexed"
                    dsc = s.get(Descriptor, (row.id, sid))
                    dsc.gen = gen
                    added.append((row.id, dsc.raw))
                continue
            row = s.get(Image, row_id) if row_id is not None else None
            if row is None:
                row = Image(path=paths.to_db(info.path), folder_id=info.folder_id, size=0, mtime_ns=0)
                s.add(row)
            elif row.digest != d.digest:  # new content: descriptors of other spaces are stale too
                s.execute(delete(Descriptor).where(Descriptor.image_id == row.id, Descriptor.space_id != sid))
            row.size, row.mtime_ns, row.folder_id = info.size, info.mtime_ns, info.folder_id
            row.digest = d.digest
            if d.error:
                row.status, row.error = "failed", d.error
                if row.id is not None and s.get(Descriptor, (row.id, sid)) is not None:
                    s.execute(delete(Descriptor).where(Descriptor.image_id == row.id))
                    killed.append(row.id)
                errors.append((paths.display(info.path), d.error))
                continue
            row.status, row.error = "indexed", ""
            s.flush()
            if d.reuse_of is not None:
                if d.reuse_of == row.id:
                    continue  # touched, same bytes: nothing to recompute
                src = s.get(Descriptor, (d.reuse_of, sid))
                srow = s.get(Image, d.reuse_of)
                raw, grid, gh, gw = src.raw, src.grid, src.grid_h, src.grid_w
                row.width, row.height, row.taken, row.sharpness = srow.width, srow.height, srow.taken, srow.sharpness
                row.phash, row.thumb = srow.phash, srow.thumb
                reused += 1
            else:
                desc = described[k]
                g = desc.weights / max(float(desc.weights.max()), 1e-12)
                raw, grid, (gh, gw) = desc.raw.astype(np.float32).tobytes(), g.astype(np.float16).tobytes(), g.shape
                row.width, row.height = d.orig_size
                row.taken, row.sharpness, row.phash, row.thumb = d.taken, d.sharp, d.phash, d.thumb
            dsc = s.get(Descriptor, (row.id, sid))
            if dsc is None:
                s.add(Descriptor(image_id=row.id, space_id=sid, raw=raw, grid=grid, grid_h=gh, grid_w=gw, gen=gen))
            else:
                dsc.raw, dsc.grid, dsc.grid_h, dsc.grid_w, dsc.gen = raw, grid, gh, gw, gen
                killed.append(row.id)
            added.append((row.id, raw))
            existing[info.path] = row.id
        return gen, errors, reused

    def waiting(msg):
        prog.message = msg

    gen, errors, reused = w.transaction(write, lambda: control.cancelled, waiting)
    w.generation = gen
    for i in moved:
        gone.pop(i, None)
        claim.pop(i, None)
    prog.failed += len(errors)
    prog.reused += reused
    prog.last_errors.extend(errors)
    if killed:
        w.store.kill_ids(killed)
    if added:
        w.store.append([i for i, _ in added], w.whitening.apply(np.stack([f32(r) for _, r in added])))
    w.publish()


def _record_special(svc, special, known: dict, prog: Progress) -> None:
    """Photo-named entries that are not regular files: recorded as failed once, with the reason."""
    todo = [(p, why) for p, why in special if p not in known or known[p].status != "failed"]
    if not todo:
        return
    w = svc.writer
    folders = [(f.id, f.path) for f in w.folders]

    def write(s):
        for p, why in todo:
            fid = next((i for i, root in folders if paths.is_within(p, root)), None)
            if fid is None:
                continue
            row = s.get(Image, known[p].id) if p in known else None
            if row is None:
                row = Image(path=paths.to_db(p), folder_id=fid, size=0, mtime_ns=0)
                s.add(row)
            row.status, row.error = "failed", why
            if row.id is not None:
                s.execute(delete(Descriptor).where(Descriptor.image_id == row.id))

    w.transaction(write)
    prog.failed += len(todo)
    prog.last_errors.extend((paths.display(p), why) for p, why in todo)


def _mark_missing_folders(svc, folder_ids: list[int], prog: Progress) -> None:
    """A library folder that is gone (its parent is there): its photos leave the results but keep
    their rows and descriptors, as 'missing', until the user forgets them or the folder returns."""
    if not folder_ids:
        return
    w = svc.writer
    with svc.db() as s:
        ids = list(s.scalars(select(Image.id).where(Image.folder_id.in_(folder_ids), Image.status == "indexed")))
    if not ids:
        return

    def write(s):
        for chunk in _chunks(ids, 500):
            s.execute(update(Image).where(Image.id.in_(chunk)).values(status="missing"))
        return w.bump(s)

    w.generation = w.transaction(write)
    w.store.kill_ids(ids)
    w.publish()
    prog.missing += len(ids)


def _drop_empty_missing_folders(svc) -> None:
    """Forget folder rows that are gone and hold no photo any more (their photos moved elsewhere
    in the library)."""
    w = svc.writer
    gone = [f.id for f in w.folders if f.state == "missing"]
    if not gone:
        return
    with svc.db() as s:
        used = set(s.scalars(select(Image.folder_id).where(Image.folder_id.in_(gone)).distinct()))
    empty = [i for i in gone if i not in used]
    if empty:
        w.transaction(lambda s: s.execute(delete(Folder).where(Folder.id.in_(empty))))
        w.refresh_folders()


def _restore(svc, restored: list, prog: Progress) -> None:
    """Rows marked missing whose file is back unchanged: back in the results, no CNN."""
    if not restored:
        return
    w = svc.writer
    ids = [i for i, _ in restored]

    def write(s):
        gen = w.bump(s)
        for chunk in _chunks(ids, 500):
            s.execute(update(Image).where(Image.id.in_(chunk)).values(status="indexed"))
            s.execute(update(Descriptor).where(Descriptor.image_id.in_(chunk), Descriptor.space_id == w.space.id).values(gen=gen))
        return gen

    w.generation = w.transaction(write)
    with svc.db() as s:
        have = sorted(s.scalars(select(Descriptor.image_id).where(Descriptor.image_id.in_(ids), Descriptor.space_id == w.space.id)))
    if have:
        w.store.append(have, w.whitening.apply(w.raw_descriptors(have)))
    prog.restored = len(ids)
    w.publish()


def _chunks(seq, n):
    seq = list(seq)
    for i in range(0, len(seq), n):
        yield seq[i: i + n]


__all__ = ["Progress", "index_library", "CALIBRATION_IMAGES"]
