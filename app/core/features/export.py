"""Export a backbone to ONNX with dynamic batch, height and width, and check it against PyTorch.

    python -m app.core.features.export NAME WEIGHTS_FILE_OR_EMPTY WEIGHTS_DIGEST OUT.onnx

Run in a child process by `engine.ensure_onnx` (and by packaging/build.py for the bundle). The
weights are read once, checked against the digest the library knows them by, and the network is
built from those very bytes (a file replaced meanwhile is refused, never cached under the old
digest). Writes OUT.onnx atomically, only after the exported model matched PyTorch within 1e-4
(relative to the largest activation) on an even and an odd input size (a model traced with its
padding frozen to one size fails instead of being cached), then its record: the file's digest and
PyTorch's output for the probe input (modelcache.py), which every later load is checked against.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..errors import WeightsLoadError
from . import modelcache
from .registry import load_backbone

OPSET = 17
TOLERANCE = 1e-4
WEIGHTS_UNUSABLE = 3  # the exit status when the weights file itself cannot be used (untrained, another network)
CHECK_SIZES = ((1, 3, 96, 128), (1, 3, 131, 77))


def _module(name: str, weights: str | None, digest: str):
    """The network built from the weights bytes whose digest is `digest`."""
    if not weights:
        return load_backbone(name).module.eval()
    data = Path(weights).read_bytes()
    if digest and hashlib.sha256(data).hexdigest()[:16] != digest:
        raise RuntimeError(f"the weights file {weights} changed (its digest is not {digest})")
    with tempfile.TemporaryDirectory(prefix="heatsearch-export-") as d:
        copy = Path(d) / Path(weights).name
        copy.write_bytes(data)
        try:
            return load_backbone(name, str(copy)).module.eval()
        except WeightsLoadError as e:  # named by the user's path, not the private copy's
            raise WeightsLoadError(str(e).replace(str(copy), weights)) from e


def export(name: str, weights: str | None, out: Path, digest: str = "") -> float:
    """Export and verify; returns the largest relative difference seen. Raises RuntimeError."""
    import torch  # this module runs in the export's own process (engine.ensure_onnx): the app never loads PyTorch

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    module = _module(name, weights, digest)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    x = torch.zeros(*CHECK_SIZES[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # the TorchScript exporter: ~1 s, and it traces the shape arithmetic of the padding
            torch.onnx.export(module, (x,), str(tmp), input_names=["image"], output_names=["features"],
                              dynamic_axes={"image": {0: "batch", 2: "height", 3: "width"}}, opset_version=OPSET,
                              dynamo=False)
        except Exception:  # noqa: BLE001 - a torch without it: the torch.export-based exporter (~30 s)
            dim_h = torch.export.Dim("height", min=16, max=8192)
            dim_w = torch.export.Dim("width", min=16, max=8192)
            torch.onnx.export(module, (x,), str(tmp), input_names=["image"], output_names=["features"],
                              dynamic_shapes={"x": {2: dim_h, 3: dim_w}}, dynamo=True, external_data=False)
    worst = 0.0
    try:
        run = _runner(tmp)
        for shape in CHECK_SIZES:
            inp = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
            with torch.inference_mode():
                ref = module(inp).numpy()
            got = run(inp.numpy())
            if got.shape != ref.shape:
                raise RuntimeError(f"exported model gives {got.shape} for {shape}, PyTorch {ref.shape}")
            worst = max(worst, float(np.abs(got - ref).max() / max(float(np.abs(ref).max()), 1e-12)))
        if worst > TOLERANCE:
            raise RuntimeError(f"exported model differs from PyTorch by {worst:.2e} (> {TOLERANCE})")
        with torch.inference_mode():
            reference = module(torch.from_numpy(modelcache.probe_input())).numpy()
        os.replace(tmp, out)
        modelcache.write_record(out, [out], reference)
    finally:
        if tmp.exists():
            tmp.unlink()
    return worst


def _runner(path: Path):
    """A function running the ONNX file with whichever runtime is installed (each is optional)."""
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda a: sess.run(None, {sess.get_inputs()[0].name: a})[0]
    except ImportError:
        import openvino as ov

        compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        return lambda a: np.asarray(compiled({0: a})[0])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 4:
        print("usage: python -m app.core.features.export NAME WEIGHTS_FILE_OR_EMPTY WEIGHTS_DIGEST OUT.onnx", file=sys.stderr)
        return 2
    name, weights, digest, out = argv
    try:
        worst = export(name, weights, Path(out), digest)
    except WeightsLoadError as e:  # the file itself cannot be used: no engine could run it (ensure_onnx)
        print(str(e).splitlines()[0], file=sys.stderr)
        return WEIGHTS_UNUSABLE
    except Exception as e:  # noqa: BLE001 - one line for the parent's log
        print(f"export failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    print(f"exported {name} to {out} (max relative difference to PyTorch {worst:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
