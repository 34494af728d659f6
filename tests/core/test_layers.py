"""The window is a client of the library service: nothing under app/gui imports the library's
writer or the catalog (whose SQL only the service's writer thread and its readers run), so no
widget can write the library or query the catalog on the GUI thread."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("app.core.library.writer", "app.core.catalog")


def imported_modules(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `path` (a module of `package`, by default
    where it lies under the checkout), relative ones resolved."""
    package = package or ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]  # `from ..core import catalog`
    return out


def test_the_gui_imports_neither_the_writer_nor_the_catalog():
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
