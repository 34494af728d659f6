"""Pieces of SQL that the catalog and both dialects build alike: lists of ids in chunks, and the
LIKE pattern that finds the stored paths under a folder."""
from __future__ import annotations

from typing import Iterable, Iterator

from .. import paths


def chunks(seq: Iterable, n: int) -> Iterator[list]:
    """`seq` in lists of at most n, in order (an IN list or an ANY array per list)."""
    seq = list(seq)
    for i in range(0, len(seq), n):
        yield seq[i: i + n]


def under(folder: str) -> tuple[str, str]:
    """(the stored path of `folder`, a LIKE pattern with ESCAPE '\\' for the stored paths below
    it). A superset: a bytes-safe stored name ("?bytes:...", paths.to_db) never matches, and path
    components decide (paths.is_within)."""
    stored = paths.to_db(folder).rstrip("/\\") or "/"
    esc = stored.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return stored, esc + ("" if esc.endswith("/") else "/") + "%"
