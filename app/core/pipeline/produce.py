"""Indexing as a producer: a pure function from (file, model, centring mean) to a Record.

    rec = produce(info, extractor, mu, params)        # decode + CNN + HeW + signatures

No library, catalog or service behind it: the laptop's indexer runs its two halves (`decode_file`
in a thread pool, `describe_decoded` after the engine on the writer thread) and a Ray worker on
another machine runs `produce` itself; both hand Records to the library's one writer.

Never raises for a bad file: every failure becomes `Record.error` (with `retry` when the cause is
this machine rather than the file). A model that gives no usable features (all zeros, not finite:
a damaged model file) never yields a descriptor.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..catalog.records import Record
from ..describe import HewParams, describe_features
from ..errors import EngineError, ImageError, WeightsLoadError
from ..features.engine import EngineChoice
from ..features.extractor import Extractor
from ..features.preprocess import Prepared, prepare
from ..features.registry import load_backbone
from ..imageio import MAX_PIXELS, check_content, decode, file_digest, image_size, sharpness
from ..signature import content_of, phash, thumb
from .scan import FileInfo

HEADER_FIRST = 16 << 20  # files larger than this are checked from their header before being read
BIG_FILE = 8 << 20
_big = threading.Semaphore(1)  # decodes of files over 8 MB run one at a time (memory)


@dataclass
class Decoded:
    """A file read and prepared for the CNN (or the reason it could not be). prepared: the
    model's input; None when the file failed, or when `reuse_of` names a catalog row with the
    same bytes (no CNN needed)."""

    info: FileInfo
    digest: str = ""
    prepared: Prepared | None = None
    orig_size: tuple[int, int] = (0, 0)
    taken: float = 0.0
    sharp: float = 0.0
    phash: int = 0
    thumb: bytes = b""
    border: float = -1.0
    camera: str = ""
    reuse_of: int | None = None
    error: str = ""
    retry: bool = False


def decode_file(info: FileInfo, max_side: int, mean, std, reuse: Mapping[str, int] | None = None) -> Decoded:
    """Stream the file's digest; decode and prepare it only when no stored descriptor has these
    bytes (`reuse`: digest -> catalog id). Thread-safe; never raises."""
    try:
        if info.size > HEADER_FIRST:
            image_size(info.path)  # the header first: a huge file that is not a photo is never read whole
        digest = file_digest(info.path)
        if reuse and digest in reuse:
            return Decoded(info, digest, reuse_of=reuse[digest], taken=info.mtime_ns / 1e9)
        big = info.size > BIG_FILE
        if big:
            _big.acquire()
        try:
            photo = decode(info.path, MAX_PIXELS, draft_side=max_side)
        finally:
            if big:
                _big.release()
        check_content(photo.image)  # on the photo itself: a thumbnail averages fine noise into grey
        small, content, border = content_of(photo.image)  # one small copy for the cheap signatures
        prepared = prepare(photo.image, photo.orig_size, max_side, mean, std)
        return Decoded(info, digest, prepared, photo.orig_size, photo.taken or info.mtime_ns / 1e9, sharpness(small),
                       phash(content), thumb(content), border, photo.camera)
    except ImageError as e:
        return Decoded(info, error=str(e), retry=e.retry)
    except MemoryError:
        return Decoded(info, error="not enough memory to decode this image", retry=True)
    except Exception as e:  # noqa: BLE001 - whatever a decoder throws, the run goes on
        return Decoded(info, error=f"cannot decode: {type(e).__name__}: {str(e)[:160]}")


def usable(features: np.ndarray) -> bool:
    """Whether a (C, h, w) feature map can be described: finite, and not all zero (a damaged or
    swapped model gives zeros or NaN for every photo)."""
    return bool(np.isfinite(features).all()) and bool(features.any())


def describe_decoded(d: Decoded, features: np.ndarray | None, mu: np.ndarray, params: HewParams) -> Record:
    """The Record of a decoded file, `features` ((C, h, w) float32 >= 0) being the model's map of
    its prepared input (None when it needed none)."""
    i = d.info
    rec = Record(i.path, i.folder_id, i.size, i.mtime_ns, d.digest, d.error, d.retry, d.reuse_of)
    if d.error or d.reuse_of is not None:
        return rec
    if mu is None:  # only possible when no photo of the run could be described: this one failed too
        rec.error = rec.error or "no centring mean: no photo of this run could be described"
        return rec
    if features is None or not usable(features):
        rec.error, rec.retry = "the model gave no usable features for this photo (is its model file damaged?)", True
        return rec
    desc = describe_features(np.ascontiguousarray(features.transpose(1, 2, 0)), mu, params)
    if not np.isfinite(desc.raw).all() or not desc.raw.any():
        rec.error, rec.retry = "the model gave no usable features for this photo (is its model file damaged?)", True
        return rec
    rec.raw = desc.raw.astype(np.float32)
    rec.grid = (desc.share / max(float(desc.share.max()), 1e-12)).astype(np.float16)
    rec.width, rec.height = d.orig_size
    rec.taken, rec.sharpness, rec.phash, rec.thumb = d.taken, d.sharp, d.phash, d.thumb
    rec.border, rec.camera = d.border, d.camera
    return rec


def produce(info: FileInfo, extractor, mu: np.ndarray, params: HewParams, reuse: Mapping[str, int] | None = None) -> Record:
    """file -> Record: decode, the extractor's CNN pass, HeW, signatures. `extractor` is an
    `features.extractor.Extractor` (the model spec made runnable)."""
    bb = extractor.backbone
    d = decode_file(info, extractor.max_side, bb.mean, bb.std, reuse)
    features = extractor.forward([d.prepared.array])[0] if d.prepared is not None else None
    d.prepared = None
    return describe_decoded(d, features, mu, params)


@dataclass(frozen=True)
class ModelSpec:
    """What a worker needs to describe photos exactly as the library does: the space's model
    (backbone, the digest its weights must have, input size, precision, HeW parameters) and how
    to run it (engine, device). Plain data: it crosses machines."""

    backbone: str
    weights: str
    weights_digest: str
    max_side: int
    fastest: bool
    threshold: float
    z_ratio: float
    engine: str = "auto"
    device: str = "auto"
    precision: str = "f32"  # the space's: a worker whose engine runs at another is refused
    model: bytes = field(default=b"", repr=False)  # an int8 space's own model (features/quantise.py), 7 MB

    @classmethod
    def of(cls, space, settings) -> "ModelSpec":
        """The spec of a SpaceInfo `space` run with the user's engine and device `settings`."""
        weights = settings.weights if space.backbone == settings.backbone else ""
        return cls(space.backbone, weights, space.weights_digest, space.max_side, space.precision != "f32",
                   space.threshold, space.z_ratio, settings.engine, settings.device, space.precision)

    @property
    def params(self) -> HewParams:
        return HewParams(self.threshold, self.z_ratio)

    def extractor(self, models_dir, log=print):
        """Build the extractor here; EngineError/WeightsMissingError when this machine's weights are
        not the library's (a worker with other weights would write wrong descriptors)."""
        bb = load_backbone(self.backbone, self.weights or None)
        if bb.weights_digest != self.weights_digest:
            raise WeightsLoadError(f"the weights of {self.backbone} here (digest {bb.weights_digest}) are not the "
                                   f"library's ({self.weights_digest})")
        ex = Extractor.create(bb, EngineChoice(self.engine, self.device, self.fastest), self.max_side, models_dir, log,
                              self.model or None)
        if ex.engine.precision != self.precision:  # its vectors would not be comparable with the library's
            raise EngineError(f"this machine's engine runs at {ex.engine.precision}, the library's vectors are "
                              f"{self.precision}")
        return ex
