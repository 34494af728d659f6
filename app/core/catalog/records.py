"""Plain records the catalog hands out and takes in (no SQLAlchemy objects leave the catalog)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class FolderInfo:
    """A library folder. state: ok | offline (its root is not reachable: rows kept) |
    missing (reachable parent, folder gone: rows kept until the user confirms)."""

    id: int
    path: str
    state: str = "ok"


@dataclass(frozen=True, slots=True)
class ImageRow:
    """A photo's catalog row, as every read of photos hands it out (`Catalog.image_rows`,
    `duplicate_rows`, `library_row`): the searches, the duplicate finder and the views read these
    fields by name. The path is the file system's (decoded from its stored form, paths.from_db).
    A column an older catalog left empty reads None (the readers default it)."""

    id: int
    path: str
    folder_id: int = 0
    status: str = "indexed"  # indexed | missing | failed | unreadable
    width: int = 0  # oriented pixels
    height: int = 0
    size: int = 0  # bytes
    mtime_ns: int = 0
    digest: str = ""  # the file's bytes (sha1); "" when not read
    taken: float = 0.0  # EXIF time (POSIX), 0 when unknown
    sharpness: float = 0.0
    camera: str = ""  # EXIF make and model, "" when none
    border: float = 0.0  # share of the photo a uniform border takes; -1: signatures from before schema 5
    phash: int = 0  # perceptual hash of the content (signature.py), 0 when none
    thumb: bytes = b""  # the content's thumbnail (signature.thumb), b"" when none


@dataclass(frozen=True)
class SpaceInfo:
    """How the vectors of a space are made (a detached copy of the catalog row)."""

    id: int
    key: str
    backbone: str
    weights_digest: str
    max_side: int
    precision: str
    threshold: float
    z_ratio: float
    channels: int
    white_version: int
    model_digest: str = ""  # int8 spaces: the SHA-256 of their own model ("" until it is made)


@dataclass(frozen=True, eq=False)
class SpaceRow:
    """A whole space row. mu: (C,) float64 or None; white_mean (C,) / white_proj (D, C) float64,
    None when not whitened."""

    info: SpaceInfo
    mu: np.ndarray | None
    mu_n: int
    white_mean: np.ndarray | None
    white_proj: np.ndarray | None
    white_n: int
    active: bool
    ready: bool
    ready_at: float
    white_shrink: float = 0.0  # the eigenvalue shrinkage the whitening was fitted with

    @property
    def id(self) -> int:
        return self.info.id

    @property
    def key(self) -> str:
        return self.info.key


@dataclass
class Known:
    """A catalog row as the scan needs it. mtime_ns is -1 when the row has no descriptor in the
    active space (a new space, or a crash before its batch): it then counts as changed."""

    id: int
    size: int
    mtime_ns: int
    status: str


@dataclass
class Record:
    """What describing one file produced: the producer's output and the writer's input.

    raw: (C,) float32 power-normalised HeW descriptor; grid: (h, w) float16 heat weights with
    max 1; both None when `error` says why the file could not be described, or when `reuse_of`
    names an indexed row with the same bytes (moved or copied: no CNN ran). retry: the error is
    about this machine, not the file (no permission, no decoder here): tried again at every scan.
    Sizes (w, h) are of the oriented original; taken is a POSIX time."""

    path: str
    folder_id: int
    size: int
    mtime_ns: int
    digest: str = ""
    error: str = ""
    retry: bool = False
    reuse_of: int | None = None
    width: int = 0
    height: int = 0
    taken: float = 0.0
    sharpness: float = 0.0
    phash: int = 0
    thumb: bytes = b""
    raw: np.ndarray | None = field(default=None, repr=False)
    grid: np.ndarray | None = field(default=None, repr=False)
    border: float = -1.0  # share of the area that is a uniform border (signature.trim_border)
    camera: str = ""  # EXIF make and model


@dataclass
class BatchOutcome:
    """What one committed batch changed. added: (image id, raw bytes) whose vectors are new in the
    space; killed: ids whose old vectors in the space are stale; dropped: ids that lost their
    descriptors in every other space (new content, or the file failed); moved: rows a moved file
    took over; ids: path -> image id of every described file; errors: (path, reason) recorded as
    failed or unreadable; redo: paths of records that named a row to reuse whose bytes are no
    longer theirs (described again since): nothing was written for them, they need the CNN."""

    generation: int
    added: list[tuple[int, bytes]] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    moved: list[int] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    reused: int = 0
    redo: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Filters:
    """Restrict results to photos under `folders` (absolute paths, by components) and taken in
    [after, before) (POSIX times; EXIF date, else file time). Empty = no restriction."""

    folders: tuple[str, ...] = ()
    after: float | None = None
    before: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.folders) or self.after is not None or self.before is not None
