"""The libraries' own usage reporting, turned off before any of them loads.

OpenVINO sends an event to Google Analytics at `import openvino` and keeps a client id in
~/intel; ONNX Runtime (1.32 on Linux and macOS) keeps a device id and an upload cache in
~/.cache/Microsoft and sends process and session events; Ray reports a cluster's usage to
usage-stats.ray.io every hour. A photo library on someone's laptop reports nothing and writes
nowhere but its data folder (without this, the first two files appeared in HOME).
"""
from __future__ import annotations

import os


def silence() -> None:
    """Turn them off for this process and the processes it starts (Ray workers, the 8-bit
    tuning child); a variable already set is left as it is. Called by `app/__init__.py`, before
    any module imports a runtime."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # ONNX Runtime's own opt-out: nothing made, nothing sent
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray's (the local cluster of large libraries)
    try:  # OpenVINO's: its consent check answers "declined" (its other opt-out is a file in HOME)
        from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker
    except ImportError:  # not installed: nothing to turn off
        return
    OptInChecker.check = lambda self, *args, **kwargs: ConsentCheckResult.DECLINED
