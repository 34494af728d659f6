"""Decoding photos safely: EXIF orientation, RGB, size caps. Read-only: never writes to a photo.

Coordinates: every box in HeatSearch is (x1, y1, x2, y2) in pixels of the *oriented* original image
(after EXIF rotation), x to the right, y down, x2/y2 exclusive.
"""
from __future__ import annotations

import io
import os
import warnings
from contextlib import nullcontext
from pathlib import Path

from PIL import Image, ImageFile, ImageOps

from .errors import ImageError

# Formats we index. HEIC/HEIF is added when the pillow-heif plugin is installed.
EXTENSIONS = {".jpg", ".jpeg", ".jpe", ".png", ".webp", ".tif", ".tiff", ".bmp", ".gif"}
try:  # optional, well-kept plugin
    import pillow_heif  # type: ignore

    pillow_heif.register_heif_opener()
    EXTENSIONS |= {".heic", ".heif"}
except Exception:  # pragma: no cover - depends on the machine
    pass

# Decompression-bomb guard: 200 megapixels is far above any camera, far below what would exhaust RAM.
MAX_PIXELS = 200_000_000
ImageFile.LOAD_TRUNCATED_IMAGES = False


def is_photo_path(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in EXTENSIONS


def open_oriented(path: str | os.PathLike | io.BytesIO, max_pixels: int = MAX_PIXELS, draft_side: int | None = None
                  ) -> tuple[Image.Image, tuple[int, int]]:
    """Decode `path` into an RGB image with EXIF orientation applied.

    Returns (image, original_size): original_size is (w, h) of the full-resolution oriented photo.
    With `draft_side`, a JPEG may be decoded at 1/2, 1/4 or 1/8 scale as long as both sides stay
    >= draft_side (much faster for camera photos); the image is then smaller than original_size.

    Raises ImageError with a short reason for every way a file can be bad: missing, unreadable,
    zero bytes, not an image, truncated/corrupt, or over `max_pixels` (decompression bomb).
    """
    if isinstance(path, io.BytesIO):
        size = path.getbuffer().nbytes
    else:
        path = Path(path)
        try:
            size = path.stat().st_size
        except OSError as e:
            raise ImageError(f"cannot read file: {e.strerror or e}") from e
    if size == 0:
        raise ImageError("empty file (0 bytes)")
    try:
        with (nullcontext(path) if isinstance(path, io.BytesIO) else open(path, "rb")) as fh, warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(fh)
            w, h = img.size
            if w * h > max_pixels:
                raise ImageError(f"image too large ({w}x{h} pixels > {max_pixels / 1e6:.0f} MP)")
            img.seek(0)  # GIF/TIFF: first frame
            orientation = img.getexif().get(0x0112, 1)
            orig = (h, w) if orientation in (5, 6, 7, 8) else (w, h)
            if draft_side and img.format == "JPEG":
                img.draft("RGB", (draft_side, draft_side))
            img.load()
            img = ImageOps.exif_transpose(img)
            return img.convert("RGB"), orig
    except ImageError:
        raise
    except PermissionError as e:
        raise ImageError(f"permission denied: {e.filename or ''}") from e
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageError(f"image too large (decompression bomb guard): {e}") from e
    except Image.UnidentifiedImageError as e:
        raise ImageError("not an image (or an unsupported format)") from e
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise ImageError(f"corrupt or truncated image: {e}") from e


def crop_box(img: Image.Image, box: tuple[float, float, float, float]) -> Image.Image:
    """Crop `box` (x1, y1, x2, y2 in oriented-image pixels), clipped to the image; at least 1x1."""
    x1, y1, x2, y2 = clip_box(box, img.size)
    return img.crop((x1, y1, x2, y2))


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


def read_file(path: str | os.PathLike) -> bytes:
    """All bytes of a photo (read-only), with OS errors as ImageError."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except PermissionError as e:
        raise ImageError(f"permission denied: {path}") from e
    except OSError as e:
        raise ImageError(f"cannot read file: {e.strerror or e}") from e
