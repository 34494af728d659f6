"""Cheap per-photo signatures, computed while indexing, for the duplicates view.

- `dihedral_phash`: a 64-bit DCT perceptual hash made invariant to the 8 rotations/mirrors of a
  photo: the DCT of a flipped or transposed image is the DCT with signs flipped or axes swapped,
  so the 8 hashes come from one transform; the smallest of them is the signature. A rotated or
  mirrored copy (even recompressed) gets the same or a close signature.
- `thumb`: a tiny grey thumbnail (longer side THUMB px, aspect kept) for checking that one photo is
  a crop of another by normalised cross-correlation (`crop_match`).
"""
from __future__ import annotations

import numpy as np
from PIL import Image
from scipy.fft import dctn

THUMB = 48


def _hash_bits(block: np.ndarray) -> int:
    flat = block.ravel()
    bits = flat > np.median(flat[1:])  # the DC term is left out of the median (pHash)
    return int(np.packbits(bits).view(">u8")[0])


def dihedral_phash(img: Image.Image) -> int:
    """The smallest of the 8 rotated/mirrored 64-bit hashes, its low 3 bits replaced by which of
    the 8 orientations gave it: the same for the photo and its rotations/mirrors (up to noise),
    and `orientation()` tells two copies in the same orientation from rotated ones.
    Returned as a signed int64 (SQLite's INTEGER)."""
    g = np.asarray(img.convert("L").resize((32, 32), Image.LANCZOS), dtype=np.float64)
    c = dctn(g, type=2, norm="ortho")[:8, :8]
    sign = (-1.0) ** np.arange(8)
    variants = []
    for t in (c, c.T):
        for sv in (False, True):  # vertical flip: (-1)^u on rows
            for sh in (False, True):  # horizontal flip: (-1)^v on columns
                b = t * (sign[:, None] if sv else 1) * (sign[None, :] if sh else 1)
                variants.append(_hash_bits(b) & ~7)
    k = int(np.argmin(variants))
    h = variants[k] | k
    return h - (1 << 64) if h >= (1 << 63) else h


def orientation(h: int) -> int:
    """Which of the 8 orientations gave the signature (0 = as the photo is)."""
    return h & 7


def hamming(a: int, b: int) -> int:
    """Bits that differ between two signatures (orientation bits excluded)."""
    return bin(((a ^ b) & ((1 << 64) - 1)) >> 3).count("1")


def thumb(img: Image.Image) -> bytes:
    """(h, w) uint8 grey thumbnail, longer side THUMB, as bytes with a 2-byte (h, w) header."""
    g = img.convert("L")
    w, h = g.size
    s = THUMB / max(w, h)
    tw, th = max(2, round(w * s)), max(2, round(h * s))
    a = np.asarray(g.resize((tw, th), Image.BILINEAR), dtype=np.uint8)
    return bytes([th, tw]) + a.tobytes()


def thumb_array(data: bytes) -> np.ndarray:
    th, tw = data[0], data[1]
    return np.frombuffer(data[2:], np.uint8).reshape(th, tw).astype(np.float32)


def crop_match(big: bytes, small: bytes, scales=np.arange(0.5, 0.97, 0.04)) -> float:
    """How well `small` matches a sub-window of `big` (both `thumb` bytes): the best normalised
    cross-correlation over window scales (the crop's side / the big photo's side) and positions.
    1.0 = a perfect crop; unrelated photos score near 0."""
    from numpy.lib.stride_tricks import sliding_window_view

    A, B = thumb_array(big), thumb_array(small)
    best = 0.0
    for s in scales:
        wh, ww = round(A.shape[0] * s), round(A.shape[1] * s)
        # the crop's aspect decides the window: the small thumb's aspect at this scale
        if B.shape[1] / B.shape[0] > ww / max(wh, 1):
            wh = max(4, round(ww * B.shape[0] / B.shape[1]))
        else:
            ww = max(4, round(wh * B.shape[1] / B.shape[0]))
        if wh > A.shape[0] or ww > A.shape[1] or wh < 8 or ww < 8:
            continue
        t = np.asarray(Image.fromarray(B.astype(np.uint8)).resize((ww, wh), Image.BILINEAR), dtype=np.float32)
        t = t - t.mean()
        tn = np.sqrt((t * t).sum())
        if tn < 1e-6:
            continue
        win = sliding_window_view(A, (wh, ww))[::2, ::2]  # (ny, nx, wh, ww), every second position
        wm = win.mean(axis=(2, 3), keepdims=True)
        num = ((win - wm) * t).sum(axis=(2, 3))
        den = np.sqrt(((win - wm) ** 2).sum(axis=(2, 3))) * tn
        ncc = np.where(den > 1e-6, num / np.maximum(den, 1e-6), 0.0)
        best = max(best, float(ncc.max()))
    return best
