"""HeatSearch: find photos by example in your own photo folders."""

from .core.telemetry import silence

__version__ = "0.1.0"

silence()  # before anything imports OpenVINO or ONNX Runtime (app/core/telemetry.py)
