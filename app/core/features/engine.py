"""Inference engines: one small interface (prepared batch -> feature maps) over PyTorch (the
reference; CPU, CUDA, MPS), ONNX Runtime and OpenVINO.

    engine.run(x)   x: (B, 3, H, W) float32 numpy  ->  (B, C, h, w) float32 numpy, every value >= 0

Exact engines (f32) give the same feature maps as PyTorch on the CPU to ~1e-5 relative and share
its descriptor space: switching between them needs no re-index. Reduced precision ("fastest":
bf16 on a CPU that has it; "int8": OpenVINO on the CPU) is its own descriptor space; an int8
model is the library's own (quantise.py), handed in as bytes.

The CPU runtimes run an ONNX export of the backbone with dynamic height and width. The export is
made once per (backbone, weights digest, export format), in a child process so that this process
never imports PyTorch on the default path, checked against PyTorch on two input sizes, and cached
in the models folder. A runtime that is missing, or an export or load that fails, falls back to
PyTorch with one log line.
"""
from __future__ import annotations

import copy
import importlib.util
import os
import platform
import shutil
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import EngineError, WeightsLoadError
from . import modelcache
from .export import WEIGHTS_UNUSABLE
from .registry import Backbone, child_python

ENGINES = ("torch", "onnxruntime", "openvino")
# Bumped whenever the exported graph changes (padding, opset, output); part of the cache key.
EXPORT_FORMAT = 2
# "auto" on the CPU takes the first exact runtime installed, in this order. Measured on the
# development machine (2 cores, AVX2, Lite2 at 1024x768): OpenVINO 340 ms, ONNX Runtime 403 ms,
# PyTorch 879 ms per photo (benchmarks/index_throughput.py prints the current figures).
CPU_PREFERENCE = ("openvino", "onnxruntime", "torch")
PLAIN_NAMES = {"torch": "PyTorch", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}
# Input shapes whose compiled kernels OpenVINO's CPU plugin keeps (its default keeps 5,000): photos
# keep their aspect, so a library of mixed cameras feeds hundreds of shapes, each held for good.
# 1,852 mixed photos left the indexing service at 867 MB resident (peak 967) with the default, at 408
# MB (peak 548) keeping 32, indexing in the same time (228 against 232 s; a library's common shapes
# stay cached). Intel Xeon (Sapphire Rapids), 2 cores: python benchmarks/gui_memory.py --distractors.
SHAPE_CACHE = 32


def installed(name: str) -> bool:
    """Whether the runtime `name` can be imported (without importing it)."""
    return importlib.util.find_spec(name) is not None


def available_engines() -> list[str]:
    return [e for e in ENGINES if installed(e)]


def threads() -> int:
    """CPU threads for inference: $HEATSEARCH_THREADS, else every core the process may use."""
    env = os.environ.get("HEATSEARCH_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _may_have_accelerator() -> bool:
    """A cheap look before importing PyTorch (460 MB): an NVIDIA driver, or an Apple-silicon Mac."""
    if sys.platform == "darwin":
        return platform.machine() == "arm64"
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


def accelerator() -> str | None:
    """'cuda' or 'mps' when PyTorch is installed and sees one, else None. PyTorch is imported only
    where an accelerator may exist, so a CPU-only machine never loads it for this question."""
    if not installed("torch") or not _may_have_accelerator():
        return None
    import torch  # (the runtimes below are imported where an engine is built: each is optional, PyTorch 460 MB)

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return None


def available_devices() -> list[str]:
    """Devices that can run here: 'cpu' and whichever accelerator PyTorch sees."""
    acc = accelerator()
    return ["cpu"] + ([acc] if acc else [])


class Engine:
    """Runs one backbone. name: torch | onnxruntime | openvino; device: cpu | cuda | mps;
    precision: f32 (exact), bf16 or int8 (reduced: its own descriptor space)."""

    name = "?"
    device = "cpu"
    precision = "f32"
    max_batch = 1  # on the CPU one photo per call: batches of 8 were 1.6x slower per photo (Lite2, 2 cores)

    @property
    def exact(self) -> bool:
        return self.precision == "f32"

    @property
    def label(self) -> str:
        """Plain words for the status bar and Settings, e.g. 'OpenVINO on the CPU (exact)'."""
        where = "the CPU" if self.device == "cpu" else f"the GPU ({self.device})"
        return f"{PLAIN_NAMES.get(self.name, self.name)} on {where} ({'exact' if self.exact else self.precision})"

    def run(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class TorchEngine(Engine):
    """The reference: float32 everywhere (TF32 off on CUDA). No fp16 on a GPU: measured on an H100
    (cuDNN 9.19, Lite2 at 512 px), every new input shape cost 1.4-2.7 s in fp16 against 0.07 s in
    float32 (a photo of another size, every box query's crop), for 0.45 against 0.77 ms a photo
    of GPU time once warm, where decoding a photo takes tens of ms (README "Engines")."""

    name = "torch"

    def __init__(self, bb: Backbone, device: str = "cpu"):
        import torch

        self.torch = torch
        if device == "cuda":
            torch.backends.cudnn.allow_tf32 = False  # TF32 convolutions would leave the exact space
            torch.backends.cuda.matmul.allow_tf32 = False
        self.device = device
        self.dev = torch.device(device)
        self.max_batch = 1 if device == "cpu" else 16
        # a copy on a GPU: Module.to moves in place, and the backbone's module is shared (a CPU
        # engine made from it afterwards took a GPU engine's weights back to the CPU)
        self.module = (bb.module if device == "cpu" else copy.deepcopy(bb.module)).to(self.dev).eval()

    def run(self, x: np.ndarray) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            y = self.module(torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(self.dev))
            return y.clamp_min_(0).cpu().numpy()


class OnnxRuntimeEngine(Engine):
    name = "onnxruntime"

    def __init__(self, onnx_path: Path):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads()
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.session = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def run(self, x: np.ndarray) -> np.ndarray:
        y = self.session.run(None, {self.input: np.ascontiguousarray(x, np.float32)})[0]
        return np.maximum(y, 0, out=y)


def cpu_has_bf16() -> bool:
    """Whether OpenVINO can run bf16 natively on this CPU (AVX512-BF16 or AMX)."""
    if not installed("openvino"):
        return False
    import openvino as ov

    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


class OpenVinoEngine(Engine):
    name = "openvino"

    def __init__(self, onnx_path: Path, cache_dir: Path, fastest: bool = False):
        import openvino as ov

        core = ov.Core()
        cache_dir.mkdir(parents=True, exist_ok=True)
        core.set_property({"CACHE_DIR": str(cache_dir)})  # compiled blobs: later loads take a fraction
        self.precision = "bf16" if (fastest and cpu_has_bf16()) else "f32"
        cfg = {"INFERENCE_PRECISION_HINT": self.precision, "INFERENCE_NUM_THREADS": str(threads()),
               "PERFORMANCE_HINT": "LATENCY", "CPU_RUNTIME_CACHE_CAPACITY": str(SHAPE_CACHE)}
        self.compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", cfg)
        self.request = self.compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request: the indexer and a search take turns

    def run(self, x: np.ndarray) -> np.ndarray:
        with self._lock:
            y = self.request.infer({0: np.ascontiguousarray(x, np.float32)})[0]
            y = np.array(y, dtype=np.float32, copy=True)  # the request reuses its output buffer
        return np.maximum(y, 0, out=y)


def pack(xml: bytes, weights: bytes) -> bytes:
    """An int8 model as a library stores it (quantise.py): 8-byte xml length, xml, weights."""
    return struct.pack("<Q", len(xml)) + xml + weights


def unpack(blob: bytes) -> tuple[bytes, bytes]:
    """(xml, weights) of a packed model; EngineError when it is not one."""
    if len(blob) < 8:
        raise EngineError("the library's 8-bit model is empty")
    n = struct.unpack("<Q", blob[:8])[0]
    if n > len(blob) - 8:
        raise EngineError("the library's 8-bit model is cut short")
    return blob[8: 8 + n], blob[8 + n:]


class QuantisedEngine(OpenVinoEngine):
    """A library's int8 model (quantise.py; `blob` checked against its digest by the catalog),
    read from memory and compiled without the compiled-model cache: nothing on disk to trust."""

    precision = "int8"

    def __init__(self, blob: bytes):
        import openvino as ov

        self.blob = blob  # handed on to Ray workers (pipeline/distributed.py)
        xml, weights = unpack(blob)
        core = ov.Core()
        model = core.read_model(xml.decode("utf-8"), ov.Tensor(np.frombuffer(weights, np.uint8).copy()))
        # f32 for what is not quantised: OpenVINO's default on a bf16 CPU is bf16, which moved the
        # maps by 16 % of the largest activation; the same library on another CPU must match
        self.compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                          "INFERENCE_NUM_THREADS": str(threads()),
                                                          "CPU_RUNTIME_CACHE_CAPACITY": str(SHAPE_CACHE)})
        self.request = self.compiled.create_infer_request()
        self._lock = threading.Lock()


# ---- ONNX export cache ------------------------------------------------------------------------

def onnx_name(bb: Backbone) -> str:
    """The export's file name: backbone, weights digest, export format and the code that builds it."""
    return f"{bb.name}-{bb.weights_digest}-f{EXPORT_FORMAT}-{modelcache.code_version()}.onnx"


def openvino_model(bb: Backbone, models_dir: Path, log: Callable[[str], None] = print) -> Path:
    """The model file OpenVINO reads for `bb`: a bundled OpenVINO IR (.xml, converted at build
    time: the CPU edition ships no PyTorch and no ONNX frontend) whose record holds, else the ONNX
    export."""
    ir = bundled_models_dir() / onnx_name(bb).replace(".onnx", ".xml")
    if ir.is_file() and modelcache.files_ok(ir):
        return ir
    return ensure_onnx(bb, models_dir, log)


def needs_export(bb: Backbone, choice: "EngineChoice", models_dir: Path) -> bool:
    """Whether the first use of `bb` with `choice` exports it (registry `setup` seconds): a CPU
    runtime with no model file of it here, bundled or cached (not checked against its record)."""
    try:
        first = choice.candidates()[:1]
    except EngineError:
        return False
    if not first or first[0] == "torch" or not installed(first[0]):  # (PyTorch exports nothing)
        return False
    name = onnx_name(bb)
    return not any(p.is_file() for p in (bundled_models_dir() / name.replace(".onnx", ".xml"),
                                         bundled_models_dir() / name, models_dir / name))


def bundled_models_dir() -> Path:
    """Exported models shipped with a bundle (resources/models), or beside a checkout."""
    base = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parents[3]))
    return base / "resources" / "models"


def ensure_onnx(bb: Backbone, models_dir: Path, log: Callable[[str], None] = print, timeout: float = 600,
                fresh: bool = False) -> Path:
    """The ONNX file of `bb` (dynamic height and width): bundled or cached when its files match
    their record, else exported now (a cached one that does not match is said once and replaced).
    fresh: export again whatever is cached.

    The export runs in a child process (`python -I` on `app.core.features.export`): PyTorch stays
    out of this process, a crash or hang of the exporter cannot take the app with it, and neither
    the current folder nor PYTHONPATH can put other code in its way. Raises EngineError when it
    cannot be made."""
    name = onnx_name(bb)
    bundled = bundled_models_dir() / name
    if bundled.is_file() and modelcache.files_ok(bundled) and not fresh:
        return bundled
    out = models_dir / name
    if out.is_file() and not fresh:
        if modelcache.files_ok(out):
            return out
        log(f"the saved model for {bb.name} does not match its record (damaged or replaced): preparing it again")
    modelcache.forget(out)
    if not installed("torch"):
        raise EngineError(f"no exported model for {bb.name} and PyTorch is not installed to make one")
    if getattr(sys, "frozen", False):
        raise EngineError("this build cannot export models")
    models_dir.mkdir(parents=True, exist_ok=True)
    log("setting up the photo analyser (once: up to a minute)")
    weights = ("", "") if bb.spec.fixed_digest else (bb.weights_path, bb.weights_digest)  # a network made, not read
    cmd = child_python("from app.core.features.export import main; sys.exit(main())", bb.name, *weights, str(out))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=models_dir)
    except subprocess.TimeoutExpired as e:
        raise EngineError(f"the model export took longer than {timeout:.0f} s") from e
    if r.returncode == WEIGHTS_UNUSABLE:  # no engine can run this file: said once, in the loader's words
        raise WeightsLoadError((r.stderr.strip().splitlines() or ["the weights file cannot be used"])[-1][:400])
    if r.returncode != 0 or not out.is_file() or not modelcache.files_ok(out):
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"the model export failed: {last[:300]}")
    return out


def _checked(name: str, bb: Backbone, models_dir: Path, choice: "EngineChoice", log) -> Engine:
    """A CPU runtime's engine whose output on the probe is the reference recorded at export: else
    the runtime's compiled cache is dropped, then the model exported again (each said once)."""
    cache = models_dir / "openvino-cache"

    def build(fresh: bool = False) -> tuple[Engine, Path]:
        if name == "onnxruntime":
            path = ensure_onnx(bb, models_dir, log, fresh=fresh)
            return OnnxRuntimeEngine(path), path
        path = ensure_onnx(bb, models_dir, log, fresh=True) if fresh else openvino_model(bb, models_dir, log)
        return OpenVinoEngine(path, cache, choice.fastest), path

    eng, path = build()
    if modelcache.output_ok(eng, path):
        return eng
    if name == "openvino":
        log(f"OpenVINO's compiled copy of {bb.name} gives wrong results (a damaged cache): compiling it again")
        modelcache.clear(cache)
        eng, path = build()
        if modelcache.output_ok(eng, path):
            return eng
    log(f"the saved model for {bb.name} gives wrong results (damaged or replaced): preparing it again")
    eng, path = build(fresh=True)
    if modelcache.output_ok(eng, path):
        return eng
    raise EngineError(f"{PLAIN_NAMES[name]} does not reproduce {bb.name}'s reference output")


# ---- choosing and creating ------------------------------------------------------------------

@dataclass(frozen=True)
class EngineChoice:
    """What the user asked for. engine: auto | torch | onnxruntime | openvino;
    device: auto | cpu | cuda | mps; fastest: reduced precision allowed (own descriptor space)."""

    engine: str = "auto"
    device: str = "auto"
    fastest: bool = False

    def resolve_device(self) -> str:
        if self.device in ("", "auto"):
            return accelerator() or "cpu"
        if self.device != "cpu" and self.device.split(":")[0] not in available_devices():
            raise EngineError(f"device '{self.device}' is not available here (available: {', '.join(available_devices())})")
        return self.device

    def candidates(self) -> list[str]:
        """Engines to try, best first: the one asked for, then the fallback to PyTorch."""
        dev = self.resolve_device()
        if self.engine not in ("auto", *ENGINES):
            raise EngineError(f"unknown engine '{self.engine}' (auto, {', '.join(ENGINES)})")
        if dev != "cpu":
            if self.engine not in ("auto", "torch"):
                raise EngineError(f"{PLAIN_NAMES[self.engine]} runs on the CPU here; use the GPU with PyTorch (engine auto)")
            return ["torch"]
        if self.engine == "auto":
            return [e for e in CPU_PREFERENCE if installed(e)]
        return [self.engine] + (["torch"] if self.engine != "torch" else [])


def precision_of(choice: EngineChoice) -> str:
    """The precision an engine made for `choice` will run at (part of the descriptor space), known
    without building it: bf16 on a bf16 CPU when `fastest`, else f32 (a GPU runs float32:
    TorchEngine). (int8 is asked for by name: Settings.precision "int8".)"""
    if not choice.fastest:
        return "f32"
    if choice.resolve_device() == "cpu" and "openvino" in choice.candidates()[:1] and cpu_has_bf16():
        return "bf16"
    return "f32"


def int8_available() -> bool:
    """Whether an int8 model can be made here: OpenVINO and NNCF installed, not a bundle (which
    cannot start the Python child that tunes it; a bundle still runs a library's stored model)."""
    return installed("openvino") and installed("nncf") and not getattr(sys, "frozen", False)


def create_engine(bb: Backbone, choice: EngineChoice, models_dir: Path, log: Callable[[str], None] = print,
                  quantised: bytes | None = None) -> Engine:
    """Build the engine for `bb`: the first candidate that works. A failure of a CPU runtime (not
    installed, export or load failed) logs one line and falls back to PyTorch. quantised: a
    library's int8 model (quantise.py), run by OpenVINO on the CPU whatever `choice` says.
    Raises EngineError when nothing can run it (e.g. no PyTorch and no exported model)."""
    if quantised is not None:
        if not installed("openvino"):
            raise EngineError("this library's vectors were made by an 8-bit model, which needs OpenVINO")
        try:
            return QuantisedEngine(quantised)
        except EngineError:
            raise
        except Exception as e:  # noqa: BLE001 - a blob OpenVINO cannot read: one line
            raise EngineError(f"the library's 8-bit model cannot be read: {str(e).splitlines()[0][:200]}") from e
    dev = choice.resolve_device()
    errors = []
    for name in choice.candidates():
        try:
            if name == "torch":
                if not installed("torch"):
                    raise EngineError("PyTorch is not installed")
                return TorchEngine(bb, dev)
            if not installed(name):
                raise EngineError(f"{PLAIN_NAMES[name]} is not installed")
            return _checked(name, bb, models_dir, choice, log)
        except WeightsLoadError:  # the weights file itself: every engine would fail on it
            raise
        except Exception as e:  # noqa: BLE001 - any failure of an optional runtime means: fall back
            msg = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            errors.append(f"{PLAIN_NAMES[name]}: {msg}")
            if name != "torch":
                log(f"{PLAIN_NAMES[name]} unavailable for {bb.name} ({msg}); falling back")
    raise EngineError(f"no engine can run {bb.name}: " + "; ".join(errors))
