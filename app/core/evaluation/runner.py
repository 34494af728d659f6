"""`heatsearch eval`: extract, aggregate (SumA and HeW), whiten, search, re-rank, score.

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

from ..aggregate.descriptor import SHRINKAGE, Whitening, learn_whitening, should_whiten
from ..describe import describe_map, mean_local_feature
from ..features.extractor import Extractor, FeatureMap
from ..features.registry import DEFAULT_BACKBONE, load_backbone
from ..rerank.her import her_rerank
from ..rerank.qe import expand_query
from .datasets import Benchmark, random_boxes
from .metrics import mean_ap, ukbench_ns

METHODS = ["SumA", "HeW", "HeW+QE", "HeW+HeR", "HeW+QE+HeR"]


@dataclass
class EvalConfig:
    backbone: str = DEFAULT_BACKBONE
    weights: str | None = None
    max_side: int = 1024
    device: str = "auto"
    dim: int = 512
    shrinkage: float = SHRINKAGE
    whiten: str = "auto"  # auto: the app's policy (>= 4 * D images); on; off
    qe_n: int = 10
    qe_alpha: float = 0.0
    her_k: int = 800
    cache_dir: Path | None = None
    batch: int = 8


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "heatsearch" / "eval-features"


class MapCache:
    """Feature maps on disk: one .npz per (image, box) under a folder per backbone digest and size."""

    def __init__(self, extractor: Extractor, root: Path, log=print):
        self.ex = extractor
        tag = f"{extractor.backbone.spec.name}-{extractor.backbone.weights_digest}-{extractor.max_side}"
        self.root = Path(root) / tag
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = log

    def _key(self, path: Path, box) -> Path:
        st = path.stat()
        h = hashlib.sha1(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{box}".encode()).hexdigest()[:20]
        return self.root / f"{h}.npz"

    def get_many(self, items: list[tuple[Path, tuple | None]], batch: int = 8) -> list[FeatureMap]:
        out: list[FeatureMap | None] = [None] * len(items)
        todo = []
        for i, (p, box) in enumerate(items):
            f = self._key(p, box)
            if f.exists():
                z = np.load(f)
                out[i] = FeatureMap(z["features"].astype(np.float32), float(z["scale"]), tuple(z["offset"]),
                                    tuple(z["orig_size"]), self.ex.stride)
            else:
                todo.append(i)
        t0 = time.time()
        for s in range(0, len(todo), batch):
            idx = todo[s: s + batch]
            prepared = [self.ex.prepare_path(items[i][0], items[i][1]) for i in idx]
            for i, fm in zip(idx, self.ex.feature_maps(prepared)):
                np.savez(self._key(*items[i]), features=fm.features.astype(np.float16), scale=fm.scale,
                         offset=np.array(fm.offset), orig_size=np.array(fm.orig_size))
                out[i] = fm
            done = min(s + batch, len(todo))
            self.log(f"  extracted {done}/{len(todo)} ({(time.time() - t0) / done:.2f} s/image)")
        return out  # type: ignore[return-value]


def rank_all(qvecs: np.ndarray, db: np.ndarray) -> np.ndarray:
    return np.argsort(-(qvecs @ db.T), axis=1, kind="stable")


def run_methods(q_suma, q_hew, db_suma, db_hew, cfg: EvalConfig) -> dict[str, np.ndarray]:
    """Rankings (Q, M) for every method row of the table."""
    out = {"SumA": rank_all(q_suma, db_suma)}
    base = rank_all(q_hew, db_hew)
    out["HeW"] = base
    qe = np.stack([expand_query(q, db_hew, r, cfg.qe_n, cfg.qe_alpha) for q, r in zip(q_hew, base)])
    qe_rank = rank_all(qe, db_hew)
    out["HeW+QE"] = qe_rank
    out["HeW+HeR"] = np.stack([her_rerank(q, db_hew, r, cfg.her_k) for q, r in zip(q_hew, base)])
    # QE+HeR: the QE vector is the heat source, the shortlist is the original query's ranking.
    out["HeW+QE+HeR"] = np.stack([her_rerank(q, db_hew, r, cfg.her_k) for q, r in zip(qe, base)])
    return out


def evaluate(benches: list[Benchmark], cfg: EvalConfig, region_seed: int = 0, log=print) -> dict:
    """Run the full table for each benchmark. Returns a JSON-able dict of results."""
    bb = load_backbone(cfg.backbone, cfg.weights)
    ex = Extractor(bb, cfg.device, cfg.max_side)
    cache = MapCache(ex, cfg.cache_dir or default_cache_dir(), log=lambda m: print(m, file=sys.stderr))
    report = {"backbone": cfg.backbone, "weights_digest": bb.weights_digest, "device": str(ex.device),
              "max_side": cfg.max_side, "qe_n": cfg.qe_n, "qe_alpha": cfg.qe_alpha, "her_k": cfg.her_k, "benchmarks": []}
    for bench in benches:
        log(f"[{bench.name}] {len(bench.images)} database images, {len(bench.queries)} queries")
        t0 = time.time()
        db_maps = cache.get_many([(p, None) for p in bench.images], cfg.batch)
        mu = mean_local_feature([m.features for m in db_maps])
        db_suma = np.stack([describe_map(m, mu, suma=True).raw for m in db_maps])
        t1 = time.time()
        db_hew = np.stack([describe_map(m, mu).raw for m in db_maps])
        hew_s = (time.time() - t1) / len(db_maps)
        whiten = cfg.whiten == "on" or (cfg.whiten == "auto" and should_whiten(len(bench.images), cfg.dim))
        if whiten:
            w_suma = learn_whitening(db_suma, cfg.dim, cfg.shrinkage)
            w_hew = learn_whitening(db_hew, cfg.dim, cfg.shrinkage)
            wdesc = f"learned on the evaluated set ({len(bench.images)} images, D = {w_hew.dim}, shrinkage {cfg.shrinkage})"
        else:
            w_suma = w_hew = Whitening.identity(db_hew.shape[1])
            wdesc = (f"none ({len(bench.images)} images < 4 x D = {4 * cfg.dim}: the app's policy; --whiten on forces it)"
                     if cfg.whiten == "auto" else "none (--whiten off)")
        dbw_suma, dbw_hew = w_suma.apply(db_suma), w_hew.apply(db_hew)
        entry = {"name": bench.name, "images": len(bench.images), "queries": len(bench.queries),
                 "whitening": wdesc,
                 "hew_ms_per_image": hew_s * 1000, "modes": {}}
        index = {p: i for i, p in enumerate(bench.images)}
        has_boxes = any(q.box is not None for q in bench.queries)
        sizes = {p: m.orig_size for p, m in zip(bench.images, db_maps)}
        if has_boxes:
            variants = {"crop": bench, "map": bench}
        else:
            variants = {"full": bench}
            if bench.groups is not None:  # UKBench: add region queries with fixed-seed random boxes
                reg = random_boxes(bench, sizes, region_seed)
                variants.update({"region-crop": reg, "region-map": reg})
        for mode, b in variants.items():
            qs_suma, qs_hew = [], []
            crop_maps = None
            if mode.endswith("crop"):
                crop_maps = cache.get_many([(q.path, q.box) for q in b.queries], cfg.batch)
            for i, q in enumerate(b.queries):
                if crop_maps is not None:
                    fm, mask = crop_maps[i], None
                else:
                    fm = db_maps[index[q.path]] if q.path in index else cache.get_many([(q.path, None)])[0]
                    mask = fm.box_mask(q.box) if q.box is not None else None
                if q.box is None and q.path in index:
                    qs_suma.append(db_suma[index[q.path]])
                    qs_hew.append(db_hew[index[q.path]])
                else:
                    qs_suma.append(describe_map(fm, mu, mask, suma=True).raw)
                    qs_hew.append(describe_map(fm, mu, mask).raw)
            rankings = run_methods(w_suma.apply(np.stack(qs_suma)), w_hew.apply(np.stack(qs_hew)), dbw_suma, dbw_hew, cfg)
            res = {}
            for method, rk in rankings.items():
                row = {}
                for setting in b.settings:
                    m = mean_ap(rk, [q.gnd[setting] for q in b.queries])
                    row[setting] = m
                if b.groups is not None:
                    row["N-S"] = ukbench_ns(rk, b.groups)
                res[method] = row
            entry["modes"][mode] = res
        entry["seconds"] = time.time() - t0
        report["benchmarks"].append(entry)
    return report


def format_report(report: dict) -> str:
    lines = [f"backbone {report['backbone']} (weights {report['weights_digest']}), device {report['device']}, "
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
        header = f"{'method':<12}" + "".join(f"{m + ' ' + names.get(k, 'mAP ' + k):>22}" for m, k in cols)
        lines.append(header)
        for method in METHODS:
            row = f"{method:<12}"
            for mode, key in cols:
                v = b["modes"][mode][method][key]
                row += f"{v:>22.2f}" if key == "N-S" else f"{100 * v['mAP']:>22.2f}"
            lines.append(row)
    lines.append("")
    lines.append("mAP in %; N-S out of 4 (query included). Region queries: crop = CNN on the crop (paper's protocol), "
                 "map = features of the full image inside the box (no new CNN pass).")
    return "\n".join(lines)

