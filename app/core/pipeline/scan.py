"""Scanning folders and diffing them with the catalog (stat only: no photo is opened here).

Names are kept exactly as the OS gives them (str with surrogate escapes for bytes that are not
UTF-8): a strange name never stops a scan. A folder that cannot be listed is reported, and the
catalog rows under it are left alone (an unreadable or unmounted subtree is not a deletion).
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import paths
from ..catalog.records import Known
from ..imageio import RAW_EXTENSIONS, is_photo_path


@dataclass(frozen=True)
class FileInfo:
    path: str  # absolute, as the OS gives it (str; surrogate escapes for undecodable bytes)
    size: int
    mtime_ns: int
    folder_id: int


@dataclass
class ScanDiff:
    """What an indexing run has to do.

    gone: catalog ids whose file vanished (a moved file claims its row back by content digest
    before the rest are removed); vanished_dirs: folders (absolute) that held photos and are gone
    as a whole: their rows become 'missing' instead of being removed; restored: rows marked
    missing whose file is back unchanged; unreadable: (folder, reason) that could not be listed;
    special: (path, reason) photo-named entries that are not regular files (FIFO, device, ...)."""

    new: list[FileInfo] = field(default_factory=list)
    changed: list[tuple[int, FileInfo]] = field(default_factory=list)
    gone: dict[int, str] = field(default_factory=dict)
    restored: list[tuple[int, FileInfo]] = field(default_factory=list)
    unchanged: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    special: list[tuple[str, str]] = field(default_factory=list)
    vanished_dirs: set[str] = field(default_factory=set)
    per_folder: dict[int, int] = field(default_factory=dict)  # photos found per library folder


def walk_photos(root: Path, errors: list | None = None, special: list | None = None,
                cancelled: Callable[[], bool] | None = None, excluded: list[str] = ()):
    """Yield (path str, stat) of photo files under `root`, recursively. Hidden files and folders
    are skipped; symlinked folders are followed once (a link loop is cut by the real-path set),
    except links to system folders (/proc, /sys, /dev, /run) or to the root or one of its
    ancestors, which would index a whole disk. Folders that cannot be listed, or links not
    followed, go to `errors` as (path, reason); photo-named entries that are not regular files go
    to `special`."""
    seen: set[str] = set()
    root_real = os.path.realpath(os.fspath(root))
    stack = [os.fspath(root)]
    n = 0
    while stack:
        d = stack.pop()
        try:
            real = os.path.realpath(d)
            if real in seen:
                continue
            seen.add(real)
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            if errors is not None:
                errors.append((d, e.strerror or str(e)))
            continue
        twins = raw_twins([e.name for e in entries])
        for e in entries:
            if e.name.startswith(".") or (excluded and any(paths.is_within(e.path, x) for x in excluded)):
                continue  # hidden, or forgotten by the user
            if e.name in twins:  # a RAW file with a same-name JPEG beside it: the JPEG is indexed
                if special is not None:
                    special.append((os.path.abspath(e.path), f"indexed as its JPEG twin {twins[e.name]}"))
                continue
            n += 1
            if cancelled is not None and n % 256 == 0 and cancelled():
                return
            try:
                if e.is_dir(follow_symlinks=True):
                    if e.is_symlink():
                        why = _unfollowed(os.path.realpath(e.path), root_real)
                        if why:
                            if errors is not None:
                                errors.append((os.path.abspath(e.path), why))
                            continue
                    stack.append(e.path)
                    continue
                if not is_photo_path(e.name):
                    continue
                st = e.stat(follow_symlinks=True)
                if stat.S_ISREG(st.st_mode):
                    yield os.path.abspath(e.path), st
                elif special is not None:
                    kind = "FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
                    special.append((os.path.abspath(e.path), f"not a regular file ({kind}); skipped without opening it"))
            except OSError as err:  # a broken link, a file that vanished mid-scan, no permission
                if special is not None and is_photo_path(e.name):
                    special.append((os.path.abspath(e.path), f"cannot read file: {err.strerror or err}"))


SYSTEM_DIRS = ("/proc", "/sys", "/dev", "/run")


def _unfollowed(real: str, root_real: str) -> str:
    """Why a folder link to `real` is not followed ("" when it is)."""
    if any(paths.is_within(real, d) for d in SYSTEM_DIRS):
        return f"a link to the system folder {real}: not followed"
    if paths.is_within(root_real, real):
        return f"a link to {real}, which contains this library folder: not followed"
    return ""


def raw_twins(names: list[str]) -> dict[str, str]:
    """RAW file name -> its JPEG twin (same name, JPEG extension, same folder). A camera that
    shoots RAW+JPEG writes both; the JPEG is indexed (the camera's own rendering, decoded fast)."""
    jpegs = {}
    for n in names:
        stem, ext = os.path.splitext(n)
        if ext.lower() in (".jpg", ".jpeg"):
            jpegs[stem.lower()] = n
    out = {}
    for n in names:
        stem, ext = os.path.splitext(n)
        if ext.lower() in RAW_EXTENSIONS and stem.lower() in jpegs:
            out[n] = jpegs[stem.lower()]
    return out


def diff_folders(folders, known: dict[str, Known], cancelled: Callable[[], bool] | None = None,
                 verify: bool = False, excluded: list[str] = ()) -> ScanDiff:
    """folders: id -> absolute path (only reachable ones), or (id, path) pairs where a path may be
    a part of its library folder (a scan of what changed); known: path -> catalog row.

    A file is unchanged when its (size, mtime) match its row (verify=True: every file is treated
    as changed, so its content digest is checked). Rows under unreadable folders, or under no
    scanned folder, are left alone; rows whose whole directory vanished go to vanished_dirs.
    `excluded`: paths the user forgot inside library folders (not scanned)."""
    diff = ScanDiff()
    present: set[str] = set()
    items = list(folders.items()) if isinstance(folders, dict) else list(folders)
    for fid, root in items:
        n_special = len(diff.special)
        for p, st in walk_photos(Path(root), diff.unreadable, diff.special, cancelled, excluded):
            if p in present:
                continue
            present.add(p)
            diff.per_folder[fid] = diff.per_folder.get(fid, 0) + 1
            info = FileInfo(p, st.st_size, st.st_mtime_ns, fid)
            row = known.get(p)
            if row is None:
                diff.new.append(info)
            elif row.status == "missing" and (row.size, row.mtime_ns) == (st.st_size, st.st_mtime_ns):
                diff.restored.append((row.id, info))
            elif verify or (row.size, row.mtime_ns) != (st.st_size, st.st_mtime_ns):
                diff.changed.append((row.id, info))
            else:
                diff.unchanged += 1
        present.update(p for p, _ in diff.special[n_special:])  # reported, not gone
    if cancelled is not None and cancelled():
        return diff
    roots = [r for _, r in items]
    blocked = [d for d, _ in diff.unreadable]
    for p, row in known.items():
        if p in present or row.status == "missing":
            continue
        if not any(paths.is_within(p, r) for r in roots) or any(paths.is_within(p, b) for b in blocked):
            continue  # not scanned this time (offline folder), or under a folder we could not list
        diff.gone[row.id] = p
    diff.vanished_dirs = vanished_dirs(diff.gone.values(), known.keys(), roots)
    return diff


MISSING_MIN = 5  # a vanished directory that held at least this many photos: kept as missing


def vanished_dirs(gone_paths, known_paths, roots) -> set[str]:
    """Directories whose photos are all gone and that no longer exist, held >= MISSING_MIN
    photos, and whose parent is still there (or a library root itself that is gone)."""
    by_dir: dict[str, int] = {}
    for p in gone_paths:
        by_dir[os.path.dirname(p)] = by_dir.get(os.path.dirname(p), 0) + 1
    out = set()
    for d, n in by_dir.items():
        top = d
        # climb to the highest vanished ancestor inside the library root
        while True:
            parent = os.path.dirname(top)
            if parent == top or os.path.exists(parent) or any(paths.norm(parent) == paths.norm(r) for r in roots):
                break
            top = parent
        if not os.path.exists(top):
            out.add(top)
    counts = {d: sum(1 for p in gone_paths if paths.is_within(p, d)) for d in out}
    return {d for d, n in counts.items() if n >= MISSING_MIN}
