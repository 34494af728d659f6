"""Indexing a library as a generator of progress, run on the library's writer thread:
scan and plan -> produce Records (decode ahead in a worker pool -> engine -> HeW) -> the writer
commits one batch per transaction.

Each `yield` is a point where the job may pause or be cancelled; a killed process loses at most
the batch in flight and the next run resumes (the catalog commits per batch; the vector caches
catch up from it). Each yielded Progress is a copy of its own: the skipped files it lists are
reported once, whoever reads it and whenever.

The centring mean of HeW comes from a random sample of the photos to index (not the first ones
in scan order, which are often one burst of one scene): the sample is run through the CNN first,
its maps give the mean, then they are described like every other photo.

Where the photos are produced is a strategy: here on this machine (`LocalProducer`), or on a Ray
cluster (`pipeline/distributed.py`); the plan and the sink are the same.
"""
from __future__ import annotations

import copy
import os
import random
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from ..describe import HewParams, mean_local_feature
from ..errors import Cancelled, CatalogError
from .. import paths
from .produce import Decoded, decode_file, describe_decoded
from .produce import usable as produce_usable
from .scan import FileInfo, ScanDiff, diff_folders, vanished_dirs

if TYPE_CHECKING:
    from ..library.writer import LibraryWriter

CALIBRATION_IMAGES = 48  # photos (a random sample) whose local features give the centring mean mu
# the time left follows the last RECENT_S seconds' pace when it is slower than the whole run's (the
# run's average from its small first photos promised an end that kept moving away); a minute, so that
# a few slow photos do not swing it (12 -> 19 -> 8 min over one run at 30 s)
RECENT_S = 60.0


def pace_of(paces: deque[tuple[float, int]]) -> float:
    """Photos a second the time left is counted at: the slower of the run's pace and its last
    RECENT_S seconds' pace (photos getting slower, as large RAWs after small JPEGs, are seen
    within a minute; a fast start never promises an end that then moves away). paces: (seconds
    of work, photos done) as the run went, newest last; pruned here to the last RECENT_S seconds
    and one sample before them. 0.0 before any photo is done."""
    el, done = paces[-1]
    while len(paces) > 2 and paces[1][0] <= el - RECENT_S:
        paces.popleft()
    pace = done / el if el > 0 else 0.0
    el0, done0 = paces[0]
    if el - el0 >= min(RECENT_S, el) / 2 and el0 > 0:  # a recent span long enough to mean something
        pace = min(pace, (done - done0) / (el - el0))
    return pace


def seconds_left(paces: deque[tuple[float, int]], total: int) -> float | None:
    """Seconds until `total` photos are done at `pace_of(paces)`; None before a pace is known."""
    pace = pace_of(paces)
    return (total - paces[-1][1]) / pace if pace > 0 else None


@dataclass
class Progress:
    """A snapshot of an indexing run. rate: photos per second, paused time excluded; eta_s:
    seconds left; message: what the run is waiting for, if anything; last_errors: files skipped
    since the previous Progress (each reported once)."""

    phase: str  # scanning | loading the model | calibrating | indexing | finishing | done | cancelled
    done: int = 0
    total: int = 0
    failed: int = 0
    reused: int = 0
    removed: int = 0
    missing: int = 0
    restored: int = 0
    rate: float = 0.0
    eta_s: float | None = None
    pace: float = 0.0  # photos a second the time left is counted at (pace_of): the rate to show beside it
    modelled: int = 0  # photos the network described (not moved, copied, touched or skipped)
    model_rate: float = 0.0  # those per second: what a re-index of the library costs here
    message: str = ""
    last_errors: list[tuple[str, str]] = field(default_factory=list)
    folder_totals: dict[int, int] = field(default_factory=dict)  # photos found per folder by the scan
    workers: int = 0  # producers at work (1 here; the actors of a cluster)
    scanned: int = 0  # photo files the scan looked at
    # photos a cluster's workers did not find where --path-map sent them (the driver has them):
    # counted among `failed` too; `heatsearch index` exits 1 when the last Progress has any
    unmapped: int = 0
    tuned: tuple[int, int] = (0, 0)  # the 8-bit model's calibration: photos prepared, of how many

    def emit(self) -> "Progress":
        """A copy to hand out (listing the errors since the last one), after which they are cleared."""
        out = copy.copy(self)
        out.last_errors = list(self.last_errors)
        out.folder_totals = dict(self.folder_totals)
        self.last_errors = []
        self.message = ""
        return out


@dataclass
class Plan:
    """What a run has to do, from the scan and the catalog. tasks: files to describe (the
    calibration sample first when the space has no mean yet); existing: path -> id of changed
    rows; reuse: digest -> id whose descriptor serves the same bytes; claim: ids a moved file may
    take over; gone: id -> path of rows whose file vanished; known: path -> catalog row as the
    scan found them; vanished: directories where a file went between the scan and its reading;
    lost: id -> path of changed rows whose file went so (gone once its library folder is known
    to be there: an unplugged drive's files go the same way)."""

    diff: ScanDiff
    tasks: list[FileInfo]
    existing: dict[str, int]
    reuse: dict[str, int]
    claim: set[int]
    gone: dict[int, str]
    calibrate: int = 0  # the first `calibrate` tasks are the mean's sample
    known: dict = field(default_factory=dict)
    vanished: set[str] = field(default_factory=set)
    lost: dict[int, str] = field(default_factory=dict)  # changed rows whose file went before it was read


def plan(writer: "LibraryWriter", control, prog: Progress, verify: bool = False, only=None) -> Plan | None:
    """Scan the reachable folders against the catalog (`only`: just these folders inside them,
    e.g. the ones a watcher saw change); record what needs no CNN (missing folders, special files,
    restored photos). None when cancelled."""
    cat = writer.catalog
    writer.refresh_folders()
    reachable = {f.id: f.path for f in writer.folders if f.state == "ok"}
    scopes = reachable
    if only is not None:
        scopes = [(fid, str(d)) for d in only for fid, root in reachable.items() if paths.is_within(d, root)]
    missing_folders = [f.id for f in writer.folders if f.state == "missing"]
    if missing_folders:
        ids = cat.image_ids(missing_folders, status="indexed")
        writer.mark_missing(ids)
        prog.missing += len(ids)
    known = cat.known(reachable, writer.target.id)
    diff = diff_folders(scopes, known, lambda: control.cancelled, verify, cat.exclusions())
    if control.cancelled:
        return None
    prog.scanned = sum(diff.per_folder.values())
    prog.folder_totals = dict(diff.per_folder) if only is None else scoped_totals(diff, known, reachable, scopes)
    for d, why in diff.unreadable:
        prog.last_errors.append((paths.display(d), why))
    todo = [(p, why) for p, why in diff.special if p not in known or known[p].status != "failed"]
    if todo:
        folders = [(f.id, f.path) for f in writer.folders]
        fails = [(p, next((i for i, root in folders if paths.is_within(p, root)), None), why) for p, why in todo]
        writer.record_failures([f for f in fails if f[1] is not None], known)
        prog.failed += len(todo)
        prog.last_errors.extend((paths.display(p), why) for p, why in todo)
    if diff.restored:
        writer.restore([i for i, _ in diff.restored])
        prog.restored = len(diff.restored)
    tasks = diff.new + [info for _, info in diff.changed]
    reuse, claimable = cat.content_index(writer.target.id) if tasks else ({}, set())
    calibrate = 0
    if tasks and writer.mu is None:  # the calibration sample first, drawn at random from every folder
        calibrate = min(CALIBRATION_IMAGES, len(tasks))
        sample = set(random.Random(0).sample(range(len(tasks)), calibrate))
        tasks = [tasks[i] for i in sorted(sample)] + [t for i, t in enumerate(tasks) if i not in sample]
    return Plan(diff, tasks, {info.path: iid for iid, info in diff.changed}, reuse, set(diff.gone) | claimable,
                dict(diff.gone), calibrate, known)


def scoped_totals(diff: ScanDiff, known: dict, roots: dict[int, str], scopes: list[tuple[int, str]]) -> dict[int, int]:
    """Photos per library folder (id -> count) after a scan of some directories inside them (a
    watcher's; `scopes`: (folder id, directory) pairs, `roots`: folder id -> its path): what the
    scan found there plus the rest of the folder as the catalog knows it (present rows, indexed or
    skipped), so the folder reads "130 of 140" as after a full scan."""
    totals = {fid: diff.per_folder.get(fid, 0) for fid, _ in scopes}
    # each path split into components once (a library of 100,000 photos: about 0.5 s, where
    # comparing every path with every directory by paths.is_within took ~10 s on the writer)
    dirs = [paths.norm(d) for _, d in scopes]
    folders = sorted(((paths.norm(roots[fid]), fid) for fid in totals), key=lambda f: -len(f[0]))  # the innermost first
    for p, row in known.items():
        if row.status not in ("indexed", "failed"):
            continue
        parts = paths.norm(p)
        if any(parts[: len(d)] == d for d in dirs):
            continue
        fid = next((i for f, i in folders if parts[: len(f)] == f), None)
        if fid is not None:
            totals[fid] += 1
    return totals


class LocalProducer:
    """Records made on this machine: decoding ahead in a small thread pool, the engine on the
    calling (writer) thread one photo at a time, yielding it to an interactive search that needs
    it, then HeW. The calibration sample's maps are kept, so no photo goes through the CNN twice."""

    workers = 1

    def __init__(self, model: Callable[[], object], interactive=None, decode_workers: int = 2):
        self.model = model
        self.interactive = interactive
        self.decode_workers = decode_workers
        self.ex = None
        self._kept: dict[str, tuple[Decoded, np.ndarray | None]] = {}

    def prepare(self) -> None:
        self.ex = self.model()

    def _forward(self, d: Decoded) -> np.ndarray | None:
        if d.prepared is None:
            return None
        if self.interactive is not None:
            self.interactive.wait_idle()
        m = self.ex.forward([d.prepared.array])[0]
        d.prepared = None  # the input array is no longer needed
        return m

    def _pairs(self, tasks: list[FileInfo], reuse: dict, batch: int, cancelled: Callable[[], bool]
               ) -> Iterator[list[tuple[Decoded, np.ndarray | None]]]:
        """Batches of (decoded file, feature map or None), in task order."""
        bb = self.ex.backbone
        with ThreadPoolExecutor(max_workers=self.decode_workers, thread_name_prefix="heatsearch-decode") as pool:
            it = iter(t for t in tasks if t.path not in self._kept)  # the calibration sample is done
            window: deque = deque()

            def fill():
                while len(window) < 3 * batch:
                    nxt = next(it, None)
                    if nxt is None:
                        return
                    window.append(pool.submit(decode_file, nxt, self.ex.max_side, bb.mean, bb.std, reuse))

            fill()
            try:
                while window:
                    items = []
                    while window and len(items) < batch:
                        items.append(window.popleft().result())
                        fill()
                    yield [(d, self._forward(d)) for d in items]
                    if cancelled():
                        return
            finally:
                for f in window:
                    f.cancel()

    def mean(self, tasks: list[FileInfo], want: int, reuse: dict, cancelled: Callable[[], bool]) -> tuple[np.ndarray | None, int]:
        """The centring mean from the first `want` photos of `tasks` that can be described (going
        further down the list when some of them cannot); (None, 0) when none can."""
        usable: list[np.ndarray] = []
        start = 0
        while len(usable) < want and start < len(tasks) and not cancelled():
            # only as many as still needed: photos decoded ahead past the sample were thrown away
            # when it was complete and decoded again (a fifth of a 125-photo run's decoding)
            chunk = tasks[start: start + want - len(usable)]
            start += len(chunk)
            for pairs in self._pairs(chunk, reuse, 8, cancelled):
                for d, m in pairs:
                    self._kept[d.info.path] = (d, m)
                    if m is not None and produce_usable(m):
                        usable.append(m)
        if not usable:
            return None, 0
        return mean_local_feature([m.transpose(1, 2, 0) for m in usable]), len(usable)

    def run(self, tasks: list[FileInfo], reuse: dict, mu, params: HewParams, batch: int,
            cancelled: Callable[[], bool]) -> Iterator[list]:
        """Batches of Records, the calibration sample's first."""
        rest = [t for t in tasks if t.path not in self._kept]
        kept = [self._kept.pop(t.path) for t in tasks if t.path in self._kept]
        for s in range(0, len(kept), batch):
            yield [describe_decoded(d, m, mu, params) for d, m in kept[s: s + batch]]
        for pairs in self._pairs(rest, reuse, batch, cancelled):
            yield [describe_decoded(d, m, mu, params) for d, m in pairs]


def _tune(make_model, paths: list[str], control, prog: Progress, every_s: float = 0.5):
    """make_model(paths, cancelled, steps) on a thread of its own, yielding `prog` every
    `every_s` seconds with `tuned` = (photos prepared, of how many): the tuning takes ~40 s for
    300 photos here and minutes on a slow processor, with nothing else to show meanwhile. Returns
    its model (None when cancelled); raises what it raised."""
    got: dict = {}

    def steps(done: int, total: int) -> None:
        prog.tuned = (done, total)

    def run():
        try:
            got["blob"] = make_model(paths, lambda: control.cancelled, steps)
        except BaseException as e:  # noqa: BLE001 - raised again on the run's own thread
            got["error"] = e

    worker = threading.Thread(target=run, name="heatsearch-tuning", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(every_s)
        yield prog.emit()
    if "error" in got:
        raise got["error"]
    return got.get("blob")


def index_library(writer: "LibraryWriter", control, producer, batch_size: int = 8, verify: bool = False,
                  only=None, make_model: Callable[..., bytes | None] | None = None
                  ) -> Iterator[Progress]:
    """Index every reachable folder of the library (`only`: these folders inside it) into the
    writer's target space. Yields Progress copies after the scan and every batch. verify: re-read
    every file's bytes (finds a photo replaced by one of the same size and time). make_model:
    (photo paths, cancelled, steps(done, total)) -> an int8 space's own model
    (features/quantise.py), called before the first photo of such a space is described; None
    when cancelled."""
    prog = Progress("scanning")
    yield prog.emit()
    if writer.target is None:
        raise Cancelled(writer.unusable or "no model to index with")
    p = plan(writer, control, prog, verify, only)
    if p is None:
        prog.phase = "cancelled"
        yield prog.emit()
        return
    prog.total = len(p.tasks)
    if not p.tasks:
        yield from _finish(writer, control, p, prog, whole=only is None)
        return
    sp = writer.target.row.info
    if sp.precision == "int8" and not sp.model_digest:
        prog.phase = "tuning the 8-bit model"
        yield prog.emit()
        if make_model is None:
            raise Cancelled("this library's 8-bit model is not made yet, and this run cannot make it")
        blob = yield from _tune(make_model, [t.path for t in p.tasks], control, prog)
        if blob is not None:  # kept even when cancelled just after: the next run needs no tuning
            writer.set_model(blob)
        if blob is None or control.cancelled:
            prog.phase = "cancelled"
            yield prog.emit()
            return
    prog.phase = "loading the model"
    yield prog.emit()
    producer.prepare()
    control.wait()
    if control.cancelled:  # cancelled while the model loaded
        prog.phase = "cancelled"
        yield prog.emit()
        return
    prog.workers = producer.workers
    cancelled = lambda: control.cancelled  # noqa: E731
    # the pace counts the calibration's time: its sample's photos are described then and counted
    # done in a blink after it (else "22 s left" at 64 of 365, 52 s in fact, with ResNet50)
    t0 = time.monotonic()
    paused0 = control.paused_s
    if p.calibrate:
        prog.phase = "calibrating"
        yield prog.emit()
        mu, n = producer.mean(p.tasks, p.calibrate, p.reuse, cancelled)
        if control.cancelled:  # a mean of fewer photos than planned is not kept
            prog.phase = "cancelled"
            yield prog.emit()
            return
        if mu is not None:
            writer.set_mu(mu, n)
    prog.phase = "indexing"
    yield prog.emit()
    sp = writer.target.row.info
    params = HewParams(sp.threshold, sp.z_ratio)

    def waiting(msg):
        prog.message = msg

    paces: deque[tuple[float, int]] = deque()
    stopped = control.cancelled
    redo: list[FileInfo] = []  # copies whose source was described again meanwhile: described themselves
    by_path = {t.path: t for t in p.tasks}

    def all_batches():
        yield from producer.run(p.tasks, p.reuse, writer.mu, params, batch_size, cancelled)
        while redo and not control.cancelled:  # without reuse: these never come back
            again = list(redo)
            redo.clear()
            yield from producer.run(again, {}, writer.mu, params, batch_size, cancelled)

    batches = all_batches()
    try:
        for records in ([] if stopped else batches):
            described = len(records)
            prog.modelled += sum(r.raw is not None for r in records)
            records = _present(records, p)
            try:
                out = writer.commit_batch(records, p.existing, p.claim, cancelled, waiting)
            except Cancelled:
                stopped = True
                break
            p.existing.update(out.ids)
            for i in out.moved:
                p.gone.pop(i, None)
                p.claim.discard(i)
            redo.extend(by_path[q] for q in out.redo if q in by_path)
            prog.done += described - len(out.redo)
            prog.failed += len(out.errors)
            prog.reused += out.reused
            prog.unmapped = getattr(producer, "unmapped", 0)  # a RayProducer's count (distributed.py)
            prog.last_errors.extend((paths.display(path), why) for path, why in out.errors)
            el = time.monotonic() - t0 - (control.paused_s - paused0)
            prog.rate = prog.done / el if el > 0 else 0.0
            prog.model_rate = prog.modelled / el if el > 0 else 0.0
            paces.append((el, prog.done))
            prog.pace = pace_of(paces)
            prog.eta_s = (prog.total - prog.done) / prog.pace if prog.pace > 0 else None
            writer.save_if_due()
            yield prog.emit()
            control.wait()
            if control.cancelled:
                stopped = True
                break
    finally:
        batches.close()
    # the run's folders that went meanwhile, also those of photos it had not come to (a stop)
    p.vanished |= {d for d in {os.path.dirname(t.path) for t in p.tasks} if _gone(d)}
    if stopped:
        if p.vanished:  # a folder deleted while it was indexed never stays searchable, stopped or not
            try:
                _forget_gone(writer, p, _settle_vanished(writer, p), prog, lambda: control.cancelled)
            except (Cancelled, CatalogError):  # the catalog locked by another program: the next scan
                pass
        prog.phase = "cancelled"
        writer.save()
        yield prog.emit()
        return
    yield from _finish(writer, control, p, prog, whole=only is None)


def _present(records: list, p: Plan) -> list:
    """The batch's records less those whose file went between the scan and its reading (a
    folder deleted while it is indexed): they are not photos that "could not be read" (one
    deleted folder read as N missing and M skipped); their directory goes to `p.vanished`,
    a changed file's row to `p.lost` (both settled by _settle_vanished)."""
    kept = []
    for r in records:
        if r.error and _gone(r.path):
            p.vanished.add(os.path.dirname(r.path))
            i = p.existing.pop(r.path, None)
            if i is not None:
                p.lost[i] = r.path
        else:
            kept.append(r)
    return kept


def _gone(path: str) -> bool:
    """Whether `path` is no longer there (not: cannot be reached now, as on a drive that stopped
    answering, which is left to the next scan)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _vanished_tops(writer: "LibraryWriter", p: Plan) -> set[str]:
    """The highest gone directory above each of `p.vanished`, inside its library folder (the
    library folder itself when it was deleted); none under a folder that is offline now."""
    tops = set()
    for d in p.vanished:
        root = _root_of(writer, d)
        if root is None or root.state == "offline":
            continue
        if root.state == "missing":
            tops.add(root.path)
            continue
        top = d
        while os.path.dirname(top) != top and paths.norm(os.path.dirname(top)) != paths.norm(root.path) \
                and _gone(os.path.dirname(top)):
            top = os.path.dirname(top)
        if _gone(top) and os.path.isdir(os.path.dirname(top)):
            tops.add(top)
    return tops


def _root_of(writer: "LibraryWriter", path: str):
    """The innermost library folder (FolderInfo) holding `path`, or None."""
    return max((f for f in writer.folders if paths.is_within(path, f.path)), key=lambda f: len(f.path), default=None)


def _settle_vanished(writer: "LibraryWriter", p: Plan) -> dict[int, str]:
    """The photos that went with the files found gone during the run (a deleted folder's photos
    described before it went, or before the run; a changed photo's row): id -> path, also put into
    `p.gone`, their directories into the scan's vanished ones (kept as missing, as a scan would;
    a deleted library folder's photos all, as plan() keeps them). Under a library folder that is
    offline now (an unplugged drive), nothing."""
    writer.refresh_folders()  # a deleted library folder reads "missing", an unmounted one "offline"
    went = {i: path for i, path in p.lost.items() if getattr(_root_of(writer, path), "state", "offline") != "offline"}
    tops = _vanished_tops(writer, p)
    if tops:
        where = {row.id: path for path, row in p.known.items() if row.status != "missing"}
        where.update({i: info.path for i, info in p.diff.restored})  # back at the scan, gone again since
        where.update({i: path for path, i in p.existing.items()})  # described (or moved) by this run
        under = tuple(t.rstrip(os.sep) + os.sep for t in tops)
        went.update({i: path for i, path in where.items() if path.startswith(under)})
    p.gone.update(went)
    deleted_roots = {f.path for f in writer.folders if f.state == "missing" and f.path in tops}
    rest = [path for path in went.values() if not any(paths.is_within(path, r) for r in deleted_roots)]
    p.diff.vanished_dirs |= deleted_roots | vanished_dirs(rest, (), [f.path for f in writer.folders if f.state == "ok"])
    return went


def _forget_gone(writer: "LibraryWriter", p: Plan, gone: dict[int, str], prog: Progress, cancelled) -> None:
    """Rows whose file is gone (id -> path): marked missing under a vanished directory, else removed."""
    if not gone:
        return
    missing_ids = [i for i, path in gone.items() if any(paths.is_within(path, d) for d in p.diff.vanished_dirs)]
    removed_ids = [i for i in gone if i not in set(missing_ids)]
    writer.remove(removed_ids, cancelled=cancelled)
    writer.mark_missing(missing_ids, cancelled=cancelled)
    prog.removed += len(removed_ids)
    prog.missing += len(missing_ids)
    for d in sorted(p.diff.vanished_dirs):
        prog.last_errors.append((paths.display(d), "this folder is gone: its photos are kept as missing until you forget them"))


def _finish(writer: "LibraryWriter", control, p: Plan, prog: Progress, whole: bool = True) -> Iterator[Progress]:
    """Rows whose file is gone (and that no moved file claimed): removed, or marked missing when
    their whole directory vanished; then the target is ready (after a run of some folders only
    when nothing is left out), the whitening policy, the search backend, the files."""
    if p.vanished:
        _settle_vanished(writer, p)
    _forget_gone(writer, p, p.gone, prog, lambda: control.cancelled)
    gone_folders = [f.id for f in writer.folders if f.state == "missing"]
    if gone_folders and writer.catalog.drop_empty_folders(gone_folders):
        writer.refresh_folders()
    prog.phase = "finishing"
    yield prog.emit()
    if not control.cancelled:
        # the whitening first: a space becomes searchable (here and for every other reader) only
        # with its vectors and whitening stored, never unwhitened for a moment in between
        writer.refit_whitening(cancelled=lambda: control.cancelled)
        if not control.cancelled:
            writer.mark_ready(whole)
        writer.maintain(lambda: control.cancelled)
    writer.publish()
    writer.save()
    prog.phase = "cancelled" if control.cancelled else "done"
    yield prog.emit()


__all__ = ["Progress", "Plan", "plan", "LocalProducer", "index_library", "CALIBRATION_IMAGES"]
