"""Where HeatSearch keeps its data, and the user's settings (versioned JSON)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .features.registry import DEFAULT_BACKBONE

SETTINGS_VERSION = 1


def home_dir(override: str | os.PathLike | None = None) -> Path:
    """The data folder: --home, else $HEATSEARCH_HOME, else the platform's convention
    (~/.local/share/heatsearch, ~/Library/Application Support/HeatSearch, %APPDATA%/HeatSearch).
    Never inside a photo folder."""
    if override:
        return Path(override).expanduser().resolve()
    if os.environ.get("HEATSEARCH_HOME"):
        return Path(os.environ["HEATSEARCH_HOME"]).expanduser().resolve()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "HeatSearch"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("APPDATA", Path.home())) / "HeatSearch"
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "heatsearch"


@dataclass
class Settings:
    """Every user option in one place. Fields marked (space) define the descriptor space: changing
    one means re-running the CNN (a new space). `dim` only refits the whitening."""

    backbone: str = DEFAULT_BACKBONE  # (space)
    weights: str = ""  # (space) a weights file for backbones that need one
    max_side: int = 1024  # (space) longer side fed to the CNN, px
    device: str = "auto"
    dim: int = 512
    # QE/HeR defaults from `heatsearch eval` (Lite2, see README): alpha-QE with n = 2 helps on both
    # UKBench (3 relevant per query) and Paris; the paper's average QE with n = 10 drops UKBench
    # from 99.3 to 84 mAP. HeR costs ~1 mAP on UKBench and gains 3-16 on Paris (box queries most).
    qe: bool = True
    qe_n: int = 2
    qe_alpha: float = 3.0
    her: bool = True
    her_k: int = 800
    region_mode: str = "map"  # box queries: "map" (measured better than "crop", and needs no CNN pass) or "crop"
    top: int = 100
    batch_size: int = 8
    version: int = SETTINGS_VERSION

    SPACE_FIELDS = ("backbone", "weights", "max_side")

    @classmethod
    def load(cls, home: Path) -> "Settings":
        f = home / "settings.json"
        if not f.exists():
            return cls()
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            return cls()
        known = {fl.name for fl in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and k != "version"})

    def save(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        tmp = home / "settings.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, home / "settings.json")

    def needs_new_space(self, other: "Settings") -> bool:
        return any(getattr(self, f) != getattr(other, f) for f in self.SPACE_FIELDS)
