"""Telling an enlarged copy from a photo taken at its size (`signature.fine_detail`), the check
Duplicates uses before "most pixels" decides which photo of a group to keep.

    python benchmarks/enlarged.py [--per-set 60]

For photos of every shared set (UKBench objects, Paris landmarks, the distractors), at each
factor: a smaller copy (shrunk by the factor, JPEG 90); the detail of the photo at its own size
above 1/factor of its resolution (JPEG 90), and of the smaller copy enlarged back (bicubic, JPEG
90), each over the smaller copy's own finest octave. Prints the lowest and the 5th percentile of
the photos at their size (a photo below ENLARGED_DETAIL would be taken for an enlargement: its
smaller copy kept) and the share of enlargements found.
"""
from __future__ import annotations

import argparse
import io
import random
import sys
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.signature import ENLARGED_DETAIL, fine_detail  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def jpeg(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-set", type=int, default=60)
    ap.add_argument("--factors", type=float, nargs="+", default=[2.5, 3.0, 4.0, 6.0])
    a = ap.parse_args()
    print(f"ENLARGED_DETAIL = {ENLARGED_DETAIL}")
    for name in ("ukbench", "paris250", "distractors"):
        files = sorted(p for p in (SHARED / name).rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
        random.Random(0).shuffle(files)
        photos = [Image.open(p).convert("RGB") for p in files[: a.per_set]]
        for f in a.factors:
            own, big = [], []
            for img in photos:
                w, h = img.size
                small = jpeg(img.resize((max(8, round(w / f)), max(8, round(h / f))), Image.LANCZOS))
                ref = fine_detail(small, 2.0)  # what Duplicates compares with: the smaller copy's finest octave
                own.append(fine_detail(jpeg(img), f) / ref)
                big.append(fine_detail(jpeg(small.resize((w, h), Image.BICUBIC)), f) / ref)
            own, big = np.array(own), np.array(big)
            print(f"{name:11s} x{f:<3}: at their size lowest {own.min():.3f}, 5th pct {np.percentile(own, 5):.3f}, "
                  f"taken for enlarged {np.mean(own < ENLARGED_DETAIL):5.1%} | enlarged median {np.median(big):.3f}, "
                  f"found {np.mean(big < ENLARGED_DETAIL):5.1%}  ({len(own)} photos)")


if __name__ == "__main__":
    main()
