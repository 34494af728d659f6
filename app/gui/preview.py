"""The preview pane: the selected result large, with its heat overlay when the overlay is on.
Always about the current selection of the current result list: cleared by a new search."""
from __future__ import annotations

import os

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QImage, QPainter, QPixmap
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from ..core.heatmap import overlay_rgba
from ..core.paths import display
from ..core.pipeline.search import Hit
from .query_view import rgba_qimage
from .results import shown_score
from .widgets import ElidedLabel

PREVIEW_LOAD = QSize(1024, 1024)


class PreviewPane(QWidget):
    def __init__(self, loader, parent=None):
        super().__init__(parent)
        self.loader = loader
        self.show_heat = False
        self.heat_of = lambda hit: None  # the heat overlay's grid of a result (None: not yet): MatchOverlays.grid
        self.hit: Hit | None = None
        v = QVBoxLayout(self)
        v.setContentsMargins(4, 4, 4, 4)
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignCenter)
        self.picture.setWordWrap(True)
        self.picture.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.picture.setMinimumSize(120, 90)
        # each line cut in its middle to the pane's width (a long name ran off its edge)
        self.caption = ElidedLabel(mode=Qt.ElideMiddle)
        # the photo at the top, as large as the pane allows, and what it is right under it (a
        # landscape photo centred in a tall pane left its upper and lower parts empty, ~400 px at
        # 1920x1080, and its words at the pane's bottom edge)
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.details.setTextInteractionFlags(Qt.TextSelectableByMouse)
        v.addWidget(self.picture)
        v.addWidget(self.caption)
        v.addWidget(self.details)
        v.addStretch(1)
        self.setMinimumWidth(150)
        loader.loaded.connect(self._on_loaded)
        self.clear()

    def clear(self, text: str = "Select a result to see it here") -> None:
        self.hit = None
        self.picture.setPixmap(QPixmap())
        self.picture.setText(text)
        self.picture.setFixedHeight(max(90, self.height() // 2))
        self.caption.setText("")
        self.details.setText("")

    def show_hit(self, hit: Hit | None) -> None:
        if hit is None:
            self.clear()
            return
        self.hit = hit
        # the name on a line of its own: a long path has no space to wrap at, and was cut mid-name
        folder, name = os.path.split(display(hit.path))
        self.caption.setText(f"#{hit.rank} · relevance {shown_score(hit.score):.2f}\n{name}\n{folder}")
        self.details.setText(details_words(hit))
        self._render()

    def set_heat(self, on: bool) -> None:
        self.show_heat = on
        self._render()

    def _on_loaded(self, path: str) -> None:
        if self.hit is not None and path == self.hit.path:
            self._render()

    def heat_ready(self, image_id: int) -> None:
        """The overlay's grid of a result was made: drawn if it is the photo shown."""
        if self.show_heat and self.hit is not None and self.hit.image_id == image_id:
            self._render()

    def resizeEvent(self, e):
        super().resizeEvent(e)
        self._render()

    def _render(self) -> None:
        hit = self.hit
        if hit is None:
            return
        img = self.loader.get(hit.path, PREVIEW_LOAD)
        if img is None:
            self.loader.request(hit.path, PREVIEW_LOAD)
            self.picture.setPixmap(QPixmap())
            self.picture.setText("Loading…")
            return
        if img.isNull():
            self.picture.setPixmap(QPixmap())
            self.picture.setText(f"Cannot show this photo: {self.loader.error(hit.path, PREVIEW_LOAD) or 'unreadable'}")
            return
        # as wide as the pane, and as tall as it allows under the words about the photo
        words = self.caption.sizeHint().height() + self.details.sizeHint().height() + 24
        box = QSize(max(1, self.width() - 8), max(90, self.height() - words))
        shown = img.scaled(box, Qt.KeepAspectRatio, Qt.SmoothTransformation).convertToFormat(QImage.Format_ARGB32)
        self.picture.setFixedHeight(max(90, shown.height()))
        if self.show_heat:
            grid = self.heat_of(hit)
            if grid is not None:
                p = QPainter(shown)
                p.drawImage(0, 0, rgba_qimage(overlay_rgba(grid, (shown.width(), shown.height()), 110)))
                p.end()
        self.picture.setPixmap(QPixmap.fromImage(shown))


def details_words(hit: Hit) -> str:
    """What the preview says of a result under its name: its pixels, its file's size, when it was
    taken and with what camera, where the catalog knows them: "4000 × 3000 px · 3.2 MB · taken 14
    Mar 2009, 15:02 · Canon EOS 5D"."""
    import time

    parts = []
    if hit.width and hit.height:
        parts.append(f"{hit.width} × {hit.height} px")
    if hit.size:
        parts.append(f"{hit.size / 1e6:.1f} MB" if hit.size >= 100_000 else f"{max(1, round(hit.size / 1e3))} kB")
    if hit.taken and hit.taken > 0:
        parts.append("taken " + time.strftime("%d %b %Y, %H:%M", time.localtime(hit.taken)).lstrip("0"))
    if hit.camera:
        parts.append(hit.camera)
    return " · ".join(parts)
