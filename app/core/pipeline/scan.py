"""Scanning folders and diffing them with the catalog (stat only: no file is opened here)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..imageio import is_photo_path


@dataclass(frozen=True)
class FileInfo:
    path: str  # absolute, resolved
    size: int
    mtime_ns: int
    folder_id: int


@dataclass
class ScanDiff:
    """What an indexing run has to do. `gone` are catalog ids whose file vanished (a moved file
    claims its row back by content digest before the rest are removed)."""

    new: list[FileInfo] = field(default_factory=list)
    changed: list[tuple[int, FileInfo]] = field(default_factory=list)
    gone: dict[int, str] = field(default_factory=dict)  # id -> old path
    unchanged: int = 0


def walk_photos(root: Path):
    """Yield (path, stat) of photo files under `root`, recursively: hidden files and folders are
    skipped, symlinked folders are followed once (a link loop is cut by the real-path set)."""
    seen: set[str] = set()
    stack = [Path(root)]
    while stack:
        d = stack.pop()
        try:
            real = os.path.realpath(d)
            if real in seen:
                continue
            seen.add(real)
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in sorted(entries, key=lambda e: e.name):
            if e.name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=True):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=True) and is_photo_path(e.name):
                    yield Path(e.path).absolute(), e.stat(follow_symlinks=True)
            except OSError:
                continue


def diff_folders(folders: dict[int, str], known: dict[str, tuple[int, int, int, str]]) -> ScanDiff:
    """folders: id -> path; known: path -> (id, size, mtime_ns, status) from the catalog.

    A file is unchanged when its (size, mtime) match a catalog row; rows under no scanned folder
    are left alone unless their file is gone."""
    diff = ScanDiff()
    present: set[str] = set()
    for fid, root in folders.items():
        for path, st in walk_photos(Path(root)):
            p = str(path)
            if p in present:
                continue
            present.add(p)
            info = FileInfo(p, st.st_size, st.st_mtime_ns, fid)
            row = known.get(p)
            if row is None:
                diff.new.append(info)
            elif (row[1], row[2]) != (st.st_size, st.st_mtime_ns):
                diff.changed.append((row[0], info))
            else:
                diff.unchanged += 1
    for p, row in known.items():
        if p not in present:
            diff.gone[row[0]] = p
    return diff
