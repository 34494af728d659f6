"""Command line: the same core code the GUI runs. `heatsearch --help` lists the commands."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .core.errors import HeatSearchError
from .core.features.registry import DEFAULT_BACKBONE


def _add_eval(sub):
    p = sub.add_parser("eval", help="measure retrieval quality on a benchmark (mAP, N-S)")
    p.add_argument("dataset", choices=["ukbench", "paris250", "oxford5k", "paris6k", "roxford5k", "rparis6k", "holidays"])
    p.add_argument("--root", help="dataset folder (ukbench, paris250, holidays)")
    p.add_argument("--images", help="image folder (oxford5k, paris6k, roxford5k, rparis6k)")
    p.add_argument("--gt", help="ground-truth folder (txt files or gnd_*.pkl)")
    p.add_argument("--backbone", default=DEFAULT_BACKBONE)
    p.add_argument("--weights", help="weights file for the backbone")
    p.add_argument("--size", type=int, default=1024, help="longer image side fed to the CNN (px)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dim", type=int, default=512, help="whitened dimension D")
    p.add_argument("--shrinkage", type=float, default=1.0, help="whitening eigenvalue shrinkage")
    p.add_argument("--whiten", choices=["auto", "on", "off"], default="auto",
                   help="auto: like the app, only with >= 4 x D images; on: learn it on the evaluated set")
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
    cfg = EvalConfig(a.backbone, a.weights, a.size, a.device, a.dim, a.shrinkage, a.whiten, a.qe_n, a.qe_alpha, a.her_k,
                     Path(a.cache) if a.cache else None)
    log = (lambda m: print(m, file=sys.stderr)) if a.json else print
    report = evaluate(benches, cfg, log=log)
    print(json.dumps(report, indent=1) if a.json else format_report(report))
    return 0


def _library(a):
    from .core.config import Settings, home_dir
    from .core.library import Library

    home = home_dir(a.home)
    settings = Settings.load(home)
    for name in ("backbone", "weights", "device"):
        if getattr(a, name, None):
            setattr(settings, name, getattr(a, name))
    if getattr(a, "size", None):
        settings.max_side = a.size
    return Library(home, settings)


def _fmt_eta(s):
    if s is None:
        return "--"
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def cmd_index(a) -> int:
    from dataclasses import asdict

    from .core.pipeline.indexer import index_paths

    lib = _library(a)
    tty = sys.stderr.isatty() and not a.json
    last = None
    for prog in index_paths(lib, a.paths):
        last = prog
        if a.json:
            print(json.dumps({k: v for k, v in asdict(prog).items() if k != "last_errors"} |
                             {"errors": [{"path": p, "reason": r} for p, r in prog.last_errors]}), flush=True)
        else:
            for p, r in prog.last_errors:
                print(f"skipped {p}: {r}", file=sys.stderr)
            if tty:
                width = 30
                frac = prog.done / prog.total if prog.total else 1.0
                bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
                print(f"\r[{bar}] {prog.done}/{prog.total} failed {prog.failed} {prog.rate:.1f} img/s ETA {_fmt_eta(prog.eta_s)} {prog.phase:<10}",
                      end="", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    if not a.json and last is not None:
        st = lib.status()
        print(f"indexed {st['indexed']} of {st['images']} images ({st['failed']} skipped, {last.reused} reused, {last.removed} removed)")
    lib.close()
    return 0


def _parse_box(text):
    if not text:
        return None
    try:
        vals = [float(v) for v in text.split(",")]
    except ValueError:
        vals = []
    if len(vals) != 4:
        raise HeatSearchError(f"--box takes x1,y1,x2,y2 in pixels, got '{text}'")
    return tuple(vals)


def cmd_search(a) -> int:
    from .core.pipeline.search import Searcher, request_from_settings

    lib = _library(a)
    st = lib.settings
    searcher = Searcher(lib)
    if a.queries:
        reqs = []
        with open(a.queries) as fh:
            for n, line in enumerate(fh):
                if line.strip():
                    q = json.loads(line)
                    box = tuple(q["box"]) if q.get("box") else None
                    reqs.append((n, q["path"], box))
    else:
        if not a.image:
            raise HeatSearchError("search needs IMAGE or --queries FILE")
        reqs = [(0, a.image, _parse_box(a.box))]
    for n, path, box in reqs:
        if not Path(path).is_file():
            raise HeatSearchError(f"no such image: {path}")
        req = request_from_settings(st, id=n, path=str(Path(path).resolve()), box=box, top=a.top,
                                    qe=(st.qe or a.qe) and not a.no_qe, her=st.her and not a.no_her,
                                    mode=a.mode or st.region_mode)
        res = searcher.search(req)
        if a.json:
            print(json.dumps({"query": req.path, "box": list(box) if box else None, "request_id": res.request_id,
                              "timings_ms": {k: round(v, 2) for k, v in res.timings.items()},
                              "results": [{"rank": h.rank, "path": h.path, "score": round(h.score, 6)} for h in res.hits]}),
                  flush=True)
        else:
            for h in res.hits:
                print(f"{h.rank:4d}  {h.score:+.4f}  {h.path}")
    return 0


def cmd_status(a) -> int:
    lib = _library(a)
    st = lib.status()
    if a.json:
        st["failures"] = [{"path": p, "reason": r} for p, r in lib.failures()]
        print(json.dumps(st))
    else:
        print(f"data folder: {st['home']}")
        print(f"backbone:    {st['backbone']} (weights {st['weights_digest']}), {st['max_side']} px, D = {st['dim']}")
        print(f"folders:     {len(st['folders'])}")
        for f in st["folders"]:
            print(f"  {f}")
        print(f"images:      {st['images']} known, {st['indexed']} indexed, {st['failed']} skipped")
        for p, r in lib.failures()[:20]:
            print(f"  skipped {p}: {r}")
    return 0


def cmd_rebuild(a) -> int:
    lib = _library(a)
    n = lib.rebuild()
    print(f"index rebuilt from the catalog: {n} vectors")
    return 0


def cmd_forget(a) -> int:
    lib = _library(a)
    n = lib.forget(a.path)
    print(f"forgot {n} images under {a.path} (the photos themselves are untouched)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="heatsearch", description="Find photos by example (HeW + heat re-ranking).")
    p.add_argument("--version", action="version", version=f"HeatSearch {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data folder (default: $HEATSEARCH_HOME or the platform's data folder)")
    common.add_argument("--backbone", help=argparse.SUPPRESS)
    common.add_argument("--weights", help=argparse.SUPPRESS)
    common.add_argument("--device", help="auto, cpu, cuda, mps")
    sub = p.add_subparsers(dest="command")
    _add_eval(sub)
    ix = sub.add_parser("index", parents=[common], help="add folders and index them (incremental)")
    ix.add_argument("paths", nargs="+")
    ix.add_argument("--json", action="store_true", help="progress as JSON lines")
    ix.set_defaults(func=cmd_index)
    se = sub.add_parser("search", parents=[common], help="search the library with a photo (or a box in it)")
    se.add_argument("image", nargs="?")
    se.add_argument("--box", help="x1,y1,x2,y2 in pixels of the (EXIF-oriented) image")
    se.add_argument("--top", type=int, default=20)
    se.add_argument("--qe", action="store_true", help="query expansion on (default from settings)")
    se.add_argument("--no-qe", action="store_true")
    se.add_argument("--no-her", action="store_true")
    se.add_argument("--mode", choices=["map", "crop"], help="box queries: map (no new CNN pass) or crop")
    se.add_argument("--queries", help="JSON lines {path, box}: one result object per line, model loaded once")
    se.add_argument("--json", action="store_true")
    se.set_defaults(func=cmd_search)
    st = sub.add_parser("status", parents=[common], help="what the library holds")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    rb = sub.add_parser("rebuild", parents=[common], help="rebuild the ANN index from the catalog (no CNN)")
    rb.set_defaults(func=cmd_rebuild)
    fg = sub.add_parser("forget", parents=[common], help="remove a folder or file from the library (photos untouched)")
    fg.add_argument("path")
    fg.set_defaults(func=cmd_forget)
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
