"""The query photo, fitted, with a box the user draws, moves and resizes, and the heat overlay.

Frames: widget pixels (mouse) <-> image pixels of the oriented original (what the core takes).
`box` is always stored in image pixels, so resizing the window never moves it.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QPen
from PySide6.QtWidgets import QWidget

from ..core.heatmap import normalise, overlay_rgba

HANDLE = 7.0  # px, half-size of a resize handle
MIN_BOX = 6.0  # px in widget space: smaller drags are clicks, not boxes
GRACE = 16.0  # px beside the photo where a press still starts a box (at the photo's edge)


def rgba_qimage(rgba: np.ndarray) -> QImage:
    h, w, _ = rgba.shape
    return QImage(np.ascontiguousarray(rgba).data, w, h, 4 * w, QImage.Format_RGBA8888).copy()


class QueryView(QWidget):
    """Emits boxChanged(box | None) on every change (the caller debounces) and boxSettled on release."""

    boxChanged = Signal(object)
    boxSettled = Signal(object)
    filesDropped = Signal(list)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumSize(200, 150)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self.setAcceptDrops(True)
        self.image: QImage | None = None
        self.orig_size: tuple[int, int] = (1, 1)
        self.box: tuple[float, float, float, float] | None = None
        self.weights: np.ndarray | None = None
        self.weights_box: tuple | None = None  # where the weights lie (image px); None = whole image
        self.show_overlay = False
        self._overlay: QImage | None = None
        self._drag = None  # ("new", start) | ("move", start, box0) | ("resize", corner, box0)
        self.placeholder = "Drop a photo here, or press Ctrl+O to open one (Ctrl+V pastes)"
        self.message = ""  # shown instead of the photo (e.g. why a query could not be opened)
        self.setToolTip("The query photo: drag with the mouse to draw a box around what you are looking for; "
                        "drag inside the box to move it, drag a corner to resize it, Esc clears it. "
                        "Keyboard: B draws a box, the arrows move it, Shift+arrows resize it")
        self._settle = QTimer(self, singleShot=True, interval=400)  # keys at rest: refine, as on mouse release
        self._settle.timeout.connect(lambda: self.boxSettled.emit(self.box))

    def box_in_motion(self) -> bool:
        """Whether the box is being dragged (the left button held), or moved by keys that have not
        rested yet."""
        dragging = self._drag is not None and bool(QGuiApplication.mouseButtons() & Qt.LeftButton)
        return dragging or self._settle.isActive()

    # ---- content --------------------------------------------------------------------------------
    def set_image(self, image: QImage | None, message: str = "", orig_size: tuple[int, int] | None = None):
        """Show `image` (possibly a reduced decode); boxes are in pixels of the oriented original of
        size `orig_size` (w, h), the image's own size when None."""
        self.image = image
        self.orig_size = orig_size or ((image.width(), image.height()) if image is not None else (1, 1))
        self.message = message
        self.box = None
        self._drag = None  # a drag or keys on the last photo do not carry over
        self._settle.stop()
        self.set_weights(None)
        self.update()

    def set_weights(self, weights: np.ndarray | None, where: tuple | None = None):
        self.weights, self.weights_box = weights, where
        self._overlay = None
        self.update()

    def set_overlay_visible(self, on: bool):
        self.show_overlay = on
        self.update()

    def clear_box(self):
        if self.box is not None:
            self.box = None
            self.update()
            self.boxChanged.emit(None)
            self.boxSettled.emit(None)

    def centred_box(self) -> tuple[float, float, float, float]:
        """A box over the middle of the photo, half of each side (image pixels)."""
        w, h = self.orig_size
        return self._clip((w / 4, h / 4, 3 * w / 4, 3 * h / 4))

    def set_box(self, box):
        self.box = None if box is None else self._clip(box)
        self.update()

    # ---- geometry -------------------------------------------------------------------------------
    def image_rect(self) -> QRectF:
        """Where the fitted image is drawn, in widget pixels."""
        if self.image is None or self.image.isNull():
            return QRectF()
        iw, ih = self.image.width(), self.image.height()
        s = min(self.width() / iw, self.height() / ih)
        w, h = iw * s, ih * s
        return QRectF((self.width() - w) / 2, (self.height() - h) / 2, w, h)

    def scale(self) -> float:
        """Widget pixels per original-image pixel."""
        r = self.image_rect()
        return r.width() / self.orig_size[0] if self.image is not None and r.width() else 1.0

    def to_image(self, p: QPointF) -> tuple[float, float]:
        r, s = self.image_rect(), self.scale()
        return (p.x() - r.x()) / s, (p.y() - r.y()) / s

    def to_widget_rect(self, box) -> QRectF:
        r, s = self.image_rect(), self.scale()
        x1, y1, x2, y2 = box
        return QRectF(r.x() + x1 * s, r.y() + y1 * s, (x2 - x1) * s, (y2 - y1) * s)

    def _clip(self, box):
        w, h = self.orig_size
        x1, y1, x2, y2 = box
        x1, x2 = sorted((max(0.0, min(w, x1)), max(0.0, min(w, x2))))
        y1, y2 = sorted((max(0.0, min(h, y1)), max(0.0, min(h, y2))))
        return (round(x1), round(y1), round(x2), round(y2))

    def _corner_at(self, pos: QPointF):
        if self.box is None:
            return None
        r = self.to_widget_rect(self.box)
        for name, c in (("tl", r.topLeft()), ("tr", r.topRight()), ("bl", r.bottomLeft()), ("br", r.bottomRight())):
            if abs(pos.x() - c.x()) <= HANDLE and abs(pos.y() - c.y()) <= HANDLE:
                return name
        return None

    # ---- mouse ----------------------------------------------------------------------------------
    def mousePressEvent(self, e):
        if self.image is None or e.button() != Qt.LeftButton:
            return
        pos = e.position()
        corner = self._corner_at(pos)
        if corner:
            self._drag = ("resize", corner, self.box)
        elif self.box is not None and self.to_widget_rect(self.box).contains(pos):
            self._drag = ("move", self.to_image(pos), self.box)
        elif self.image_rect().adjusted(-GRACE, -GRACE, GRACE, GRACE).contains(pos):
            # a box started just beside the photo starts at its edge (else a press a few
            # pixels outside was ignored, the drag drew nothing)
            r = self.image_rect()
            self._drag = ("new", QPointF(min(max(pos.x(), r.left()), r.right()), min(max(pos.y(), r.top()), r.bottom())))

    def mouseMoveEvent(self, e):
        pos = e.position()
        if self._drag is None:
            corner = self._corner_at(pos)
            inside = self.box is not None and self.to_widget_rect(self.box).contains(pos)
            self.setCursor(Qt.SizeFDiagCursor if corner in ("tl", "br") else Qt.SizeBDiagCursor if corner
                           else Qt.SizeAllCursor if inside else Qt.CrossCursor if self.image is not None else Qt.ArrowCursor)
            return
        if not e.buttons() & Qt.LeftButton:  # the release went elsewhere (a grab lost): the drag is over
            self.mouseReleaseEvent(e)
            return
        kind = self._drag[0]
        if kind == "new":
            start = self._drag[1]
            if abs(pos.x() - start.x()) < MIN_BOX and abs(pos.y() - start.y()) < MIN_BOX:
                return
            (x1, y1), (x2, y2) = self.to_image(start), self.to_image(pos)
            self.box = self._clip((x1, y1, x2, y2))
        elif kind == "move":
            (sx, sy), b = self._drag[1], self._drag[2]
            x, y = self.to_image(pos)
            dx, dy = x - sx, y - sy
            w, h = self.orig_size
            dx = max(-b[0], min(w - b[2], dx))
            dy = max(-b[1], min(h - b[3], dy))
            self.box = self._clip((b[0] + dx, b[1] + dy, b[2] + dx, b[3] + dy))
        else:
            corner, b = self._drag[1], self._drag[2]
            x, y = self.to_image(pos)
            x1, y1, x2, y2 = b
            if "l" in corner:
                x1 = x
            if "r" in corner:
                x2 = x
            if "t" in corner:
                y1 = y
            if "b" in corner:
                y2 = y
            self.box = self._clip((x1, y1, x2, y2))
        self.update()
        self.boxChanged.emit(self.box)

    def mouseReleaseEvent(self, e):
        if self._drag is None:
            return
        self._drag = None
        if self.box is not None and (self.box[2] - self.box[0] < 2 or self.box[3] - self.box[1] < 2):
            self.box = None
        self.update()
        self.boxSettled.emit(self.box)

    def keyPressEvent(self, e):
        """The box by keyboard: B draws a centred box (half of each side), the arrows move it and
        Shift+arrows resize it (by 2 % of the photo; Ctrl: 10 %), Esc clears it. The search follows
        as it does a dragged box, refined once the keys rest."""
        k, mods = e.key(), e.modifiers()
        if k == Qt.Key_Escape:
            self.clear_box()
            return
        if self.image is None:
            return super().keyPressEvent(e)
        w, h = self.orig_size
        if k == Qt.Key_B:
            self.box = self.centred_box()
        elif k in (Qt.Key_Left, Qt.Key_Right, Qt.Key_Up, Qt.Key_Down) and self.box is not None:
            step = 0.10 if mods & Qt.ControlModifier else 0.02
            dx = {Qt.Key_Left: -1, Qt.Key_Right: 1}.get(k, 0) * step * w
            dy = {Qt.Key_Up: -1, Qt.Key_Down: 1}.get(k, 0) * step * h
            x1, y1, x2, y2 = self.box
            if mods & Qt.ShiftModifier:  # resize: the right and bottom edges, never below a few pixels
                x2, y2 = max(x1 + 4, x2 + dx), max(y1 + 4, y2 + dy)
            else:
                dx = max(-x1, min(w - x2, dx))
                dy = max(-y1, min(h - y2, dy))
                x1, y1, x2, y2 = x1 + dx, y1 + dy, x2 + dx, y2 + dy
            self.box = self._clip((x1, y1, x2, y2))
        else:
            return super().keyPressEvent(e)
        self.update()
        self.boxChanged.emit(self.box)
        self._settle.start()

    # ---- drops ----------------------------------------------------------------------------------
    def dragEnterEvent(self, e):
        if e.mimeData().hasUrls() or e.mimeData().hasImage():
            e.acceptProposedAction()

    def dropEvent(self, e):
        paths = [u.toLocalFile() for u in e.mimeData().urls() if u.isLocalFile()]
        if paths:
            e.acceptProposedAction()
            self.filesDropped.emit(paths)

    # ---- painting -------------------------------------------------------------------------------
    def paintEvent(self, _e):
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().base())
        if self.image is None:
            p.setPen(QColor(200, 60, 60) if self.message else self.palette().placeholderText().color())
            p.drawText(self.rect().adjusted(12, 12, -12, -12), Qt.AlignCenter | Qt.TextWordWrap, self.message or self.placeholder)
            return
        r = self.image_rect()
        p.setRenderHint(QPainter.SmoothPixmapTransform)
        p.drawImage(r, self.image)
        if self.show_overlay and self.weights is not None:
            where = self.to_widget_rect(self.weights_box) if self.weights_box else r
            if self._overlay is None or self._overlay.size() != where.size().toSize():
                self._overlay = rgba_qimage(overlay_rgba(normalise(self.weights), (max(1, int(where.width())), max(1, int(where.height())))))
            p.drawImage(where, self._overlay)
        if self.box is not None:
            br = self.to_widget_rect(self.box)
            shade = QColor(0, 0, 0, 90)  # dim outside the box so the region stands out
            p.fillRect(QRectF(r.left(), r.top(), r.width(), br.top() - r.top()), shade)
            p.fillRect(QRectF(r.left(), br.bottom(), r.width(), r.bottom() - br.bottom()), shade)
            p.fillRect(QRectF(r.left(), br.top(), br.left() - r.left(), br.height()), shade)
            p.fillRect(QRectF(br.right(), br.top(), r.right() - br.right(), br.height()), shade)
            p.setPen(QPen(QColor(255, 255, 255), 2))
            p.drawRect(br)
            p.setPen(QPen(QColor(30, 30, 30), 1))
            p.setBrush(QColor(255, 255, 255))
            for c in (br.topLeft(), br.topRight(), br.bottomLeft(), br.bottomRight()):
                p.drawRect(QRectF(c.x() - HANDLE / 2, c.y() - HANDLE / 2, HANDLE, HANDLE))
        if self.hasFocus():  # reached with Tab: a frame, and the keys that draw a box
            p.setPen(QPen(self.palette().highlight().color(), 3))
            p.setBrush(Qt.NoBrush)
            p.drawRect(QRectF(self.rect()).adjusted(1.5, 1.5, -1.5, -1.5))
            hint = "B: a box · arrows move it · Shift+arrows resize it · Esc clears it"
            room = self.rect().adjusted(10, 0, -10, 0)
            text = self.fontMetrics().boundingRect(room, Qt.AlignCenter | Qt.TextWordWrap, hint)  # wraps on a narrow pane
            band = QRectF(3, self.height() - text.height() - 10, self.width() - 6, text.height() + 6)
            p.fillRect(band, QColor(0, 0, 0, 150))
            p.setPen(QColor(255, 255, 255))
            p.drawText(band, Qt.AlignCenter | Qt.TextWordWrap, hint)

    def focusInEvent(self, e):
        super().focusInEvent(e)
        self.update()

    def focusOutEvent(self, e):
        super().focusOutEvent(e)
        self.update()
