"""8-bit (int8) models: OpenVINO's model quantised by NNCF (post-training, fast bias correction),
calibrated on photos of the library it will index; its other layers run in f32 (engine.py).

    blob = quantise(bb, photo_paths, max_side, models_dir, log, cancelled)   # once per library space
    xml, weights = unpack(blob)                                              # what OpenVINO reads

The model is a library's data, not a cache: a quantised model depends on its calibration photos,
so the same library gets the same model on every machine only if the model travels with it. It is
stored in the catalog with its space (packed: 8-byte xml length, xml, weights) under its SHA-256,
and checked against it whenever it is loaded (Catalog.space_model).

Quantising runs in a child process (`python -I`, like the ONNX export): NNCF imports PyTorch when
it is installed (+700 MB), and a crash or hang cannot take the app with it. The child decodes the
photos itself, one at a time (300 prepared photos would be 700 MB of float32), at the size the
library analyses them.
"""
from __future__ import annotations

import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import EngineError
from ..imageio import image_size
from .engine import int8_available, openvino_model, pack
from .preprocess import load_prepared
from .registry import Backbone

CALIBRATION_PHOTOS = 300  # measured with 300 (README, "Precision")
TIMEOUT_S = 1200


def quantise(bb: Backbone, photos: list[str], max_side: int, models_dir: Path, log: Callable[[str], None] = print,
             cancelled: Callable[[], bool] = lambda: False,
             steps: Callable[[int, int], None] = lambda done, total: None) -> bytes | None:
    """The packed int8 model of `bb`, calibrated on (at most CALIBRATION_PHOTOS of) `photos` at
    `max_side`; None when cancelled. Raises EngineError when it cannot be made. `steps(done,
    total)` is told every tenth of a second how many of the calibration photos NNCF has
    prepared (its one pass over them; ~6 s of imports come first)."""
    if not int8_available():
        raise EngineError("an 8-bit model cannot be made here: it needs OpenVINO and NNCF (pip install nncf), "
                          "outside the app bundle")
    if not photos:
        raise EngineError("no photos to tune the 8-bit model on")
    base = openvino_model(bb, models_dir, log)
    if len(photos) > CALIBRATION_PHOTOS:  # a spread of the run, the same one every time
        photos = random.Random(0).sample(photos, CALIBRATION_PHOTOS)
    log(f"tuning the 8-bit model on {len(photos)} photos (once)")  # short: the status line shows it
    root = str(Path(__file__).resolve().parents[3])
    models_dir.mkdir(parents=True, exist_ok=True)
    for old in models_dir.glob("heatsearch-int8-*"):  # left by a run killed meanwhile (none lives this long)
        if time.time() - old.stat().st_mtime > TIMEOUT_S:
            shutil.rmtree(old, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="heatsearch-int8-", dir=models_dir) as d:
        listing = Path(d) / "photos.txt"
        # NUL-separated, bytes as the file system has them (any name survives, a newline included)
        listing.write_bytes(b"\0".join(p.encode("utf-8", "surrogateescape") for p in photos))
        out = Path(d) / "model.xml"
        code = f"import sys; sys.path.insert(0, {root!r}); from app.core.features.quantise import main; sys.exit(main())"
        norm = ",".join(str(float(v)) for v in (*bb.mean, *bb.std))
        cmd = [sys.executable, "-I", "-c", code, str(base), str(max_side), norm, str(listing), str(out)]
        errors = Path(d) / "errors.txt"
        with open(errors, "wb") as err_file:
            # stdin: a pipe never written to; the child stops at its end (this process gone).
            # Its output goes to a file: a pipe nobody reads could fill and block it.
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err_file, cwd=d)
            t0 = time.monotonic()
            counted = Path(d) / "steps"  # the child's count of photos prepared
            try:
                while proc.poll() is None:
                    steps(_count(counted), len(photos))
                    if cancelled() or time.monotonic() - t0 > TIMEOUT_S:
                        proc.kill()
                        proc.wait()
                        if cancelled():
                            return None
                        raise EngineError(f"tuning the 8-bit model took longer than {TIMEOUT_S} s")
                    time.sleep(0.1)
            finally:
                proc.stdin.close()
        weights = out.with_suffix(".bin")
        if proc.returncode != 0 or not out.is_file() or not weights.is_file():
            last = (errors.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise EngineError(f"the 8-bit model could not be made: {last[:300]}")
        return pack(out.read_bytes(), weights.read_bytes())


def _count(path: Path) -> int:
    """The number in `path` (0 while it is not there or half written)."""
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _make(base: str, max_side: int, mean: tuple, std: tuple, listing: Path, out: Path) -> int:
    """In the child: quantise the OpenVINO model `base` on the listed photos, prepared with the
    model's `mean` and `std`; returns how many photos could be read (a photo that cannot is left
    out of the calibration)."""
    import nncf  # in the child only: NNCF imports PyTorch when it is installed (+700 MB)
    import openvino as ov

    paths = [p.decode("utf-8", "surrogateescape") for p in listing.read_bytes().split(b"\0") if p]
    readable = []
    for p in paths:  # a cheap pass first: NNCF iterates the data twice and cannot skip an item
        try:
            image_size(p)
            readable.append(p)
        except Exception:  # noqa: BLE001 - any photo that cannot be read is left out
            continue
    if not readable:
        raise RuntimeError("none of the calibration photos could be read")

    seen = [0]
    steps = out.with_name("steps")  # photos prepared so far, for the parent's progress

    def transform(p):
        seen[0] += 1
        steps.write_text(str(seen[0]))
        try:
            return load_prepared(p, max_side, mean, std).array[None]
        except Exception:  # noqa: BLE001 - unreadable after all: a mean-grey picture, inside every range
            return np.zeros((1, 3, 64, 64), np.float32)

    model = ov.Core().read_model(base)
    q = nncf.quantize(model, nncf.Dataset(readable, transform), subset_size=len(readable), fast_bias_correction=True)
    ov.save_model(q, str(out))
    return len(readable)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 5:
        print("usage: quantise BASE_MODEL MAX_SIDE MEAN1,MEAN2,MEAN3,STD1,STD2,STD3 PHOTO_LIST OUT.xml", file=sys.stderr)
        return 2
    base, side, norm, listing, out = argv
    v = [float(x) for x in norm.split(",")]

    def orphaned():  # the app was killed (its end of stdin closed): stop too, nobody will read the model
        while os.read(0, 1 << 12):  # the raw descriptor: a buffered stdin's lock stops a clean exit
            pass
        os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()

    logging.disable(logging.WARNING)  # NNCF's progress bars and notes: the parent logs one line
    try:
        n = _make(base, int(side), tuple(v[:3]), tuple(v[3:]), Path(listing), Path(out))
    except Exception as e:  # noqa: BLE001 - one line for the parent's log
        print(f"int8 failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    print(f"quantised on {n} photos")
    return 0
