"""What the relevance cut-off hides: one library of the shared photos (UKBench, Paris and the
distractors), indexed and searched with the shipped CLI (`search --queries --json`, defaults), and
for each cut-off the fraction of wrong results it hides and of right ones it keeps, per set.

    python benchmarks/relevance.py                      # all shared photos (~2,700; ~8 min here)
    python benchmarks/relevance.py --distractors 500 --home /tmp/hs-rel   # smaller; --home keeps the library
    python benchmarks/relevance.py --home /tmp/hs-rel --reuse             # search an indexed library again
    python benchmarks/relevance.py --home /tmp/hs-rel --fit               # refit policy.RELEVANCE_WEIGHTS
    python benchmarks/relevance.py --reuse --fit --home A --home B --home C   # on several libraries at once
                                                  # (the shipped weights: 850, 1,500 and 2,702 photos)
    python benchmarks/relevance.py --sample 120 --home /tmp/hs-s120      # a small library: a third of each set
    python benchmarks/relevance.py --landmarks all --home /tmp/hs-paris   # one kind of subject: the Paris photos alone
    python benchmarks/relevance.py --landmarks louvre,defense,eiffel --home /tmp/hs-l3   # three landmarks (150)
    python benchmarks/relevance.py --sample 600 --home /tmp/hs-s600      # ~600 photos, searched as above, then
    python benchmarks/relevance.py --across --home /tmp/hs-s600 --home /tmp/hs-rel   # the same pairs in both
    python benchmarks/relevance.py --smoke       # a check that it runs: --sample 30 (8 box queries, 8 photos
                                                 # not held), then --reuse --fit and --across on it, in a temp folder

Libraries: all shared photos, or UKBench and Paris with `--distractors N` of the unrelated photos
(links beside --home), or `--sample N`: about N photos, a third of each set (UKBench objects whole,
the same number of each landmark; links beside --home), the small libraries a person starts with.
Only the queries whose photo the library holds are searched, each with the right photos it holds.

Queries: every UKBench photo (right: the other 3 views of its object), the first 200 again with a
random box (15-35 % of the photo; right: the same), the Paris box queries
(right: Easy + Hard; Junk counted neither way) and the Paris full-photo queries (right: the same
landmark). The top 100 of each query are counted; the query's own photo (pinned first) is not. It also
prints each set's mAP over that top (queries with no right photo in the library left out).
Searches for photos the library does not hold are counted too, as the row "not in the library":
up to 160 shared photos outside it (unrelated photos and UKBench objects), every result counted
wrong (though in a library holding unrelated photos many find one of the same kind: mountains for
mountains), and the share of those searches whose first result each cut-off hides (the search
reads as empty); and as "boxes not in the library", the shared box queries on photos of subjects
the library does not hold. With --fit, searches with no right answer are the same queries with a folder
filter that leaves out the query's set, as their own rows ("..., none right").

`--fit` searches in this process, records each result's inputs of policy.relevance (u, the
similarity on the nearest-neighbour scale; r, the ranking's own score; whether HeR ranked) and fits the logistic weights so that both kinds of search count, each set of each
library weighted equally; it prints the weights and the table they would give, and each
library's nearest-neighbour scale (what policy.NEIGHBOUR_Z fixes). With several
--home, every library's searches are fitted together and the tables are printed per library.
The fit leaves out policy.match (the tables apply it: each search's factor is recorded with its
rows), so it weighs a little differently what ships. The searches are saved beside each library
and reused with --reuse while the library, the
queries and policy.NEIGHBOUR_Z are the same (u is stored on that scale). The shipped weights were
fitted (round 2) without the UKBench boxes; with them the objective is not quite the same.
"""
from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
CUTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def queries(limit_ukbench: int | None, boxes: int = 200):
    """[(set name, query path, box or None, right paths, junk paths)]; `boxes`: how many UKBench
    photos are searched again with a random box (datasets.random_boxes, 15-35 % of the photo)."""
    from PIL import Image

    from app.core.evaluation.datasets import Benchmark, paris250, random_boxes, ukbench

    out = []
    uk = ukbench(SHARED / "ukbench", limit_ukbench)
    for q in uk.queries:
        right = {str(uk.images[i].resolve()) for i in q.gnd["all"].ok}
        out.append(("UKBench", str(q.path.resolve()), None, right, set()))
    some = uk.queries[:boxes]
    sizes = {q.path: Image.open(q.path).size for q in some}
    for q in random_boxes(Benchmark(uk.name, uk.images, some, uk.settings, uk.groups), sizes, seed=1).queries:
        right = {str(uk.images[i].resolve()) for i in q.gnd["all"].ok}
        out.append(("UKBench boxes", str(q.path.resolve()), list(q.box), right, set()))
    for b in paris250(SHARED / "paris250"):
        for q in b.queries:
            g = q.gnd["Medium"] if "Medium" in q.gnd else q.gnd["all"]
            right = {str(b.images[i].resolve()) for i in g.ok}
            junk = {str(b.images[i].resolve()) for i in g.junk}
            name = "Paris boxes" if q.box else "Paris photos"
            out.append((name, str(q.path.resolve()), list(q.box) if q.box else None, right, junk))
    return out


def library_folders(home: Path) -> list[Path]:
    """The library's three folders (UKBench, Paris, distractors): the shared ones, or those of
    links that `--sample` made beside `home`."""
    links, extra = home.parent / (home.name + "-photos"), home.parent / (home.name + "-distractors")
    if links.is_dir():
        return [links / "ukbench", links / "paris", links / "distractors"]
    return [SHARED / "ukbench", SHARED / "paris250" / "jpg", extra if extra.is_dir() else SHARED / "distractors"]


def sample_library(home: Path, n: int, seed: int = 0) -> None:
    """A library of about n photos, a third from each set (UKBench groups of 4 whole, Paris the
    same number per landmark, distractors), as links in three folders beside `home`: the small
    libraries a person starts with, which the shared sets as a whole do not show."""
    rng = np.random.default_rng(seed)
    links = home.parent / (home.name + "-photos")
    if links.exists():
        raise SystemExit(f"{links} exists (a sample made before): remove it, or search it again with --reuse")
    uk = sorted((SHARED / "ukbench").rglob("*.jpg"))
    groups = rng.choice(len(uk) // 4, min(len(uk) // 4, max(1, n // 12)), replace=False)
    paris = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))
    by_landmark: dict[str, list[Path]] = {}
    for p in paris:
        by_landmark.setdefault(p.name.split("_")[1], []).append(p)
    extra = sorted((SHARED / "distractors").rglob("*.jpg"))
    picked = {"ukbench": [uk[4 * g + k] for g in sorted(groups) for k in range(4)],
              "paris": [p for ps in by_landmark.values() for p in rng.choice(ps, min(len(ps), max(1, n // 15)), replace=False)],
              "distractors": list(rng.choice(extra, min(len(extra), n // 3), replace=False))}
    for folder, ps in picked.items():
        (links / folder).mkdir(parents=True, exist_ok=True)
        for p in ps:
            if not (links / folder / p.name).exists():
                (links / folder / p.name).symlink_to(Path(p).resolve())


@functools.lru_cache(maxsize=None)
def held(home: Path) -> set[str]:
    """The photos (resolved paths) in the folders of the library in `home` (asked once: a run
    indexes before it asks)."""
    status = json.loads(subprocess.run([sys.executable, "-m", "app", "status", "--json", "--home", str(home)],
                                       check=True, capture_output=True, text=True).stdout)
    return {str(p.resolve()) for f in status["folders"] for p in Path(f).rglob("*.jpg")}


def in_library(qs, home: Path):
    """The queries whose photo the library holds, each with the right photos it holds."""
    mine = held(home)
    return [(name, path, box, right & mine, junk) for name, path, box, right, junk in qs if path in mine]


def not_held(home: Path, n: int = 160):
    """Searches for photos the library does not hold (every result wrong): up to n of the shared
    photos outside it, three quarters unrelated photos and a quarter UKBench objects (seeded)."""
    rng = np.random.default_rng(0)
    mine = held(home)
    out = []
    for folder, share in (("distractors", 0.75), ("ukbench", 0.25)):
        outside = sorted(p for p in (str(p.resolve()) for p in (SHARED / folder).rglob("*.jpg")) if p not in mine)
        out += list(rng.choice(outside, min(len(outside), int(n * share)), replace=False)) if outside else []
    return [("not in the library", str(p), None, set(), set()) for p in out]


def not_held_boxes(home: Path, boxes: int = 200):
    """The shared box queries on photos the library does not hold, of subjects it does not hold
    either (every result wrong): a box on a landmark or an object the library lacks."""
    mine = held(home)
    return [("boxes not in the library", path, box, set(), junk) for _, path, box, right, junk in queries(None, boxes)
            if box and path not in mine and not right & mine]


def filtered_out(qs, home: Path):
    """The queries again, each with a folder filter leaving out its own set's folder: no right answer."""
    uk, paris, extra = library_folders(home)
    folders = {"UKBench": uk, "UKBench boxes": uk, "Paris boxes": paris, "Paris photos": paris}
    return [(name + ", none right", path, box, set(), junk,
             tuple(str(f.resolve()) for f in (uk, paris, extra) if f != folders[name]))
            for name, path, box, right, junk in qs]


def record(home: Path, qs, top: int):
    """[(set, query n, u, r, right?, her?, policy.match of the search)] from searches in this process; pinned/junk results left out.
    Each result's inputs are taken where the search computes them (Searcher._relevance over the
    whole library's first results, in ranking order) and paired with it by its id: the list is
    in relevance order, not the ranking's."""
    from app.core.catalog.records import Filters
    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.core.pipeline.search import SearchRequest, Searcher

    seen = {}
    real = Searcher._relevance

    def recording(ids, sims, scores, vectors, scale, sl, own):  # the inputs as the shipped search computes them
        mu, unit, her, matched = scale[:4]
        r = np.asarray(scores, np.float64)
        if not seen:  # the first call: the whole library's first results
            u = (np.asarray(sims, np.float64) - mu) / unit
            seen.update({int(i): (float(a), float(b)) for i, a, b in zip(ids, u, r if her else (r - mu) / unit)},
                        her=her, matched=matched)
        return real(ids, sims, scores, vectors, scale, sl, own)

    Searcher._relevance = staticmethod(recording)
    svc = LibraryService(home, Settings())
    svc.wait_ready()
    searcher = Searcher(svc)
    rows = []
    try:
        for n, (name, path, box, right, junk, *folders) in enumerate(qs):
            seen.clear()
            req = SearchRequest(path=path, box=tuple(box) if box else None, top=top,
                                filters=Filters(folders=folders[0]) if folders else Filters())
            res = searcher.search(req)
            if not seen:
                continue
            for h in res.hits:
                p = str(Path(h.path).resolve())
                if p in junk or p == path or h.ranked_id not in seen:
                    continue  # (a filter's photos beyond the whole library's first results: no inputs)
                ui, ri = seen[h.ranked_id]
                rows.append((name, n, ui, ri, p in right, seen["her"], seen["matched"]))
    finally:
        Searcher._relevance = staticmethod(real)
        svc.close()
    return rows


def neighbour_z(home: Path) -> tuple[float, bool]:
    """(how many spreads (Snapshot.similarity_scale) above the median of two random photos a
    photo's nearest other photo lies, the median over 200 photos spread over the library; whether
    it is whitened): what policy.NEIGHBOUR_Z fixes."""
    from app.core.config import Settings
    from app.core.library.service import LibraryService

    svc = LibraryService(home, Settings())
    try:
        svc.wait_ready()
        snap = svc.snapshot()
        _, v = snap.all_vectors()
        sample = v[:: max(1, len(v) // 200)][:200]
        sims = np.sort(sample @ v.T, axis=1)[:, -2]  # the first is the photo itself
        mu, sd = snap.similarity_scale
        return (float(np.median(sims)) - mu) / sd, not snap.whitening.is_identity
    finally:
        svc.close()


def inputs(row) -> tuple:
    """The terms policy.relevance weighs: (u, r with HeR, r without, 1, HeR)."""
    u, r, her = row[2], row[3], row[5]
    return (u, r if her else 0.0, 0.0 if her else r, 1.0, float(her))


def fit(rows):
    """Logistic weights (policy.RELEVANCE_WEIGHTS' terms) maximising the likelihood, each set's
    results weighted equally (a set: the row's first field, library included)."""
    from scipy.optimize import minimize

    count: dict = {}
    for r in rows:
        count[r[0]] = count.get(r[0], 0) + 1
    X = np.array([inputs(r) for r in rows])
    y = np.array([r[4] for r in rows], np.float64)
    w = np.array([1.0 / count[r[0]] for r in rows]) * len(rows) / len(count)

    def loss(b):
        t = np.clip(X @ b, -50, 50)
        return float(np.sum(w * (np.logaddexp(0, t) - y * t)))

    def grad(b):
        t = np.clip(X @ b, -50, 50)
        return X.T @ (w * (1 / (1 + np.exp(-t)) - y))

    from app.core import policy
    return minimize(loss, np.array(policy.RELEVANCE_WEIGHTS), jac=grad, method="BFGS").x


def table(by_set: dict, title: str):
    """by_set: {set: [(relevance, right?, ...)]}: per cut-off, the share of wrong results hidden and of right ones kept."""
    print(title)
    print("| set | right / wrong results | " + " | ".join(f"cut-off {c:.1f}: wrong hidden / right kept" for c in CUTS) + " |")
    print("|---|---|" + "---|" * len(CUTS))
    for name, rs in list(by_set.items()) + [("all", [r for rs in by_set.values() for r in rs])]:
        s = np.array([r[0] for r in rs])
        ok = np.array([r[1] for r in rs], bool)
        cells = []
        for c in CUTS:
            hid = (s[~ok] < c).mean() if (~ok).any() else float("nan")
            kept = (s[ok] >= c).mean() if ok.any() else float("nan")
            cells.append(f"{hid:.2f} / {kept:.2f}")
        print(f"| {name} | {ok.sum()} / {(~ok).sum()} | " + " | ".join(cells) + " |")


def scored(rows, weights):
    """{set: [(relevance, right?, first of its search?)]} as the search would show them (in relevance order per query)."""
    out: dict = {}
    i = 0
    while i < len(rows):
        j = i
        while j < len(rows) and rows[j][:2] == rows[i][:2]:
            j += 1
        t = np.array([inputs(r) for r in rows[i:j]]) @ np.asarray(weights)
        rel = rows[i][6] / (1 + np.exp(-np.clip(t, -50, 50)))  # policy.match's
        order = np.argsort(-rel, kind="stable")
        out.setdefault(rows[i][0], []).extend((float(rel[o]), rows[i + o][4], k == 0) for k, o in enumerate(order))
        i = j
    return out


def raw_descriptors(home: Path) -> dict[str, np.ndarray]:
    """{resolved path: (C,) float32 raw descriptor (HeW before whitening)} of every searchable photo."""
    from app.core.config import Settings
    from app.core.library.service import LibraryService

    svc = LibraryService(home, Settings())
    try:
        svc.wait_ready()
        snap = svc.snapshot()
        ids, _ = snap.all_vectors()
        raw = svc.catalog.raw_descriptors(ids, snap.space.id, snap.space.channels)
        rows = svc.catalog.image_rows(ids)
        return {str(Path(rows[int(i)].path).resolve()): v for i, v in zip(ids, raw)}
    finally:
        svc.close()


def raw_relevance(cosine):
    """The candidate number that would read the same in every library: a logistic of the raw
    cosine of query and result, 0.5 at policy.MATCH_RAW (what a whole photo's best match is judged by)."""
    from app.core import policy

    return 1.0 / (1.0 + np.exp(-np.clip(policy.MATCH_RAW_STEEPNESS * (np.asarray(cosine) - policy.MATCH_RAW), -50, 50)))


def across(homes: list[Path], boxes: int, near: float = 0.1) -> None:
    """The same query and result in two libraries (each searched before: relevance-pairs.json):
    how often their numbers lie within `near`, per set; all pairs both lists hold, and those that
    read 0.5 or more in either (where a difference changes what a person sees). Then the same for
    a candidate number built on the raw cosine of query and result alone (`raw_relevance`; whole
    photos both libraries hold), and how it separates right from wrong results in each."""
    a, b = ({(q["path"], json.dumps(q["box"])): q for q in json.loads((h / "relevance-pairs.json").read_text())}
            for h in homes)
    right = {(path, json.dumps(box)): r for _, path, box, r, _ in queries(None, boxes)}
    raws = [raw_descriptors(h) for h in homes]
    by_set: dict = {}
    for key, qa in a.items():
        qb = b.get(key)
        if qb is None:
            continue
        for p, sa in qa["scores"].items():
            if p in qb["scores"] and p != qa["path"]:
                ra = rb = None
                if qa["box"] is None and all(qa["path"] in r and p in r for r in raws):
                    ra, rb = (float(r[qa["path"]] @ r[p]) for r in raws)
                by_set.setdefault(qa["set"], []).append((sa, qb["scores"][p], ra, rb, p in right.get(key, ())))
    for what, pick in (("the shipped number", lambda t: (t[0], t[1])),
                       ("a logistic of the raw cosine alone (whole photos)",
                        lambda t: tuple(raw_relevance([t[2], t[3]])) if t[2] is not None else None)):
        print(f"\nthe same query and result in {homes[0]} and {homes[1]}, {what}: |difference| <= {near}; "
              "wrong hidden / right kept at 0.5 in each")
        print("| set | pairs | within | median diff | pairs >= 0.5 in either | within | worst | first library | second library |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, ts in list(by_set.items()) + [("all", [t for ts in by_set.values() for t in ts])]:
            ps = [(pick(t), t[4]) for t in ts if pick(t) is not None]
            if not ps:
                continue
            x = np.array([p for p, _ in ps], np.float64)
            ok = np.array([o for _, o in ps], bool)
            d = np.abs(x[:, 0] - x[:, 1])
            hi = x.max(axis=1) >= 0.5
            sep = [f"{(x[~ok, k] < 0.5).mean():.2f} / " + (f"{(x[ok, k] >= 0.5).mean():.2f}" if ok.any() else "-")
                   for k in (0, 1)]
            print(f"| {name} | {len(d)} | {(d <= near).mean():.2f} | {np.median(d):.3f} | {hi.sum()} | "
                  + (f"{(d[hi] <= near).mean():.2f} | {d[hi].max():.2f} |" if hi.any() else "- | - |")
                  + f" {sep[0]} | {sep[1]} |")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", action="append", default=None, help="the library's data folder (several with --fit --reuse)")
    ap.add_argument("--reuse", action="store_true", help="the library in --home is already indexed")
    ap.add_argument("--distractors", type=int, default=None, help="how many distractor photos (default: all)")
    ap.add_argument("--sample", type=int, default=None,
                    help="a library of about this many photos, a third from each set (links beside --home)")
    ap.add_argument("--landmarks", default=None,
                    help="a library of Paris photos alone (one kind of subject): 'all' (the 250), or landmarks by name "
                         "(e.g. louvre,defense,eiffel: links beside --home)")
    ap.add_argument("--ukbench", type=int, default=None, help="how many UKBench photos (default: all)")
    ap.add_argument("--top", type=int, default=100, help="results counted per query")
    ap.add_argument("--fetch", type=int, default=None, help="results asked per query (saved for study)")
    ap.add_argument("--fit", action="store_true", help="search in this process and refit the relevance weights")
    ap.add_argument("--boxes", type=int, default=200, help="UKBench photos searched again with a random box")
    ap.add_argument("--outside", type=int, default=160, help="searches for shared photos the library does not hold")
    ap.add_argument("--across", action="store_true",
                    help="two --home libraries searched before: the same query and result's numbers in both")
    ap.add_argument("--smoke", action="store_true",
                    help="a check that it runs (tests/test_benchmarks.py): --sample 30 --boxes 8 --outside 8 in a temp "
                         "folder, then --reuse --fit on that library")
    a = ap.parse_args(argv)
    if a.smoke:
        import shutil

        tmp = Path(tempfile.mkdtemp(prefix="hs-relevance-smoke-"))
        few = ["--home", str(tmp / "home"), "--boxes", "8", "--outside", "8"]
        main(["--sample", "30", *few])
        main(["--reuse", "--fit", *few])
        main(["--across", "--home", few[1], "--home", few[1]])  # the comparison's code (one library with itself)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    homes = [Path(h) for h in a.home or [tempfile.mkdtemp(prefix="hs-relevance-")]]
    if a.across:
        if len(homes) != 2:
            ap.error("--across compares two --home libraries")
        return across(homes, a.boxes)
    if len(homes) > 1 and not (a.fit and a.reuse):
        ap.error("several --home only with --fit --reuse (libraries indexed before)")
    home = homes[0]
    exe = [sys.executable, "-m", "app"]
    if not a.reuse and a.sample:
        sample_library(home, a.sample)
        subprocess.run(exe + ["index", *map(str, library_folders(home)), "--home", str(home)], check=True, stdout=subprocess.DEVNULL)
    elif not a.reuse:
        extra = SHARED / "distractors"
        folders = [str(SHARED / "ukbench"), str(SHARED / "paris250" / "jpg")]
        if a.landmarks:
            folders = [str(SHARED / "paris250" / "jpg")]
            if a.landmarks != "all":
                link = home.parent / (home.name + "-landmarks")
                link.mkdir(parents=True, exist_ok=True)
                for p in sorted((SHARED / "paris250" / "jpg").glob("paris_*.jpg")):
                    if p.name.split("_")[1] in a.landmarks.split(",") and not (link / p.name).exists():
                        (link / p.name).symlink_to(p.resolve())
                folders = [str(link)]
        elif a.distractors is None:
            folders.append(str(extra))
        elif a.distractors:
            link = home.parent / (home.name + "-distractors")  # links: the shared folder is not ours to change
            link.mkdir(parents=True, exist_ok=True)
            for p in sorted(extra.rglob("*.jpg"))[: a.distractors]:
                if not (link / p.name).exists():
                    (link / p.name).symlink_to(p.resolve())
            folders.append(str(link))
        subprocess.run(exe + ["index", *folders, "--home", str(home)], check=True, stdout=subprocess.DEVNULL)
    qs = in_library(queries(a.ukbench, a.boxes), home)
    if a.fit:
        from app.core import policy

        libraries = {}
        for h in homes:
            saved = h / "relevance-fit-rows.json"
            mine = in_library(queries(a.ukbench, a.boxes), h)
            # what the saved searches depend on besides the library: the queries and the scale of u
            key = [len(mine), a.top, "paired by id", policy.NEIGHBOUR_Z_PLAIN, policy.NEIGHBOUR_Z_WHITENED, "match",
                   policy.MATCH_U, policy.MATCH_COSINE, *policy.MATCH_STEEPNESS, policy.MATCH_RAW,
                   policy.MATCH_RAW_STEEPNESS, *policy.MATCH_RAW_MODELS, policy.MATCH_RAW_BOX,
                   policy.RECIPROCAL_GAP, policy.RECIPROCAL_STEEPNESS, policy.NEAR_SHOT]
            old = json.loads(saved.read_text()) if saved.exists() else None
            if (a.reuse and isinstance(old, dict) and old.get("key") == key
                    and saved.stat().st_mtime > (h / "catalog.sqlite").stat().st_mtime):
                rows = [tuple(r) for r in old["rows"]]  # the searches of the last --fit
            else:
                rows = record(h, mine + filtered_out(mine, h), a.top)
                saved.write_text(json.dumps({"key": key, "rows": rows}))
            libraries[h] = rows
            z, whitened = neighbour_z(h)
            print(f"{h}: a photo's nearest other photo at {z:.2f} spreads "
                  f"({'whitened' if whitened else 'unwhitened'}; policy.NEIGHBOUR_Z: {policy.neighbour_z(whitened)})")
        w = fit([(f"{h}: {r[0]}", *r[1:]) for h, rows in libraries.items() for r in rows])
        for weights, title in ((policy.RELEVANCE_WEIGHTS, f"shipped weights {policy.RELEVANCE_WEIGHTS}"),
                               (w, "fitted weights (" + ", ".join(f"{x:.4f}" for x in w) + ")")):
            for h, rows in libraries.items():
                by_set = scored(rows, weights)
                table(by_set, f"\n{title}, library {h}: every result of the top")
                firsts = {name: [r for r in rs if r[2]] for name, rs in by_set.items() if name.endswith("none right")}
                table(firsts, "the first result of searches with no right answer (wrong hidden = the search reads as empty)")
        return
    qs += not_held(home, a.outside) + not_held_boxes(home, a.boxes)
    qfile = home / "relevance-queries.jsonl"
    qfile.write_text("".join(json.dumps({"path": p, "box": box}) + "\n" for _, p, box, _, _ in qs))
    out = subprocess.run(exe + ["search", "--queries", str(qfile), "--json", "--top", str(a.fetch or a.top), "--home", str(home)],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    status = json.loads(subprocess.run(exe + ["status", "--json", "--home", str(home)], check=True,
                                       capture_output=True, text=True).stdout)
    rows = {}  # set -> [(score, similarity, right?)]
    saved = []  # (query, rank, score, similarity, right?) of every result, for offline study
    pairs = []  # per search: its set, photo, box and {result: score} (--across)
    aps = {}  # set -> average precision of each query over its top (the ranking's quality)
    firsts = {}  # set -> the first counted result's score of each search
    for n, ((name, path, box, right, junk), line) in enumerate(zip(qs, out)):
        res = json.loads(line)
        found, seen, ap = 0, 0, 0.0
        pairs.append({"set": name, "path": path, "box": box,
                      "scores": {str(Path(r["path"]).resolve()): r["score"] for r in res.get("results", [])}})
        for r in res.get("results", []):
            p = str(Path(r["path"]).resolve())
            saved.append((n, r["rank"], r["score"], r["similarity"], p in right, p in junk or p == path))
            if p in junk or p == path:
                continue
            if r["rank"] <= a.top:
                if seen == 0:
                    firsts.setdefault(name, []).append(r["score"])
                rows.setdefault(name, []).append((r["score"], r["similarity"], p in right))
                seen += 1
                if p in right:
                    found += 1
                    ap += found / seen
        if right - {path}:  # a query with no right photo in the library has no average precision
            aps.setdefault(name, []).append(ap / len(right - {path}))
    table({name: [(r[0], r[2]) for r in rs] for name, rs in rows.items()},
          f"{status.get('indexed', '?')} photos indexed; top {a.top} of {len(qs)} queries; the CLI's `score`:")
    print("mAP of the top " + str(a.top) + ": " + ", ".join(f"{k} {100 * np.mean(v):.1f} ({len(v)} queries)" for k, v in aps.items()))
    for name, fs in firsts.items():
        if name in ("not in the library", "boxes not in the library"):
            what = "a photo" if name == "not in the library" else "a box on a subject"
            print(f"searches for {what} the library does not hold ({len(fs)}), first result hidden (the search reads as empty): "
                  + ", ".join(f"cut-off {c:.1f}: {np.mean(np.array(fs) < c):.2f}" for c in CUTS))
    np.save(home / "relevance-rows.npy", np.array(saved, np.float64))
    (home / "relevance-pairs.json").write_text(json.dumps(pairs))
    (home / "relevance-sets.json").write_text(json.dumps([q[0] for q in qs]))


if __name__ == "__main__":
    main()
