"""Build the one-folder bundle (dist/heatsearch/) and smoke-test it.

    make bundle        # the CPU edition: no PyTorch; the built-in models run on OpenVINO
    make bundle-gpu    # with PyTorch, for GPUs and every model

Steps: export the built-in models to ONNX (build/models, checked against PyTorch), run
PyInstaller, print the size, then run the bundle: --version, `doctor --json` (the CPU edition must
not be able to import PyTorch and must run the default model on OpenVINO), and an index + search +
screenshot on 16 UKBench photos.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
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


def main() -> int:
    kind = os.environ.get("HEATSEARCH_BUNDLE", "cpu")
    export_models()
    t = time.time()
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--distpath", str(ROOT / "dist"),
                    "--workpath", str(ROOT / "build" / "pyinstaller"), str(ROOT / "packaging" / "heatsearch.spec")],
                   check=True, cwd=ROOT, env={**os.environ, "HEATSEARCH_BUNDLE": kind})
    took = time.time() - t
    exe = ROOT / "dist" / "heatsearch" / ("heatsearch.exe" if os.name == "nt" else "heatsearch")
    size = du(exe.parent)
    print(f"{kind} bundle built in {took / 60:.1f} min: {exe.parent} ({size / 2**20:.0f} MiB)")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=300)
    print("bundle --version:", out.stdout.strip() or out.stderr.strip())
    home = Path(tempfile.mkdtemp(prefix="hs-bundle-"))
    out = subprocess.run([str(exe), "doctor", "--json", "--home", str(home / "home")], capture_output=True, text=True, timeout=300)
    doctor = json.loads(out.stdout or "{}")
    print("bundle doctor:", json.dumps(doctor))
    ok = True
    if kind == "cpu":
        ok = not doctor.get("torch_installed") and str(doctor.get("engine", "")).startswith("OpenVINO")
        print("CPU edition without PyTorch, default model on OpenVINO:", "yes" if ok else "NO")
    photos = home / "photos"
    photos.mkdir()
    src = sorted((ROOT.parent / "shared" / "data" / "ukbench").glob("*.jpg"))[:16]
    for p in src:
        shutil.copy(p, photos / p.name)
    shot = ROOT / "dist" / "bundle-screenshot.png"
    args = [str(exe), "--home", str(home / "home"), "--screenshot", str(shot)]
    if src:
        args += ["--index", str(photos), "--query", str(photos / src[1].name)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=900, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    print("bundle --screenshot:", out.stdout.strip().splitlines()[-1:] or out.stderr[-500:])
    shutil.rmtree(home, ignore_errors=True)
    return 0 if shot.exists() and ok else 1


if __name__ == "__main__":
    sys.exit(main())
