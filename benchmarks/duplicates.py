"""Duplicate groups: grouping time at 100,000 photos, and precision/recall per kind of edit on real
photos.

    python benchmarks/duplicates.py --speed 100000 [--cameras 2]   # synthetic descriptors and signatures
    python benchmarks/duplicates.py --quality           # edits of shared photos, indexed for real
    python benchmarks/duplicates.py --smoke             # a check that both run: 300 photos; 6 sources

Quality set (`make_set`), built like the trial on unseen photos in issue 19: 150 sources (75 UKBench
objects at 640x480, 75 Paris photos at ~1024 px), each with 3 of 12 edits (JPEG quality 40-70,
resized to 40-70 %, rotated 90/180/270, mirrored, cropped to 55-85 % of each side, trimmed to
96-98.5 % of each side (92-97 % of the pixels), cropped then resized to 60 %, brightness/contrast +-15 %, a 30 px white border, stored turned with an EXIF
orientation (quality 95), a PNG copy, a byte copy); every other shared UKBench and Paris photo is
a look-alike (the other views of each object, other photos of each building): similar, never a
duplicate. A pair (source, edit) counts as found when both land in one group; precision counts
every pair inside the groups; "the original kept" counts groups whose first member is the source.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.aggregate.descriptor import l2n  # noqa: E402
from app.core.catalog.records import ImageRow  # noqa: E402
from app.core.duplicates import NEAR_DEFAULT, group_duplicates  # noqa: E402
from app.core.signature import THUMB  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
EDITS = ("jpeg", "resize", "rotate", "mirror", "crop", "trim", "crop+resize", "bright", "border", "exif", "png", "copy")


def speed(n: int, d: int = 512, cameras: int = 1) -> None:
    rng = np.random.default_rng(0)
    clusters = max(1, n // 50)
    centres = l2n(rng.normal(size=(clusters, d))).astype(np.float32)
    vecs = l2n(centres[rng.integers(0, clusters, n)] + (0.5 / np.sqrt(d)) * rng.normal(size=(n, d))).astype(np.float32)
    dups = rng.choice(n, n // 100, replace=False)  # 1 % near copies
    vecs[dups] = l2n(vecs[(dups + 1) % n] + (0.05 / np.sqrt(d)) * rng.normal(size=(len(dups), d)))
    ids = np.arange(1, n + 1)
    hashes = rng.integers(0, 1 << 62, n)
    hashes[dups] = hashes[(dups + 1) % n] ^ (0b101 << 20)  # a near copy: 2 hash bits differ
    # one camera (12 MP) or two (and 8 MP), every 20th photo a smaller export: crop checks happen
    # between photos of different sizes (with two cameras, about half of all similar pairs)
    sizes = [(4000, 3000), (3264, 2448)][:cameras]
    th, tw = THUMB * 3 // 4, THUMB  # 4:3 photos' thumbnails
    thumbs = rng.integers(0, 256, (n, th, tw), dtype=np.uint8)
    rows = {}
    for k, (i, h) in enumerate(zip(ids.tolist(), hashes.tolist())):
        w, hh = (2600, 1950) if k % 20 == 0 else sizes[k % len(sizes)]
        rows[i] = ImageRow(i, f"/p/{i}.jpg", width=w, height=hh, size=3_000_000, sharpness=1.0, digest=f"{i:040x}",
                           phash=h, thumb=bytes([th, tw]) + thumbs[k].tobytes())
    t = time.perf_counter()
    groups = group_duplicates(ids, vecs, rows, NEAR_DEFAULT, crops=True, log=print)
    print(f"n = {n:,}, D = {d}, {cameras} camera(s): {len(groups)} groups in {time.perf_counter() - t:.1f} s")


def _edit(img: Image.Image, kind: str, rnd: random.Random, src: Path, out: Path) -> None:
    """Write `img` (the source, RGB) edited by `kind` to `out`."""
    w, h = img.size

    def crop(lo=0.55, hi=0.85):
        fw, fh = rnd.uniform(lo, hi), rnd.uniform(lo, hi)
        cw, ch = int(w * fw), int(h * fh)
        x, y = rnd.randint(0, w - cw), rnd.randint(0, h - ch)
        return img.crop((x, y, x + cw, y + ch))

    if kind == "copy":
        shutil.copyfile(src, out)  # a new file with the same bytes (and a new file time)
    elif kind == "png":
        img.save(out, "PNG")
    elif kind == "jpeg":
        img.save(out, "JPEG", quality=rnd.randint(40, 70))
    elif kind == "exif":  # stored turned, with an EXIF orientation that shows it as the source
        exif = Image.open(src).getexif()
        exif[0x0112] = 6
        img.transpose(Image.Transpose.ROTATE_90).save(out, "JPEG", quality=95, exif=exif.tobytes())
    else:
        edited = {
            "resize": lambda: img.resize((round(w * (f := rnd.uniform(0.4, 0.7))), round(h * f)), Image.LANCZOS),
            "rotate": lambda: img.transpose(rnd.choice([Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180,
                                                        Image.Transpose.ROTATE_270])),
            "mirror": lambda: img.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
            "crop": crop,
            "trim": lambda: crop(0.96, 0.985),  # a slight crop: 92-97 % of the pixels (trial 13: 96 % of a corner)
            "crop+resize": lambda: (c := crop()).resize((round(c.width * 0.6), round(c.height * 0.6)), Image.LANCZOS),
            "bright": lambda: ImageEnhance.Contrast(ImageEnhance.Brightness(img).enhance(rnd.uniform(0.85, 1.15)))
            .enhance(rnd.uniform(0.85, 1.15)),
            "border": lambda: ImageOps.expand(img, 30, fill="white"),
        }[kind]()
        edited.save(out, "JPEG", quality=92)


def make_set(out: Path, seed: int = 0, per_source: int = 3, sources: int = 75) -> dict[str, str]:
    """Write the quality set into `out`; returns file name -> family (the source's name for a
    source and its edits, '' for every other photo). 2 x `sources` sources (the first view of
    every other UKBench object, as many Paris photos), each with `per_source` of the EDITS; every
    other shared UKBench and Paris photo is a look-alike (other views of the same objects, other
    photos of the same buildings), never a duplicate. Originals keep their file times; edits are
    newer. Fewer sources (--smoke): UKBench up to the last source's object, Paris photos 4 per source."""
    rnd = random.Random(seed)
    uk = sorted((SHARED / "ukbench").glob("*.jpg"))[: 8 * sources]
    pa = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
    pa = pa if sources >= 75 else pa[: 4 * sources]
    sources = uk[0:600:8] + rnd.sample(pa, sources)
    family = {}
    for p in uk + pa:
        shutil.copy2(p, out / p.name)
        family[p.name] = p.stem if p in sources else ""
    for p in sources:
        img = Image.open(p).convert("RGB")
        for kind in rnd.sample(EDITS, per_source):
            name = f"{p.stem}__{kind}.{'png' if kind == 'png' else 'jpg'}"
            _edit(img, kind, rnd, p, out / name)
            family[name] = p.stem
    return family


EXPECTED = {"copy": "exact", "png": "format", "jpeg": "reencoded", "exif": "reencoded", "resize": "resized",
            "rotate": "turned", "mirror": "turned", "crop": "crop", "trim": "crop", "crop+resize": "crop", "bright": "edited",
            "border": "bordered"}


def score(groups, family: dict[str, str]) -> dict:
    """Per-edit recall, pair precision, the original kept, relations right."""
    group_of = {Path(m.path).name: k for k, g in enumerate(groups) for m in g.members}
    found = {k: [] for k in EDITS}
    for name, fam in family.items():
        if "__" in name:
            kind = name.split("__")[1].rsplit(".", 1)[0]
            found[kind].append(int(name in group_of and group_of.get(fam + ".jpg") == group_of[name]))
    pairs = right = 0
    kept = with_source = 0
    relation_right = {k: [] for k in EDITS}
    for g in groups:
        names = [Path(m.path).name for m in g.members]
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                pairs += 1
                right += int(family[names[a]] != "" and family[names[a]] == family[names[b]])
        sources = [n for n in names if "__" not in n and family[n]]
        if sources:
            with_source += 1
            kept += int(names[0] in sources)
            if names[0] in sources:
                for m in g.members[1:]:
                    n = Path(m.path).name
                    if "__" in n and family[n] == family[names[0]]:
                        kind = n.split("__")[1].rsplit(".", 1)[0]
                        relation_right[kind].append(int(m.relation == EXPECTED[kind]))
    every = [v for k in EDITS for v in found[k]]
    return {"recall": {k: np.mean(v) if v else float("nan") for k, v in found.items()}, "all": np.mean(every),
            "n": {k: len(v) for k, v in found.items()}, "precision": right / max(pairs, 1), "pairs": pairs,
            "kept": kept / max(with_source, 1), "groups": with_source,
            "relation": {k: np.mean(v) if v else float("nan") for k, v in relation_right.items()}}


def quality(size: int | None, keep: str | None = None, reuse: str | None = None, sources: int = 75) -> None:
    from app.core.config import Settings
    from app.core.duplicates import SLIDER_RANGE, find_duplicates
    from app.core.library.service import LibraryService

    tmp = Path(reuse) if reuse else Path(tempfile.mkdtemp(prefix="hs-dups-"))
    lib = tmp / "photos"
    if reuse:
        family = make_set(Path(tempfile.mkdtemp()), sources=sources)  # the same names and families, made again elsewhere
    else:
        lib.mkdir()
        family = make_set(lib, sources=sources)
    settings = Settings(**({"max_side": size} if size else {}))
    svc = LibraryService(tmp / "home", settings)
    svc.wait_ready()
    t = time.perf_counter()
    svc.run(svc.index([lib]))
    print(f"{len(family)} photos ({sum('__' in n for n in family)} edits of {2 * sources} sources), indexed in "
          f"{time.perf_counter() - t:.0f} s")
    cache: dict = {}
    t = time.perf_counter()
    groups = find_duplicates(svc, NEAR_DEFAULT, cache=cache)
    first = time.perf_counter() - t
    r = score(groups, family)
    print(f"\ndefault threshold {NEAR_DEFAULT:.2f} ({first:.1f} s):")
    print("| edit | " + " | ".join(EDITS) + " | all |")
    print("|---" * (len(EDITS) + 2) + "|")
    print("| recall | " + " | ".join(f"{r['recall'][k]:.3f}" for k in EDITS) + f" | {r['all']:.3f} |")
    print("| pairs | " + " | ".join(str(r["n"][k]) for k in EDITS) + f" | {sum(r['n'].values())} |")
    print("| relation right | " + " | ".join(f"{r['relation'][k]:.2f}" for k in EDITS) + " | |")
    print(f"pair precision {r['precision']:.4f} ({r['pairs']} pairs); the original kept in {r['kept']:.3f} of "
          f"{r['groups']} groups")
    # the same grouping with every file time equal: what the other rules decide alone
    rows = svc.catalog.duplicate_rows()
    same_time = {i: replace(row, mtime_ns=1_600_000_000 * 10**9) for i, row in rows.items()}
    ids, vecs = svc.snapshot().all_vectors()
    r2 = score(group_duplicates(ids, vecs, same_time, NEAR_DEFAULT, cache=cache), family)
    print(f"with every file time equal: the original kept in {r2['kept']:.3f} of {r2['groups']} groups")
    print("\n| threshold | recall (all edits) | " + " | ".join(EDITS) + " | pair precision |")
    print("|---" * (len(EDITS) + 3) + "|")
    for threshold in np.round(np.arange(SLIDER_RANGE[0], SLIDER_RANGE[1] + 1e-9, 0.02), 2).tolist() + [0.99]:
        t = time.perf_counter()
        r = score(find_duplicates(svc, threshold, cache=cache), family)
        print(f"| {threshold:.2f} | {r['all']:.3f} | " + " | ".join(f"{r['recall'][k]:.2f}" for k in EDITS)
              + f" | {r['precision']:.4f} | ({time.perf_counter() - t:.1f} s)")
    svc.close()
    if keep is None and not reuse:  # a library given to measure again is the caller's
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
    ap.add_argument("--sources", type=int, default=75, help="--quality: UKBench and Paris sources, each (75: all)")
    ap.add_argument("--smoke", action="store_true",
                    help="a check that both run (tests/test_benchmarks.py): --speed 300 --quality --sources 3")
    a = ap.parse_args()
    if a.smoke:
        a.speed, a.quality, a.sources = [300], True, 3
    for n in a.speed or []:
        speed(n, cameras=a.cameras)
    if a.quality:
        quality(a.size, "keep" if a.keep else None, a.reuse, a.sources)


if __name__ == "__main__":
    main()
