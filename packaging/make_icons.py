"""Render resources/heatsearch.svg to the PNG sizes desktops ask for (run once after editing the SVG)."""
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

RES = Path(__file__).resolve().parents[1] / "resources"

app = QGuiApplication(sys.argv[:1])
svg = QSvgRenderer(str(RES / "heatsearch.svg"))
for size in (16, 32, 48, 64, 128, 256, 512):
    img = QImage(size, size, QImage.Format_ARGB32)
    img.fill(Qt.transparent)
    p = QPainter(img)
    svg.render(p)
    p.end()
    img.save(str(RES / f"heatsearch-{size}.png"))
print("icons written to", RES)
