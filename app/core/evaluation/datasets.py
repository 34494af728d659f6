"""Benchmark definitions: the database images, the queries (full image or box) and their ground
truth, for UKBench, the shared Paris250 subset, Oxford5k/Paris6k (txt), ROxford/RParis (pkl),
Holidays."""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from .metrics import Gnd


@dataclass
class Query:
    """path: the query photo; box: (x1, y1, x2, y2) original pixels or None; gnd: setting -> Gnd;
    db_index: the query's own image in the database (or None)."""

    path: Path
    box: tuple | None
    gnd: dict[str, Gnd]
    db_index: int | None = None


@dataclass
class Benchmark:
    name: str
    images: list[Path]
    queries: list[Query]
    settings: list[str]
    groups: np.ndarray | None = None  # UKBench group ids (for N-S)
    notes: list[str] = field(default_factory=list)


def ukbench(root: str | Path, limit: int | None = None) -> Benchmark:
    """UKBench: groups of 4 consecutive ids; every image queries; the query itself is junk for mAP
    (but counts in N-S)."""
    root = Path(root)
    images = sorted(root.glob("ukbench*.jpg"))
    if limit:
        images = images[: limit - limit % 4]
    if not images:
        raise FileNotFoundError(f"no ukbench*.jpg in {root}")
    groups = np.array([int(p.stem[7:]) // 4 for p in images])
    queries = []
    for i, p in enumerate(images):
        mates = set(np.where(groups == groups[i])[0].tolist()) - {i}
        queries.append(Query(p, None, {"all": Gnd(mates, {i})}, i))
    return Benchmark("ukbench", images, queries, ["all"], groups)


def random_boxes(bench: Benchmark, sizes: dict[Path, tuple[int, int]], seed: int = 0,
                 area=(0.15, 0.35)) -> Benchmark:
    """The same queries with a fixed-seed box covering 15-35% of each query image's area
    (aspect within [0.5, 2] of the image's), at a random place."""
    rng = np.random.default_rng(seed)
    out = []
    for q in bench.queries:
        w, h = sizes[q.path]
        frac = rng.uniform(*area)
        aspect = np.exp(rng.uniform(np.log(0.5), np.log(2.0)))
        bw = min(w, np.sqrt(frac * w * h * aspect))
        bh = min(h, frac * w * h / bw)
        x1 = rng.uniform(0, w - bw)
        y1 = rng.uniform(0, h - bh)
        out.append(Query(q.path, (x1, y1, x1 + bw, y1 + bh), q.gnd, q.db_index))
    return Benchmark(bench.name + "-region", bench.images, out, bench.settings, bench.groups)


def _names_to_ids(names, index):
    return {index[n] for n in names if n in index}


def paris250(root: str | Path) -> list[Benchmark]:
    """The shared 250-image Paris subset: revisited box queries (Easy/Medium/Hard) and per-landmark
    full-image leave-one-out queries."""
    root = Path(root)
    out = []
    rev = json.loads((root / "gt_revisited_subset.json").read_text())
    images = [root / p for p in rev["db"]]
    index = {p.stem: i for i, p in enumerate(images)}
    queries = []
    for q in rev["queries"]:
        easy, hard, junk = (_names_to_ids(q[k], index) for k in ("easy", "hard", "junk"))
        gnd = {"Easy": Gnd(easy, junk | hard), "Medium": Gnd(easy | hard, junk), "Hard": Gnd(hard, junk | easy)}
        queries.append(Query(root / q["query_file"], tuple(q["bbx"]), gnd, index.get(q["query"])))
    out.append(Benchmark("paris250-revisited", images, queries, ["Easy", "Medium", "Hard"],
                         notes=[rev["protocol"]]))
    loo = json.loads((root / "gt_landmark_loo.json").read_text())
    images = [root / p for p in loo["db"]]
    index = {p.stem: i for i, p in enumerate(images)}
    queries = []
    for q in loo["queries"]:
        me = index[q["query"]]
        gnd = Gnd(_names_to_ids(q["relevant"], index) - {me}, _names_to_ids(q["junk"], index) | {me})
        queries.append(Query(root / q["query_file"], None, {"all": gnd}, me))
    out.append(Benchmark("paris250-landmark", images, queries, ["all"], notes=[loo["protocol"]]))
    return out


def read_classic_gt(gt_dir: str | Path) -> tuple[list[str], list[dict]]:
    """Oxford5k/Paris6k txt ground truth. Returns (query names in file order, per query
    {name, image, box, good, ok, junk}) with image names without extension."""
    gt_dir = Path(gt_dir)
    out = []
    for qf in sorted(gt_dir.glob("*_query.txt")):
        q = qf.name[: -len("_query.txt")]
        parts = qf.read_text().split()
        image = parts[0][5:] if parts[0].startswith("oxc1_") else parts[0]
        rec = {"name": q, "image": image, "box": tuple(float(v) for v in parts[1:5])}
        for kind in ("good", "ok", "junk"):
            rec[kind] = (gt_dir / f"{q}_{kind}.txt").read_text().split()
        out.append(rec)
    return [r["name"] for r in out], out


def classic(images_dir: str | Path, gt_dir: str | Path, name: str) -> Benchmark:
    """Oxford5k / Paris6k: 55 box queries; positives = good + ok (the query's own image included)."""
    images_dir = Path(images_dir)
    images = sorted(p for p in images_dir.rglob("*.jpg"))
    index = {p.stem: i for i, p in enumerate(images)}
    _, recs = read_classic_gt(gt_dir)
    queries = [Query(images[index[r["image"]]], r["box"],
                     {"all": Gnd(_names_to_ids(r["good"] + r["ok"], index), _names_to_ids(r["junk"], index))},
                     index[r["image"]]) for r in recs if r["image"] in index]
    return Benchmark(name, images, queries, ["all"])


class _PlainUnpickler(pickle.Unpickler):
    """Reads pickles made only of builtins (dict, list, str, int, float): the revisited ground
    truth is exactly that. Any class or function reference is refused, so a crafted file cannot
    run code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: ground truth must hold plain data only")


def load_plain_pickle(path: str | Path):
    try:
        with open(path, "rb") as fh:
            return _PlainUnpickler(fh).load()
    except pickle.UnpicklingError as e:
        raise InputError(f"{path}: {e}") from e
    except (OSError, EOFError, ValueError) as e:
        raise InputError(f"cannot read the ground truth {path}: {e}") from e


def revisited_gnd(gnd_path: str | Path) -> tuple[list[str], list[str], list[dict[str, Gnd]], list]:
    """ROxford/RParis (gnd_*.pkl, read without running code, or the same content as gnd_*.json):
    (imlist, qimlist, per query {Easy, Medium, Hard: Gnd}, per query bbx)."""
    gnd_path = Path(gnd_path)
    cfg = json.loads(gnd_path.read_text()) if gnd_path.suffix == ".json" else load_plain_pickle(gnd_path)
    if not isinstance(cfg, dict) or not {"gnd", "imlist", "qimlist"} <= set(cfg):
        raise InputError(f"{gnd_path} is not revisited ground truth (needs gnd, imlist, qimlist)")
    out = []
    for g in cfg["gnd"]:
        easy, hard, junk = set(g["easy"]), set(g["hard"]), set(g["junk"])
        out.append({"Easy": Gnd(easy, junk | hard), "Medium": Gnd(easy | hard, junk), "Hard": Gnd(hard, junk | easy)})
    return cfg["imlist"], cfg["qimlist"], out, [tuple(g["bbx"]) for g in cfg["gnd"]]


def revisited(images_dir: str | Path, pkl_path: str | Path, name: str) -> Benchmark:
    images_dir = Path(images_dir)
    imlist, qimlist, gnds, bbxs = revisited_gnd(pkl_path)
    images = [_find(images_dir, n) for n in imlist]
    queries = [Query(_find(images_dir, q), b, g) for q, g, b in zip(qimlist, gnds, bbxs)]
    return Benchmark(name, images, queries, ["Easy", "Medium", "Hard"])


def _find(d: Path, stem: str) -> Path:
    p = d / f"{stem}.jpg"
    if p.exists():
        return p
    hits = list(d.rglob(f"{stem}.jpg"))
    if not hits:
        raise FileNotFoundError(f"{stem}.jpg not found under {d}")
    return hits[0]


def holidays_gnd(names: list[str]) -> list[tuple[int, Gnd]]:
    """INRIA Holidays: names like 100000 .. 149902 (no extension); group = int(name) // 100; the
    first image of each group is the query, the query itself is junk. Returns (query id, Gnd)."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(int(n) // 100, []).append(i)
    out = []
    for ids in groups.values():
        ids = sorted(ids, key=lambda i: names[i])
        out.append((ids[0], Gnd(set(ids[1:]), {ids[0]})))
    return out


def holidays(images_dir: str | Path) -> Benchmark:
    images = sorted(Path(images_dir).glob("*.jpg"))
    qs = holidays_gnd([p.stem for p in images])
    return Benchmark("holidays", images, [Query(images[q], None, {"all": g}, q) for q, g in qs], ["all"])
