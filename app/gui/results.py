"""Results grid: a list model of hits and a constant-size delegate painting thumbnail, rank, score
and (optionally) the stored heat grid. Thumbnails load lazily: a cell asks for its picture only
when painted, so visible cells come first and a 100k-row model costs nothing until scrolled."""
from __future__ import annotations

from PySide6.QtCore import QAbstractListModel, QModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPixmap
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from ..core.heatmap import overlay_rgba
from ..core.pipeline.search import Hit
from .query_view import rgba_qimage

PathRole = Qt.UserRole + 1
ScoreRole = Qt.UserRole + 2
RankRole = Qt.UserRole + 3
HitRole = Qt.UserRole + 4

CELL = QSize(176, 196)
THUMB = QSize(160, 160)


class ResultsModel(QAbstractListModel):
    """Rows = hits of the latest search, best first."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.hits: list[Hit] = []

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self.hits)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self.hits):
            return None
        h = self.hits[index.row()]
        if role == Qt.DisplayRole:
            return f"#{h.rank}  {h.score:.3f}"
        if role == Qt.ToolTipRole:
            return f"{h.path}\nrank {h.rank}, similarity {h.score:.4f}"
        if role == PathRole:
            return h.path
        if role == ScoreRole:
            return h.score
        if role == RankRole:
            return h.rank
        if role == HitRole:
            return h
        if role == Qt.SizeHintRole:
            return CELL
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.NoItemFlags
        return Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled

    def set_hits(self, hits: list[Hit]):
        self.beginResetModel()
        self.hits = list(hits)
        self.endResetModel()

    def mimeTypes(self):
        return ["text/uri-list"]

    def mimeData(self, indexes):
        from PySide6.QtCore import QMimeData, QUrl

        md = QMimeData()
        md.setUrls([QUrl.fromLocalFile(self.hits[i.row()].path) for i in indexes if i.isValid()])
        return md


class ThumbnailDelegate(QStyledItemDelegate):
    """Paints a cell: thumbnail (or a placeholder while it loads), heat overlay, rank and score."""

    def __init__(self, loader, heat_lookup, parent=None):
        super().__init__(parent)
        self.loader = loader
        self.heat_lookup = heat_lookup  # image_id -> (H, W) weights or None
        self.show_heat = False
        self._pixmaps: dict[str, QPixmap] = {}  # GUI thread only
        self._heat: dict[tuple, QPixmap] = {}

    def sizeHint(self, option, index):
        return CELL

    def forget(self):
        self._pixmaps.clear()
        self._heat.clear()

    def paint(self, p: QPainter, option, index):
        hit = index.data(HitRole)
        if hit is None:
            return
        p.save()
        rect = option.rect
        if option.state & QStyle.State_Selected:
            p.fillRect(rect, option.palette.highlight())
        thumb_area = QRect(rect.x() + (rect.width() - THUMB.width()) // 2, rect.y() + 6, THUMB.width(), THUMB.height())
        pm = self._pixmaps.get(hit.path)
        if pm is None:
            img = self.loader.get(hit.path)
            if img is None:
                self.loader.request(hit.path)
            elif not img.isNull():
                pm = QPixmap.fromImage(img)
                self._pixmaps[hit.path] = pm
                if len(self._pixmaps) > 800:
                    self._pixmaps.pop(next(iter(self._pixmaps)))
        if pm is not None:
            target = QRect(0, 0, pm.width(), pm.height())
            target.moveCenter(thumb_area.center())
            p.drawPixmap(target, pm)
            if self.show_heat:
                key = (hit.image_id, target.width(), target.height())
                ov = self._heat.get(key)
                if ov is None:
                    grid = self.heat_lookup(hit.image_id)
                    if grid is not None:
                        ov = QPixmap.fromImage(rgba_qimage(overlay_rgba(grid, (target.width(), target.height()), 150)))
                        self._heat[key] = ov
                if ov is not None:
                    p.drawPixmap(target, ov)
        else:
            p.fillRect(thumb_area.adjusted(20, 20, -20, -20), QColor(128, 128, 128, 40))
        text_rect = QRect(rect.x() + 6, thumb_area.bottom() + 4, rect.width() - 12, rect.bottom() - thumb_area.bottom() - 6)
        f = QFont(option.font)
        f.setBold(True)
        p.setFont(f)
        p.setPen(option.palette.highlightedText().color() if option.state & QStyle.State_Selected else option.palette.text().color())
        p.drawText(text_rect, Qt.AlignLeft | Qt.AlignVCenter, f"#{hit.rank}")
        p.setFont(option.font)
        p.drawText(text_rect, Qt.AlignRight | Qt.AlignVCenter, f"{hit.score:.3f}")
        p.restore()
