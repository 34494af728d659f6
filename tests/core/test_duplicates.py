"""Duplicates (issue 13): exact, near (recompressed, resized), rotated/mirrored and cropped copies
are grouped with the best one first; similar but different photos are not; nothing is deleted."""
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.core.duplicates import crop_scale, find_duplicates, knn_pairs, to_records
from app.core.signature import crop_scores, dihedral_phash, hamming, thumb
from tests.conftest import shared_photos, write_photo
from tests.core.helpers import index, open_lib

ROOT = Path(__file__).resolve().parents[2]


def edits(src: Image.Image) -> dict[str, Image.Image]:
    buf = io.BytesIO()
    src.save(buf, "JPEG", quality=60)
    w, h = src.size
    return {"q60": Image.open(io.BytesIO(buf.getvalue())).convert("RGB"),
            "half": src.resize((w // 2, h // 2), Image.LANCZOS),
            "rot90": src.transpose(Image.Transpose.ROTATE_90),
            "mirror": src.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
            "crop": src.crop((int(w * 0.1), int(h * 0.12), int(w * 0.88), int(h * 0.9)))}


def test_signatures_see_through_rotation_and_recompression(tmp_path):
    src = Image.open(write_photo(tmp_path / "a.png", 1, size=(320, 240))).convert("RGB")
    other = Image.open(write_photo(tmp_path / "b.png", 2, size=(320, 240))).convert("RGB")
    h = dihedral_phash(src)
    for name, img in edits(src).items():
        if name != "crop":
            assert hamming(h, dihedral_phash(img)) <= 3, name
    assert hamming(h, dihedral_phash(other)) > 10
    crop = edits(src)["crop"]
    scale = crop_scale((0, "", *src.size), (0, "", *crop.size))
    assert scale == pytest.approx((crop.height / 240, crop.width / 320))
    scores = crop_scores([thumb(src), thumb(src), thumb(other)], [thumb(crop), thumb(other.crop((20, 20, 260, 200))),
                                                                  thumb(src.crop((30, 20, 290, 220)))],
                         [scale, scale, (200 / 240, 260 / 320)])
    assert scores[0] > 0.94 and scores[1] < 0.7 and scores[2] < 0.7  # batched: each pair its own answer
    assert crop_scores([thumb(src)], [thumb(src.crop((10, 10, 60, 40)))], [(30 / 240, 50 / 320)])[0] == 0.0  # too small
    assert crop_scale((0, "", *src.size), (0, "", *other.size)) is None  # same size: never a crop
    assert crop_scale((0, "", 320, 240), (0, "", 310, 235)) is None  # 95 % of the area: near, not crop


def test_neighbour_pairs_are_the_exact_ones():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 128)).astype(np.float32)
    x[1500:1600] = x[:100] + 0.05 * rng.normal(size=(100, 128))  # 100 near copies
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    pairs, cos = knn_pairs(x, 10, 0.9)
    assert {tuple(p) for p in pairs.tolist()} == {(i, 1500 + i) for i in range(100)}
    assert (cos > 0.99).all()


@pytest.mark.slow
def test_real_photo_edits_are_grouped_with_the_original_first(tmp_path):
    """On real photos with the built-in model: every edit of a photo joins its group, with the
    right relation; the other views of the same object (UKBench) are not duplicates."""
    d = tmp_path / "lib"
    d.mkdir()
    srcs = shared_photos("ukbench", 8)  # two objects x four views: similar, not duplicates
    for p in srcs:
        Image.open(p).convert("RGB").save(d / p.name, quality=95)
    original = Image.open(srcs[0]).convert("RGB")
    (d / "copy.jpg").write_bytes((d / srcs[0].name).read_bytes())
    for name, img in edits(original).items():
        img.save(d / f"edit_{name}.jpg", quality=92)
    svc = open_lib(tmp_path / "h", backbone="efficientnet-lite0", max_side=320, engine="auto")
    index(svc, [d])
    groups = find_duplicates(svc)
    svc.close()
    assert len(groups) == 1
    g = groups[0]
    names = {Path(m.path).name: m.relation for m in g.members}
    assert Path(g.members[0].path).name in (srcs[0].name, "copy.jpg")  # largest and sharpest first
    assert set(names) == {srcs[0].name, "copy.jpg", "edit_q60.jpg", "edit_half.jpg", "edit_rot90.jpg",
                          "edit_mirror.jpg", "edit_crop.jpg"}
    assert names["edit_rot90.jpg"] in ("dihedral", "near") and names["edit_crop.jpg"] == "crop"
    assert names["edit_half.jpg"] in ("near", "dihedral") and names["edit_q60.jpg"] in ("near", "dihedral")
    rec = to_records(groups)
    assert rec[0]["members"][0]["keep"] and sum(m["keep"] for m in rec[0]["members"]) == 1


def test_cli_lists_duplicates_as_json_and_never_touches_files(tmp_path):
    d = tmp_path / "lib"
    for i in range(5):
        write_photo(d / f"p{i}.png", i, size=(160, 120))
    (d / "p0-copy.png").write_bytes((d / "p0.png").read_bytes())
    Image.open(d / "p1.png").transpose(Image.Transpose.ROTATE_180).save(d / "p1-rotated.png")
    before = {p: p.read_bytes() for p in d.iterdir()}
    home = tmp_path / "h"
    svc = open_lib(home)
    index(svc, [d])
    svc.close()
    import os

    r = subprocess.run([sys.executable, "-m", "app", "duplicates", "--json", "--threshold", "0.9999", "--no-crops",
                        "--home", str(home)], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    groups = {frozenset(Path(m["path"]).name for m in g["members"]): g for g in out["groups"]}
    assert frozenset({"p0.png", "p0-copy.png"}) in groups and groups[frozenset({"p0.png", "p0-copy.png"})]["kind"] == "exact"
    assert frozenset({"p1.png", "p1-rotated.png"}) in groups
    assert {p: p.read_bytes() for p in d.iterdir()} == before


def test_the_one_to_keep_says_which_rule_put_it_first():
    from app.core.duplicates import Member, kept_because

    big = Member(1, "/p/a.jpg", 4000, 3000, 3_000_000, 1.6e9, 5.0)
    assert kept_because(big, Member(2, "/p/b.jpg", 2000, 1500, 3_500_000, 1.5e9, 9.0)) == "most pixels (4000x3000)"
    assert kept_because(big, Member(3, "/p/c.jpg", 4000, 3000, 1_000_000, 1.5e9, 9.0)).startswith("same pixels, largest file (3.0 MB)")
    assert kept_because(big, Member(4, "/p/d.jpg", 4000, 3000, 3_000_000, 1.5e9, 4.0)) == "same pixels and file size, sharpest"
    assert kept_because(big, Member(5, "/p/e.jpg", 4000, 3000, 3_000_000, 1.7e9, 5.0)).startswith("oldest (")
    assert Member(6, "/p/f.jpg", 1, 1, 1, 0, 0, relation="crop").reason == "a crop of the first photo"


def test_moving_the_threshold_reuses_the_neighbours_and_crop_scores(monkeypatch):
    """The duplicates slider: with a cache, a second threshold finds no neighbours and scores no
    crops again, and gives the same groups as a fresh run at that threshold."""
    import app.core.duplicates as dup

    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 64)).astype(np.float32)
    x[200:260] = x[:60] + 0.02 * rng.normal(size=(60, 64))  # near copies
    x[300:330] = x[100:130] + 0.25 * rng.normal(size=(30, 64))  # looser: crop candidates
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = np.arange(1, 401)
    thumbs = rng.integers(0, 256, (400, 36, 48), dtype=np.uint8)
    rows = {}
    for k, i in enumerate(ids.tolist()):
        w, h = (3000, 2250) if 300 <= k < 330 else (4000, 3000)
        src = k - 200 if 200 <= k < 260 else k
        rows[i] = (i, f"/p/{i}.jpg", w, h, 1000 + k, 0.0, 1.0, f"{k:040x}", (src + 1) << 8, bytes([36, 48]) + thumbs[k].tobytes())
    calls = {"knn": 0, "crop": 0}
    real_knn, real_crop = dup.knn_pairs, dup.crop_scores
    monkeypatch.setattr(dup, "knn_pairs", lambda *a, **k: (calls.__setitem__("knn", calls["knn"] + 1), real_knn(*a, **k))[1])
    monkeypatch.setattr(dup, "crop_scores", lambda *a, **k: (calls.__setitem__("crop", calls["crop"] + 1), real_crop(*a, **k))[1])
    cache = {}

    def key(groups):
        return sorted(sorted(m.image_id for m in g.members) for g in groups)

    first = dup.group_duplicates(ids, x, rows, 0.99, cache=cache)
    assert calls == {"knn": 1, "crop": 1}
    again = dup.group_duplicates(ids, x, rows, 0.90, cache=cache)
    assert calls == {"knn": 1, "crop": 1}  # nothing recomputed
    assert key(again) == key(dup.group_duplicates(ids, x, rows, 0.90))  # same answer as without a cache
    assert len(again) >= len(first) >= 1
