"""One writer per SQLite library, across processes: an advisory file lock on <home>/lock.

The holder writes who it is (pid, host, command, since) into the file, so a second process can
say who is using the library. The OS drops the lock when the holder exits or is killed, so there
is never a stale lock to clean up. The file is never deleted (deleting would race).
"""
from __future__ import annotations

import getpass
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Callable

from ..errors import LibraryBusyError

if sys.platform.startswith("win"):  # pragma: no cover - not run here
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class LibraryLock:
    def __init__(self, home: Path):
        self.path = Path(home) / "lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> dict:
        """What the current holder wrote about itself ({} when unknown)."""
        try:
            return json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}

    def describe_holder(self) -> str:
        return describe(self.holder())

    def acquire(self, wait: float = 0.0, on_wait: Callable[[str], None] | None = None,
                cancelled: Callable[[], bool] | None = None) -> None:
        """Take the lock, waiting up to `wait` seconds (float('inf'): until free). `on_wait` is
        called once with the holder's description when we have to wait. Raises LibraryBusyError."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        told = False
        while not _try_lock(fd):
            if time.monotonic() >= deadline or (cancelled and cancelled()):
                os.close(fd)
                raise LibraryBusyError(f"the library in {self.path.parent} is in use by {self.describe_holder()}")
            if not told and on_wait:
                on_wait(self.describe_holder())
                told = True
            time.sleep(0.2)
        self._fd = fd
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(whoami()).encode())

    def check(self) -> None:
        """Nothing to check: the OS keeps a file lock for as long as its descriptor is open."""

    def release(self) -> None:
        if self._fd is not None:
            try:
                _unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


def whoami() -> dict:
    """What a writer says about itself: pid, user, host, command line (shortened) and since when."""
    return {"pid": os.getpid(), "user": _user(), "host": socket.gethostname(), "command": " ".join(_command()),
            "since": time.time()}


def describe(h: dict) -> str:
    """A holder record as a person reads it: "alice on nas ('heatsearch index ...', since 14:02)";
    on this computer, "another HeatSearch of alice (pid 1234, ...)". A process id is named only
    where it means something: on the same computer."""
    if not h:
        return "another HeatSearch"
    since = time.strftime("%H:%M", time.localtime(float(h.get("since") or time.time())))
    user = h.get("user") or "someone"
    what = f"'{h.get('command', '?')}', since {since}"
    if h.get("host") == socket.gethostname():
        return f"another HeatSearch of {user} on this computer (pid {h.get('pid')}, {what})"
    return f"{user} on {h.get('host') or 'another computer'} ({what})"


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no name for this uid (a container): the uid
        return str(os.getuid()) if hasattr(os, "getuid") else "someone"


def _command() -> list[str]:
    argv = [os.path.basename(sys.argv[0] or "heatsearch")] + sys.argv[1:4]
    return ["heatsearch" if a in ("__main__.py", "-m", "app") else a for a in argv]
