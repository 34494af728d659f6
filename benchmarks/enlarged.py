"""Telling an enlarged copy from a photo taken at its size (`signature.enlargement_residual`), the
check Duplicates makes before "most pixels" decides which photo of a group to keep.

    python benchmarks/enlarged.py [--per-set 40]
    python benchmarks/enlarged.py --smoke      # a check that it runs: 2 photos per set, factors 2.5 and 4

For photos of every shared set (UKBench objects, Paris landmarks, the distractors), at each
factor: a smaller copy (shrunk by the factor, JPEG 90); the residual of the photo at its own size
(JPEG 90) against the smaller copy, and of the smaller copy enlarged back with each filter (JPEG
90; the bicubic one mirrored, as the trial's), the larger photo read back from its file as
Duplicates reads it (`open_oriented`, whole: a JPEG decoded at half its size by its draft mode,
tried for speed, found 80 % of the distractors' 4x enlargements against 100 %). Prints the lowest residual of the photos at their size (below ENLARGED_DETAIL, a photo
would be taken for an enlargement and its smaller copy kept) and, per filter, the largest
residual of the enlargements and the share found.
"""
from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.imageio import open_oriented  # noqa: E402
from app.core.signature import ENLARGE_FILTERS, ENLARGED_DETAIL, enlargement_residual  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
NAMES = {Image.NEAREST: "nearest", Image.BILINEAR: "bilinear", Image.BICUBIC: "bicubic+mirror", Image.LANCZOS: "lanczos"}


def jpeg(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def residual(big: Image.Image, small: Image.Image) -> float:
    """The residual of `big` saved as JPEG 90 and read back as Duplicates reads it."""
    with tempfile.NamedTemporaryFile(suffix=".jpg") as f:
        big.save(f.name, "JPEG", quality=90)
        return enlargement_residual(open_oriented(f.name, )[0], small)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-set", type=int, default=40)
    ap.add_argument("--factors", type=float, nargs="+", default=[2.5, 3.0, 4.0, 6.0])
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "--per-set 2 --factors 2.5 4")
    a = ap.parse_args()
    if a.smoke:
        a.per_set, a.factors = 2, [2.5, 4.0]
    print(f"ENLARGED_DETAIL = {ENLARGED_DETAIL}")
    t0, calls = time.perf_counter(), 0
    for name in ("ukbench", "paris250", "distractors"):
        files = sorted(p for p in (SHARED / name).rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        random.Random(0).shuffle(files)
        photos = [Image.open(p).convert("RGB") for p in files[: a.per_set]]
        for f in a.factors:
            own, big = [], {k: [] for k in ENLARGE_FILTERS}
            for img in photos:
                w, h = img.size
                small = jpeg(img.resize((max(8, round(w / f)), max(8, round(h / f))), Image.LANCZOS))
                own.append(residual(img, small))
                for k in ENLARGE_FILTERS:
                    up = small.resize((w, h), k)
                    if k == Image.BICUBIC:
                        up = up.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
                    big[k].append(residual(up, small))
                calls += 1 + len(ENLARGE_FILTERS)
            own = np.array(own)
            found = ", ".join(f"{NAMES[k]} max {max(v):.3f} found {np.mean(np.array(v) < ENLARGED_DETAIL):.0%}"
                              for k, v in big.items())
            print(f"{name:11s} x{f:<3}: at their size lowest {own.min():.3f} (taken for enlarged "
                  f"{np.mean(own < ENLARGED_DETAIL):.0%}) | {found}  ({len(own)} photos)")
    print(f"{1000 * (time.perf_counter() - t0) / calls:.0f} ms per check, JPEG encoding and decoding included")


if __name__ == "__main__":
    main()
