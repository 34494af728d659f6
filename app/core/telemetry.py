"""The inference runtimes' own usage reporting, turned off before either loads.

OpenVINO sends an event to Google Analytics at `import openvino` and keeps a client id in
~/intel; ONNX Runtime (1.32 on Linux and macOS) keeps a device id and an upload cache in
~/.cache/Microsoft and sends process and session events. A photo library on someone's laptop
reports nothing and writes nowhere but its data folder (a trial found both files in HOME).
"""
from __future__ import annotations

import os


def silence() -> None:
    """Turn both off for this process and the processes it starts (Ray workers, the 8-bit
    tuning child). Called by `app/__init__.py`, before any module imports a runtime."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # ONNX Runtime's own opt-out: nothing made, nothing sent
    try:  # OpenVINO's: its consent check answers "declined" (its other opt-out is a file in HOME)
        from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker
    except ImportError:  # not installed: nothing to turn off
        return
    OptInChecker.check = lambda self, *args, **kwargs: ConsentCheckResult.DECLINED
