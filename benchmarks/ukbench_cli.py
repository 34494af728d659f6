"""Index UKBench with the CLI, then search every image with `heatsearch search --queries --json`
and print N-S and mAP of the library search (what a user gets).

    python benchmarks/ukbench_cli.py --root ../shared/data/ukbench --home /tmp/hs-ukbench [--extra --no-her --qe]
    python benchmarks/ukbench_cli.py --smoke      # a check that it runs: the first 12 photos (3 objects)
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from app.core.evaluation.metrics import compute_ap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2] / "shared/data/ukbench"))
    ap.add_argument("--home", default=None)
    ap.add_argument("--extra", nargs="*", default=[], help="extra search flags, e.g. --no-her --qe")
    ap.add_argument("--limit", type=int, help="only the first LIMIT photos (whole objects of 4), linked in a folder beside --home")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): --limit 12")
    a = ap.parse_args()
    if a.smoke:
        a.limit = 12
    home = a.home or tempfile.mkdtemp(prefix="hs-ukbench-")
    root = Path(a.root).resolve()
    if a.limit:  # links to the first photos, in a folder of their own
        root = Path(tempfile.mkdtemp(prefix="hs-ukbench-photos-"))
        for p in sorted(Path(a.root).resolve().glob("ukbench*.jpg"))[: a.limit - a.limit % 4]:
            (root / p.name).symlink_to(p)
    exe = [sys.executable, "-m", "app"]
    subprocess.run(exe + ["index", str(root), "--home", home], check=True)
    images = sorted(root.glob("ukbench*.jpg"))
    qfile = Path(home) / "queries.jsonl"
    qfile.write_text("".join(json.dumps({"path": str(p), "box": None}) + "\n" for p in images))
    out = subprocess.run(exe + ["search", "--queries", str(qfile), "--json", "--top", "600", "--home", home] + a.extra,
                         check=True, capture_output=True, text=True).stdout.splitlines()
    group = {str(p): int(p.stem[7:]) // 4 for p in images}
    ns, aps, ms = [], [], []
    for p, line in zip(images, out):
        res = json.loads(line)
        ranked = [r["path"] for r in res["results"]]
        g = group[str(p)]
        ns.append(sum(group[r] == g for r in ranked[:4]))
        rest = [r for r in ranked if r != str(p)]
        pos = [i for i, r in enumerate(rest) if group[r] == g]
        aps.append(compute_ap(np.array(pos), 3))
        ms.append(res["timings_ms"]["total_ms"])
    if a.limit:
        shutil.rmtree(root)
    if not a.home:  # a library of its own: nobody will search it again
        shutil.rmtree(home, ignore_errors=True)
    print(f"UKBench via `heatsearch search` ({len(images)} queries, flags {a.extra or 'defaults'}): "
          f"N-S = {np.mean(ns):.3f} / 4, mAP = {100 * np.mean(aps):.2f}%, "
          f"all 3 mates in top 4: {np.mean([n == 4 for n in ns]) * 100:.1f}% of queries, "
          f"search time excl. CNN p50 {np.median(ms):.1f} ms")


if __name__ == "__main__":
    main()
