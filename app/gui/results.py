"""Results grid: a list model of hits, a delegate painting thumbnail, file name, rank, a relevance
bar and (optionally) the stored heat grid, and a view whose columns follow its width.

Thumbnails load lazily: a cell asks for its picture only when painted, so visible cells come first
and a long result list costs nothing until scrolled."""
from __future__ import annotations

import os

from PySide6.QtCore import QAbstractListModel, QMimeData, QModelIndex, QRect, QSize, Qt, QUrl
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyle, QStyledItemDelegate

from ..core.heatmap import overlay_rgba
from ..core.paths import display
from ..core.pipeline.search import Hit
from .query_view import rgba_qimage

HitRole = Qt.UserRole + 1
MIN_CELL = 150  # px: the narrowest cell; the view fits as many columns as the width allows
THUMB_LOAD = QSize(256, 256)  # decoded thumbnail size (drawn scaled to the cell)


def caption_height(font: QFont) -> int:
    """px under the thumbnail: the file name (two lines of `font`), then relevance (bar and number)."""
    return 2 * QFontMetrics(font).lineSpacing() + 20


def shown_score(score: float) -> float:
    """A relevance as the grid, the preview and the viewer show it (two decimals): what the cut-off
    compares (else results that read "1.00" vanished at "min 1.00"). 1.00 is the query's own
    file and its copies alone: any other photo reads 0.99 at most (else 29 photos of a
    landmark read "1.00", which is kept for the photo itself)."""
    s = max(0.0, min(1.0, score))
    return 1.0 if s >= 1.0 else min(round(s, 2), 0.99)

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
            return f"#{h.rank} {os.path.basename(display(h.path))}"
        if role == Qt.ToolTipRole:
            extra = {"offline": "\nits folder is offline", "missing": "\nthe file is gone"}.get(h.state, "")
            dup = "\nthe same file as the query" if h.duplicate else "\na copy of the query photo" if h.copy else ""
            if h.hidden_copies:  # One per duplicate: what this tile stands for
                dup += f"\nalso stands for {copies_words(len(h.hidden_copies))} (One per duplicate):" + "".join(
                    f"\n  {display(p)}" for p in h.hidden_copies[:8]) + ("\n  …" if len(h.hidden_copies) > 8 else "")
            return (f"{display(h.path)}\nrank {h.rank} · relevance {shown_score(h.score):.2f} · similarity {h.similarity:.3f}"
                    f"{dup}{extra}")
        if role == HitRole:
            return h
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
        md = QMimeData()
        md.setUrls([QUrl.fromLocalFile(self.hits[i.row()].path) for i in indexes if i.isValid()])
        return md


class ThumbnailDelegate(QStyledItemDelegate):
    """Paints a cell: thumbnail (or a placeholder while it loads), heat overlay, file name, rank
    and a relevance bar whose length is the score the ranking used."""

    def __init__(self, loader, parent=None):
        super().__init__(parent)
        self.loader = loader
        self.show_heat = False
        self.cell = QSize(180, 170)
        self._pixmaps: dict[str, QPixmap] = {}  # GUI thread only, bounded
        self._heat: dict[tuple, QPixmap] = {}
        # a result's heat overlay: its match grid for the query (MatchOverlays.grid), None while made
        self.heat_of = lambda hit: None

    def sizeHint(self, option, index):
        return self.cell

    def forget(self):
        self._pixmaps.clear()
        self._heat.clear()

    def _pixmap(self, path: str) -> QPixmap | None:
        pm = self._pixmaps.get(path)
        if pm is not None:
            return pm
        img = self.loader.get(path, THUMB_LOAD)
        if img is None:
            self.loader.request(path, THUMB_LOAD)
            return None
        if img.isNull():
            return QPixmap()
        pm = QPixmap.fromImage(img)
        self._pixmaps[path] = pm
        if len(self._pixmaps) > 400:
            self._pixmaps.pop(next(iter(self._pixmaps)))
        return pm

    @staticmethod
    def caption(hit: Hit, font: QFont, width: int) -> tuple[str, str]:
        """(file name as it fits `width` px on one line or two joined by "\n", relevance as the
        viewer and --json give it). A long name breaks after a "_", "-", "." or space (not its
        extension's dot): where the rest fits the second line, nearest the name's middle; else where
        the first line is full. Only what overflows the second line is elided, in its middle (on one
        line, names were cut in the middle at every window size)."""
        fm = QFontMetrics(font)
        name = os.path.basename(display(hit.path))
        value = f"{shown_score(hit.score):.2f}"
        if fm.horizontalAdvance(name) <= width:
            return name, value
        fit = max(1, next((n for n in range(len(name), 0, -1) if fm.horizontalAdvance(name[:n]) <= width), 1))
        ext = name.rfind(".")
        cuts = [i + 1 for i, c in enumerate(name[:fit]) if c in "_-. " and i != ext and i + 1 < len(name)]
        whole = [c for c in cuts if fm.horizontalAdvance(name[c:]) <= width]
        late = [c for c in cuts if c >= 0.6 * fit]  # else the first line would be mostly empty
        cut = min(whole, key=lambda c: abs(c - len(name) / 2)) if whole else max(late, default=fit)
        return f"{name[:cut]}\n{fm.elidedText(name[cut:], Qt.ElideMiddle, width)}", value

    def paint(self, p: QPainter, option, index):
        hit: Hit | None = index.data(HitRole)
        if hit is None:
            return
        p.save()
        rect = option.rect.adjusted(3, 3, -3, -3)
        selected = bool(option.state & QStyle.State_Selected)
        if selected:
            p.fillRect(option.rect, option.palette.highlight())
        elif option.state & QStyle.State_HasFocus:  # where the keyboard is (Tab into the grid)
            p.setPen(QPen(option.palette.highlight().color(), 2))
            p.drawRect(option.rect.adjusted(1, 1, -1, -1))
        names = 2 * QFontMetrics(option.font).lineSpacing()
        area = QRect(rect.x(), rect.y(), rect.width(), rect.height() - caption_height(option.font))
        pm = self._pixmap(hit.path)
        if pm is not None and not pm.isNull():
            scaled = pm.size().scaled(area.size(), Qt.KeepAspectRatio)
            target = QRect(0, 0, scaled.width(), scaled.height())
            target.moveCenter(area.center())
            p.setRenderHint(QPainter.SmoothPixmapTransform)
            p.drawPixmap(target, pm)
            if self.show_heat:
                key = (hit.image_id, target.width(), target.height())
                ov = self._heat.get(key)
                if ov is None:
                    grid = self.heat_of(hit)  # never reads the catalog nor runs the model here
                    if grid is not None:
                        ov = QPixmap.fromImage(rgba_qimage(overlay_rgba(grid, (target.width(), target.height()), 95)))
                        self._heat[key] = ov
                if ov is not None:
                    p.drawPixmap(target, ov)
        elif pm is not None:  # could not be read
            p.setPen(option.palette.placeholderText().color())
            p.drawText(area, Qt.AlignCenter | Qt.TextWordWrap, "cannot show this photo")
        else:
            p.fillRect(area.adjusted(area.width() // 6, area.height() // 6, -area.width() // 6, -area.height() // 6),
                       QColor(128, 128, 128, 40))
        # the rank in the thumbnail's corner: the caption's line is the file name's alone
        f = QFont(option.font)
        f.setBold(True)
        p.setFont(f)
        rank = f"#{hit.rank}"
        badge_rect = QRect(area.x(), area.y(), QFontMetrics(f).horizontalAdvance(rank) + 8, 17)
        p.fillRect(badge_rect, QColor(0, 0, 0, 150))
        p.setPen(QColor(255, 255, 255))
        p.drawText(badge_rect, Qt.AlignCenter, rank)
        if hit.hidden_copies:  # One per duplicate: this tile stands for more files
            more = f"+{len(hit.hidden_copies)}"
            more_rect = QRect(badge_rect.right() + 2, area.y(), QFontMetrics(f).horizontalAdvance(more) + 8, 17)
            p.fillRect(more_rect, QColor(40, 90, 170, 220))
            p.drawText(more_rect, Qt.AlignCenter, more)
        if hit.state != "ok":
            badge = "offline" if hit.state == "offline" else "file gone"
            p.fillRect(QRect(area.right() - 70, area.y(), 70, 17), QColor(180, 40, 40, 220))
            p.drawText(QRect(area.right() - 70, area.y(), 70, 17), Qt.AlignCenter, badge)
        # caption: the file name, then the relevance as a bar and as the number the viewer and
        # --json give
        text_color = option.palette.highlightedText().color() if selected else option.palette.text().color()
        p.setFont(option.font)
        p.setPen(text_color)
        line = QRect(rect.x(), area.bottom() + 3, rect.width(), names)
        name, value = self.caption(hit, option.font, line.width())
        p.drawText(line, Qt.AlignHCenter | Qt.AlignTop, name)
        value_w = QFontMetrics(option.font).horizontalAdvance("0.00") + 4
        row = QRect(rect.x(), line.bottom() + 1, rect.width(), 14)
        bar = QRect(row.x(), row.center().y() - 2, row.width() - value_w, 5)
        p.fillRect(bar, QColor(128, 128, 128, 60))
        p.fillRect(QRect(bar.x(), bar.y(), max(1, round(bar.width() * max(0.0, min(1.0, hit.score)))), bar.height()),
                   QColor(240, 140, 30) if not selected else text_color)
        p.drawText(QRect(bar.right() + 2, row.y(), value_w, row.height()), Qt.AlignRight | Qt.AlignVCenter, value)
        p.restore()


def copies_words(n: int) -> str:
    """'1 copy' / '3 copies': the hidden copies a result stands for."""
    return f"{n} {'copy' if n == 1 else 'copies'}"


class ResultsView(QListView):
    """Icon grid whose number of columns follows its width: cells are at least MIN_CELL wide and
    share the width; their height fits a landscape thumbnail and the caption."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setViewMode(QListView.IconMode)
        self.setResizeMode(QListView.Adjust)
        self.setUniformItemSizes(True)
        self.setMovement(QListView.Static)
        self.setSelectionMode(QAbstractItemView.SingleSelection)
        self.setDragEnabled(True)
        self.setSpacing(0)
        self.setMinimumWidth(MIN_CELL + 30)
        self.empty_note = ""  # drawn in the middle while every result is hidden (`set_empty_note`)

    def set_empty_note(self, text: str) -> None:
        """What the grid says while it shows nothing though there are results (a cut-off
        of 0.99 remembered from the day before left an empty grid, said only in the small line)."""
        if text != self.empty_note:
            self.empty_note = text
            self.viewport().update()

    def paintEvent(self, event):
        super().paintEvent(event)
        if self.empty_note:
            p = QPainter(self.viewport())
            p.setPen(self.palette().placeholderText().color())
            p.drawText(self.viewport().rect().adjusted(24, 24, -24, -24), Qt.AlignCenter | Qt.TextWordWrap, self.empty_note)
            p.end()

    def moveCursor(self, action, modifiers):
        """Qt's icon mode moves onto rows the cut-off hides (End, Page Down: End went to
        #100 of "3 shown", and Return opened it): the nearest shown row instead, or stay. Page
        Down and Page Up with no page to move by (every result in one row) go to the
        last and the first shown result, as End and Home."""
        index = super().moveCursor(action, modifiers)
        shown = [r for r in range(self.model().rowCount()) if not self.isRowHidden(r)]
        if not shown:
            return self.currentIndex()
        if index == self.currentIndex() and action in (QAbstractItemView.MovePageDown, QAbstractItemView.MovePageUp):
            return self.model().index(shown[-1] if action == QAbstractItemView.MovePageDown else shown[0], 0)
        if not index.isValid() or not self.isRowHidden(index.row()):
            return index
        return self.model().index(min(shown, key=lambda r: abs(r - index.row())), 0)

    def usable_width(self) -> int:
        """The width cells may use, leaving room for the vertical scroll bar even before it shows
        (otherwise its arrival would push the last column out)."""
        return max(1, self.width() - 2 * self.frameWidth() - self.verticalScrollBar().sizeHint().width() - 2)

    def columns(self) -> int:
        return max(1, self.usable_width() // MIN_CELL)

    def fit_cells(self) -> None:
        delegate = self.itemDelegate()
        if not isinstance(delegate, ThumbnailDelegate):
            return
        w = max(MIN_CELL, self.usable_width() // self.columns())
        cell = QSize(w, round((w - 6) * 0.75) + caption_height(self.font()) + 6)
        if cell != delegate.cell:
            delegate.cell = cell
            self.setGridSize(cell)

    def resizeEvent(self, e):
        self.fit_cells()
        super().resizeEvent(e)
