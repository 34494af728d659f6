"""Build the one-folder bundle (dist/heatsearch/) and smoke-test it: --version and --screenshot.

    make bundle        # creates .venv, installs PyInstaller, runs this script
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main() -> int:
    t = time.time()
    subprocess.run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--distpath", str(ROOT / "dist"),
                    "--workpath", str(ROOT / "build"), str(ROOT / "packaging" / "heatsearch.spec")], check=True, cwd=ROOT)
    took = time.time() - t
    exe = ROOT / "dist" / "heatsearch" / ("heatsearch.exe" if os.name == "nt" else "heatsearch")
    print(f"bundle built in {took / 60:.1f} min: {exe.parent} ({du(exe.parent) / 2**30:.2f} GiB)")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=300)
    print("bundle --version:", out.stdout.strip() or out.stderr.strip())
    home = Path(tempfile.mkdtemp(prefix="hs-bundle-"))
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
    return 0 if shot.exists() else 1


if __name__ == "__main__":
    sys.exit(main())
