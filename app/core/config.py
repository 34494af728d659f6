"""Where HeatSearch keeps its data, and the user's settings (versioned, validated JSON)."""
from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import platformdirs

from . import policy
from .errors import InputError
from .features.registry import DEFAULT_BACKBONE

SETTINGS_VERSION = 2
# The longer image side fed to the CNN, chosen on every shared set (benchmarks/policies.py --exp
# size; README "Quality"): 512 px beats 640, 768 and 1024 on every Paris column, ties on UKBench
# (photos of 640 px), and costs a quarter of 1024's CNN time. EfficientNet-Lite2 was trained at 260.
DEFAULT_MAX_SIDE = 512


# Settings presets (Settings dialog, "Search quality and speed"), chosen by measurement
# (docs/METHOD.md, "Presets"). Each sets the fields that define the descriptor space; their models
# are built in, so a preset has no weights file (else Balanced, chosen after ResNet50, kept its
# weights file and was refused as "does not match the architecture").
PRESETS = {
    "balanced": {"backbone": DEFAULT_BACKBONE, "weights": "", "max_side": DEFAULT_MAX_SIDE, "precision": "exact",
                 "help": "EfficientNet-Lite2 at the measured best size: the best results on every test set at a third "
                         "of the time of 1024 px"},
    "quality": {"backbone": DEFAULT_BACKBONE, "weights": "", "max_side": 1024, "precision": "exact",
                "help": "Photos analysed at 1024 px: finer detail for small objects, about 2.5x slower indexing"},
    # exact: Lite0 in int8 lost 1.9 mAP on one shared column and indexed no faster end to end (the
    # photos' decoding is most of the time); bf16 was not measured for Lite0 (README "Engines")
    "speed": {"backbone": "efficientnet-lite0", "weights": "", "max_side": 512, "precision": "exact",
              "help": "EfficientNet-Lite0 at 512 px: the smaller model; indexing about 1.2x faster, results a little different"},
}


def home_dir(override: str | os.PathLike | None = None) -> Path:
    """The data folder: --home, else $HEATSEARCH_HOME, else the platform's user data folder
    (platformdirs): $XDG_DATA_HOME/heatsearch (~/.local/share/heatsearch), ~/Library/Application
    Support/HeatSearch, %APPDATA%\\HeatSearch (the roaming one). Never inside a photo folder
    (checked when the library opens and when a folder is added)."""
    if override:
        return Path(override).expanduser().resolve()
    if os.environ.get("HEATSEARCH_HOME"):
        return Path(os.environ["HEATSEARCH_HOME"]).expanduser().resolve()
    return Path(platformdirs.user_data_dir(app_folder_name(), appauthor=False, roaming=True))


def app_folder_name(platform: str = sys.platform) -> str:
    """The data folder's own name: each platform's custom (a lower-case dot-less name on Linux)."""
    return "HeatSearch" if platform == "darwin" or platform.startswith("win") else "heatsearch"


def check_home(home: Path, create: bool = True) -> Path:
    """Check the data folder and create it if needed (create=False: only check, write nothing);
    InputError with a hint when it cannot be used."""
    if home.exists() and not home.is_dir():
        raise InputError(f"the data folder {home} is a file, not a folder; pass another --home")
    if str(home).startswith("/proc/") or str(home) in ("/proc", "/sys", "/dev") or str(home).startswith(("/sys/", "/dev/")):
        raise InputError(f"the data folder {home} is a system folder; pass another --home")
    if not create:
        return home
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise InputError(f"cannot write to the data folder {home}: {e.strerror or e}; pass another --home") from e
    return home


def models_dir(home: Path | None = None) -> Path:
    """Exported models and compiled-engine caches: $HEATSEARCH_MODELS, else <home>/models."""
    if os.environ.get("HEATSEARCH_MODELS"):
        return Path(os.environ["HEATSEARCH_MODELS"]).expanduser()
    return (home or home_dir()) / "models"


CHOICES = {
    "engine": ("auto", "torch", "onnxruntime", "openvino"),
    "precision": ("exact", "fastest", "int8"),
    "qe": ("auto", "on", "off"),
    "her": ("auto", "on", "off"),
    "region_mode": ("auto", "map", "crop", "hybrid"),
    "preset": ("balanced", "quality", "speed", "custom"),
}
LIMITS = {  # field -> (min, max)
    "max_side": (128, 4096), "dim": (0, 4096), "qe_n": (1, 100), "qe_alpha": (0.0, 20.0),
    "her_k": (2, 10000), "top": (1, 5000), "batch_size": (1, 256),
}


class _NotFinite(str):
    """A number in settings.json that is no finite number (1e400, Infinity, -Infinity, NaN), kept as
    written: Python's json reads those as inf/nan, which no setting can hold (int(inf) raises
    OverflowError), so `from_dict` names it and uses the field's default."""


def _json_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


@dataclass
class Settings:
    """Every user option in one place. Fields marked (space) define the descriptor space: changing
    one means re-running the CNN (a new space). `dim` only refits the whitening; the rest act at
    search time. "auto" means the library's policy (docs/METHOD.md, "Policies")."""

    backbone: str = DEFAULT_BACKBONE  # (space)
    weights: str = ""  # (space) a weights file for backbones that need one
    max_side: int = DEFAULT_MAX_SIDE  # (space) longer side fed to the CNN, px
    # (space) "fastest": bf16 on a CPU that has it; "int8": a model tuned to 8-bit on the
    # library's photos (features/quantise.py). Each is its own space.
    precision: str = "exact"
    engine: str = "auto"
    device: str = "auto"
    dim: int = 0  # whitened dimension D; 0 = the size policy
    qe: str = "auto"
    qe_n: int = 2
    qe_alpha: float = 3.0
    her: str = "auto"
    her_k: int = policy.HER_K
    region_mode: str = "auto"
    top: int = 100
    batch_size: int = 8
    preset: str = "balanced"
    version: int = SETTINGS_VERSION
    problems: list[str] = field(default_factory=list, compare=False, repr=False)  # what load() had to fix

    SPACE_FIELDS = ("backbone", "weights", "max_side", "precision")

    @classmethod
    def load(cls, home: Path) -> "Settings":
        """The saved settings; a missing file gives the defaults. A value of the wrong type or out
        of range is replaced by its default and named in `problems` (never an exception)."""
        f = home / "settings.json"
        if not f.exists():
            return cls()
        try:
            data = json.loads(f.read_text(), parse_float=_json_float, parse_constant=_NotFinite)
        except (OSError, ValueError, RecursionError) as e:  # RecursionError: nested thousands deep
            s = cls()
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e).splitlines()[0][:120]
            s.problems.append(f"{f} is unreadable ({why}); using the defaults")
            return s
        if not isinstance(data, dict):
            s = cls()
            s.problems.append(f"{f} does not hold settings; using the defaults")
            return s
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict) -> "Settings":
        s = cls()
        if int(data.get("version", 1) if isinstance(data.get("version", 1), int) else 1) < 2:
            # Version 1 stored qe/her as booleans and the box mode as map|crop, chosen before the
            # library policies existed: those become "auto" (the measured policies).
            data = {k: v for k, v in data.items() if k not in ("qe", "her", "region_mode", "max_side", "dim")}
        for fl in fields(cls):
            if fl.name in ("version", "problems") or fl.name not in data:
                continue
            value = data[fl.name]
            if isinstance(value, _NotFinite):
                s.problems.append(f"settings: {fl.name}: {value} is not a finite number; "
                                  f"using the default {getattr(cls(), fl.name)!r}")
                continue
            try:
                setattr(s, fl.name, validate(fl.name, value))
            except InputError as e:
                s.problems.append(f"settings: {e}; using {getattr(cls(), fl.name)!r}")
        return s

    def save(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / f"settings.json.{os.getpid()}.tmp"
        data = {k: v for k, v in asdict(self).items() if k != "problems"}
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, home / "settings.json")

    def needs_new_space(self, other: "Settings") -> bool:
        return any(getattr(self, f) != getattr(other, f) for f in self.SPACE_FIELDS)


def validate(name: str, value):
    """A setting's value checked and converted, or InputError naming the field."""
    default = getattr(Settings(), name)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputError(f"'{name}' must be true or false, not {value!r}")
        return value
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"'{name}' must be a number, not {value!r}")
        if isinstance(value, float) and not math.isfinite(value):  # int(inf) would raise OverflowError
            raise InputError(f"'{name}' must be a finite number, not {value!r}")
        if isinstance(default, int):
            if int(value) != value:
                raise InputError(f"'{name}' must be a whole number, not {value!r}")
            value = int(value)
        lo, hi = LIMITS.get(name, (float("-inf"), float("inf")))
        if not lo <= value <= hi:
            raise InputError(f"'{name}' must be between {lo} and {hi}, not {value!r}")
        return type(default)(value)
    if not isinstance(value, str):
        raise InputError(f"'{name}' must be text, not {value!r}")
    if name in CHOICES and value not in CHOICES[name]:
        raise InputError(f"'{name}' must be one of {', '.join(CHOICES[name])}, not {value!r}")
    if name == "device" and value not in ("auto", "cpu", "mps") and not value.startswith("cuda"):
        raise InputError(f"'device' must be auto, cpu, cuda or mps, not {value!r}")
    return value
