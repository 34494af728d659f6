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
  comparisons of `similarity` (whole photos, in any of the 8 orientations) and `crop_search`
  (a photo inside a window of another, at its own or any other scale, upright or turned).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image
from scipy.ndimage import map_coordinates
from scipy.fft import dctn, irfft2, rfft2

THUMB = 64
BORDER_TOL = 10  # grey levels: a border line's pixels are within this of the border's colour
BORDER_FILL = 0.98  # ... for at least this share of the line (JPEG ringing, a signature in a corner)
# `enlargement_residual` below which a photo counts as enlarged from a smaller one of its group.
# `python benchmarks/enlarged.py` (40 photos of each shared set, their copies shrunk 2.5-4x,
# JPEG 90): photos at their own size 0.18 and more (UKBench at 2.5x; Paris 0.69, distractors
# 0.46); the copies enlarged back with a smooth filter (bilinear, bicubic, Lanczos) 0.09 at most
# (all found), by repeating pixels (nearest) found 72-100 %
ENLARGED_DETAIL = 0.15
ENLARGE_FILTERS = (Image.NEAREST, Image.BILINEAR, Image.BICUBIC, Image.LANCZOS)



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


def best_turns(ncc: np.ndarray) -> np.ndarray:
    """(P,) int: for each row of `frame_scores`' ncc (P, 8), the orientation that turns b onto a
    best; 0 where as-is is within 0.005 of it (a photo that looks the same turned is not turned)."""
    ncc = np.atleast_2d(ncc)
    best = ncc.argmax(1)
    return np.where(ncc[:, 0] >= ncc[np.arange(len(ncc)), best] - 0.005, 0, best)


def inverse_turn(k: int) -> int:
    """The orientation that undoes ORIENTATIONS[k]: the two 90° turns undo each other, the rest
    themselves."""
    return {5: 6, 6: 5}.get(k, k)


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


def content_of(img: Image.Image) -> tuple[Image.Image, Image.Image, float]:
    """(a <= 256 px copy of the photo, its content without a border, the border's area share):
    what the catalog's signatures (phash, thumb) are made from, of a photo indexed or a query."""
    small = img.copy()
    small.thumbnail((256, 256), Image.BILINEAR)
    content, border = trim_border(small)
    return small, content, border


def thumb_array(data: bytes) -> np.ndarray:
    th, tw = data[0], data[1]
    return np.frombuffer(data[2:], np.uint8).reshape(th, tw).astype(np.float32)


@lru_cache(maxsize=256)
def _resize_matrix(n: int, m: int) -> np.ndarray:
    """(m, n) float64: Pillow's BILINEAR resize of a length-n signal to length m, as a matrix
    (resize is linear and separable: an image resizes as Ry @ img @ Rx.T)."""
    eye = Image.fromarray(np.eye(n, dtype=np.float32))  # a float32 array makes a mode "F" image
    return np.asarray(eye.resize((m, n), Image.BILINEAR), dtype=np.float64).T


CROP_TURNS = (0, 3, 5, 6)  # a crop may also be turned (rotated in an editor, or cut from pixels stored sideways); not mirrored
CROP_PRE = 0.80  # half-resolution correlation a pair needs to be searched at full resolution


class _Windows:
    """Pairs whose big and (turned) small thumbnails have the same shapes: the big thumbnails'
    FFTs and integral images, computed once for every window size tried.

    Not cv2.matchTemplate: it gives the same correlations (within 2e-7) one pair and size per call,
    and took 13.6 s against 7.8 s for the window searches of `benchmarks/duplicates.py --speed 3000
    --cameras 2` (14,361 pairs; 13.2 against 10.3 s at --speed 10000), where one FFT of a big
    thumbnail serves every pair and size of a batch (only small batches favour it: 5.6 against
    6.9 s over the 74 calls of three groupings of a 360-photo --quality library; Xeon, 2 cores)."""

    def __init__(self, bigs: list[np.ndarray], which: np.ndarray, smalls: list[np.ndarray], sizes: list[tuple[int, int]]):
        """bigs: (H, W) float32 arrays, each once; which: (P,) each pair's index into them;
        smalls: (h, w) float32 arrays, one per pair; sizes: window (height, width) in pixels."""
        A = np.stack(bigs)  # (U, H, W)
        self.H, self.W = A.shape[1:]
        self.which = which
        self.spec = rfft2(A, workers=-1)
        A = A.astype(np.float64)
        self.s1 = np.zeros((len(A), self.H + 1, self.W + 1))
        self.s2 = np.zeros_like(self.s1)
        self.s1[:, 1:, 1:] = A.cumsum(1).cumsum(2)
        self.s2[:, 1:, 1:] = (A * A).cumsum(1).cumsum(2)
        self.B = np.stack(smalls)  # (P, h, w)
        self.sizes = sizes
        self.norms: dict[int, np.ndarray] = {}

    def _norm(self, k: int) -> np.ndarray:
        """(U, ny, nx): each big thumbnail's windows of size k, their norms around their means."""
        if k not in self.norms:
            wh, ww = self.sizes[k]

            def window(s):
                return s[:, wh:, ww:] - s[:, :-wh, ww:] - s[:, wh:, :-ww] + s[:, :-wh, :-ww]

            w1, w2 = window(self.s1), window(self.s2)
            self.norms[k] = np.sqrt(np.maximum(w2 - w1 * w1 / (wh * ww), 0.0)).astype(np.float32)
        return self.norms[k]

    def score(self, sel: np.ndarray, k: int) -> np.ndarray:
        """(len(sel),) best correlation of pairs `sel` at window size k, over the window's positions."""
        H, W, (wh, ww) = self.H, self.W, self.sizes[k]
        h, w = self.B.shape[1:]
        T = _resize_matrix(h, wh).astype(np.float32) @ self.B[sel] @ _resize_matrix(w, ww).T.astype(np.float32)
        T -= T.mean(axis=(1, 2), keepdims=True)
        tn = np.sqrt((T * T).sum(axis=(1, 2)))
        # sum(window * T) at every position: circular correlation, valid where it does not wrap
        num = irfft2(self.spec[self.which[sel]] * np.conj(rfft2(T, s=(H, W), workers=-1)), s=(H, W),
                     workers=-1)[:, : H - wh + 1, : W - ww + 1]
        norm = self._norm(k)[self.which[sel]]
        flat = 0.5 * np.sqrt(wh * ww)  # a window or template under half a grey level of spread
        ncc = np.where((norm > flat) & (tn[:, None, None] > flat), num / np.maximum(norm * tn[:, None, None], 1e-6), 0.0)
        return np.maximum(ncc.reshape(len(sel), -1).max(axis=1), 0.0)


def _half(a: np.ndarray) -> np.ndarray:
    """A thumbnail at half resolution (2x2 means; an odd last row or column dropped)."""
    h, w = a.shape[0] // 2, a.shape[1] // 2
    return a[: 2 * h, : 2 * w].reshape(h, 2, w, 2).mean(axis=(1, 3))


def _best_windows(entries, bigs: dict, smalls: dict, scales, near: dict | None = None, stride: int = 2) -> dict:
    """For entries (pair, turn): {pair: (score, turn, width fraction)} of the best window over
    the turns given for it. bigs: pair -> (key, array); smalls: entry -> array. Without `near`,
    every `stride`-th size, then the neighbours of the best; with it (pair -> width fraction),
    the sizes within 2.5 px (at the half resolution) of that width: the half-resolution best
    is off by up to 2 px there (on the benchmark)."""
    groups: dict[tuple, list] = {}
    for e in entries:
        big = bigs[e[0]][1]
        groups.setdefault((*big.shape, *smalls[e].shape), []).append(e)
    found: dict[int, tuple[float, int, float]] = {}
    for (H, W, h, w), members in groups.items():
        sizes = [(round(H * fh), round(W * fw)) for fh, fw in scales(H, W, h, w)]
        sizes = [s for s in sizes if 8 <= s[0] <= H and 8 <= s[1] <= W]
        if not sizes:
            continue
        first: dict = {}
        which = np.array([first.setdefault(bigs[i][0], len(first)) for i, _ in members])
        arrays = {bigs[i][0]: bigs[i][1] for i, _ in members}
        win = _Windows([arrays[key] for key in first], which, [smalls[e] for e in members], sizes)
        fws = np.array([ww / W for _, ww in sizes])
        best = np.full(len(members), -1.0)
        at = np.zeros(len(members), np.int64)

        def run(k, sel):
            if len(sel):
                s = win.score(sel, k)
                better = s > best[sel]
                best[sel[better]], at[sel[better]] = s[better], k

        if near is None:
            coarse = sorted(set(range(0, len(sizes), stride)) | {len(sizes) - 1})
            for k in coarse:
                run(k, np.arange(len(members)))
            for k in range(len(sizes)):
                if k not in coarse:
                    run(k, np.flatnonzero(np.abs(at - k) < stride))
        else:
            want = np.array([near[i] for i, _ in members])
            for k in range(len(sizes)):
                run(k, np.flatnonzero(np.abs(want - fws[k]) <= 2.5 / (W / 2)))
        for (i, t), s, k in zip(members, best.tolist(), at.tolist()):
            if s >= 0 and (i not in found or s > found[i][0]):
                found[i] = (s, t, float(fws[k]))
    return found


def crop_search(bigs: list[bytes], smalls: list[bytes], scales, turns=CROP_TURNS, chunk: int = 1024
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How well each `smalls[i]`, turned by one of `turns`, matches a window of `bigs[i]` (`thumb`
    bytes): a crop keeps its original's pixels, so it is a window of the big thumbnail, at the
    crop's own scale or, when it was resized afterwards, another. `scales(H, W, h, w)` lists the
    window sizes to try, as (height, width) fractions of an H x W big thumbnail, for an h x w
    small one. Searched at half resolution first (every turn, every other size, then the
    neighbours of the best); pairs reaching CROP_PRE there are searched at full resolution, in
    their best turn, at the sizes around the best.

    Returns (best (P,) float64: normalised cross-correlation, 1.0 = a perfect crop, unrelated
    photos near 0 (below CROP_PRE: the half-resolution figure), 0 where no window of 8 px or more
    fits; width (P,) float64: that window's width fraction; turn (P,) int: the ORIENTATIONS index
    that turns the small photo onto the big one). Batched: pairs with the same shapes share FFTs
    (a library has few shapes)."""
    P = len(bigs)
    best, width, turn = np.zeros(P), np.zeros(P), np.zeros(P, np.int64)
    for c in range(0, P, chunk):
        idx = range(c, min(P, c + chunk))
        arrays = {b: thumb_array(b) for b in {bigs[i] for i in idx}}
        small = {i: thumb_array(smalls[i]) for i in idx}
        halves = {b: _half(a) for b, a in arrays.items()}
        entries = [(i, t) for i in idx for t in turns]
        coarse = _best_windows(entries, {i: (bigs[i], halves[bigs[i]]) for i in idx},
                               {(i, t): _half(orient(small[i], t)) for i, t in entries}, scales)
        for i, (s, t, fw) in coarse.items():
            best[i], width[i], turn[i] = s, fw, t
        again = [(i, t) for i, (s, t, _) in coarse.items() if s >= CROP_PRE]
        fine = _best_windows(again, {i: (bigs[i], arrays[bigs[i]]) for i, _ in again},
                             {(i, t): orient(small[i], t) for i, t in again}, scales,
                             near={i: coarse[i][2] for i, _ in again})
        for i, (s, t, fw) in fine.items():
            best[i], width[i], turn[i] = s, fw, t
    return best, width, turn


FRAMED = 0.2  # `frame_share` from which a photo holds the other in a drawn frame rather than cut around it


def frame_share(big: bytes, small: bytes, fw: float, turn: int) -> float:
    """The share of `big`'s thumbnail outside its best window for `small` (turned by
    ORIENTATIONS[turn]; fw: the window's width fraction, from `crop_search`) that is exactly flat
    and not clipped (no grey step to a neighbour at 64 px, grey 3-252): drawn surfaces, an app's
    window or a mount, not a photo's. On benchmarks/duplicates.py --quality a screenshot of a
    photo in an app's frame reads 0.29-0.42, the surround of a crop 0.11 at most (a night sky, at
    grey 0, 0.47 before the clipped pixels were left out). 0 where the window is the whole."""
    A = thumb_array(big).astype(np.float64)
    S = orient(thumb_array(small), turn).astype(np.float64)
    H, W = A.shape
    h, w = S.shape
    ww = min(W, max(8, round(fw * W)))
    wh = min(H, max(8, round(ww * h / w)))
    T = _resize_matrix(h, wh) @ S @ _resize_matrix(w, ww).T
    T -= T.mean()
    win = np.lib.stride_tricks.sliding_window_view(A, (wh, ww))  # (ny, nx, wh, ww)
    d = win - win.mean(axis=(2, 3), keepdims=True)
    ncc = np.einsum("yxij,ij->yx", d, T) / np.maximum(np.sqrt((d * d).sum(axis=(2, 3)) * (T * T).sum()), 1e-9)
    y, x = np.unravel_index(int(np.argmax(ncc)), ncc.shape)
    outside = np.ones_like(A, bool)
    outside[y: y + wh, x: x + ww] = False
    if not outside.any():
        return 0.0
    gy, gx = np.gradient(A)
    flat = (np.hypot(gx, gy) < 0.01) & (A > 2) & (A < 253) & outside
    return float(flat.sum() / outside.sum())


FRAME = 32  # whole photos are compared on FRAME x FRAME grey versions of their thumbnails
ASPECT_TOL = 0.06  # |log aspect ratio| two photos may differ by and still be compared whole
# ... for duplicates: a copy stretched to another shape (up to 1.35x one way: a photo fitted to a
# banner or a screen) is still the same photo (benchmarks/duplicates.py --quality, "stretch")
STRETCH_TOL = 0.30


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


DETAIL = 64  # fine structure is compared on DETAIL x DETAIL versions of thumbnails that have it


def detail_grid(data: bytes) -> np.ndarray | None:
    """The fine structure of a `thumb`: the 4-neighbour Laplacian of its DETAIL x DETAIL grey
    version, (DETAIL - 2, DETAIL - 2) float32 with zero mean and unit norm; None for a thumbnail
    smaller than DETAIL (rows indexed before 64 px thumbnails). Edits that keep the framing
    (re-encode, resize, brightness, turns) keep it; another shot from a step aside moves every
    edge by a few of its pixels, which the FRAME grid of `frame_grid` cannot see."""
    arr = thumb_array(data).astype(np.float64)
    return _fine(arr).astype(np.float32) if max(arr.shape) >= DETAIL else None


def _fine(arr: np.ndarray) -> np.ndarray:
    """`detail_grid` of an (h, w) grey array: float64."""
    h, w = arr.shape
    g = _resize_matrix(h, DETAIL) @ arr @ _resize_matrix(w, DETAIL).T
    lap = 4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:]
    lap -= lap.mean()
    return lap / max(float(np.sqrt((lap * lap).sum())), 1e-6)


BAND = 8  # rows or columns of the (DETAIL - 2)-square fine structure a band along one edge may take (13 %)


def detail_scores(a: list[bytes], b: list[bytes], turns, banded: bool = False) -> np.ndarray:
    """(P,) float32 correlation of the fine structure (`detail_grid`) of a[i] and b[i] turned by
    ORIENTATIONS[turns[i]] (the Laplacian turns with the grid); NaN where a thumbnail lacks it.
    banded: the best correlation with a band along one edge of up to BAND rows or columns left out
    (a caption or a strip drawn over the photo: 0.99-1.00 for 17 of 18 captions of
    benchmarks/duplicates.py --quality, other views and photos of one subject 0.47 at most)."""
    out = np.full(len(a), np.nan, np.float32)
    grids: dict[bytes, np.ndarray | None] = {}
    for i, (ta, tb, k) in enumerate(zip(a, b, turns)):
        ga = grids[ta] if ta in grids else grids.setdefault(ta, detail_grid(ta))
        gb = grids[tb] if tb in grids else grids.setdefault(tb, detail_grid(tb))
        if ga is not None and gb is not None:
            gb = orient(gb, int(k))
            out[i] = float((ga * gb).sum()) if not banded else _banded_correlation(ga, gb)
    return out


def _banded_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """The best correlation of grids `a` and `b` (h, w) with 0..BAND rows or columns left out at
    one edge, from the sums of a, b, a², b² and ab over rows and columns (no copy per band)."""
    h, w = a.shape
    a, b = a.astype(np.float64), b.astype(np.float64)
    parts = np.stack([a, b, a * a, b * b, a * b])  # (5, h, w)
    rows, cols = parts.sum(axis=2), parts.sum(axis=1)  # (5, h), (5, w)
    total = rows.sum(axis=1, keepdims=True)  # (5, 1)
    n = np.arange(1, BAND + 1)
    left_out = np.concatenate([np.zeros((5, 1)),  # nothing, then n rows at the top, the bottom, n columns at the left, the right
                               np.cumsum(rows, axis=1)[:, :BAND], np.cumsum(rows[:, ::-1], axis=1)[:, :BAND],
                               np.cumsum(cols, axis=1)[:, :BAND], np.cumsum(cols[:, ::-1], axis=1)[:, :BAND]], axis=1)
    count = h * w - np.concatenate([[0], n * w, n * w, n * h, n * h])
    sa, sb, saa, sbb, sab = total - left_out
    var = np.maximum(saa - sa * sa / count, 0.0) * np.maximum(sbb - sb * sb / count, 0.0)
    return float(np.max((sab - sa * sb / count) / np.maximum(np.sqrt(var), 1e-9)))


def frame_scores(a: list[bytes], b: list[bytes], chunk: int = 8192, tol: float = ASPECT_TOL
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Whole-photo pixel correlation of pairs of `thumb` bytes, in each orientation.

    Returns (ncc (P, 8) float32: the normalised cross-correlation of a[i] with b[i] turned by
    ORIENTATIONS[k], both resized to FRAME x FRAME; -1 where the turned b's log aspect ratio is
    more than `tol` from a's; change (P, 2) float32: b's mean grey minus a's, and b's spread over a's (a re-encode
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
            fits = np.abs(aspect[pa] - (-aspect[pb] if transpose else aspect[pb])) <= tol
            if fits.any():
                ncc[s: s + chunk][fits, k] = np.einsum("pij,pij->p", ga[fits], orient(gb[fits], k))
    if not len(a):
        return ncc, np.zeros((0, 2), np.float32)
    change = np.stack([mean[ib] - mean[ia], spread[ib] / np.maximum(spread[ia], 1e-6)], 1).astype(np.float32)
    return ncc, change


# A straightened copy: the photo turned by a few degrees and cut to the largest rectangle of its
# shape that holds no corner (an editor's straighten tool), searched every half degree from 1.5 to
# 9 either way. On benchmarks/duplicates.py --quality the copies read 0.98-1.00 on the frame grid
# at their angle (0.18 of them were found before) and other photos up to 0.965 turned at their
# best (views of a UKBench object beside each other): the fine structure at that angle tells them
# apart (the copies 0.56-0.91, other photos 0.41 at most).
STRAIGHTEN_ANGLES = np.array([s * d for d in np.arange(1.5, 9.01, 0.5) for s in (1, -1)])
STRAIGHT_DETAIL = 0.55  # the fine structure a straightened copy keeps (its pixels resampled once)


def _straightened(arr: np.ndarray, degrees: float) -> np.ndarray:
    """(h, w) grey array turned by `degrees` (counter-clockwise, as Image.rotate) and cut to the
    largest centred rectangle of its shape holding no corner, back at (h, w): float64. One
    affine resampling (rotate, crop and resize in one)."""
    h, w = arr.shape
    a = np.radians(abs(degrees))
    f = 1.0 / (np.cos(a) + max(w / h, h / w) * np.sin(a))
    t = -np.radians(degrees)  # Image.rotate's matrix, scaled by f about the centre
    m00, m01, m10, m11 = np.cos(t), np.sin(t), -np.sin(t), np.cos(t)
    cx, cy = w / 2, h / 2
    coeffs = (f * m00, f * m01, cx - f * (m00 * cx + m01 * cy), f * m10, f * m11, cy - f * (m10 * cx + m11 * cy))
    img = Image.fromarray(arr.astype(np.float32), "F").transform((w, h), Image.AFFINE, coeffs, Image.BILINEAR)
    return np.asarray(img, np.float64)


def _unit(g: np.ndarray) -> np.ndarray:
    """`g` less its mean, of norm 1 (over its last two axes)."""
    g = g - g.mean(axis=(-2, -1), keepdims=True)
    return g / np.maximum(np.sqrt((g * g).sum(axis=(-2, -1), keepdims=True)), 1e-6)


def _straight_grids(arr: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """(len(angles), FRAME, FRAME) float64 unit grids (`_unit`) of the (h, w) grey array
    straightened by each angle (`_straightened`), as `frame_grid` would make them: sampled
    bilinearly, all angles at once, from its half-size version (the grid's spacing is ~1.7
    thumbnail pixels) rather than resampled whole per angle (~20 times cheaper)."""
    h, w = arr.shape
    hh, hw = max(2, h // 2), max(2, w // 2)
    half = _resize_matrix(h, hh) @ arr @ _resize_matrix(w, hw).T
    ys, xs = np.meshgrid((np.arange(FRAME) + 0.5) * h / FRAME - h / 2, (np.arange(FRAME) + 0.5) * w / FRAME - w / 2,
                         indexing="ij")  # the grid's cell centres about the photo's centre, thumbnail pixels
    a = np.radians(np.abs(angles))[:, None, None]
    f = 1.0 / (np.cos(a) + max(w / h, h / w) * np.sin(a))
    t = -np.radians(angles)[:, None, None]  # as `_straightened`: Image.rotate's matrix, scaled by f
    u = f * (np.cos(t) * xs + np.sin(t) * ys) + w / 2
    v = f * (-np.sin(t) * xs + np.cos(t) * ys) + h / 2
    return _unit(map_coordinates(half, [v * hh / h - 0.5, u * hw / w - 0.5], order=1, mode="nearest"))


def straighten_scores(a: list[bytes], b: list[bytes], least: float = -1.0) -> np.ndarray:
    """(P, 3) float32 for pairs of `thumb` bytes: how well b[i] is a[i] straightened (turned by a
    few degrees, cut to its shape: `_straightened`), at its best of STRAIGHTEN_ANGLES: (frame grid
    correlation, fine structure correlation at that angle (`detail_grid`'s; -1 without one, or
    where the grid's is under `least`), the angle); (-1, -1, 0) where their shapes differ by more
    than ASPECT_TOL. Each photo is turned once for all its pairs."""
    out = np.tile(np.array([-1.0, -1.0, 0.0], np.float32), (len(a), 1))
    by_source: dict[bytes, list[int]] = {}
    for i, (ta, tb) in enumerate(zip(a, b)):
        if abs(np.log(ta[1] / ta[0]) - np.log(tb[1] / tb[0])) <= ASPECT_TOL:
            by_source.setdefault(ta, []).append(i)
    plain: dict[bytes, np.ndarray] = {}  # b's grid sampled the same way (0 degrees): the same blur on both sides
    for ta, rows in by_source.items():
        arr = thumb_array(ta).astype(np.float64)
        grids = _straight_grids(arr, STRAIGHTEN_ANGLES)
        for i in rows:
            if b[i] not in plain:
                plain[b[i]] = _straight_grids(thumb_array(b[i]).astype(np.float64), np.zeros(1))[0]
            scores = np.einsum("aij,ij->a", grids, plain[b[i]])
            k = int(np.argmax(scores))
            out[i, 0], out[i, 2] = scores[k], STRAIGHTEN_ANGLES[k]
            lb = detail_grid(b[i]) if scores[k] >= least else None
            if lb is not None and max(arr.shape) >= DETAIL:
                out[i, 1] = float((_fine(_straightened(arr, float(STRAIGHTEN_ANGLES[k]))) * lb).sum())
    return out


def enlargement_residual(big: Image.Image, small: Image.Image, crop: int = 512, stretched: bool = False) -> float:
    """How far `big` is from `small` enlarged to its size: the least mean squared difference over
    the usual enlarging filters and the 8 orientations whose shape fits (on a central `crop` px
    square of `big`), over `small`'s own finest octave (its energy above half its resolution: how
    much fine detail this scene, camera and compression hold). A photo enlarged from `small`
    differs by its JPEG noise (~0.01-0.1); a photo taken at its size by the detail `small` lost
    (natural images' spectra fall off smoothly: about that octave's energy, 0.2-1.5). stretched:
    `small` may be enlarged to another shape (log aspect ratios up to STRETCH_TOL apart)."""
    big, small = big.convert("L"), small.convert("L")
    w, h = big.size
    c = min(crop, w, h)
    x, y = (w - c) // 2, (h - c) // 2
    a = np.asarray(big.crop((x, y, x + c, y + c)), np.float32)
    best = float("inf")
    for k in (None, *Image.Transpose):
        s = small if k is None else small.transpose(k)
        sw, sh = s.size
        if (abs(np.log(sw / sh) - np.log(w / h)) > STRETCH_TOL) if stretched else abs(sw / sh - w / h) > 0.02 * w / h:
            continue
        region = (x * sw / w, y * sh / h, (x + c) * sw / w, (y + c) * sh / h)  # the crop, in `s` pixels
        for f in ENLARGE_FILTERS:
            up = np.asarray(s.resize((c, c), f, box=region), np.float32)
            best = min(best, float(((a - up) ** 2).mean()))
    sa = np.asarray(small, np.float32)
    sw, sh = small.size
    half = small.resize((max(4, sw // 2), max(4, sh // 2)), Image.LANCZOS).resize((sw, sh), Image.BICUBIC)
    own = float(((sa - np.asarray(half, np.float32)) ** 2).mean())
    return best / max(own, 1e-6)
