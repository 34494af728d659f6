"""Paths as the OS gives them, stored and shown safely, and folder containment by components.

A POSIX file name is bytes; Python hands undecodable bytes to us as lone surrogates
("surrogateescape"), which SQLite (UTF-8 text) and most printing refuse. In the catalog such a
path is stored reversibly as "?bytes:" + base64 of its bytes ("?" cannot begin an absolute
path on any platform); everywhere else the path stays the str the OS gave, and `display` makes a
printable version (undecodable bytes shown as U+FFFD).
"""
from __future__ import annotations

import base64
import os
from pathlib import PurePath

_PREFIX = "?bytes:"


def _clean(path: str) -> bool:
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def to_db(path: str) -> str:
    """The catalog's text for `path` (identical to it when it is valid Unicode)."""
    path = os.fspath(path)
    if _clean(path) and not path.startswith(_PREFIX):
        return path
    return _PREFIX + base64.urlsafe_b64encode(os.fsencode(path)).decode("ascii")


def from_db(text: str) -> str:
    """Inverse of to_db."""
    if text.startswith(_PREFIX):
        return os.fsdecode(base64.urlsafe_b64decode(text[len(_PREFIX):].encode("ascii")))
    return text


def display(path) -> str:
    """A printable form of a path: undecodable bytes become U+FFFD."""
    path = os.fspath(path)
    if _clean(path):
        return path
    return os.fsencode(path).decode("utf-8", "replace")


def norm(path) -> tuple[str, ...]:
    """Comparable components of an absolute path (case folded where the platform does)."""
    return PurePath(os.path.normcase(os.path.abspath(os.fspath(path)))).parts


def is_within(path, folder) -> bool:
    """True when `path` is `folder` or lies under it, compared by whole components:
    /p/x_y does not contain /p/xzy, and /p/x does not contain /p/xy."""
    p, f = norm(path), norm(folder)
    return p[: len(f)] == f
