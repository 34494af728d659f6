"""`heatsearch eval`: extract, aggregate (SumA and HeW), whiten, search, re-rank, score.

The row "policy" is what the app gives a user for a library of this size: whitening, box mode,
QE and HeR chosen by app.core.policy, and the query photo pinned first when it is in the library.
The other rows are the method's variants, side by side.

Local feature maps are cached on disk (float16) per backbone, size and image, so re-runs with
other aggregation or re-ranking parameters take seconds.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import policy
from ..aggregate.descriptor import Whitening, learn_whitening
from ..config import DEFAULT_MAX_SIDE, models_dir
from ..describe import describe_map, mean_local_feature
from ..features.engine import EngineChoice
from ..features.extractor import Extractor
from ..features.preprocess import FeatureMap
from ..features.registry import DEFAULT_BACKBONE, load_backbone
from ..rerank.her import her_rerank
from ..rerank.qe import expand_query
from .datasets import Benchmark, random_boxes
from .metrics import mean_ap, ukbench_ns

METHODS = ["policy", "SumA", "HeW", "HeW+QE", "HeW+HeR", "HeW+QE+HeR"]
BOX_MODES = ("map", "crop", "hybrid")


@dataclass
class EvalConfig:
    backbone: str = DEFAULT_BACKBONE
    weights: str | None = None
    max_side: int = DEFAULT_MAX_SIDE
    device: str = "auto"
    engine: str = "auto"
    precision: str = "exact"
    dim: int = 0  # 0: the library-size policy
    shrinkage: float | None = None  # None: the policy's
    whiten: str = "policy"  # policy | on | off
    qe_n: int = 2
    qe_alpha: float = 3.0
    her_k: int = policy.HER_K
    mode: str = "policy"  # box queries: policy | map | crop | hybrid
    methods: list[str] | None = None
    cache_dir: Path | None = None
    box_modes: tuple[str, ...] = BOX_MODES


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "heatsearch" / "eval-features"


class MapCache:
    """Feature maps on disk: one .npz per (image, box) under a folder per backbone digest, size
    and precision."""

    def __init__(self, extractor: Extractor, root: Path, log=print):
        self.ex = extractor
        bb = extractor.backbone
        tag = f"{bb.name}-{bb.weights_digest}-{extractor.max_side}-{extractor.engine.precision}"
        self.root = Path(root) / tag
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = log

    def _key(self, path: Path, box) -> Path:
        st = path.stat()
        # a crop at the photo's own pixels (preprocess.crop_scale): its rule named, so that a change
        # of the rule is a new key
        crop = f"|own pixels up to {self.ex.box_side}, r2" if box is not None and self.ex.box_side else ""
        h = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{box}{crop}".encode()).hexdigest()[:20]
        return self.root / f"{h}.npz"

    def get_many(self, items: list[tuple[Path, tuple | None]]) -> list[FeatureMap]:
        out: list[FeatureMap | None] = [None] * len(items)
        todo = []
        for i, (p, box) in enumerate(items):
            f = self._key(p, box)
            if f.exists():
                z = np.load(f)
                out[i] = FeatureMap(z["features"].astype(np.float32), float(z["scale"]), tuple(int(v) for v in z["offset"]),
                                    tuple(int(v) for v in z["orig_size"]), self.ex.stride)
            else:
                todo.append(i)
        t0 = time.time()
        for n, i in enumerate(todo, 1):
            fm = self.ex.feature_maps([self.ex.prepare_path(items[i][0], items[i][1])])[0]
            np.savez(self._key(*items[i]), features=fm.features.astype(np.float16), scale=fm.scale,
                     offset=np.array(fm.offset), orig_size=np.array(fm.orig_size))
            out[i] = fm
            if n % 50 == 0 or n == len(todo):
                self.log(f"  extracted {n}/{len(todo)} ({(time.time() - t0) / n:.2f} s/image)")
        return out  # type: ignore[return-value]


def rank_all(qvecs: np.ndarray, db: np.ndarray) -> np.ndarray:
    return np.argsort(-(qvecs @ db.T), axis=1, kind="stable")


def whitening_for(db: np.ndarray, cfg: EvalConfig) -> tuple[Whitening, str]:
    """The whitening a library of these descriptors gets, and a description of it."""
    n, c = db.shape
    shrink = policy.SHRINKAGE if cfg.shrinkage is None else cfg.shrinkage
    if cfg.whiten == "off":
        return Whitening.identity(c), "none (--whiten off)"
    dim = policy.whitening_dim(n, c, cfg.dim) if cfg.whiten == "policy" else (cfg.dim or 512)
    if dim == 0:
        return Whitening.identity(c), f"none ({n} images: the size policy does not whiten yet)"
    w = learn_whitening(db, dim, shrink)
    return w, f"learned on the evaluated set ({n} images, D = {w.dim}, shrinkage {shrink})"


def run_methods(q_suma, q_hew, db_suma, db_hew, cfg: EvalConfig, plan: policy.SearchPlan, own: list,
                methods: list[str]) -> dict[str, np.ndarray]:
    """Rankings (Q, M) for each method row. own: per query, its database index or None (pinned
    first in the policy row, as the app does)."""
    out = {}
    base = rank_all(q_hew, db_hew)
    qe = None
    if any("QE" in m for m in methods) or plan.qe:
        qe = np.stack([expand_query(q, db_hew, r, cfg.qe_n, cfg.qe_alpha) for q, r in zip(q_hew, base)])
    for m in methods:
        if m == "SumA":
            out[m] = rank_all(q_suma, db_suma)
        elif m == "HeW":
            out[m] = base
        elif m == "HeW+QE":
            out[m] = rank_all(qe, db_hew)
        elif m == "HeW+HeR":
            out[m] = np.stack([her_rerank(q, db_hew, r, cfg.her_k) for q, r in zip(q_hew, base)])
        elif m == "HeW+QE+HeR":
            # QE+HeR: the QE vector is the heat source, the shortlist is the original query's ranking.
            out[m] = np.stack([her_rerank(q, db_hew, r, cfg.her_k) for q, r in zip(qe, base)])
        elif m == "policy":
            src = qe if plan.qe else q_hew
            plain = rank_all(src, db_hew)
            rk = []
            for i, (s, r) in enumerate(zip(src, base)):
                her = plan.her
                if her == "auto":  # decided per query from its neighbourhood, as the app does
                    her = policy.use_her((q_hew[i] @ db_hew.T)[r[: policy.NEIGHBOURHOOD]], own[i] is not None)
                rk.append(her_rerank(s, db_hew, r, plan.her_k) if her else plain[i])
            rk = np.stack(rk)
            for i, o in enumerate(own):
                if o is not None:  # the query photo itself first (the app pins exact duplicates)
                    rk[i] = np.concatenate([[o], rk[i][rk[i] != o]])
            out[m] = rk
    return out


def evaluate(benches: list[Benchmark], cfg: EvalConfig, region_seed: int = 0, log=print) -> dict:
    """Run the table for each benchmark. Returns a JSON-able dict of results."""
    bb = load_backbone(cfg.backbone, cfg.weights)
    ex = Extractor.create(bb, EngineChoice(cfg.engine, cfg.device, cfg.precision == "fastest"), cfg.max_side,
                          models_dir(), log=lambda m: print(m, file=sys.stderr), box_side=policy.BOX_SIDE)
    cache = MapCache(ex, cfg.cache_dir or default_cache_dir(), log=lambda m: print(m, file=sys.stderr))
    methods = cfg.methods or METHODS
    report = {"backbone": cfg.backbone, "weights_digest": bb.weights_digest, "engine": ex.engine.label,
              "max_side": cfg.max_side, "qe_n": cfg.qe_n, "qe_alpha": cfg.qe_alpha, "her_k": cfg.her_k, "benchmarks": []}
    for bench in benches:
        log(f"[{bench.name}] {len(bench.images)} database images, {len(bench.queries)} queries")
        t0 = time.time()
        db_maps = cache.get_many([(p, None) for p in bench.images])
        mu = mean_local_feature([m.features for m in db_maps])
        db_suma = np.stack([describe_map(m, mu, suma=True).raw for m in db_maps])
        t1 = time.time()
        db_hew = np.stack([describe_map(m, mu).raw for m in db_maps])
        hew_s = (time.time() - t1) / len(db_maps)
        w_suma, _ = whitening_for(db_suma, cfg)
        w_hew, wdesc = whitening_for(db_hew, cfg)
        dbw_suma, dbw_hew = w_suma.apply(db_suma), w_hew.apply(db_hew)
        entry = {"name": bench.name, "images": len(bench.images), "queries": len(bench.queries), "whitening": wdesc,
                 "hew_ms_per_image": hew_s * 1000, "modes": {}}
        index = {p: i for i, p in enumerate(bench.images)}
        has_boxes = any(q.box is not None for q in bench.queries)
        sizes = {p: m.orig_size for p, m in zip(bench.images, db_maps)}
        if has_boxes:
            variants = {m: bench for m in cfg.box_modes}
        else:
            variants = {"full": bench}
            if bench.groups is not None:  # UKBench: add region queries with fixed-seed random boxes
                reg = random_boxes(bench, sizes, region_seed)
                variants.update({f"region-{m}": reg for m in cfg.box_modes})
        for mode, b in variants.items():
            box_mode = mode.replace("region-", "") if mode != "full" else None
            plan = policy.search_plan(len(bench.images), box_mode is not None, "auto", "auto",
                                      "auto" if cfg.mode == "policy" else cfg.mode, cfg.qe_n, cfg.qe_alpha, cfg.her_k)
            if box_mode is not None and cfg.mode == "policy" and plan.box_mode != box_mode:
                row_methods = [m for m in methods if m != "policy"]  # the policy row sits in its own mode's column
            else:
                row_methods = methods
            qs_suma, qs_hew = describe_queries(b, box_mode, cache, db_maps, index, mu)
            rankings = run_methods(w_suma.apply(qs_suma), w_hew.apply(qs_hew), dbw_suma, dbw_hew, cfg, plan,
                                   [index.get(q.path) if q.box is None else None for q in b.queries], row_methods)
            res = {}
            for method, rk in rankings.items():
                row = {setting: mean_ap(rk, [q.gnd[setting] for q in b.queries]) for setting in b.settings}
                if b.groups is not None:
                    row["N-S"] = ukbench_ns(rk, b.groups)
                res[method] = row
            entry["modes"][mode] = res
        entry["seconds"] = time.time() - t0
        report["benchmarks"].append(entry)
    return report


def describe_queries(b: Benchmark, box_mode, cache: MapCache, db_maps, index, mu) -> tuple[np.ndarray, np.ndarray]:
    """(SumA (Q, C), HeW (Q, C)) raw descriptors of the queries in `box_mode` (None: full photo).
    map: the full photo's cells inside the box; crop: the CNN on the crop (the paper's protocol);
    hybrid: the sum of both descriptors, re-normalised."""
    crops = cache.get_many([(q.path, q.box) for q in b.queries]) if box_mode in ("crop", "hybrid") else None
    suma, hew = [], []
    for i, q in enumerate(b.queries):
        if q.box is None:
            fm = db_maps[index[q.path]] if q.path in index else cache.get_many([(q.path, None)])[0]
            s, h = describe_map(fm, mu, suma=True).raw, describe_map(fm, mu).raw
        else:
            parts_s, parts_h = [], []
            if box_mode in ("map", "hybrid"):
                fm = db_maps[index[q.path]] if q.path in index else cache.get_many([(q.path, None)])[0]
                parts_s.append(describe_map(fm, mu, q.box, suma=True).raw)
                parts_h.append(describe_map(fm, mu, q.box).raw)
            if crops is not None:
                parts_s.append(describe_map(crops[i], mu, suma=True).raw)
                parts_h.append(describe_map(crops[i], mu).raw)
            s, h = np.sum(parts_s, 0), np.sum(parts_h, 0)
            s, h = s / max(np.linalg.norm(s), 1e-12), h / max(np.linalg.norm(h), 1e-12)
        suma.append(s)
        hew.append(h)
    return np.stack(suma), np.stack(hew)


def format_report(report: dict) -> str:
    lines = [f"backbone {report['backbone']} (weights {report['weights_digest']}), {report['engine']}, "
             f"longer side {report['max_side']} px, QE n={report['qe_n']} alpha={report['qe_alpha']}, HeR k={report['her_k']}"]
    for b in report["benchmarks"]:
        lines.append("")
        lines.append(f"== {b['name']}: {b['images']} images, {b['queries']} queries; whitening {b['whitening']}; "
                     f"HeW {b['hew_ms_per_image']:.1f} ms/image")
        cols = []
        for mode, res in b["modes"].items():
            first = next(iter(res.values()))
            for key in first:
                cols.append((mode, key))
        names = {"N-S": "N-S", "all": "mAP"}
        lines.append(f"{'method':<12}" + "".join(f"{m + ' ' + names.get(k, 'mAP ' + k):>22}" for m, k in cols))
        methods = []
        for res in b["modes"].values():
            methods += [m for m in res if m not in methods]
        for method in methods:
            row = f"{method:<12}"
            for mode, key in cols:
                cell = b["modes"][mode].get(method)
                if cell is None:
                    row += f"{'-':>22}"
                else:
                    v = cell[key]
                    row += f"{v:>22.2f}" if key == "N-S" else f"{100 * v['mAP']:>22.2f}"
            lines.append(row)
    lines.append("")
    lines.append("mAP in %; N-S out of 4 (query included). policy = what the app does for a library of this size "
                 "(whitening, box mode, QE, HeR). Box queries: map = the full photo's cells inside the box (no new CNN "
                 "pass); crop = the CNN on the crop (the paper's protocol); hybrid = both descriptors summed.")
    return "\n".join(lines)
