"""A minimal DNG writer for tests: a real camera-RAW file (a Bayer mosaic LibRaw decodes), made
from an RGB picture, optionally with an embedded JPEG preview as DNG files from cameras carry.

Layout (little-endian TIFF): IFD0 is the preview (NewSubfileType 1, JPEG) when one is given, with
the raw image in a SubIFD (tag 330); without a preview IFD0 is the raw image itself.
"""
from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
from PIL import Image

SHORT, LONG, RATIONAL, SRATIONAL, BYTE, ASCII = 3, 4, 5, 10, 1, 2


def _mosaic(rgb: np.ndarray) -> np.ndarray:
    """RGGB Bayer mosaic, 16-bit values (12-bit range)."""
    h, w, _ = rgb.shape
    h, w = h - h % 2, w - w % 2
    x = rgb[:h, :w].astype(np.uint16) * 16
    out = np.empty((h, w), np.uint16)
    out[0::2, 0::2] = x[0::2, 0::2, 0]
    out[0::2, 1::2] = x[0::2, 1::2, 1]
    out[1::2, 0::2] = x[1::2, 0::2, 1]
    out[1::2, 1::2] = x[1::2, 1::2, 2]
    return out


class _IFD:
    def __init__(self):
        self.entries: list[tuple[int, int, list]] = []

    def add(self, tag, typ, values):
        self.entries.append((tag, typ, list(values) if not isinstance(values, (bytes, str)) else values))


def _encode(ifds: list[tuple[_IFD, bytes]]) -> bytes:
    """Serialise IFDs (each with its strip data) into a TIFF; SubIFD (330) offsets are patched."""
    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    offsets = []
    blobs = []
    for ifd, data in ifds:  # strip data first
        offsets.append(len(out))
        out += data
        if len(out) % 2:
            out += b"\x00"
    ifd_pos = []
    for k, (ifd, data) in enumerate(ifds):
        entries = sorted(ifd.entries, key=lambda e: e[0])
        pos = len(out)
        ifd_pos.append(pos)
        extra_at = pos + 2 + 12 * len(entries) + 4
        extra = bytearray()
        table = bytearray(struct.pack("<H", len(entries)))
        for tag, typ, values in entries:
            if tag == 273:  # StripOffsets
                values = [offsets[k]]
            if typ == ASCII:
                payload = values.encode() + b"\x00"
                count = len(payload)
            elif typ in (RATIONAL, SRATIONAL):
                fmt = "<ii" if typ == SRATIONAL else "<II"
                payload = b"".join(struct.pack(fmt, *v) for v in values)
                count = len(values)
            elif typ == BYTE:
                payload = bytes(values)
                count = len(values)
            else:
                fmt = "<H" if typ == SHORT else "<I"
                payload = b"".join(struct.pack(fmt, v) for v in values)
                count = len(values)
            if len(payload) <= 4:
                table += struct.pack("<HHI", tag, typ, count) + payload.ljust(4, b"\x00")
            else:
                table += struct.pack("<HHII", tag, typ, count, extra_at + len(extra))
                extra += payload
                if len(extra) % 2:
                    extra += b"\x00"
        table += b"\x00\x00\x00\x00"  # next IFD: none (SubIFDs are reached through tag 330)
        out += table + extra
        blobs.append((pos, entries))
    struct.pack_into("<I", out, 4, ifd_pos[0])
    if len(ifds) > 1:  # patch IFD0's SubIFDs entry to point at IFD1
        pos, entries = blobs[0]
        for n, (tag, typ, values) in enumerate(sorted(ifds[0][0].entries, key=lambda e: e[0])):
            if tag == 330:
                struct.pack_into("<I", out, pos + 2 + 12 * n + 8, ifd_pos[1])
    return bytes(out)


def _raw_ifd(mosaic: np.ndarray, primary: bool) -> tuple[_IFD, bytes]:
    h, w = mosaic.shape
    data = mosaic.astype("<u2").tobytes()
    ifd = _IFD()
    ifd.add(254, LONG, [0])
    ifd.add(256, LONG, [w])
    ifd.add(257, LONG, [h])
    ifd.add(258, SHORT, [16])
    ifd.add(259, SHORT, [1])
    ifd.add(262, SHORT, [32803])  # CFA
    ifd.add(273, LONG, [0])
    ifd.add(277, SHORT, [1])
    ifd.add(278, LONG, [h])
    ifd.add(279, LONG, [len(data)])
    ifd.add(284, SHORT, [1])
    ifd.add(33421, SHORT, [2, 2])  # CFARepeatPatternDim
    ifd.add(33422, BYTE, [0, 1, 1, 2])  # CFAPattern RGGB
    ifd.add(50717, LONG, [4095])  # WhiteLevel
    if primary:
        _camera_tags(ifd)
    return ifd, data


def _camera_tags(ifd: _IFD) -> None:
    ifd.add(271, ASCII, "HeatSearch")
    ifd.add(272, ASCII, "Test DNG")
    ifd.add(50706, BYTE, [1, 4, 0, 0])  # DNGVersion
    ifd.add(50708, ASCII, "HeatSearch Test DNG")
    ifd.add(50721, SRATIONAL, [(1, 1), (0, 1), (0, 1), (0, 1), (1, 1), (0, 1), (0, 1), (0, 1), (1, 1)])  # ColorMatrix1
    ifd.add(50778, SHORT, [21])  # CalibrationIlluminant1 = D65
    ifd.add(50728, RATIONAL, [(1, 1), (1, 1), (1, 1)])  # AsShotNeutral


def write_dng(path: Path, rgb: Image.Image, preview: Image.Image | None = None) -> Path:
    """Write `rgb` as a Bayer DNG; with `preview`, also embed it as the JPEG preview in IFD0."""
    mosaic = _mosaic(np.asarray(rgb.convert("RGB")))
    if preview is None:
        raw = _raw_ifd(mosaic, primary=True)
        Path(path).write_bytes(_encode([raw]))
        return Path(path)
    buf = io.BytesIO()
    preview.convert("RGB").save(buf, "JPEG", quality=90)
    jpg = buf.getvalue()
    ifd0 = _IFD()
    ifd0.add(254, LONG, [1])  # reduced-resolution image
    ifd0.add(256, LONG, [preview.width])
    ifd0.add(257, LONG, [preview.height])
    ifd0.add(258, SHORT, [8, 8, 8])
    ifd0.add(259, SHORT, [7])  # JPEG
    ifd0.add(262, SHORT, [6])  # YCbCr
    ifd0.add(273, LONG, [0])
    ifd0.add(277, SHORT, [3])
    ifd0.add(278, LONG, [preview.height])
    ifd0.add(279, LONG, [len(jpg)])
    ifd0.add(330, LONG, [0])  # SubIFDs: patched to the raw IFD
    _camera_tags(ifd0)
    raw = _raw_ifd(mosaic, primary=False)
    Path(path).write_bytes(_encode([(ifd0, jpg), raw]))
    return Path(path)
