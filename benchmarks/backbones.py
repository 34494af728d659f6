"""Compare the offline backbones: EfficientNet-Lite0 and Lite2, each with the head (1280 ch) and
the last block (320 / 352 ch) as the local-feature layer. One CNN pass per image gives both
layers (a hook on the last block); maps go to the eval cache, then the full eval table runs on
each of the four on UKBench and Paris250.

    python benchmarks/backbones.py --data ../shared/data --cache /tmp/evalcache > benchmarks/out/backbones.txt
    python benchmarks/backbones.py --smoke     # a check that it runs: Lite0 on policies.py's few photos,
                                               # a cache of its own (removed)
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.evaluation import datasets as ds
from app.core.evaluation.runner import EvalConfig, MapCache, evaluate, format_report
from app.core.features.engine import TorchEngine
from app.core.features.extractor import Extractor
from app.core.features.registry import load_backbone


def fill_caches(variant: str, items, cache_root: Path, size: int) -> dict:
    """One PyTorch pass per image gives both layers' maps (a hook on the last block), stored where
    the evaluation's caches of both backbones look for them (MapCache's tag: name, weights, size,
    f32)."""
    head_bb, block_bb = load_backbone(f"efficientnet-{variant}"), load_backbone(f"efficientnet-{variant}-block")
    head = Extractor(head_bb, TorchEngine(head_bb, "cpu"), size)
    block = Extractor(block_bb, TorchEngine(block_bb, "cpu"), size)  # its cache's place only: never run
    caches = {"head": MapCache(head, cache_root, log=lambda m: None), "block": MapCache(block, cache_root, log=lambda m: None)}
    grabbed = {}
    head_bb.module._blocks[-1].register_forward_hook(lambda m, i, o: grabbed.__setitem__("block", torch.relu(o)))
    times, cells = [], []
    for path, box in items:
        if all(c._key(path, box).exists() for c in caches.values()):
            continue
        prep = head.prepare_path(path, box)
        t = time.perf_counter()
        fm = head.feature_maps([prep])[0]
        times.append(time.perf_counter() - t)
        cells.append(fm.features.shape[0] * fm.features.shape[1])
        b = grabbed["block"][0].permute(1, 2, 0).numpy()
        for name, feats in (("head", fm.features), ("block", b)):
            np.savez(caches[name]._key(path, box), features=feats.astype(np.float16), scale=fm.scale,
                     offset=np.array(fm.offset), orig_size=np.array(fm.orig_size))
    return {"images": len(times), "forward_s_mean": float(np.mean(times)) if times else None,
            "cells_mean": float(np.mean(cells)) if cells else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--cache", default="/tmp/evalcache")
    ap.add_argument("--variants", nargs="*", default=["lite0", "lite2"])
    ap.add_argument("--size", type=int, default=EvalConfig.max_side, help="input size (default: the app's)")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): Lite0 on "
                                                           "policies.py's few photos, a cache of its own (removed)")
    a = ap.parse_args()
    if a.smoke:
        a.variants, a.cache = ["lite0"], tempfile.mkdtemp(prefix="hs-backbones-")
    torch.set_num_threads(torch.get_num_threads())
    data = Path(a.data)
    uk = ds.ukbench(data / "ukbench", 8 if a.smoke else None)
    paris = ds.paris250(data / "paris250")
    if a.smoke:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from policies import fewer

        loo = fewer(paris[1], paris[1].images[::10])
        paris = [fewer(paris[0], [p for p in paris[0].images if p in set(loo.images)], queries=2), loo]
    sizes = {p: __import__("app.core.imageio", fromlist=["open_oriented"]).open_oriented(p)[1] for p in uk.images}
    uk_region = ds.random_boxes(uk, sizes, 0)
    for variant in a.variants:
        for label, items in (("ukbench 640x480", [(p, None) for p in uk.images]),
                             ("ukbench region crops", [(q.path, q.box) for q in uk_region.queries]),
                             ("paris250 1024 px", sorted({(p, None) for b in paris for p in b.images})),
                             ("paris250 box crops", [(q.path, q.box) for q in paris[0].queries])):
            st = fill_caches(variant, items, Path(a.cache), a.size)
            if st["images"]:
                print(f"{variant} {label}: {st['images']} images, CNN forward {1000 * st['forward_s_mean']:.0f} ms/image "
                      f"({st['cells_mean']:.0f} cells) on {torch.get_num_threads()} CPU threads", flush=True)
        for layer in ("", "-block"):
            name = f"efficientnet-{variant}{layer}"
            # PyTorch, as the maps in the cache were made (and no export for the few it lacks)
            cfg = EvalConfig(backbone=name, max_side=a.size, cache_dir=Path(a.cache), device="cpu", engine="torch")
            rep = evaluate([uk] + paris, cfg, log=lambda m: print(m, file=sys.stderr))
            print(format_report(rep), flush=True)
            Path(a.cache, f"report-{name}.json").write_text(json.dumps(rep))
    if a.smoke:
        shutil.rmtree(a.cache, ignore_errors=True)


if __name__ == "__main__":
    main()
