"""Indexing throughput per engine, all engines in one run (so the ratios are fair), on
(a) the Paris photos (1024 px) and (b) camera-size photos (12 MP JPEGs at quality 92 made from
them, a third with EXIF orientation 6); the engine alone on pre-decoded inputs; the box query of
a photo that is not in the library (a CNN pass on the crop plus the full photo's map); peak RSS.

    python benchmarks/index_throughput.py [--limit 60] [--engines torch onnxruntime openvino]
    python benchmarks/index_throughput.py --against /tmp/old [--engines openvino] [--repeat 3]
    python benchmarks/index_throughput.py --engines openvino openvino-int8 openvino-bf16   # reduced precision
    python benchmarks/index_throughput.py --backbone efficientnet-lite0 --engines openvino
    python benchmarks/index_throughput.py --smoke     # a check that it runs: 4 Paris photos, 2 camera ones, OpenVINO

Each engine runs in its own child process (clean memory figures), one after the other. With
`--against DIR` (a checkout of another commit, e.g. `git worktree add /tmp/old 33dfabb`), that
checkout's code indexes the same photos in the same run, alternating with this one's, and the
ratio of the median rates is printed: a change is measured against its base on one machine state.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def make_camera_photos(src: list[Path], out: Path) -> None:
    """12-megapixel JPEGs (4000x3000, quality 92) upscaled from the shared photos; every third
    one stored sideways with EXIF orientation 6, as phones do."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(src):
        img = Image.open(p).convert("RGB")
        big = img.resize((4000, 3000) if img.width >= img.height else (3000, 4000), Image.BICUBIC)
        if i % 3 == 0:
            exif = Image.Exif()
            exif[0x0112] = 6
            big.transpose(Image.Transpose.ROTATE_90).save(out / f"cam{i:03d}.jpg", quality=92, exif=exif.tobytes())
        else:
            big.save(out / f"cam{i:03d}.jpg", quality=92)


def child(engine: str, folder: Path, home: Path, backbone: str) -> dict:
    """engine: a runtime, or openvino-int8 / openvino-bf16: precision "int8" (the library's first
    run tunes its model, timed apart) or "fastest" on a bf16 CPU, as shipped."""
    from app.core.config import Settings
    from app.core.library.service import LibraryService
    from app.core.pipeline.search import SearchRequest, Searcher

    runtime, _, reduced = engine.partition("-")
    settings = Settings(backbone=backbone, engine=runtime, precision={"int8": "int8", "bf16": "fastest"}.get(reduced, "exact"))
    svc = LibraryService(home, settings)
    svc.wait_ready()
    photos = sorted(folder.glob("*.jpg"))
    phases = {}
    svc.subscribe(lambda ev: ev.kind == "progress" and phases.setdefault(ev.data.phase, time.perf_counter()))
    if not reduced or reduced == "bf16":
        svc.run(svc.index())  # a new library's space is made by its first (here empty) indexing run
        ex = svc.extractor()  # loaded before timing: both measurements start with a ready engine
        ex.forward([ex.prepare_path(photos[0]).array])
    t = time.perf_counter()
    prog = svc.run(svc.index([folder]))
    pipeline = time.perf_counter() - t
    calibration_s = 0.0
    if "tuning the 8-bit model" in phases:  # once per library: not indexing speed
        calibration_s = phases["loading the model"] - phases["tuning the 8-bit model"]
        # and its loading (compiling), which the other engines did before the clock started
        after = min(t for ph, t in phases.items() if t > phases["loading the model"])
        pipeline -= after - phases["tuning the 8-bit model"]
    ex = svc.extractor()
    if ex.engine.precision != {"int8": "int8", "bf16": "bf16"}.get(reduced, "f32"):
        raise SystemExit(f"{engine} ran at {ex.engine.precision}")
    n = svc.stats()["indexed"]
    arrays = [ex.prepare_path(p).array for p in photos]
    t = time.perf_counter()
    for a in arrays:
        ex.forward([a])
    alone = time.perf_counter() - t
    del arrays
    query = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[-1]
    s = Searcher(svc)
    t = time.perf_counter()
    s.search(SearchRequest(path=str(query), box=(200, 150, 700, 600)))
    box_ms = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    s.search(SearchRequest(path=str(query), box=(250, 150, 750, 600), mode="map"))
    move_ms = (time.perf_counter() - t) * 1000
    photo_ms = []  # another photo not in the library, dropped: then the same photo again (another filter, say)
    dropped = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[-2]
    split = {}  # where the first search's time went (SearchResult.timings, ms)
    shown_ms = None  # until the window shows the first search's results (before their details are compared)
    for _ in range(2):
        t = time.perf_counter()
        early = []
        r = s.search(SearchRequest(path=str(dropped)), lambda _res: early.append(time.perf_counter()))
        photo_ms.append((time.perf_counter() - t) * 1000)
        if not split:
            split, shown_ms = r.timings, ((early or [time.perf_counter()])[0] - t) * 1000
    svc.close()
    return {"engine": ex.engine.label, "photos": n, "phase": prog.phase, "pipeline_s": pipeline, "rate": n / pipeline,
            "engine_alone_rate": len(photos) / alone, "ratio": (n / pipeline) / (len(photos) / alone),
            "box_ms": box_ms, "box_move_ms": move_ms, "photo_ms": photo_ms, "photo_shown_ms": shown_ms,
            "photo_split": {k: round(v, 1) for k, v in split.items() if k.endswith("_ms")}, "calibration_s": calibration_s,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "torch_loaded": "torch" in sys.modules}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--engines", nargs="+", default=["torch", "onnxruntime", "openvino"])
    ap.add_argument("--backbone", default="efficientnet-lite2")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)  # ENGINE FOLDER HOME [BACKBONE]
    ap.add_argument("--against", type=Path, help="another checkout to run alternately with this one")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tree with --against")
    ap.add_argument("--camera", type=int, help="photos of the camera set (default: half of --limit, at least 12)")
    ap.add_argument("--smoke", action="store_true", help="a check that it runs (tests/test_benchmarks.py): "
                                                           "--limit 4 --camera 2 --engines openvino")
    a = ap.parse_args()
    if a.smoke:
        a.limit, a.camera, a.engines = 4, 2, ["openvino"]
    camera = a.camera or max(12, a.limit // 2)
    if a.child:
        backbone = a.child[3] if len(a.child) > 3 else "efficientnet-lite2"  # a base tree's call gives three
        print(json.dumps(child(a.child[0], Path(a.child[1]), Path(a.child[2]), backbone)))
        return
    tmp = Path(tempfile.mkdtemp(prefix="hs-throughput-"))
    src = sorted((SHARED / "paris250" / "jpg").glob("*.jpg"))[: a.limit]
    sets = {"Paris 1024 px": tmp / "paris", "camera 12 MP": tmp / "camera"}
    sets["Paris 1024 px"].mkdir()
    for p in src:
        shutil.copy(p, sets["Paris 1024 px"] / p.name)
    make_camera_photos(src[:camera], sets["camera 12 MP"])
    from app.core.config import DEFAULT_MAX_SIDE

    print(f"{a.limit} photos per set (camera set: {camera}), input size {DEFAULT_MAX_SIDE} px, "
          f"{os.cpu_count()} CPU cores")
    if a.against:
        failed = against(a, sets, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if failed:
            raise SystemExit(f"{failed} run(s) failed")
        return
    results, failed = {}, 0
    for name, folder in sets.items():
        for eng in a.engines:
            home = tmp / f"home-{eng}-{folder.name}"
            r = subprocess.run([sys.executable, __file__, "--child", eng, str(folder), str(home), a.backbone], capture_output=True,
                               text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if r.returncode != 0:
                print(f"{name} / {eng}: failed: {r.stderr.strip().splitlines()[-1:]}")
                failed += 1
                continue
            res = json.loads(r.stdout.strip().splitlines()[-1])
            results[(name, eng)] = res
            print(f"{name} / {res['engine']}: pipeline {res['rate']:.2f} photos/s, engine alone {res['engine_alone_rate']:.2f} "
                  f"photos/s (ratio {res['ratio']:.2f}); box query on a new photo {res['box_ms']:.0f} ms, moving it "
                  f"{res['box_move_ms']:.0f} ms; the whole photo shown in {res['photo_shown_ms']:.0f} ms, settled in {res['photo_ms'][0]:.0f} ms ("
                  + ", ".join(f"{k[:-3]} {v:.0f}" for k, v in res.get("photo_split", {}).items())
                  + f"), again {res['photo_ms'][1]:.0f} ms; peak RSS {res['max_rss_mb']:.0f} MB; PyTorch loaded: {res['torch_loaded']}"
                  + (f"; tuning the int8 model {res['calibration_s']:.0f} s (once per library, not counted)" if res.get("calibration_s") else ""),
                  flush=True)
    for name in sets:
        base = results.get((name, "torch"))
        if base:
            for eng in a.engines:
                if eng != "torch" and (name, eng) in results:
                    print(f"{name}: {eng} pipeline is {results[(name, eng)]['rate'] / base['rate']:.2f}x PyTorch's")
    shutil.rmtree(tmp, ignore_errors=True)
    if failed:  # the figures of the others are printed, but a run that failed fails the benchmark
        raise SystemExit(f"{failed} run(s) failed")


def run_child(root: Path, engine: str, folder: Path, home: Path) -> dict | None:
    """One indexing run of the code in `root` (its own copy of this benchmark's child)."""
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "index_throughput.py"), "--child", engine, str(folder),
                        str(home)], capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    if r.returncode != 0:
        print(f"{root} / {engine}: failed: {r.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def against(a, sets: dict, tmp: Path) -> int:
    """This tree and `a.against`, alternately, `a.repeat` times each per set and engine. Returns
    how many runs failed."""
    import statistics

    failed = 0
    trees = {"this": ROOT, "base": a.against.resolve()}
    for name, folder in sets.items():
        for eng in a.engines:
            rates: dict[str, list[float]] = {"this": [], "base": []}
            for k in range(a.repeat):
                for label, root in trees.items():
                    res = run_child(root, eng, folder, tmp / f"home-{label}-{eng}-{folder.name}-{k}")
                    if res:
                        rates[label].append(res["rate"])
                    else:
                        failed += 1
            if rates["this"] and rates["base"]:
                this, base = statistics.median(rates["this"]), statistics.median(rates["base"])
                print(f"{name} / {eng}: this tree {this:.2f} photos/s (runs {', '.join(f'{r:.2f}' for r in rates['this'])}), "
                      f"{trees['base']} {base:.2f} photos/s (runs {', '.join(f'{r:.2f}' for r in rates['base'])}): "
                      f"{100 * (this / base - 1):+.1f} %", flush=True)
    return failed


if __name__ == "__main__":
    main()
