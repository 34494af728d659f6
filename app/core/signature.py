"""Cheap per-photo signatures, computed while indexing, for the duplicates view.

All are computed on the photo's *content*: a uniform border added around a photo (a frame, a
mat, letterbox bars) is found by `trim_border` and left out, so a bordered copy has the same
signatures as its original, and `border` records how much was left out.

- `phash`: a 64-bit DCT sign hash of the content as it is stored (bit 8u+v, from the most
  significant, says whether DCT coefficient (u, v) of the 32x32 grey content is positive). A
  mirror flips the signs of the odd rows or columns and a transpose swaps rows and columns, so
  the hashes of the 8 rotations and mirrors are bit operations on the stored one (`variants`):
  no orientation has to be chosen when indexing (the smallest-of-8 choice of schema 4 flipped on
  light edits).
- `thumb`: a tiny grey thumbnail of the content (longer side THUMB px, aspect kept), for the pixel
  comparisons of `similarity` (whole photos, in any of the 8 orientations) and `crop_scores`
  (a photo inside a window of another, at its own or any other scale).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image
from scipy.fft import dctn

THUMB = 48
BORDER_TOL = 10  # grey levels: a border line's pixels are within this of the border's colour
BORDER_FILL = 0.98  # ... for at least this share of the line (JPEG ringing, a signature in a corner)


def _uniform_run(lines: np.ndarray, limit: int) -> tuple[int, float]:
    """(how many of `lines` (n, m), from the first on, are of the first line's colour, that
    colour) - at most `limit`."""
    colour = float(np.median(lines[0]))
    ok = (np.abs(lines[:limit] - colour) < BORDER_TOL).mean(axis=1) >= BORDER_FILL
    n = int(np.argmin(ok)) if not ok.all() else len(ok)
    return n, colour


def trim_border(img: Image.Image) -> tuple[Image.Image, float]:
    """(the content, the fraction of the area that was border). A border is a band of one colour
    on two opposite sides at once (top and bottom, or left and right; a frame is both), each at
    least 2 px and at most a quarter of the side: a sky or a wall on one side is content."""
    a = np.asarray(img.convert("L"), dtype=np.float32)
    h, w = a.shape
    box = [0, 0, w, h]  # left, top, right, bottom
    for first, last, lo, hi in ((a, a[::-1], 1, 3), (a.T, a.T[::-1], 0, 2)):  # rows: top/bottom; columns: left/right
        n1, c1 = _uniform_run(first, len(first) // 4)
        n2, c2 = _uniform_run(last, len(last) // 4)
        if n1 >= 2 and n2 >= 2 and abs(c1 - c2) < BORDER_TOL:
            box[lo], box[hi] = n1, box[hi] - n2
    if box == [0, 0, w, h] or box[2] - box[0] < 8 or box[3] - box[1] < 8:
        return img, 0.0
    return img.crop(tuple(box)), 1.0 - (box[2] - box[0]) * (box[3] - box[1]) / (w * h)


def phash(content: Image.Image) -> int:
    """The DCT sign hash of the content as stored, as a signed int64 (SQLite's INTEGER); never 0
    (0 means "no signature")."""
    g = np.asarray(content.convert("L").resize((32, 32), Image.LANCZOS), dtype=np.float64)
    bits = dctn(g, type=2, norm="ortho")[:8, :8] > 0  # the DC term is always positive: bit 63 is always 1
    h = int(np.packbits(bits.ravel()).view(">u8")[0])
    return h - (1 << 64) if h >= (1 << 63) else h


_ODD_V = np.tile(np.arange(8) % 2 == 1, (8, 1))  # a left-right mirror flips the signs of odd columns
_ODD_U = _ODD_V.T  # an upside-down flip those of odd rows
# The 8 orientations as (transpose first?, flip rows?, flip columns?), named as what turns the
# first photo into the second.
ORIENTATIONS = ((False, False, False), (False, False, True), (False, True, False), (False, True, True),
                (True, False, False), (True, True, False), (True, False, True), (True, True, True))
ORIENTATION_NAMES = ("as is", "mirrored", "flipped upside down", "rotated 180°", "mirrored across a diagonal",
                     "rotated 90° left", "rotated 90° right", "mirrored across a diagonal")


def _bits(h: np.ndarray) -> np.ndarray:
    """(n,) int64 hashes -> (n, 8, 8) bool."""
    return np.unpackbits(np.asarray(h, np.int64).astype(">i8").view(np.uint8).reshape(-1, 8), axis=1).reshape(-1, 8, 8).astype(bool)


def _pack(b: np.ndarray) -> np.ndarray:
    return np.packbits(b.reshape(len(b), 64), axis=1).view(">i8").ravel().astype(np.int64)


def variants(h: np.ndarray) -> np.ndarray:
    """(n,) int64 hashes -> (n, 8): the hash of each photo turned by each of ORIENTATIONS."""
    b = _bits(h)
    out = []
    for transpose, flip_rows, flip_cols in ORIENTATIONS:
        t = b.transpose(0, 2, 1) if transpose else b
        out.append(_pack(t ^ (_ODD_U if flip_rows else False) ^ (_ODD_V if flip_cols else False)))
    return np.stack(out, 1)


def orient(t: np.ndarray, k: int) -> np.ndarray:
    """A (..., h, w) thumbnail, or a stack of them, turned by ORIENTATIONS[k]."""
    transpose, flip_rows, flip_cols = ORIENTATIONS[k]
    t = np.swapaxes(t, -1, -2) if transpose else t
    t = t[..., ::-1, :] if flip_rows else t
    return t[..., ::-1] if flip_cols else t


def hamming(a, b) -> np.ndarray:
    """Bits that differ between int64 hashes (broadcast)."""
    return np.bitwise_count(np.asarray(a, np.int64) ^ np.asarray(b, np.int64))


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


@lru_cache(maxsize=256)
def _resize_matrix(n: int, m: int) -> np.ndarray:
    """(m, n) float64: Pillow's BILINEAR resize of a length-n signal to length m, as a matrix
    (resize is linear and separable: an image resizes as Ry @ img @ Rx.T)."""
    eye = Image.fromarray(np.eye(n, dtype=np.float32))  # a float32 array makes a mode "F" image
    return np.asarray(eye.resize((m, n), Image.BILINEAR), dtype=np.float64).T


def crop_scores(bigs: list[bytes], smalls: list[bytes], scales: list[tuple[float, float]], chunk: int = 2048) -> np.ndarray:
    """How well each `smalls[i]` matches a window of `bigs[i]` (`thumb` bytes) whose size is
    `scales[i]` = (height, width) of the small photo over the big one's, in pixels: a crop keeps
    its original's pixels, so its window in the big thumbnail is that fraction of it. (P,)
    float64: the best normalised cross-correlation over the window's positions; 1.0 = a perfect
    crop, unrelated photos near 0, 0 where the window is under 8 px.

    Batched: pairs with the same thumbnail and window shapes (a library has few) are scored
    together, the correlation through FFTs and the windows' means and norms from integral images
    (0.1-0.25 ms a pair on 2 cores)."""
    from scipy.fft import irfft2, rfft2

    out = np.zeros(len(bigs))
    groups: dict[tuple, list[int]] = {}
    for k, (a, b, (fh, fw)) in enumerate(zip(bigs, smalls, scales)):
        H, W = a[0], a[1]
        wh, ww = round(H * fh), round(W * fw)
        if 8 <= wh <= H and 8 <= ww <= W:
            groups.setdefault((H, W, b[0], b[1], wh, ww), []).append(k)
    for (H, W, h, w, wh, ww), members in groups.items():
        ry, rx = _resize_matrix(h, wh), _resize_matrix(w, ww)
        for c in range(0, len(members), chunk):
            idx = members[c: c + chunk]
            # a big photo is in several pairs: its transform and window norms are computed once
            first: dict[bytes, int] = {}
            which = np.array([first.setdefault(bigs[k], len(first)) for k in idx])
            A = np.stack([thumb_array(b) for b in first]).astype(np.float64)  # (U, H, W)
            B = np.stack([thumb_array(smalls[k]) for k in idx]).astype(np.float64)  # (P, h, w)
            T = ry @ B @ rx.T  # (P, wh, ww) templates
            T -= T.mean(axis=(1, 2), keepdims=True)
            tn = np.sqrt((T * T).sum(axis=(1, 2)))
            # sum(window * T) at every position: circular correlation, valid where it does not wrap
            spec = rfft2(A, workers=-1)[which] * np.conj(rfft2(T, s=(H, W), workers=-1))
            num = irfft2(spec, s=(H, W), workers=-1)[:, : H - wh + 1, : W - ww + 1]
            s1 = np.zeros((len(A), H + 1, W + 1))
            s2 = np.zeros_like(s1)
            s1[:, 1:, 1:] = A.cumsum(1).cumsum(2)
            s2[:, 1:, 1:] = (A * A).cumsum(1).cumsum(2)

            def window(s):
                return s[:, wh:, ww:] - s[:, :-wh, ww:] - s[:, wh:, :-ww] + s[:, :-wh, :-ww]

            w1, w2 = window(s1), window(s2)
            norm = np.sqrt(np.maximum(w2 - w1 * w1 / (wh * ww), 0.0))[which]  # (P, ny, nx) windows' norms
            den = norm * tn[:, None, None]
            flat = 0.5 * np.sqrt(wh * ww)  # a window or template under half a grey level of spread
            ok = (norm > flat) & (tn[:, None, None] > flat)
            ncc = np.where(ok, num / np.maximum(den, 1e-6), 0.0)
            out[idx] = np.maximum(ncc.reshape(len(idx), -1).max(axis=1), 0.0)
    return out


FRAME = 32  # whole photos are compared on FRAME x FRAME grey versions of their thumbnails
ASPECT_TOL = 0.06  # |log aspect ratio| two photos may differ by and still be compared whole


def frame_grid(data: bytes) -> tuple[np.ndarray, float, float, float]:
    """A `thumb` made comparable as a whole photo: (grid (FRAME, FRAME) float32 with zero mean
    and unit norm, log aspect ratio, mean grey, grey spread)."""
    arr = thumb_array(data).astype(np.float64)
    h, w = arr.shape
    g = _resize_matrix(h, FRAME) @ arr @ _resize_matrix(w, FRAME).T
    mean, spread = float(g.mean()), float(g.std())
    g -= mean
    g /= max(float(np.sqrt((g * g).sum())), 1e-6)
    return g.astype(np.float32), float(np.log(w / h)), mean, spread


def frame_scores(a: list[bytes], b: list[bytes], chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Whole-photo pixel correlation of pairs of `thumb` bytes, in each orientation.

    Returns (ncc (P, 8) float32: the normalised cross-correlation of a[i] with b[i] turned by
    ORIENTATIONS[k], both resized to FRAME x FRAME; -1 where the turned b's aspect ratio is not
    a's; change (P, 2) float32: b's mean grey minus a's, and b's spread over a's (a re-encode
    keeps both; a brightness or contrast edit does not))."""
    uniq: dict[bytes, int] = {}
    ia = np.array([uniq.setdefault(t, len(uniq)) for t in a], np.int64)
    ib = np.array([uniq.setdefault(t, len(uniq)) for t in b], np.int64)
    prepared = [frame_grid(t) for t in uniq]
    grids = np.stack([p[0] for p in prepared]) if prepared else np.zeros((0, FRAME, FRAME), np.float32)
    aspect, mean, spread = (np.array([p[k] for p in prepared]) for k in (1, 2, 3))
    ncc = np.full((len(a), 8), -1.0, np.float32)
    for s in range(0, len(a), chunk):
        pa, pb = ia[s: s + chunk], ib[s: s + chunk]
        ga, gb = grids[pa], grids[pb]
        for k, (transpose, _, _) in enumerate(ORIENTATIONS):
            fits = np.abs(aspect[pa] - (-aspect[pb] if transpose else aspect[pb])) <= ASPECT_TOL
            if fits.any():
                ncc[s: s + chunk][fits, k] = np.einsum("pij,pij->p", ga[fits], orient(gb[fits], k))
    if not len(a):
        return ncc, np.zeros((0, 2), np.float32)
    change = np.stack([mean[ib] - mean[ia], spread[ib] / np.maximum(spread[ia], 1e-6)], 1).astype(np.float32)
    return ncc, change
