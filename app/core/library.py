"""The photo library: catalog + descriptor space + ANN index, behind one object.

Threads: any number of readers (search, status) may use a Library at once; writes to the catalog
and the index come from one indexing job at a time (`writer_lock`), in the thread that consumes
the indexing generator.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from sqlalchemy import delete, func, select

from .aggregate.descriptor import Whitening, learn_whitening, should_whiten
from .aggregate.hew import THRESHOLD, Z_RATIO
from .catalog.models import Descriptor, Folder, Image, Space
from .catalog.store import open_catalog
from .config import Settings, home_dir
from .describe import HewParams
from .errors import HeatSearchError
from .features.extractor import Extractor
from .features.registry import REGISTRY, WeightsMissingError, file_digest, load_backbone
from .index.ann import AnnIndex

WHITEN_SAMPLE = 20_000  # descriptors used to fit the whitening (a random sample beyond that)


def f32(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float32)


def f64(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.float64).copy()


class Library:
    def __init__(self, home: str | Path | None = None, settings: Settings | None = None):
        self.home = home_dir(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings or Settings.load(self.home)
        self.db = open_catalog(self.home / "catalog.sqlite")
        self.writer_lock = threading.Lock()
        self._lock = threading.RLock()  # guards lazy members below
        self._extractor: Extractor | None = None
        self._index: AnnIndex | None = None
        self._space: Space | None = None

    # ---- descriptor space -------------------------------------------------------------------
    def weights_digest(self) -> str:
        name = self.settings.backbone
        if name not in REGISTRY:
            raise WeightsMissingError(f"unknown backbone '{name}'; known: {', '.join(REGISTRY)}")
        if name == "tiny-random":
            return "seed0"
        return file_digest(REGISTRY[name].locate(self.settings.weights or None))

    def space_key(self) -> str:
        s = self.settings
        return f"{s.backbone}|{self.weights_digest()}|{s.max_side}|{THRESHOLD}|{Z_RATIO}"

    def space(self) -> Space:
        """The active descriptor space for the current settings (created when new)."""
        with self._lock:
            if self._space is not None:
                return self._space
            key = self.space_key()
            with self.db.begin() as s:
                sp = s.scalar(select(Space).where(Space.key == key))
                if sp is None:
                    spec = REGISTRY[self.settings.backbone]
                    sp = Space(key=key, backbone=self.settings.backbone, weights_digest=key.split("|")[1],
                               max_side=self.settings.max_side, threshold=THRESHOLD, z_ratio=Z_RATIO,
                               channels=spec.channels)
                    s.add(sp)
                for other in s.scalars(select(Space).where(Space.key != key)):
                    other.active = 0
                sp.active = 1
                s.flush()
                s.expunge(sp)
            self._space = sp
            return sp

    def reload_space(self) -> Space:
        with self._lock:
            self._space = None
            return self.space()

    def hew_params(self) -> HewParams:
        sp = self.space()
        return HewParams(sp.threshold, sp.z_ratio)

    def extractor(self) -> Extractor:
        with self._lock:
            if self._extractor is None:
                bb = load_backbone(self.settings.backbone, self.settings.weights or None)
                self._extractor = Extractor(bb, self.settings.device, self.settings.max_side)
                sp = self.space()
                if sp.channels != bb.spec.channels:  # cirtorch: channels known once loaded
                    with self.db.begin() as s:
                        s.get(Space, sp.id).channels = bb.spec.channels
                    self.reload_space()
            return self._extractor

    def mu(self) -> np.ndarray | None:
        sp = self.space()
        return f64(sp.mu) if sp.mu else None

    def set_mu(self, mu: np.ndarray) -> None:
        sp = self.space()
        with self.db.begin() as s:
            s.get(Space, sp.id).mu = np.asarray(mu, np.float64).tobytes()
        self.reload_space()

    def whitening(self) -> Whitening:
        sp = self.space()
        if sp.white_dim:
            c = sp.channels
            return Whitening(f64(sp.white_mean), f64(sp.white_proj).reshape(sp.white_dim, c))
        return Whitening.identity(sp.channels)

    # ---- folders ----------------------------------------------------------------------------
    def add_folder(self, path: str | Path) -> Folder:
        p = Path(path).expanduser().resolve()
        if not p.is_dir():
            raise HeatSearchError(f"not a folder: {p}")
        if p == self.home or p.is_relative_to(self.home):
            raise HeatSearchError("the HeatSearch data folder cannot be a photo folder")
        with self.db.begin() as s:
            f = s.scalar(select(Folder).where(Folder.path == str(p)))
            if f is None:
                f = Folder(path=str(p), added_at=time.time())
                s.add(f)
                s.flush()
            s.expunge(f)
        return f

    def folders(self) -> list[Folder]:
        with self.db() as s:
            return list(s.scalars(select(Folder).order_by(Folder.path)))

    def folder_counts(self) -> dict[int, dict]:
        """folder id -> {images, indexed, failed} in the active space."""
        sp = self.space()
        out: dict[int, dict] = {}
        with self.db() as s:
            for fid, status, n in s.execute(select(Image.folder_id, Image.status, func.count()).group_by(Image.folder_id, Image.status)):
                d = out.setdefault(fid, {"images": 0, "indexed": 0, "failed": 0})
                d["images"] += n
                if status == "failed":
                    d["failed"] += n
            for fid, n in s.execute(select(Image.folder_id, func.count()).join(Descriptor, Descriptor.image_id == Image.id)
                                    .where(Descriptor.space_id == sp.id).group_by(Image.folder_id)):
                out.setdefault(fid, {"images": 0, "indexed": 0, "failed": 0})["indexed"] = n
        return out

    def forget(self, path: str | Path) -> int:
        """Remove a folder (or one file, or everything under a path) from the catalog and index.
        The photos themselves are never touched. Returns how many images were forgotten."""
        p = str(Path(path).expanduser().resolve())
        with self.writer_lock:
            with self.db.begin() as s:
                ids = list(s.scalars(select(Image.id).where((Image.path == p) | Image.path.startswith(p.rstrip("/") + "/"))))
                for chunk in _chunks(ids, 500):
                    s.execute(delete(Image).where(Image.id.in_(chunk)))
                s.execute(delete(Folder).where((Folder.path == p) | Folder.path.startswith(p.rstrip("/") + "/")))
            if ids:
                self.ann().delete(ids)
                self.save_index()
        return len(ids)

    # ---- ANN index ----------------------------------------------------------------------------
    def _index_path(self) -> Path:
        return self.home / f"index-space{self.space().id}.hnsw"

    def _index_tag(self) -> str:
        sp = self.space()
        return f"{sp.id}:{sp.white_version}"

    def indexed_ids(self) -> set[int]:
        sp = self.space()
        with self.db() as s:
            return set(s.scalars(select(Descriptor.image_id).where(Descriptor.space_id == sp.id)))

    def ann(self) -> AnnIndex:
        """The loaded index; rebuilt from stored descriptors when the file is missing, stale or
        does not match the catalog."""
        with self._lock:
            if self._index is None:
                w = self.whitening()
                idx = AnnIndex.load(self._index_path(), w.dim, self._index_tag())
                if idx is None or idx.ids() != self.indexed_ids():
                    idx = self._build_index()
                self._index = idx
            return self._index

    def _build_index(self) -> AnnIndex:
        sp, w = self.space(), self.whitening()
        ids = sorted(self.indexed_ids())
        idx = AnnIndex(w.dim, capacity=max(1024, int(len(ids) * 1.25)), tag=self._index_tag())
        for chunk in _chunks(ids, 5000):
            raws = self.raw_descriptors(chunk, sp.id)
            idx.add(chunk, w.apply(raws))
        idx.save(self._index_path())
        return idx

    def rebuild(self) -> int:
        """Rebuild the ANN index from the catalog (no CNN). Returns the number of vectors."""
        with self._lock:
            self._index = self._build_index()
            return len(self._index)

    def save_index(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.save(self._index_path())

    def raw_descriptors(self, ids, space_id: int | None = None) -> np.ndarray:
        """(len(ids), C) float32 raw descriptors, in the order of `ids`."""
        space_id = space_id or self.space().id
        with self.db() as s:
            rows = dict(s.execute(select(Descriptor.image_id, Descriptor.raw)
                                  .where(Descriptor.space_id == space_id, Descriptor.image_id.in_(list(ids)))).all())
        return np.stack([f32(rows[i]) for i in ids]) if ids else np.zeros((0, self.space().channels), np.float32)

    def maybe_refit_whitening(self, force: bool = False) -> bool:
        """Fit the whitening once the library is large enough (`should_whiten`: 4 * D images) and
        refit when it has doubled since the last fit; re-projects stored descriptors and rebuilds
        the index (no CNN). Until then vectors are the L2 descriptors (identity whitening)."""
        sp = self.space()
        ids = sorted(self.indexed_ids())
        n = len(ids)
        due = should_whiten(n, self.settings.dim) and (sp.white_n == 0 or n >= 2 * sp.white_n or (force and n != sp.white_n))
        if not due:
            return False
        rng = np.random.default_rng(0)
        sample = sorted(rng.choice(ids, WHITEN_SAMPLE, replace=False).tolist()) if n > WHITEN_SAMPLE else ids
        w = learn_whitening(self.raw_descriptors(sample, sp.id), self.settings.dim)
        with self.db.begin() as s:
            row = s.get(Space, sp.id)
            row.white_mean, row.white_proj = w.mean.tobytes(), w.proj.tobytes()
            row.white_dim, row.white_n, row.white_version = w.dim, n, row.white_version + 1
        self.reload_space()
        self.rebuild()
        return True

    # ---- status ---------------------------------------------------------------------------------
    def status(self) -> dict:
        sp = self.space()
        with self.db() as s:
            images = s.scalar(select(func.count()).select_from(Image))
            failed = s.scalar(select(func.count()).select_from(Image).where(Image.status == "failed"))
            indexed = s.scalar(select(func.count()).select_from(Descriptor).where(Descriptor.space_id == sp.id))
            folders = [f.path for f in s.scalars(select(Folder).order_by(Folder.path))]
        return {"home": str(self.home), "folders": folders, "images": images, "indexed": indexed, "failed": failed,
                "backbone": sp.backbone, "weights_digest": sp.weights_digest, "max_side": sp.max_side,
                "dim": self.whitening().dim, "whitened_on": sp.white_n}

    def failures(self) -> list[tuple[str, str]]:
        with self.db() as s:
            return [(p, e) for p, e in s.execute(select(Image.path, Image.error).where(Image.status == "failed").order_by(Image.path))]

    def close(self) -> None:
        self.save_index()
        self.db.kw["bind"].dispose()


def _chunks(seq, n):
    seq = list(seq)
    for i in range(0, len(seq), n):
        yield seq[i: i + n]
