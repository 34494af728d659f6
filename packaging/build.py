"""Build the one-folder bundle (dist/heatsearch/) and smoke-test it.

    make bundle        # the CPU edition: no PyTorch; the built-in models run on OpenVINO
    make bundle-gpu    # with PyTorch, for GPUs and every model

Steps: export the built-in models to ONNX (checked against PyTorch) and convert them to OpenVINO
IR (build/models, each with its record), run PyInstaller, write THIRD-PARTY-NOTICES.txt and
LICENSE.txt beside the executable, print the size, then run the bundle as a person would:
--version, `doctor --json` (the CPU edition must not be able to import PyTorch and must run the
default model on OpenVINO), `index` on 16 UKBench photos (shared/data/ukbench, beside the
checkout), the window's --index + --query + --screenshot, then `status` (16 indexed) and `search`
(the query first) on what the window indexed. Each step is timed; a failure is one line.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))
BUILT_IN = ("efficientnet-lite2", "efficientnet-lite0")


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def export_models() -> None:
    """ONNX exports of the built-in models (checked against PyTorch), converted to OpenVINO IR
    (float32 weights kept): the CPU edition reads the IR, so it needs neither PyTorch nor the ONNX
    frontend."""
    import openvino as ov

    from app.core.features.engine import onnx_name
    from app.core.features.registry import load_backbone

    onnx_dir, ir_dir = ROOT / "build" / "models-onnx", ROOT / "build" / "models"
    shutil.rmtree(ir_dir, ignore_errors=True)  # only what this build converts is shipped
    onnx_dir.mkdir(parents=True, exist_ok=True)
    ir_dir.mkdir(parents=True, exist_ok=True)
    from app.core.features import modelcache

    for name in BUILT_IN:
        bb = load_backbone(name)
        onnx = onnx_dir / onnx_name(bb)
        if not (onnx.exists() and modelcache.files_ok(onnx)):
            subprocess.run([sys.executable, "-m", "app.core.features.export", name, bb.weights_path, bb.weights_digest,
                            str(onnx)], check=True, cwd=ROOT)
        xml = ir_dir / onnx.name.replace(".onnx", ".xml")
        ov.save_model(ov.convert_model(str(onnx)), str(xml), compress_to_fp16=False)
        # the IR's own record: its files' digests and the export's probe reference
        modelcache.write_record(xml, [xml, xml.with_suffix(".bin")], np.load(modelcache.probe_of(onnx)))
        size = (xml.stat().st_size + xml.with_suffix(".bin").stat().st_size) / 2**20
        print(f"model {name}: {xml.name} ({size:.0f} MiB)")


def write_notices(shipped_list: Path, folder: Path) -> None:
    """THIRD-PARTY-NOTICES.txt (every distribution whose files the bundle carries, with its
    licence texts) and HeatSearch's own LICENSE.txt, beside the executable. A shipped
    distribution without any licence text stops the build."""
    import notices

    shipped = json.loads(shipped_list.read_text())
    dists = notices.owners(shipped) | ({"pyinstaller"} if "pyinstaller" in notices._installed() else set())  # its bootloader
    python = [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")]  # its notice: Python's

    def other_library(f: Path) -> bool:
        return ((f.suffix in (".so", ".dylib", ".dll") or ".so." in f.name) and not f.name.startswith("libpython")
                and not any(f.is_relative_to(d) for d in (ROOT, *python)))

    others = sorted({Path(f).name for f in notices.unowned(shipped) if other_library(Path(f).resolve())})
    text, missing = notices.notices(dists, others)
    if missing:
        raise SystemExit(f"packaging: no licence text found for {', '.join(missing)} (shipped in the bundle)")
    (folder / "THIRD-PARTY-NOTICES.txt").write_text(text)
    shutil.copy(ROOT / "LICENSE", folder / "LICENSE.txt")
    print(f"notices: {len(dists)} distributions, {len(others)} other libraries -> {folder / 'THIRD-PARTY-NOTICES.txt'}")


def run(args: list[str], timeout: float, **kw) -> tuple[subprocess.CompletedProcess, float]:
    t = time.time()
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        raise SystemExit(f"smoke test: {Path(args[0]).name} {' '.join(args[1:3])} ran past {timeout:.0f} s") from e
    return out, time.time() - t


def last_line(out: subprocess.CompletedProcess) -> str:
    return ((out.stderr or "").strip().splitlines() or (out.stdout or "").strip().splitlines() or ["no output"])[-1]


def smoke(exe: Path, kind: str) -> bool:
    """Run the bundle as a person would: --version, doctor, `index` on 16 photos, the window's
    index + search + screenshot, then status and search on what the window indexed."""
    ok = True
    out, took = run([str(exe), "--version"], 300)
    print(f"bundle --version ({took:.1f} s):", out.stdout.strip() or last_line(out))
    ok &= out.returncode == 0
    home = Path(tempfile.mkdtemp(prefix="hs-bundle-"))
    try:
        out, took = run([str(exe), "doctor", "--json", "--home", str(home / "cli")], 300)
        doctor = json.loads(out.stdout or "{}")
        print(f"bundle doctor ({took:.1f} s):", json.dumps(doctor))
        if kind == "cpu":
            cpu_ok = not doctor.get("torch_installed") and str(doctor.get("engine", "")).startswith("OpenVINO")
            print("CPU edition without PyTorch, default model on OpenVINO:", "yes" if cpu_ok else "NO")
            ok &= cpu_ok
        photos = home / "photos"
        photos.mkdir()
        src = sorted((ROOT.parent / "shared" / "data" / "ukbench").glob("*.jpg"))[:16]
        if len(src) < 16:
            print(f"smoke test: 16 photos needed in {ROOT.parent / 'shared' / 'data' / 'ukbench'}, found {len(src)}")
            return False
        for p in src:
            shutil.copy(p, photos / p.name)
        query = photos / src[1].name
        out, took = run([str(exe), "index", str(photos), "--home", str(home / "cli")], 900)
        print(f"bundle index, 16 photos ({took:.1f} s):", last_line(out) if out.returncode else out.stdout.strip().splitlines()[-1:])
        ok &= out.returncode == 0
        shot = ROOT / "dist" / "bundle-screenshot.png"
        shot.unlink(missing_ok=True)
        out, took = run([str(exe), "--home", str(home / "gui"), "--screenshot", str(shot), "--index", str(photos),
                         "--query", str(query)], 900, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        print(f"bundle window --index --query --screenshot ({took:.1f} s):",
              out.stdout.strip().splitlines()[-1:] if out.returncode == 0 else last_line(out))
        ok &= out.returncode == 0 and shot.exists()
        out, _ = run([str(exe), "status", "--json", "--home", str(home / "gui")], 300)
        indexed = json.loads(out.stdout or "{}").get("indexed")
        out, took = run([str(exe), "search", str(query), "--json", "--top", "4", "--home", str(home / "gui")], 300)
        hits = [Path(h["path"]).name for h in json.loads(out.stdout or "{}").get("results", [])]
        print(f"the window indexed {indexed} photos; search ({took:.1f} s): {hits}" + ("" if out.returncode == 0 else
                                                                                  f" ({last_line(out)})"))
        ok &= indexed == 16 and hits[:1] == [query.name]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return ok


def main() -> int:
    kind = os.environ.get("HEATSEARCH_BUNDLE", "cpu")
    t = time.time()
    export_models()
    print(f"models exported in {(time.time() - t) / 60:.1f} min")
    t = time.time()
    shipped = ROOT / "build" / f"shipped-{kind}.json"
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--distpath", str(ROOT / "dist"),
                    "--workpath", str(ROOT / "build" / "pyinstaller"), str(ROOT / "packaging" / "heatsearch.spec")],
                   check=True, cwd=ROOT, env={**os.environ, "HEATSEARCH_BUNDLE": kind, "HEATSEARCH_SHIPPED": str(shipped)})
    took = time.time() - t
    exe = ROOT / "dist" / "heatsearch" / ("heatsearch.exe" if os.name == "nt" else "heatsearch")
    write_notices(shipped, exe.parent)
    size = du(exe.parent)
    print(f"{kind} bundle built in {took / 60:.1f} min: {exe.parent} ({size / 2**20:.0f} MiB)")
    t = time.time()
    ok = smoke(exe, kind)
    print(f"smoke test {'passed' if ok else 'FAILED'} in {(time.time() - t) / 60:.1f} min")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
