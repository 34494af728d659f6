"""THIRD-PARTY-NOTICES for the bundle, made from the installed distributions themselves
(importlib.metadata): for each one the bundle ships, its name, version, licence as its metadata
states it, home page, and every licence file it installs (LICENSE, COPYING, NOTICE, ... and the
texts of the libraries it vendors). A distribution that names its licence but ships no text of it
(PySide6, shiboken6: LGPL-3.0) gets the standard text from packaging/licenses/.

    owners(files)                  the distributions that installed these files (the bundle's)
    expected_distributions(...)    what the spec ships, known without a build (the fast test)
    notices(dists) -> (text, missing)
"""
from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys
import tomllib
from functools import lru_cache
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LICENSES = Path(__file__).resolve().parent / "licenses"
SELF = "heatsearch"  # the app: its own LICENSE (MIT), shipped beside these notices
LICENSE_FILE = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|COPYRIGHT|AUTHORS)", re.I)
# standard texts, for a licence named in metadata (SPDX) without a file of it (the LGPL's text
# builds on the GPL's, so both)
STANDARD = {"LGPL-3.0": ("LGPL-3.0.txt", "GPL-3.0.txt")}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def _installed() -> dict[str, md.Distribution]:
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist)  # the first on sys.path, as import finds it
    return found


def distribution(name: str) -> md.Distribution:
    try:
        return _installed()[canonical(name)]
    except KeyError:
        raise LookupError(f"the distribution {name} is not installed") from None


@lru_cache(maxsize=1)
def _file_owners() -> dict[str, str]:
    """Every installed file (real path) -> the canonical name of the distribution that installed it."""
    owner: dict[str, str] = {}
    for name, dist in _installed().items():
        if name == SELF:
            continue
        base = os.path.realpath(dist.locate_file(""))
        for f in dist.files or ():
            owner.setdefault(os.path.normpath(os.path.join(base, str(f))), name)
    return owner


def owners(files) -> set[str]:
    """The distributions that installed any of `files` (the app's own files and the standard
    library belong to none)."""
    table = _file_owners()
    return {table[p] for p in (os.path.normpath(os.path.realpath(f)) for f in files) if p in table}


def unowned(files) -> list[str]:
    """The files no distribution installed (the standard library, the build machine's libraries)."""
    table = _file_owners()
    return [f for f in files if os.path.normpath(os.path.realpath(f)) not in table]


def _top_level(dist: md.Distribution) -> set[str]:
    names = set((dist.read_text("top_level.txt") or "").split())
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if len(parts) > 1 and not parts[0].endswith((".dist-info", ".data", ".libs")) and parts[0] != "..":
            names.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py"):
            names.add(parts[0][:-3])
    return names


def _requires(dist: md.Distribution) -> list[str]:
    """The names of what `dist` needs at run time here (no extras; markers for this platform)."""
    out = []
    for line in dist.requires or ():
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(req.name)
    return out


def expected_distributions(hiddenimports, excludes, datas, pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """The distributions the bundle ships, as the spec and pyproject.toml say without a build:
    the app's run-time dependencies and theirs, those of the modules the spec names and of its
    data files; less those whose every module the spec excludes (not followed further)."""
    excluded_mods = {m for m in excludes if "." not in m}  # (a submodule left out leaves its distribution in)

    def excluded(name: str) -> bool:  # (torch's distribution also holds functorch and torchgen)
        return bool(_top_level(distribution(name)) & excluded_mods)

    def ships_nothing(name: str) -> bool:  # a meta-package: its metadata only
        return all(".dist-info" in str(f) for f in distribution(name).files or ())

    start = [Requirement(r).name for r in tomllib.loads(pyproject.read_text())["project"]["dependencies"]
             if Requirement(r).marker is None or Requirement(r).marker.evaluate({"extra": ""})]
    by_module = md.packages_distributions()
    for mod in hiddenimports:
        start += by_module.get(mod.split(".")[0], [])
    start += sorted(owners(src for src, _dest in datas if Path(src).is_file()))
    seen: set[str] = set()
    todo = [canonical(n) for n in start]
    while todo:
        name = todo.pop()
        if name in seen or name == SELF or excluded(name):
            continue
        seen.add(name)
        todo += [canonical(n) for n in _requires(distribution(name))]
    return {name for name in seen if not ships_nothing(name)}


def heading(name: str) -> str:
    dist = distribution(name)
    return f"{dist.metadata['Name']} {dist.version}"


def licence_name(dist: md.Distribution) -> str:
    meta = dist.metadata
    expr = (meta.get("License-Expression") or "").strip()
    if expr:
        return expr
    lic = (meta.get("License") or "").strip()
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    if lic and lic.upper() != "UNKNOWN" and "\n" not in lic and len(lic) < 100:
        return lic
    return "; ".join(classifiers) or "as the text below states"


def licence_texts(dist: md.Distribution) -> list[tuple[str, str]]:
    """(file, text) of every licence file the distribution installed (by name, or under its
    .dist-info/licenses/ folder, PEP 639), each text once."""
    texts, seen = [], set()
    for f in sorted(dist.files or (), key=lambda f: (len(Path(str(f)).parts), str(f))):
        name = Path(str(f)).name
        in_licenses = any(part.endswith(".dist-info") for part in Path(str(f)).parts[:1]) and "licenses" in Path(str(f)).parts
        if not (LICENSE_FILE.match(name) or in_licenses) or name.endswith((".py", ".pyc", ".so", ".pyd", ".dll", ".html")):
            continue
        try:
            text = dist.locate_file(f).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text and text not in seen:
            seen.add(text)
            texts.append((str(f), text))
    if not texts:
        expr = licence_name(dist)
        for spdx, files in STANDARD.items():
            if spdx in expr:
                texts += [(f"standard text of {spdx} (packaging/licenses/{f})", (LICENSES / f).read_text().strip())
                          for f in files]
    return texts


def _home(dist: md.Distribution) -> str:
    meta = dist.metadata
    if meta.get("Home-page"):
        return meta["Home-page"]
    urls = [u.split(",", 1)[-1].strip() for u in meta.get_all("Project-URL") or []]
    return urls[0] if urls else ""


def python_notice() -> tuple[str, str] | None:
    """The Python interpreter and standard library the bundle carries (the PSF licence)."""
    for p in (Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "LICENSE.txt",
              Path(sys.base_prefix) / "LICENSE.txt"):
        if p.is_file():
            return f"Python {sys.version.split()[0]}", p.read_text(errors="replace").strip()
    return None


def notices(dists, others=()) -> tuple[str, list[str]]:
    """The notices' text for the distributions `dists`, and those for which no licence text was
    found (the build fails on them). others: file names shipped that no distribution installed."""
    rule = "=" * 78
    parts = ["THIRD-PARTY NOTICES",
             "",
             "HeatSearch (MIT licence: LICENSE.txt beside this file) is distributed with the software below.",
             "For each: its name and version, its licence as its own metadata states it, and the licence",
             "texts it installs (its own, and those of the libraries it carries). The LGPL libraries",
             "(Qt for Python, libheif, LibRaw) are shared libraries in this folder and may be replaced."]
    missing = []
    for name in sorted(dists, key=lambda n: heading(n).lower()):
        dist = distribution(name)
        texts = licence_texts(dist)
        if not texts:
            missing.append(name)
        parts += ["", rule, heading(name), rule, f"Licence: {licence_name(dist)}"]
        if _home(dist):
            parts.append(f"Home: {_home(dist)}")
        for f, text in texts:
            parts += ["", f"--- {f} ---", text]
    py = python_notice()
    if py is not None:
        parts += ["", rule, py[0], rule, "Licence: PSF-2.0 (the interpreter and its standard library)", "", py[1]]
    if others:
        parts += ["", rule, "Other files", rule,
                  "Libraries copied from the build machine (no Python distribution installed them; their",
                  "licences are those of the operating system's packages):", ""]
        parts += [f"  {o}" for o in sorted(set(others))]
    return "\n".join(parts) + "\n", missing
