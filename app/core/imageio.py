"""Decoding photos safely: EXIF orientation, RGB, an explicit size cap, 16-bit images, HEIC/AVIF
and camera RAW. Read-only: never writes to a photo.

Coordinates: every box in HeatSearch is (x1, y1, x2, y2) in pixels of the *oriented* original image
(after EXIF rotation), x to the right, y down, x2/y2 exclusive.

Every way a file can be bad ends as an ImageError with a short reason: a decoder's own exception
of any type is caught, so one strange file never stops an indexing run.
"""
from __future__ import annotations

import hashlib
import io
import os
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFile, ImageOps

from .errors import ImageError, InputError

# Pillow warns about damaged metadata (corrupt EXIF, a tag larger than the file, a malformed MPO or
# APNG) on photos it still reads: never worth a line. One process-wide filter does it, and this module
# never uses warnings.catch_warnings: that saves and restores the global filter list, so blocks
# entered and left interleaved by decode threads leave a wrong list behind for good. Only Pillow's
# plain UserWarnings from its image modules are silenced; every other warning still shows.
_PIL_MODULES = r"PIL\.(\w+ImagePlugin|Image)$"


def _quiet_pillow() -> None:
    """Install the filter unless it is there. Idempotent, so the filter list changes at most once:
    at import, or again at the next read when the import ran inside someone's catch_warnings block
    (pytest's collection is one), whose exit dropped it."""
    for action, _msg, category, module, _line in warnings.filters:
        if action == "ignore" and category is UserWarning and module is not None and module.pattern == _PIL_MODULES:
            return
    warnings.filterwarnings("ignore", category=UserWarning, module=_PIL_MODULES)


_quiet_pillow()

# Formats we index. JPEG, PNG, WebP, TIFF, BMP, GIF (first frame) and AVIF come with Pillow;
# HEIC/HEIF with the pi-heif plugin (libheif's decoders only: a read-only app ships no HEVC encoder);
# camera RAW with rawpy (both regular dependencies).
# Every one of them is scanned even when its decoder failed to load on this machine: such a
# file is "cannot be read here" (kept, tried again at every scan), never "gone".
EXTENSIONS = {".jpg", ".jpeg", ".jpe", ".png", ".webp", ".tif", ".tiff", ".bmp", ".gif", ".avif"}
HEIF_EXTENSIONS = {".heic", ".heif", ".hif"}
RAW_EXTENSIONS = {".cr2", ".cr3", ".nef", ".arw", ".dng", ".raf", ".orf", ".rw2"}
EXTENSIONS |= HEIF_EXTENSIONS | RAW_EXTENSIONS
UNAVAILABLE: dict[str, str] = {}  # extension -> why its decoder cannot run here
try:  # well-kept plugin, a regular dependency; guarded so a broken install only loses HEIC
    from pi_heif import register_heif_opener  # type: ignore

    register_heif_opener()
except Exception as _e:  # noqa: BLE001 - depends on the machine
    UNAVAILABLE.update(dict.fromkeys(HEIF_EXTENSIONS, f"HEIC photos need pi-heif, which cannot load here ({type(_e).__name__})"))
try:
    import rawpy  # type: ignore
except Exception as _e:  # noqa: BLE001
    UNAVAILABLE.update(dict.fromkeys(RAW_EXTENSIONS, f"camera RAW files need rawpy, which cannot load here ({type(_e).__name__})"))

# The size cap, explicit: photos up to 200 megapixels are indexed (cameras stop near 100 MP;
# panoramas reach 200); larger files are refused from their header, before a pixel is decoded
# (`decode`, `image_size`). Pillow's own decompression-bomb check (a warning from 89 MP) is
# replaced by this one, so it never refuses a photo we accept and never warns (no warning is turned
# into an error anywhere: the size is compared here, from the header).
MAX_PIXELS = 200_000_000
Image.MAX_IMAGE_PIXELS = None
MIN_SIDE = 16  # smaller images cannot be described (a 1x1 map has no graph): skipped with a reason
ImageFile.LOAD_TRUNCATED_IMAGES = False


def is_photo_path(path) -> bool:
    return os.path.splitext(os.fspath(path))[1].lower() in EXTENSIONS


def _reason(e: Exception) -> str:
    """A decoder's complaint in words: its message (OSError's own text, never its class name)."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e).splitlines()[0][:160] if str(e) else ""
    if text.lower().startswith(("image file is truncated", "truncated")):  # Pillow's words ("image file
        # is truncated (3 bytes not processed)", "Truncated File Read"), no byte count needed
        return "the file ends early (an incomplete copy or download)"
    if isinstance(e, (OSError, ValueError, SyntaxError, EOFError)):
        return text or "the file ends or breaks off early"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _raw_reason(e: Exception) -> str:
    """LibRaw's complaint in words (not "LibRawFileUnsupportedError: b'Unsupported file format or
    not RAW file'" in the Log)."""
    kind = type(e).__name__
    if kind == "LibRawFileUnsupportedError":
        return "not a camera RAW file that can be read (an unknown camera, or not RAW data)"
    if kind in ("LibRawIOError", "LibRawDataError"):
        return "corrupt or truncated camera RAW file"
    if kind in ("LibRawTooBigError", "LibRawUnsufficientMemoryError", "MemoryError"):
        return "camera RAW file too large to decode"
    if isinstance(e, OSError):
        return f"cannot read this camera RAW file: {_reason(e)}"
    return "cannot decode this camera RAW file"


def _to_rgb(img: Image.Image) -> Image.Image:
    """RGB, with 16-bit and float images scaled to 8 bits (Pillow's convert would clip them to white)."""
    if img.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        a = np.asarray(img, dtype=np.float64)
        if img.mode == "F":  # NaN/inf pixels as black: a finite scale, and no numpy warning on the cast
            a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        top = 65535.0 if img.mode.startswith("I;16") else max(float(a.max()), 1.0)
        if img.mode == "I" and a.max() <= 255:
            top = 255.0
        a = np.clip(a / top * 255.0 + 0.5, 0, 255).astype(np.uint8)
        return Image.fromarray(a, "L").convert("RGB")
    if img.mode == "RGBA" or img.mode == "LA" or (img.mode == "P" and "transparency" in img.info):
        base = Image.new("RGB", img.size, (255, 255, 255))  # transparent areas as white paper
        rgba = img.convert("RGBA")
        base.paste(rgba, mask=rgba.getchannel("A"))
        return base
    return img.convert("RGB")


def _exif_time(img: Image.Image) -> float:
    """EXIF DateTimeOriginal (or DateTime) as a POSIX time in local time; 0 when absent or invalid."""
    try:
        exif = img.getexif()
        text = exif.get_ifd(0x8769).get(0x9003) or exif.get(0x0132)
        if not text:
            return 0.0
        return time.mktime(time.strptime(str(text).strip("\x00 ")[:19], "%Y:%m:%d %H:%M:%S"))
    except Exception:  # noqa: BLE001 - a bad date is no date
        return 0.0


def _exif_camera(img: Image.Image) -> str:
    """EXIF Make and Model ("Canon PowerShot S230"), "" when absent: a camera's own file has them,
    most conversions and edits lose them."""
    try:
        exif = img.getexif()
        make, model = (str(exif.get(t) or "").strip("\x00 ") for t in (0x010F, 0x0110))
    except Exception:  # noqa: BLE001 - damaged metadata is no camera
        return ""
    return (model if model.lower().startswith(make.lower()) else f"{make} {model}".strip())[:80]


@dataclass
class Photo:
    """A decoded photo. image: RGB, possibly reduced (JPEG draft or RAW preview);
    orig_size: (w, h) of the full-resolution oriented original; taken: EXIF time or 0;
    camera: EXIF make and model or ""."""

    image: Image.Image
    orig_size: tuple[int, int]
    taken: float = 0.0
    camera: str = ""


def _open_raw(path, draft_side: int | None) -> Photo:
    """A camera RAW file: its embedded JPEG preview when that is at least the model's input size
    (`draft_side`, the longer side), else a half-size decode of the sensor data (LibRaw)."""
    with rawpy.imread(os.fspath(path)) as raw:
        sizes = raw.sizes
        flip = sizes.flip  # LibRaw: 3 = 180, 5 = 90 counter-clockwise, 6 = 90 clockwise
        full = (sizes.width, sizes.height) if flip not in (5, 6) else (sizes.height, sizes.width)
        try:
            thumb = raw.extract_thumb()
        except Exception:  # noqa: BLE001 - no usable preview: decode the raw data
            thumb = None
        if thumb is not None and thumb.format == rawpy.ThumbFormat.JPEG:
            img = Image.open(io.BytesIO(thumb.data))
            img.load()
            taken, camera = _exif_time(img), _exif_camera(img)
            if img.getexif().get(0x0112, 1) != 1:
                img = ImageOps.exif_transpose(img)
            elif flip in (3, 5, 6):
                img = img.transpose({3: Image.Transpose.ROTATE_180, 5: Image.Transpose.ROTATE_90,
                                     6: Image.Transpose.ROTATE_270}[flip])
            if draft_side is None or max(img.size) >= min(draft_side, max(full)):
                same_shape = abs(full[0] / full[1] - img.size[0] / img.size[1]) < 0.05
                return Photo(_to_rgb(img), full if same_shape else img.size, taken, camera)
        rgb = raw.postprocess(half_size=True, use_camera_wb=True, output_bps=8)
    img = Image.fromarray(rgb)
    return Photo(img, full if abs(full[0] / full[1] - img.size[0] / img.size[1]) < 0.05 else img.size)


def open_oriented(path, max_pixels: int = MAX_PIXELS, draft_side: int | None = None) -> tuple[Image.Image, tuple[int, int]]:
    """Decode `path` (a path or a BytesIO) into an RGB image with EXIF orientation applied.

    Returns (image, original_size): original_size is (w, h) of the full-resolution oriented photo.
    With `draft_side`, a JPEG may be decoded at 1/2, 1/4 or 1/8 scale as long as both sides stay
    >= draft_side (much faster for camera photos); the image is then smaller than original_size.
    Raises ImageError with a short reason for every way a file can be bad."""
    p = decode(path, max_pixels, draft_side)
    return p.image, p.orig_size


def decode(path, max_pixels: int = MAX_PIXELS, draft_side: int | None = None) -> Photo:
    """Like open_oriented, returning a Photo (with the EXIF time). Only the header is read before
    the size and the format are checked, so a huge or mislabelled file costs no memory."""
    if isinstance(path, io.BytesIO):
        size = path.getbuffer().nbytes
        name = ""
    else:
        try:
            st = os.stat(path)
        except OSError as e:
            raise ImageError(f"cannot read file: {e.strerror or e}", retry=True) from e
        if not os.path.isfile(path):
            raise ImageError("not a regular file")
        size, name = st.st_size, os.fspath(path)
    if size == 0:
        raise ImageError("empty file (0 bytes)")
    _quiet_pillow()
    ext = os.path.splitext(name)[1].lower()
    if ext in UNAVAILABLE:
        raise ImageError(f"cannot be read here: {UNAVAILABLE[ext]}; kept, and read when it can be", retry=True)
    if ext in RAW_EXTENSIONS:
        try:
            return _open_raw(path, draft_side)
        except ImageError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ImageError(_raw_reason(e)) from e
    try:
        with (open(path, "rb") if name else nullcontext(path)) as fh:
            img = Image.open(fh)  # "Corrupt EXIF data" and the like: silenced by the filter above
            w, h = img.size
            if w * h > max_pixels:
                raise ImageError(f"image too large ({w}x{h} = {w * h / 1e6:.1f} MP; the limit is {max_pixels / 1e6:.0f} MP)")
            if min(w, h) < MIN_SIDE:
                raise ImageError(f"image too small to describe ({w}x{h} pixels)")
            img.seek(0)  # GIF/TIFF: first frame
            orientation = img.getexif().get(0x0112, 1)
            orig = (h, w) if orientation in (5, 6, 7, 8) else (w, h)
            if draft_side and img.format == "JPEG":
                img.draft("RGB", (draft_side, draft_side))
            img.load()
            taken, camera = _exif_time(img), _exif_camera(img)
            img = ImageOps.exif_transpose(img)
            if (img.width > img.height) != (orig[0] > orig[1]) and img.width != img.height:
                orig = (orig[1], orig[0])  # a decoder that had already turned it (Pillow's TIFF)
            return Photo(_to_rgb(img), orig, taken, camera)
    except ImageError:
        raise
    except PermissionError as e:
        raise ImageError("permission denied", retry=True) from e
    except Image.UnidentifiedImageError as e:
        raise ImageError("not an image (or an unsupported format)") from e
    except MemoryError as e:
        raise ImageError("not enough memory to decode this image") from e
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageError(f"corrupt or truncated image: {_reason(e)}") from e
    except Exception as e:  # noqa: BLE001 - a decoder's own error (struct.error, a plugin's RuntimeError)
        raise ImageError(f"cannot decode: {_reason(e)}") from e


def file_digest(path, chunk: int = 1 << 20) -> str:
    """sha1 of a file's bytes, streamed (never the whole file in memory). ImageError on OS errors."""
    h = hashlib.sha1()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(chunk), b""):
                h.update(block)
    except PermissionError as e:
        raise ImageError("permission denied", retry=True) from e
    except OSError as e:
        raise ImageError(f"cannot read file: {e.strerror or e}", retry=True) from e
    return h.hexdigest()


def check_content(img: Image.Image) -> None:
    """ImageError for images with nothing to describe: a single colour (blank). Pixels are
    sampled on a grid (never averaged: a downscale of fine noise or a long thin strip is grey)."""
    w, h = img.size
    sample = img.resize((min(64, w), min(64, h)), Image.NEAREST)
    if float(np.asarray(sample, dtype=np.float32).std()) < 1.0:
        raise ImageError("blank image (a single colour): nothing to search for")


def sharpness(img: Image.Image) -> float:
    """Variance of the Laplacian of a grey version (<= 512 px): higher = sharper (duplicate ranking)."""
    g = img.convert("L")
    if max(g.size) > 512:
        g.thumbnail((512, 512))
    a = np.asarray(g, dtype=np.float32)
    if min(a.shape) < 3:
        return 0.0
    lap = a[1:-1, :-2] + a[1:-1, 2:] + a[:-2, 1:-1] + a[2:, 1:-1] - 4 * a[1:-1, 1:-1]
    return float(lap.var())


def crop_box(img: Image.Image, box: tuple[float, float, float, float]) -> Image.Image:
    """Crop `box` (x1, y1, x2, y2 in oriented-image pixels), clipped to the image; at least 1x1."""
    x1, y1, x2, y2 = clip_box(box, img.size)
    return img.crop((x1, y1, x2, y2))


def check_box(box, size) -> tuple[float, float, float, float]:
    """A user's box checked against an image of `size` (w, h): four finite numbers with x1 < x2,
    y1 < y2 that overlap the image. InputError (one line) otherwise; never silently clamped to
    a corner."""
    try:
        vals = [float(v) for v in box]
    except (TypeError, ValueError) as e:
        raise InputError(f"a box is four numbers x1,y1,x2,y2, got {box!r}") from e
    if len(vals) != 4 or not all(np.isfinite(vals)):
        raise InputError(f"a box is four finite numbers x1,y1,x2,y2, got {box!r}")
    x1, y1, x2, y2 = vals
    if x2 <= x1 or y2 <= y1:
        raise InputError(f"a box needs x1 < x2 and y1 < y2, got {x1:g},{y1:g},{x2:g},{y2:g}")
    w, h = size
    if x2 <= 0 or y2 <= 0 or x1 >= w or y1 >= h:
        raise InputError(f"the box {x1:g},{y1:g},{x2:g},{y2:g} lies outside the {w}x{h} photo")
    # past an edge by more than rounding: coordinates meant for another size of the photo, which
    # clipped would search a sliver of it (e.g. 600,400,2000,2000 on a 640x480 photo)
    sx, sy = max(2.0, 0.01 * w), max(2.0, 0.01 * h)
    if x1 < -sx or y1 < -sy or x2 > w + sx or y2 > h + sy:
        raise InputError(f"the box {x1:g},{y1:g},{x2:g},{y2:g} reaches past the {w}x{h} photo "
                         f"(x from 0 to {w}, y from 0 to {h}, in the photo's pixels as shown upright)")
    return x1, y1, x2, y2


def clip_box(box, size) -> tuple[int, int, int, int]:
    """Round and clip a box to an image of `size` (w, h); returns integer (x1, y1, x2, y2), non-empty."""
    w, h = size
    x1, y1, x2, y2 = (float(v) for v in box)
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    x1 = int(max(0, min(w - 1, round(x1))))
    y1 = int(max(0, min(h - 1, round(y1))))
    x2 = int(max(x1 + 1, min(w, round(x2))))
    y2 = int(max(y1 + 1, min(h, round(y2))))
    return x1, y1, x2, y2


def stored_orientation(path) -> int:
    """The EXIF orientation tag of a photo's file (1-8; 1 when it has none or cannot be read): how
    its pixels are stored against how it is shown."""
    _quiet_pillow()
    try:
        with Image.open(path) as img:
            o = img.getexif().get(0x0112, 1)
            return o if o in range(1, 9) else 1
    except Exception:  # noqa: BLE001 - a word in Duplicates, never a reason to fail
        return 1


def colour_of(path) -> tuple[float, float, float] | None:
    """(chroma, a, b) of a photo: its mean colourfulness and its mean colour on the opponent axes
    a = R - G and b = (R + G) / 2 - B (0-255 levels; chroma the mean of each pixel's hypot(a, b)),
    at ~96 px (a JPEG decoded at 1/8); None when it cannot be read. Duplicates' words for a copy
    in black and white or with its colours changed: its thumbnails are grey."""
    try:
        img, _ = open_oriented(path, draft_side=96)
    except Exception:  # noqa: BLE001 - a word in Duplicates, never a reason to fail
        return None
    img.thumbnail((96, 96))
    rgb = np.asarray(img, np.float32)
    a = rgb[..., 0] - rgb[..., 1]
    b = (rgb[..., 0] + rgb[..., 1]) / 2 - rgb[..., 2]
    return float(np.hypot(a, b).mean()), float(a.mean()), float(b.mean())


def image_size(path) -> tuple[int, int]:
    """(w, h) of the oriented photo from its header (no pixel decode); ImageError when unreadable."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext in UNAVAILABLE:
        raise ImageError(f"cannot be read here: {UNAVAILABLE[ext]}", retry=True)
    if ext in RAW_EXTENSIONS:
        return decode(path).orig_size
    try:
        if os.stat(path).st_size == 0:
            raise ImageError("empty file (0 bytes)")
        _quiet_pillow()
        with Image.open(path) as img:  # a corrupt EXIF block prints nothing (the filter above)
            w, h = img.size
            if w * h > MAX_PIXELS:
                raise ImageError(f"image too large ({w}x{h} = {w * h / 1e6:.1f} MP; the limit is {MAX_PIXELS / 1e6:.0f} MP)")
            o = img.getexif().get(0x0112, 1)
            if img.format == "TIFF" and (w, h) != (img.tag_v2.get(256), img.tag_v2.get(257)):
                return w, h  # Pillow reports a TIFF's size already turned by its orientation
            return (h, w) if o in (5, 6, 7, 8) else (w, h)
    except ImageError:
        raise
    except FileNotFoundError as e:
        raise ImageError("no such file") from e
    except PermissionError as e:
        raise ImageError("permission denied", retry=True) from e
    except Image.UnidentifiedImageError as e:
        raise ImageError("not an image (or an unsupported format)") from e
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageError(f"corrupt or truncated image: {_reason(e)}") from e
    except Exception as e:  # noqa: BLE001 - a decoder's own error
        raise ImageError(f"cannot decode: {_reason(e)}") from e


def read_bytes_limited(path, limit: int = 64 << 20) -> bytes:
    """A file's bytes for a decoder that needs them all (thumbnails of odd formats), refusing
    files above `limit` bytes."""
    size = Path(path).stat().st_size
    if size > limit:
        raise ImageError(f"file too large to read here ({size / 2**20:.0f} MB)")
    with open(path, "rb") as fh:
        return fh.read()
