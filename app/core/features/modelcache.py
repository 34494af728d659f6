"""Exported models are data: each carries a record, checked before it is used.

An export (features/export.py) writes, beside `<name>.onnx`, a record `<name>.json` with the
SHA-256 of every file of the model and `<name>.probe.npy`: PyTorch's own output for a fixed probe
input. Before an engine is trusted:
1. the files must match their digests (a swapped, truncated or damaged file is caught here), and
2. the engine, as compiled (OpenVINO may load a compiled blob from its cache folder), must give
   the probe's reference output (a damaged runtime cache, a wrong model with the right name).
A model that fails is exported again (one log line); the engine that fails is rebuilt without its
cache. The name of an export carries its format, the weights' digest and a digest of the code that
builds the network, so a changed architecture never reuses an old file.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

FORMAT = 2
PROBE_SHAPE = (1, 3, 96, 128)
PROBE_SEED = 20251123
# f32: the largest difference, relative to the largest activation. Reduced precisions: the RMS of
# the difference relative to the reference's (bf16 on an AVX512-BF16 CPU: 0.054 on the probe, its
# largest single difference 7 % of the largest activation, which the 5 % check this replaced
# refused, so "fastest" fell back to PyTorch there; a wrong or damaged model gives ~1).
TOLERANCE = {"f32": 1e-3, "f16": 0.15, "bf16": 0.15}
_CODE = ("efficientnet_lite.py", "export.py", "registry.py")


def code_version() -> str:
    """8 hex digits over the source files that define how a network is built and exported."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _CODE:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:8]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def probe_input() -> np.ndarray:
    """(1, 3, 96, 128) float32: a fixed, normalised-looking input."""
    return np.random.default_rng(PROBE_SEED).normal(size=PROBE_SHAPE).astype(np.float32)


def record_of(model: Path) -> Path:
    return model.with_name(model.name.rsplit(".", 1)[0] + ".json")


def probe_of(model: Path) -> Path:
    return model.with_name(model.name.rsplit(".", 1)[0] + ".probe.npy")


def write_record(model: Path, files: list[Path], reference: np.ndarray) -> None:
    """Record `files` (the model's) and the probe's reference output beside `model`."""
    np.save(probe_of(model), np.asarray(reference, np.float32))
    rec = {"format": FORMAT, "files": {f.name: sha256(f) for f in files}, "probe": list(PROBE_SHAPE),
           "probe_sha256": sha256(probe_of(model))}
    tmp = record_of(model).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec))
    tmp.replace(record_of(model))


def files_ok(model: Path) -> bool:
    """Whether the model's files and its probe match their record."""
    try:
        rec = json.loads(record_of(model).read_text())
        if rec.get("format") != FORMAT or not rec.get("files"):
            return False
        if sha256(probe_of(model)) != rec["probe_sha256"]:
            return False
        return all(sha256(model.parent / name) == digest for name, digest in rec["files"].items())
    except (OSError, ValueError, KeyError):
        return False


def output_ok(engine, model: Path) -> bool:
    """Whether `engine` gives the probe's reference output (within its precision's tolerance)."""
    try:
        ref = np.load(probe_of(model), allow_pickle=False)
        got = engine.run(probe_input())
    except Exception:  # noqa: BLE001 - an engine that cannot even run the probe is not ok
        return False
    if got.shape != ref.shape or not np.isfinite(got).all():
        return False
    tol = TOLERANCE.get(engine.precision, 1e-3)
    worst = float(np.abs(got - ref).max()) / max(float(np.abs(ref).max()), 1e-6)
    if engine.precision == "f32":
        return worst <= tol
    # and no single value far off (damage to a few weights moves a few values, not the RMS)
    return float(np.linalg.norm(got - ref)) / max(float(np.linalg.norm(ref)), 1e-6) <= tol and worst <= 0.3


def forget(model: Path) -> None:
    """Remove a model, its record, probe and companion files (an IR's .bin)."""
    for p in (model, record_of(model), probe_of(model), model.with_suffix(".bin")):
        if p.exists():
            p.unlink()


def clear(folder: Path) -> None:
    """Empty a runtime cache folder (compiled blobs)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
