"""Duplicate groups: grouping time at 100,000 photos, and precision/recall per kind of edit on real
photos.

    python benchmarks/duplicates.py --speed 100000 [--cameras 2]   # synthetic descriptors and signatures
    python benchmarks/duplicates.py --quality           # edits of shared photos, indexed for real
    python benchmarks/duplicates.py --smoke             # a check that both run: 300 photos; 6 sources

Quality set (`make_set`), built like the trial on unseen photos in issue 19: 150 sources (75 UKBench
objects at 640x480, 75 Paris photos at ~1024 px), each with 3 of 22 edits (JPEG quality 40-70,
resized to 40-70 %, rotated 90/180/270, mirrored, cropped to 55-85 % of each side, trimmed to
96-98.5 % of each side (92-97 % of the pixels), cropped then resized to 60 %, brightness/contrast +-15 %, a 30 px white border, stored turned with an EXIF
orientation (quality 95), a PNG copy, a byte copy; black and white, sepia, a vignette, saturation,
a "vintage" filter, a caption band, a watermark, straightened 2-8 degrees with its crop, stretched
1.15-1.3x one way, a screenshot of it in an app's frame); 40 pairs of consecutive camera shots
(`_consecutive`: never duplicates, "consecutive shots grouped" counts them); every other shared UKBench and Paris photo is
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
EDITS = ("jpeg", "resize", "rotate", "mirror", "crop", "trim", "crop+resize", "bright", "border", "exif", "png", "copy",
         # the edits people make that the first twelve lack (issue 48, item 10)
         "grey", "sepia", "vignette", "saturate", "vintage", "caption", "watermark", "straighten", "stretch",
         "screenshot")


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
            "grey": lambda: img.convert("L").convert("RGB"),
            "sepia": lambda: ImageOps.colorize(img.convert("L"), (40, 26, 13), (255, 240, 192)),
            "vignette": lambda: _vignette(img, rnd.uniform(0.5, 0.7)),
            "saturate": lambda: ImageEnhance.Color(img).enhance(rnd.uniform(1.6, 2.0)),
            "vintage": lambda: _vintage(img),
            "caption": lambda: _text(img, rnd, caption=True),
            "watermark": lambda: _text(img, rnd, caption=False),
            "straighten": lambda: _straighten(img, rnd.uniform(2, 8) * rnd.choice([-1, 1])),
            "stretch": lambda: img.resize((round(w * rnd.uniform(1.15, 1.3)), h), Image.LANCZOS),
            "screenshot": lambda: _screenshot(img, rnd),
        }[kind]()
        edited.save(out, "PNG" if kind == "screenshot" else "JPEG", **({} if kind == "screenshot" else {"quality": 92}))


def _vignette(img: Image.Image, strength: float) -> Image.Image:
    """Corners darkened by up to `strength` (a filter app's vignette)."""
    w, h = img.size
    y, x = np.mgrid[0:h, 0:w]
    r = np.hypot((x - w / 2) / (w / 2), (y - h / 2) / (h / 2)) / np.sqrt(2)  # 0 centre, 1 corner
    gain = 1.0 - strength * np.clip((r - 0.35) / 0.65, 0, 1) ** 1.5
    return Image.fromarray((np.asarray(img, np.float32) * gain[..., None]).clip(0, 255).astype(np.uint8))


def _vintage(img: Image.Image) -> Image.Image:
    """A "vintage" filter: faded blacks, lower contrast, a warm cast, a little less colour."""
    a = np.asarray(ImageEnhance.Color(img).enhance(0.7), np.float32)
    a = 40 + a * 0.75  # faded: blacks lifted, contrast down
    a *= np.array([1.08, 1.0, 0.82], np.float32)  # warm
    return Image.fromarray(a.clip(0, 255).astype(np.uint8))


def _text(img: Image.Image, rnd: random.Random, caption: bool) -> Image.Image:
    """A caption on a band along the bottom, or a half-transparent watermark across the middle."""
    from PIL import ImageDraw, ImageFont

    w, h = img.size
    out = img.copy().convert("RGBA")
    layer = Image.new("RGBA", out.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(layer)
    if caption:
        size = max(12, h // 16)
        font = ImageFont.load_default(size=size)
        draw.rectangle((0, h - int(size * 1.8), w, h), fill=(0, 0, 0, 160))
        draw.text((size // 2, h - int(size * 1.5)), rnd.choice(["Summer 2019", "Holiday in Paris", "For sale — call now"]),
                  font=font, fill=(255, 255, 255, 255))
    else:
        size = max(16, w // 9)
        font = ImageFont.load_default(size=size)
        draw.text((w // 10, h // 2 - size // 2), "© PHOTOSTOCK", font=font, fill=(255, 255, 255, 110),
                  stroke_width=2, stroke_fill=(0, 0, 0, 60))
    return Image.alpha_composite(out, layer).convert("RGB")


def _straighten(img: Image.Image, degrees: float) -> Image.Image:
    """Turned by `degrees` and cropped to the largest rectangle of the same aspect that holds no
    corner (what an editor's straighten tool does)."""
    w, h = img.size
    turned = img.rotate(degrees, Image.BICUBIC, expand=False)
    a = np.radians(abs(degrees))
    f = 1.0 / (np.cos(a) + max(w / h, h / w) * np.sin(a))  # the scale of the inscribed same-aspect rectangle
    cw, ch = int(w * f), int(h * f)
    return turned.crop(((w - cw) // 2, (h - ch) // 2, (w - cw) // 2 + cw, (h - ch) // 2 + ch))


def _screenshot(img: Image.Image, rnd: random.Random) -> Image.Image:
    """The photo as an app shows it, captured: a dark window with a title bar, a side panel and a
    status bar, the photo scaled into the rest (a PNG, as screenshots are)."""
    from PIL import ImageDraw

    w, h = img.size
    W, H = int(w * 1.35), int(h * 1.3)
    shot = Image.new("RGB", (W, H), (38, 38, 42))
    draw = ImageDraw.Draw(shot)
    draw.rectangle((0, 0, W, int(H * 0.06)), fill=(60, 60, 66))  # title bar
    draw.rectangle((0, int(H * 0.06), int(W * 0.18), H), fill=(48, 48, 54))  # side panel
    for k in range(6):
        y = int(H * (0.1 + 0.08 * k))
        draw.rectangle((int(W * 0.02), y, int(W * 0.16), y + int(H * 0.04)), fill=(90, 90, 100))
    area = (int(W * 0.2), int(H * 0.09), W - int(W * 0.02), H - int(H * 0.06))
    scale = min((area[2] - area[0]) / w, (area[3] - area[1]) / h) * rnd.uniform(0.9, 1.0)
    photo = img.resize((int(w * scale), int(h * scale)), Image.LANCZOS)
    shot.paste(photo, (area[0] + (area[2] - area[0] - photo.width) // 2, area[1] + (area[3] - area[1] - photo.height) // 2))
    return shot


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
            name = f"{p.stem}__{kind}.{'png' if kind in ('png', 'screenshot') else 'jpg'}"
            _edit(img, kind, rnd, p, out / name)
            family[name] = p.stem
    for k, p in enumerate(sorted((SHARED / "distractors").glob("*.jpg"))[: sources_bursts(len(sources))]):
        for name in _consecutive(p, rnd, out, k):
            family[name] = ""  # never a duplicate of the other shot
    return family


def sources_bursts(sources: int) -> int:
    """How many pairs of consecutive shots a set of `sources` sources gets (40 for the whole set)."""
    return max(2, sources * 40 // 150)


def _consecutive(src: Path, rnd: random.Random, out: Path, k: int) -> list[str]:
    """Two camera shots of one scene a second or two apart, the camera moved a little (the second
    framed 2-4 % further along each side and 1-3 % closer): EXIF DateTimeOriginal and a camera's
    Make/Model in both. Another photo, not an edit of the first (issue 48, item 9)."""
    img = Image.open(src).convert("RGB")
    w, h = img.size
    names = []
    for shot, when in ((0, "2021:06:05 14:03:10"), (1, f"2021:06:05 14:03:{11 + rnd.randint(0, 1)}")):
        if shot:
            z = rnd.uniform(0.97, 0.99)
            dx, dy = rnd.uniform(0.02, 0.04) * w * rnd.choice([-1, 1]), rnd.uniform(0.02, 0.04) * h * rnd.choice([-1, 1])
            cw, ch = w * z * 0.92, h * z * 0.92
            x0, y0 = (w - cw) / 2 + dx, (h - ch) / 2 + dy
        else:
            cw, ch, x0, y0 = w * 0.92, h * 0.92, w * 0.04, h * 0.04
        frame = img.crop((round(x0), round(y0), round(x0 + cw), round(y0 + ch))).resize((w, h), Image.LANCZOS)
        exif = Image.Exif()
        exif[0x010F], exif[0x0110] = "Canon", "Canon EOS 80D"
        exif.get_ifd(0x8769)[0x9003] = when
        name = f"burst{k:02d}_{'ab'[shot]}.jpg"
        frame.save(out / name, "JPEG", quality=92, exif=exif.tobytes())
        names.append(name)
    return names


EXPECTED = {"copy": "exact", "png": "format", "jpeg": "reencoded", "exif": "reencoded", "resize": "resized",
            "rotate": "turned", "mirror": "turned", "crop": "crop", "trim": "crop", "crop+resize": "crop", "bright": "edited",
            "border": "bordered", "grey": "edited", "sepia": "edited", "vignette": "edited", "saturate": "edited",
            "vintage": "edited", "caption": "edited", "watermark": "edited", "straighten": "crop", "stretch": "resized",
            "screenshot": "bordered"}


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
    bursts = sum(len({n.split("_")[0] for n in (Path(m.path).name for m in g.members) if n.startswith("burst")})
                 < sum(Path(m.path).name.startswith("burst") for m in g.members) for g in groups)
    return {"recall": {k: np.mean(v) if v else float("nan") for k, v in found.items()}, "all": np.mean(every),
            "n": {k: len(v) for k, v in found.items()}, "precision": right / max(pairs, 1), "pairs": pairs,
            "kept": kept / max(with_source, 1), "groups": with_source, "bursts": bursts,
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
          f"{r['groups']} groups; consecutive shots grouped: {r['bursts']} of {sources_bursts(2 * sources)} pairs")
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
