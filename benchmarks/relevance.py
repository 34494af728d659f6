"""What the relevance cut-off hides: one library of the shared photos (UKBench, Paris and the
distractors), indexed and searched with the shipped CLI (`search --queries --json`, defaults), and
for each cut-off the fraction of wrong results it hides and of right ones it keeps, per set.

    python benchmarks/relevance.py                      # all shared photos (~2,700; ~8 min here)
    python benchmarks/relevance.py --distractors 500 --home /tmp/hs-rel   # smaller; --home keeps the library
    python benchmarks/relevance.py --home /tmp/hs-rel --reuse             # search an indexed library again

Queries: every UKBench photo (right: the other 3 views of its object), the Paris box queries
(right: Easy + Hard; Junk counted neither way) and the Paris full-photo queries (right: the same
landmark). The top 100 of each query are counted; the query's own photo (pinned first) is not.
"""
from __future__ import annotations

import argparse
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


def queries(limit_ukbench: int | None):
    """[(set name, query path, box or None, right paths, junk paths)]."""
    from app.core.evaluation.datasets import paris250, ukbench

    out = []
    uk = ukbench(SHARED / "ukbench", limit_ukbench)
    for q in uk.queries:
        right = {str(uk.images[i].resolve()) for i in q.gnd["all"].ok}
        out.append(("UKBench", str(q.path.resolve()), None, right, set()))
    for b in paris250(SHARED / "paris250"):
        for q in b.queries:
            g = q.gnd["Medium"] if "Medium" in q.gnd else q.gnd["all"]
            right = {str(b.images[i].resolve()) for i in g.ok}
            junk = {str(b.images[i].resolve()) for i in g.junk}
            name = "Paris boxes" if q.box else "Paris photos"
            out.append((name, str(q.path.resolve()), list(q.box) if q.box else None, right, junk))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default=None)
    ap.add_argument("--reuse", action="store_true", help="the library in --home is already indexed")
    ap.add_argument("--distractors", type=int, default=None, help="how many distractor photos (default: all)")
    ap.add_argument("--ukbench", type=int, default=None, help="how many UKBench photos (default: all)")
    ap.add_argument("--top", type=int, default=100, help="results counted per query")
    ap.add_argument("--fetch", type=int, default=None, help="results asked per query (saved for study)")
    a = ap.parse_args()
    home = Path(a.home or tempfile.mkdtemp(prefix="hs-relevance-"))
    exe = [sys.executable, "-m", "app"]
    if not a.reuse:
        extra = SHARED / "distractors"
        folders = [str(SHARED / "ukbench"), str(SHARED / "paris250" / "jpg")]
        if a.distractors is None:
            folders.append(str(extra))
        elif a.distractors:
            link = home.parent / (home.name + "-distractors")  # links: the shared folder is not ours to change
            link.mkdir(parents=True, exist_ok=True)
            for p in sorted(extra.rglob("*.jpg"))[: a.distractors]:
                if not (link / p.name).exists():
                    (link / p.name).symlink_to(p.resolve())
            folders.append(str(link))
        subprocess.run(exe + ["index", *folders, "--home", str(home)], check=True, stdout=subprocess.DEVNULL)
    qs = queries(a.ukbench)
    qfile = home / "relevance-queries.jsonl"
    qfile.write_text("".join(json.dumps({"path": p, "box": box}) + "\n" for _, p, box, _, _ in qs))
    out = subprocess.run(exe + ["search", "--queries", str(qfile), "--json", "--top", str(a.fetch or a.top), "--home", str(home)],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    status = json.loads(subprocess.run(exe + ["status", "--json", "--home", str(home)], check=True,
                                       capture_output=True, text=True).stdout)
    rows = {}  # set -> [(score, similarity, right?)]
    saved = []  # (query, rank, score, similarity, right?) of every result, for offline study
    for n, ((name, path, box, right, junk), line) in enumerate(zip(qs, out)):
        res = json.loads(line)
        for r in res.get("results", []):
            p = str(Path(r["path"]).resolve())
            saved.append((n, r["rank"], r["score"], r["similarity"], p in right, p in junk or p == path))
            if p in junk or p == path:
                continue
            if r["rank"] <= a.top:
                rows.setdefault(name, []).append((r["score"], r["similarity"], p in right))
    print(f"{status.get('indexed', '?')} photos indexed; top {a.top} of {len(qs)} queries; the CLI's `score`:")
    print("| set | right / wrong results | " + " | ".join(f"cut-off {c:.1f}: wrong hidden / right kept" for c in CUTS) + " |")
    print("|---|---|" + "---|" * len(CUTS))
    for name, rs in list(rows.items()) + [("all", [r for rs in rows.values() for r in rs])]:
        s = np.array([r[0] for r in rs])
        ok = np.array([r[2] for r in rs])
        cells = []
        for c in CUTS:
            hid = (s[~ok] < c).mean() if (~ok).any() else float("nan")
            kept = (s[ok] >= c).mean() if ok.any() else float("nan")
            cells.append(f"{hid:.2f} / {kept:.2f}")
        print(f"| {name} | {ok.sum()} / {(~ok).sum()} | " + " | ".join(cells) + " |")
    np.save(home / "relevance-rows.npy", np.array(saved, np.float64))
    (home / "relevance-sets.json").write_text(json.dumps([q[0] for q in qs]))


if __name__ == "__main__":
    main()
