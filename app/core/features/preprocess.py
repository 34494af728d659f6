"""Preprocessing for the CNN (numpy only) and the geometry of feature maps.

Frames: a box is (x1, y1, x2, y2) in original-image pixels after EXIF orientation, x2/y2
exclusive. The model sees the image scaled by `scale` = min(1, max_side / longer side) (never
upscaled); a crop keeps that same scale (a region has the size it has in the full image), or with
`box_side` sees more of the photo's own pixels (`crop_scale`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from PIL import Image

from ..imageio import RAW_EXTENSIONS, clip_box, image_size, open_oriented


@dataclass
class Prepared:
    """One image ready for the CNN.

    array: (3, h, w) float32, normalised. scale: model pixels per original pixel.
    offset: (x0, y0) original pixel at the array's top-left (non-zero for crops).
    orig_size: (w, h) of the oriented original photo.
    """

    array: np.ndarray
    scale: float
    offset: tuple[int, int]
    orig_size: tuple[int, int]


@dataclass
class FeatureMap:
    """Local features of one image. features: (H, W, C) float32 >= 0; geometry as in Prepared;
    stride: original-model pixels per cell."""

    features: np.ndarray
    scale: float
    offset: tuple[int, int]
    orig_size: tuple[int, int]
    stride: int

    def cell_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(xs (W+1,), ys (H+1,)): cell borders in original-image pixels, clipped to the image."""
        h, w = self.features.shape[:2]
        xs = np.minimum(np.arange(w + 1) * self.stride / self.scale + self.offset[0], self.orig_size[0])
        ys = np.minimum(np.arange(h + 1) * self.stride / self.scale + self.offset[1], self.orig_size[1])
        return xs, ys

    def cell_centres(self) -> tuple[np.ndarray, np.ndarray]:
        """(xs (W,), ys (H,)): centre of each cell in original-image pixels."""
        xs, ys = self.cell_edges()
        return (xs[:-1] + xs[1:]) / 2, (ys[:-1] + ys[1:]) / 2

    def box_cells(self, box) -> tuple[slice, slice]:
        """(rows, cols): the rectangle of cells whose centres fall inside `box` (original pixels);
        never empty (a box smaller than a cell selects the cell nearest its centre)."""
        x1, y1, x2, y2 = box
        xs, ys = self.cell_centres()
        cols = np.where((xs >= x1) & (xs < x2))[0]
        rows = np.where((ys >= y1) & (ys < y2))[0]
        if len(cols) == 0:
            cols = np.array([np.abs(xs - (x1 + x2) / 2).argmin()])
        if len(rows) == 0:
            rows = np.array([np.abs(ys - (y1 + y2) / 2).argmin()])
        return slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1)

    def box_mask(self, box) -> np.ndarray:
        """(H, W) bool mask of `box_cells`."""
        mask = np.zeros(self.features.shape[:2], bool)
        mask[self.box_cells(box)] = True
        return mask

    def cells_rect(self, rows: slice, cols: slice) -> tuple[float, float, float, float]:
        """The original-pixel rectangle covered by a block of cells: where its weights belong."""
        xs, ys = self.cell_edges()
        return (float(xs[cols.start]), float(ys[rows.start]), float(xs[cols.stop]), float(ys[rows.stop]))


# The most pixels a box's photo is decoded to (a 24 MP camera photo whole; larger ones reduced)
BOX_DECODE_PIXELS = 24_000_000


def scale_for(orig_size: tuple[int, int], max_side: int) -> float:
    return min(1.0, max_side / max(orig_size))


def crop_scale(box_size: tuple[float, float], s: float, box_side: int) -> float:
    """Model pixels per original pixel for a crop of `box_size` (w, h original pixels) from a photo
    seen at scale `s`: s, or larger so that the crop's longer side reaches `box_side`, never beyond
    the photo's own pixels (enlarging them 1.25 times and more lost UKBench boxes 0.1-0.5 mAP:
    docs/quality.md, "Boxes at the photo's own pixels")."""
    if box_side <= 0:
        return s
    return max(s, min(1.0, box_side / max(1.0, max(box_size))))


def to_array(img: Image.Image, mean, std) -> np.ndarray:
    """RGB PIL image -> (3, h, w) float32, (pixel / 255 - mean) / std (one scale and one shift
    per channel, in place: this runs once per photo beside the engine)."""
    scale = 1.0 / (255.0 * np.asarray(std, np.float32))
    shift = -np.asarray(mean, np.float32) / np.asarray(std, np.float32)
    out = np.empty((3, img.height, img.width), np.float32)
    hwc = np.asarray(img, dtype=np.uint8)
    for c in range(3):
        np.multiply(hwc[:, :, c], scale[c], out=out[c], casting="unsafe")
        out[c] += shift[c]
    return out


def prepare(img: Image.Image, orig_size: tuple[int, int], max_side: int, mean, std, box=None,
            box_side: int = 0) -> Prepared:
    """Resize (and crop `box`) an oriented RGB image for the model.

    `img` may be a reduced decode of the original (JPEG draft): its own size over `orig_size`
    gives the factor. The result has longer side round(max_side) for a full image (or its own size
    when smaller); the crop keeps the full image's scale (docs/METHOD.md, "Local features"), or,
    with `box_side`, sees the photo's own pixels up to a longer side of box_side (`crop_scale`).
    """
    s = scale_for(orig_size, max_side)
    r = img.size[0] / orig_size[0]  # decoded pixels per original pixel
    offset = (0, 0)
    if box is not None:
        x1, y1, x2, y2 = clip_box(box, orig_size)
        offset = (x1, y1)
        # never beyond the pixels decoded (a RAW file's preview, LibRaw's half-size decode)
        s = max(s, min(crop_scale((x2 - x1, y2 - y1), s, box_side), r))
        img = img.crop((round(x1 * r), round(y1 * r), max(round(x2 * r), round(x1 * r) + 1), max(round(y2 * r), round(y1 * r) + 1)))
        target = (max(1, round((x2 - x1) * s)), max(1, round((y2 - y1) * s)))
    else:
        target = (max(1, round(orig_size[0] * s)), max(1, round(orig_size[1] * s)))
    if img.size != target:
        img = img.resize(target, Image.BILINEAR, reducing_gap=3.0)
    return Prepared(to_array(img, mean, std), s, offset, tuple(orig_size))


def load_prepared(path: str | os.PathLike, max_side: int, mean, std, box=None, box_side: int = 0) -> Prepared:
    """Decode a photo (JPEG draft-decoded when much larger than needed; with `box_side`, a box's
    crop keeps the pixels `crop_scale` asks for, in a decode of at most BOX_DECODE_PIXELS) and
    prepare it."""
    draft = max_side
    if box is not None and box_side > 0 and os.path.splitext(os.fspath(path))[1].lower() not in RAW_EXTENSIONS:
        size = image_size(path)  # (a RAW file's size is a decode: its preview serves as it is)
        x1, y1, x2, y2 = clip_box(box, size)
        zoom = crop_scale((x2 - x1, y2 - y1), scale_for(size, max_side), box_side)
        # the decode's shorter side: the crop's scale or more, in at most BOX_DECODE_PIXELS (a box
        # on a 200 MP scan is not worth a 600 MB decode)
        zoom = min(zoom, max(scale_for(size, max_side), math.sqrt(BOX_DECODE_PIXELS / (size[0] * size[1]))))
        draft = math.ceil(zoom * min(size))
    img, orig = open_oriented(path, draft_side=draft)
    return prepare(img, orig, max_side, mean, std, box, box_side)
