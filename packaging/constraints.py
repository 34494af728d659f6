"""packaging/constraints.txt: the exact versions CI tested, for the run-time, test and packaging
dependencies (pyproject.toml's, and theirs), written from the environment that passed.

    .venv/bin/python packaging/constraints.py            # rewrite it from .venv (after `make test` passed)
    .venv/bin/python packaging/constraints.py --check    # exit 1, naming them, where .venv differs

`make` installs with `-c packaging/constraints.txt`, so a new release of anything (PySide6 6.12.0
once broke the app) arrives only by a change to this file, which CI runs.
"""
from __future__ import annotations

import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "packaging" / "constraints.txt"
EXTRAS = ("test", "scale", "onnxruntime", "package")
HEADER = """\
# The versions CI tested (pip constraints: they pin, they install nothing by themselves).
# Used by the Makefile: pip install -c packaging/constraints.txt -e '.[test]'.
# Written by `.venv/bin/python packaging/constraints.py` from the environment that passed `make test`;
# see CONTRIBUTING.md ("Dependency versions") to move one. Platform-only packages (nvidia-*, triton)
# constrain only where they are installed.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def roots(pyproject: Path = ROOT / "pyproject.toml") -> list[Requirement]:
    """pyproject.toml's requirements: the dependencies and those of EXTRAS (not itself)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in EXTRAS:
        reqs += [Requirement(r) for r in project.get("optional-dependencies", {}).get(extra, [])]
    return [r for r in reqs if canonical(r.name) != "heatsearch"]


def closure(reqs: list[Requirement]) -> dict[str, md.Distribution]:
    """The installed distributions these requirements need here, and theirs (with their extras)."""
    found: dict[str, md.Distribution] = {}
    todo = [(r, "") for r in reqs]
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req, from_extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": from_extra}):
            continue
        key = (canonical(req.name), frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            raise SystemExit(f"constraints: {req.name} is not installed (make test installs it first)") from None
        found[canonical(req.name)] = dist
        for line in dist.requires or ():
            sub = Requirement(line)
            extras = [""] + sorted(req.extras)
            for e in extras:
                if sub.marker is None or sub.marker.evaluate({"extra": e}):
                    todo.append((Requirement(str(sub).split(";")[0]), ""))
                    break
    return found


def pins() -> dict[str, str]:
    return {name: dist.version for name, dist in sorted(closure(roots()).items())}


def read(path: Path = OUT) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version.strip()
    return out


def main(argv: list[str]) -> int:
    now = pins()
    if "--check" in argv:
        pinned = read()
        wrong = [f"{n} {v} (pinned {pinned.get(n, 'not at all')})" for n, v in now.items() if pinned.get(n) != v]
        if wrong:
            print("constraints: this environment differs from packaging/constraints.txt: " + ", ".join(wrong))
            return 1
        print(f"constraints: {len(now)} pins, as installed")
        return 0
    OUT.write_text(HEADER + "".join(f"{n}=={v}\n" for n, v in now.items()))
    print(f"constraints: {len(now)} pins written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
