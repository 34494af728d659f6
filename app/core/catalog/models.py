"""SQLAlchemy 2 models of the catalog, portable between SQLite and PostgreSQL.

Arrays are stored as raw little-endian bytes; paths as `paths.to_db` text (reversible
for names that are not valid UTF-8). Every count, size and time is 64-bit (BIGINT in
PostgreSQL; SQLite's INTEGER is always 64-bit). Ids are never reused (AUTOINCREMENT in SQLite,
sequences in PostgreSQL): a vector cached under an id always belongs to the same photo.
"""
from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 7

# A primary key that is SQLite's rowid (INTEGER PRIMARY KEY) there and BIGINT elsewhere.
ID = BigInteger().with_variant(Integer, "sqlite")


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class State(Base):
    """One row (id 1): the library's generation, bumped by every committed transaction that
    changes which photos are searchable or what their descriptors are, in any space. Vector
    files and snapshots record the generation they reflect."""

    __tablename__ = "library_state"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)


class Folder(Base):
    """A photo folder the user added (scanned recursively). state: ok | offline | missing."""

    __tablename__ = "folders"
    __table_args__ = {"sqlite_autoincrement": True}
    id: Mapped[int] = mapped_column(ID, primary_key=True)
    path: Mapped[str] = mapped_column(String, unique=True)
    added_at: Mapped[float] = mapped_column(Float)
    state: Mapped[str] = mapped_column(String, default="ok")


class Image(Base):
    """One photo file.

    status: indexed (has a descriptor in some space) | failed (error says why; not retried until
    the file changes) | missing (its folder or subtree vanished at once: kept, out of results,
    until the user confirms or it comes back) | unreadable (a format whose decoder is not
    available here: kept with its descriptors, never treated as gone).
    digest: sha1 of the file's bytes (identity for moves and exact duplicates).
    taken: EXIF DateTimeOriginal as a POSIX time, else the file's mtime (date filters)."""

    __tablename__ = "images"
    __table_args__ = {"sqlite_autoincrement": True}
    id: Mapped[int] = mapped_column(ID, primary_key=True)
    path: Mapped[str] = mapped_column(String, unique=True)
    folder_id: Mapped[int] = mapped_column(ForeignKey("folders.id", ondelete="CASCADE"), index=True)
    size: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)
    width: Mapped[int] = mapped_column(Integer, default=0)
    height: Mapped[int] = mapped_column(Integer, default=0)
    digest: Mapped[str] = mapped_column(String, default="", index=True)
    status: Mapped[str] = mapped_column(String, default="indexed", index=True)
    error: Mapped[str] = mapped_column(Text, default="")
    taken: Mapped[float] = mapped_column(Float, default=0.0)
    sharpness: Mapped[float] = mapped_column(Float, default=0.0)
    phash: Mapped[int] = mapped_column(BigInteger, default=0)  # signature.phash (0: none)
    thumb: Mapped[bytes] = mapped_column(LargeBinary, default=b"")  # signature.thumb
    # signature.trim_border's share of the area; -1: phash and thumb are from before schema 5
    # (an older hash, the border kept), so the duplicate finder does not compare their hashes
    border: Mapped[float] = mapped_column(Float, default=-1.0)
    camera: Mapped[str] = mapped_column(String, default="")  # EXIF make and model ("" when none)


class Space(Base):
    """A descriptor space: how vectors are made. Vectors of two spaces are never mixed.

    mu: (C,) float64 centring mean of HeW (from a random sample across the library).
    white_mean (C,) / white_proj (D, C) float64: the whitening; empty when not whitened.
    white_n: how many images the whitening was fitted on; white_version counts refits;
    white_shrink: the eigenvalue shrinkage it was fitted with (a new policy refits it).
    active: the space the settings ask for (indexing writes it). ready: an indexing run in it
    has finished, so it answers searches; until then the last ready space keeps answering (a
    space made active again that lacks photos added meanwhile is not ready until a run ends).
    ready_at: when it became ready, or when it stopped being the active space while ready; the
    newest ready space serves (the one the user searched last)."""

    __tablename__ = "spaces"
    __table_args__ = {"sqlite_autoincrement": True}
    id: Mapped[int] = mapped_column(ID, primary_key=True)
    key: Mapped[str] = mapped_column(String, unique=True)
    backbone: Mapped[str] = mapped_column(String)
    weights_digest: Mapped[str] = mapped_column(String)
    max_side: Mapped[int] = mapped_column(Integer)
    threshold: Mapped[float] = mapped_column(Float)
    z_ratio: Mapped[float] = mapped_column(Float)
    channels: Mapped[int] = mapped_column(Integer)
    mu: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    white_mean: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    white_proj: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    white_dim: Mapped[int] = mapped_column(Integer, default=0)
    white_n: Mapped[int] = mapped_column(BigInteger, default=0)
    white_version: Mapped[int] = mapped_column(Integer, default=0)
    white_shrink: Mapped[float] = mapped_column(Float, default=0.0)
    active: Mapped[int] = mapped_column(Integer, default=1)
    precision: Mapped[str] = mapped_column(String, default="f32")
    # the space's own generation before schema 3 made one for the library (State), read only by that
    # migration (migrations._v3). Still declared: catalogs made since hold it NOT NULL with no default
    # in the database, so every new space row must give it (0)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    mu_n: Mapped[int] = mapped_column(Integer, default=0)
    ready: Mapped[int] = mapped_column(Integer, default=0)
    ready_at: Mapped[float] = mapped_column(Float, default=0.0)
    # an int8 space's own model (features/quantise.py: packed OpenVINO IR, 7 MB for Lite2), read only when
    # a model is built, and the SHA-256 it is checked against; b"" and "" for other spaces
    model: Mapped[bytes] = mapped_column(LargeBinary, default=b"", deferred=True)
    model_digest: Mapped[str] = mapped_column(String, default="")


class Descriptor(Base):
    """Per image and space: the raw HeW descriptor (power + L2, before whitening; (C,) float32),
    the heat-weight grid ((grid_h, grid_w) float16, normalised to max 1) and the library
    generation at which it was written."""

    __tablename__ = "descriptors"
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id", ondelete="CASCADE"), primary_key=True)
    space_id: Mapped[int] = mapped_column(ForeignKey("spaces.id", ondelete="CASCADE"), primary_key=True)
    raw: Mapped[bytes] = mapped_column(LargeBinary)
    grid: Mapped[bytes] = mapped_column(LargeBinary)
    grid_h: Mapped[int] = mapped_column(Integer)
    grid_w: Mapped[int] = mapped_column(Integer)
    gen: Mapped[int] = mapped_column(BigInteger, default=0)


Index("ix_descriptors_space_gen", Descriptor.space_id, Descriptor.gen)
