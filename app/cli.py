"""Command line: the same core code the GUI runs. `heatsearch --help` lists the commands."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .core.errors import HeatSearchError


def _add_eval(sub):
    p = sub.add_parser("eval", help="measure retrieval quality on a benchmark (mAP, N-S)")
    p.add_argument("dataset", choices=["ukbench", "paris250", "oxford5k", "paris6k", "roxford5k", "rparis6k", "holidays"])
    p.add_argument("--root", help="dataset folder (ukbench, paris250, holidays)")
    p.add_argument("--images", help="image folder (oxford5k, paris6k, roxford5k, rparis6k)")
    p.add_argument("--gt", help="ground-truth folder (txt files or gnd_*.pkl)")
    p.add_argument("--backbone", default="efficientnet-lite0")
    p.add_argument("--weights", help="weights file for the backbone")
    p.add_argument("--size", type=int, default=1024, help="longer image side fed to the CNN (px)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dim", type=int, default=512, help="whitened dimension D")
    p.add_argument("--shrinkage", type=float, default=0.1)
    p.add_argument("--qe-n", type=int, default=10)
    p.add_argument("--qe-alpha", type=float, default=0.0, help="0 = average QE; >0 = alpha-QE (sim**alpha)")
    p.add_argument("--her-k", type=int, default=800)
    p.add_argument("--limit", type=int, help="use only the first N images (ukbench)")
    p.add_argument("--cache", help="feature cache folder")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)


def cmd_eval(a) -> int:
    from .core.evaluation import datasets as ds
    from .core.evaluation.runner import EvalConfig, evaluate, format_report

    def need(*names):
        for n in names:
            if not getattr(a, n):
                raise HeatSearchError(f"eval {a.dataset} needs --{n}")

    if a.dataset == "ukbench":
        need("root")
        benches = [ds.ukbench(a.root, a.limit)]
    elif a.dataset == "paris250":
        need("root")
        benches = ds.paris250(a.root)
    elif a.dataset in ("oxford5k", "paris6k"):
        need("images", "gt")
        benches = [ds.classic(a.images, a.gt, a.dataset)]
    elif a.dataset == "holidays":
        need("root")
        benches = [ds.holidays(a.root)]
    else:
        need("images", "gt")
        pkl = Path(a.gt) / f"gnd_{a.dataset}.pkl" if Path(a.gt).is_dir() else Path(a.gt)
        benches = [ds.revisited(a.images, pkl, a.dataset)]
    cfg = EvalConfig(a.backbone, a.weights, a.size, a.device, a.dim, a.shrinkage, a.qe_n, a.qe_alpha, a.her_k,
                     Path(a.cache) if a.cache else None)
    log = (lambda m: print(m, file=sys.stderr)) if a.json else print
    report = evaluate(benches, cfg, log=log)
    print(json.dumps(report, indent=1) if a.json else format_report(report))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="heatsearch", description="Find photos by example (HeW + heat re-ranking).")
    p.add_argument("--version", action="version", version=f"HeatSearch {__version__}")
    sub = p.add_subparsers(dest="command")
    _add_eval(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "func", None):
        parser.print_help()
        return 2
    try:
        return a.func(a)
    except HeatSearchError as e:
        print(f"heatsearch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("heatsearch: interrupted", file=sys.stderr)
        return 130
