"""Duplicate groups: grouping time at 100,000 photos, and precision/recall per kind of edit on real
photos.

    python benchmarks/duplicates.py --speed 100000 [--cameras 2]   # synthetic descriptors and signatures
    python benchmarks/duplicates.py --quality           # edits of shared photos, indexed for real

Quality set: 60 source photos (30 UKBench objects, 30 Paris), each copied once per edit: JPEG
quality 60, resized to 50 %, rotated by 90/180/270 (one at random), mirrored, cropped to 60-90 %
(random); every other shared photo is an untouched negative (the other views of the UKBench
objects are the hard ones: similar, not duplicates). A pair (source, edit) counts as found when
both land in one group; precision counts every pair inside the groups.
"""
from __future__ import annotations

import argparse
import io
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.aggregate.descriptor import l2n  # noqa: E402
from app.core.duplicates import NEAR_DEFAULT, group_duplicates  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
EDITS = ("q60", "half", "rotate", "mirror", "crop")


def speed(n: int, d: int = 512, cameras: int = 1) -> None:
    rng = np.random.default_rng(0)
    clusters = max(1, n // 50)
    centres = l2n(rng.normal(size=(clusters, d))).astype(np.float32)
    vecs = l2n(centres[rng.integers(0, clusters, n)] + (0.5 / np.sqrt(d)) * rng.normal(size=(n, d))).astype(np.float32)
    dups = rng.choice(n, n // 100, replace=False)  # 1 % near copies
    vecs[dups] = l2n(vecs[(dups + 1) % n] + (0.05 / np.sqrt(d)) * rng.normal(size=(len(dups), d)))
    ids = np.arange(1, n + 1)
    hashes = rng.integers(0, 1 << 62, n)
    hashes[dups] = hashes[(dups + 1) % n] ^ (0b101 << 20)  # a near copy: 2 hash bits differ, same orientation bits (the low 3)
    # one camera (12 MP) or two (and 8 MP), every 20th photo a smaller export: crop checks happen
    # between photos of different sizes (with two cameras, about half of all similar pairs)
    sizes = [(4000, 3000), (3264, 2448)][:cameras]
    thumbs = rng.integers(0, 256, (n, 36, 48), dtype=np.uint8)
    rows = {}
    for k, (i, h) in enumerate(zip(ids.tolist(), hashes.tolist())):
        w, hh = (2600, 1950) if k % 20 == 0 else sizes[k % len(sizes)]
        rows[i] = (i, f"/p/{i}.jpg", w, hh, 3_000_000, 0.0, 1.0, f"{i:040x}", h, bytes([36, 48]) + thumbs[k].tobytes())
    t = time.perf_counter()
    groups = group_duplicates(ids, vecs, rows, NEAR_DEFAULT, crops=True, log=print)
    print(f"n = {n:,}, D = {d}, {cameras} camera(s): {len(groups)} groups in {time.perf_counter() - t:.1f} s")


def make_set(out: Path, seed: int = 0) -> dict[str, str]:
    """Write the quality set into `out`; returns file name -> family (the source it comes from,
    or '' for an untouched negative)."""
    rnd = random.Random(seed)
    uk = sorted((SHARED / "ukbench").glob("*.jpg"))
    pa = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
    sources = uk[0:120:4] + rnd.sample(pa, 30)  # the first view of 30 objects, 30 landmark photos
    family = {}
    for p in uk + pa:
        shutil.copy(p, out / p.name)
        family[p.name] = p.stem if p in sources else ""
    for p in sources:
        img = Image.open(p).convert("RGB")
        w, h = img.size
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=60)
        variants = {
            "q60": Image.open(io.BytesIO(buf.getvalue())),
            "half": img.resize((w // 2, h // 2), Image.LANCZOS),
            "rotate": img.transpose(rnd.choice([Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180,
                                                Image.Transpose.ROTATE_270])),
            "mirror": img.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        }
        f = rnd.uniform(0.6, 0.9)
        cw, ch = int(w * f), int(h * f)
        x, y = rnd.randint(0, w - cw), rnd.randint(0, h - ch)
        variants["crop"] = img.crop((x, y, x + cw, y + ch))
        for kind, v in variants.items():
            name = f"{p.stem}__{kind}.jpg"
            v.save(out / name, quality=92)
            family[name] = p.stem
    return family


def quality(size: int | None, keep: str | None = None, reuse: str | None = None) -> None:
    from app.core.config import Settings
    from app.core.duplicates import find_duplicates
    from app.core.library.service import LibraryService

    tmp = Path(reuse) if reuse else Path(tempfile.mkdtemp(prefix="hs-dups-"))
    lib = tmp / "photos"
    if reuse:
        family = make_set(Path(tempfile.mkdtemp()))  # the same names and families, made again elsewhere
    else:
        lib.mkdir()
        family = make_set(lib)
    settings = Settings(**({"max_side": size} if size else {}))
    svc = LibraryService(tmp / "home", settings)
    svc.wait_ready()
    t = time.perf_counter()
    svc.run(svc.index([lib]))
    print(f"indexed {len(family)} photos in {time.perf_counter() - t:.0f} s")
    for threshold in (0.90, 0.93, 0.95, 0.97):
        groups = find_duplicates(svc, threshold)
        group_of = {Path(m.path).name: k for k, g in enumerate(groups) for m in g.members}
        found = {kind: 0 for kind in EDITS}
        total = {kind: 0 for kind in EDITS}
        for name, fam in family.items():
            if "__" in name:
                kind = name.split("__")[1][:-4]
                total[kind] += 1
                src = fam + ".jpg"
                found[kind] += int(name in group_of and group_of.get(src) == group_of[name])
        pairs = right = 0
        for g in groups:
            names = [Path(m.path).name for m in g.members]
            for a in range(len(names)):
                for b in range(a + 1, len(names)):
                    pairs += 1
                    fa, fb = family[names[a]], family[names[b]]
                    right += int(fa != "" and fa == fb)
        by_rel: dict[str, list[int]] = {}
        for g in groups:
            keep = family[Path(g.members[0].path).name]
            for m in g.members[1:]:
                fam = family[Path(m.path).name]
                by_rel.setdefault(m.relation, []).append(int(fam != "" and fam == keep))
        recall = ", ".join(f"{k} {found[k] / total[k]:.2f}" for k in EDITS)
        rel = ", ".join(f"{r} {np.mean(v):.2f} of {len(v)}" for r, v in sorted(by_rel.items()))
        print(f"threshold {threshold:.2f}: {len(groups)} groups; recall per edit: {recall}; "
              f"pair precision {right / max(pairs, 1):.3f} ({pairs} pairs); members right per relation: {rel}")
    svc.close()
    if keep is None:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"library kept in {tmp}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--speed", type=int, nargs="*", help="library sizes for the timing (synthetic)")
    ap.add_argument("--cameras", type=int, default=1, choices=[1, 2], help="photo sizes in the synthetic library")
    ap.add_argument("--quality", action="store_true")
    ap.add_argument("--size", type=int, help="input size for --quality (default: the app's)")
    ap.add_argument("--keep", action="store_true", help="keep the indexed quality library (prints where)")
    ap.add_argument("--reuse", help="a kept quality library to measure again (no indexing)")
    a = ap.parse_args()
    for n in a.speed or []:
        speed(n, cameras=a.cameras)
    if a.quality:
        quality(a.size, "keep" if a.keep else None, a.reuse)


if __name__ == "__main__":
    main()
