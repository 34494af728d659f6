"""The core runs without Qt: every app.core module imports with PySide6 made unimportable."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import app.core

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_without_qt():
    mods = [m.name for m in pkgutil.walk_packages(app.core.__path__, "app.core.")]
    assert len(mods) > 10
    code = (
        "import sys\n"
        "for name in ('PySide6', 'shiboken6', 'PyQt5', 'PyQt6'): sys.modules[name] = None\n"
        f"import importlib\nfor m in {mods!r}: importlib.import_module(m)\n"
        "assert not any(k.startswith('PySide6.') for k in sys.modules)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
