"""Small widgets shared by the panes."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy


class ElidedLabel(QLabel):
    """One line of text that never wraps or pushes its neighbours: shortened with "…" to the room it
    has, the whole text in its tooltip."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.setMinimumWidth(40)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(text)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802
        fm = self.fontMetrics()
        return QSize(min(fm.horizontalAdvance(self.text()), 400), fm.height() + 4)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(40, self.fontMetrics().height() + 4)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setPen(self.palette().windowText().color())
        rect = self.contentsRect()
        p.drawText(rect, Qt.AlignLeft | Qt.AlignVCenter, self.fontMetrics().elidedText(self.text(), Qt.ElideRight, rect.width()))

    def shown_text(self) -> str:
        """The text as painted (what a person sees)."""
        return self.fontMetrics().elidedText(self.text(), Qt.ElideRight, self.contentsRect().width())
