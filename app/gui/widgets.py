"""Small widgets shared by the panes."""
from __future__ import annotations

import os
from datetime import date, datetime

from PySide6.QtCore import QDate, QRect, QSize, Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (QCalendarWidget, QDialog, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMenu,
                               QSizePolicy, QToolButton, QTreeView, QWidget, QWidgetAction)


def choose_path(parent: QWidget, title: str, start: str, filters: str = "", mode: str = "open") -> tuple[str, str]:
    """A file ("open": an existing one; "save": a name to write, given the chosen type's suffix
    when typed without one) or a folder ("folder") chosen by the person, and the file type
    chosen; ("", "") when cancelled. The platform's own dialog where it has one; Qt's own
    elsewhere (a bare Linux desktop), made wide enough that its size, type and date columns read
    whole (not "32....KiB", "26 11 2...6")."""
    dlg = QFileDialog(parent, title, start, filters)
    try:
        if mode == "folder":
            dlg.setFileMode(QFileDialog.Directory)
            dlg.setOption(QFileDialog.ShowDirsOnly)
        elif mode == "save":
            dlg.setAcceptMode(QFileDialog.AcceptSave)
            dlg.setFileMode(QFileDialog.AnyFile)
            # the suffix before the overwrite question, so that it asks about the file written
            suffix = lambda f: f.rpartition("*.")[2].split(")")[0].split()[0] if "*." in f else ""  # noqa: E731
            dlg.setDefaultSuffix(suffix(dlg.selectedNameFilter()))
            dlg.filterSelected.connect(lambda f: dlg.setDefaultSuffix(suffix(f)))
        else:
            dlg.setFileMode(QFileDialog.ExistingFile)
        room = (parent.screen() if parent is not None else dlg.screen()).availableGeometry()
        dlg.resize(min(980, room.width() - 40), min(620, room.height() - 60))
        headers = [v.header() for v in dlg.findChildren(QTreeView)]  # none in a native dialog
        for h in headers:
            h.setSectionResizeMode(QHeaderView.ResizeToContents)
            h.setSectionResizeMode(0, QHeaderView.Stretch)  # the name takes the rest
        accepted = dlg.exec() == QDialog.Accepted and bool(dlg.selectedFiles())
        for h in headers:  # Qt saves its columns for every Qt program: left as they were, draggable
            h.setSectionResizeMode(QHeaderView.Interactive)
        if not accepted:
            return "", ""
        typed = dlg.findChild(QLineEdit, "fileNameEdit")  # Qt's own dialog only
        if mode == "folder" and typed is not None and typed.text():
            # a folder's path typed whole: Qt's dialog gave the folder its completer had listed
            # (".../a/inner" typed and Return gave ".../a")
            folder = os.path.join(dlg.directory().absolutePath(), os.path.expanduser(typed.text()))
            if os.path.isdir(folder):
                return os.path.normpath(folder), dlg.selectedNameFilter()
        return dlg.selectedFiles()[0], dlg.selectedNameFilter()
    finally:
        dlg.deleteLater()


class ElidedLabel(QLabel):
    """Lines of text that never wrap or push their neighbours: each shortened with "…" to the room
    it has (at its end, or in its middle with `mode` Qt.ElideMiddle: a long file name keeps its
    start and its end), the whole text in its tooltip. hide_empty: hidden while it has no text,
    so that its neighbours take its room."""

    textSet = Signal()  # after each setText (SharedLine shares its room by the texts)

    def __init__(self, text: str = "", parent=None, hide_empty: bool = False, mode=Qt.ElideRight):
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.setMinimumWidth(40)
        self.hide_empty = hide_empty
        self.mode = mode
        if hide_empty and not text:
            self.setVisible(False)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(text)
        if self.hide_empty:
            self.setVisible(bool(text))
        self.updateGeometry()  # its number of lines sets its height
        self.update()
        self.textSet.emit()

    def _lines(self) -> list[str]:
        return self.text().split("\n")

    def needed_width(self) -> int:
        """px: the width its text takes whole (0 with no text)."""
        if not self.text():
            return 0
        m = self.contentsMargins()
        return max(self.fontMetrics().horizontalAdvance(line) for line in self._lines()) + m.left() + m.right() + 2

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(min(self.needed_width(), 400), self.fontMetrics().height() * len(self._lines()) + 4)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(40, self.fontMetrics().height() * len(self._lines()) + 4)

    def paintEvent(self, _e) -> None:  # noqa: N802
        p = QPainter(self)
        p.setPen(self.palette().windowText().color())
        rect, h = self.contentsRect(), self.fontMetrics().height()
        lines = self.shown_text().split("\n")
        top = rect.top() + (rect.height() - h * len(lines)) // 2
        for i, line in enumerate(lines):
            p.drawText(QRect(rect.left(), top + i * h, rect.width(), h), Qt.AlignLeft | Qt.AlignVCenter, line)

    def shown_text(self) -> str:
        """The text as painted (what a person sees)."""
        width = self.contentsRect().width()
        return "\n".join(self.fontMetrics().elidedText(line, self.mode, width) for line in self._lines())


class SharedLine(QWidget):
    """Two ElidedLabels side by side sharing one line by what their texts need: both whole when
    they fit; otherwise the shorter whole up to half the width and the longer cut with "…" in the
    rest (an even split cut a search's note at "(an incomplete copy or do…" beside a short
    indexing line)."""

    def __init__(self, left: ElidedLabel, right: ElidedLabel, parent=None):
        super().__init__(parent)
        self.labels = (left, right)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        for label in self.labels:
            row.addWidget(label, 1)
            label.textSet.connect(self.share)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)

    def share(self) -> None:
        """The labels' stretches (the layout's share of the width) from their texts' widths."""
        row = self.layout()
        room = max(2, self.width() - row.spacing())
        need = [max(label.needed_width(), label.minimumWidth()) if label.isVisibleTo(self) else 0 for label in self.labels]
        if sum(need) > room:
            short = min(range(2), key=lambda i: need[i])
            need[short] = min(need[short], room // 2)
            need[1 - short] = room - need[short]
        for i, n in enumerate(need):
            row.setStretch(i, max(1, n))

    def resizeEvent(self, e) -> None:  # noqa: N802
        super().resizeEvent(e)
        self.share()


class DateField(QWidget):
    """A day typed as YYYY-MM-DD (or picked from the calendar beside it): what is typed is what is
    read, with no hidden sections or special text in front of the digits. `changed` fires when a
    valid day is entered; an invalid one is marked and said in the tooltip."""

    changed = Signal()

    def __init__(self, tip: str = "", parent=None):
        super().__init__(parent)
        h = QHBoxLayout(self)
        h.setContentsMargins(0, 0, 0, 0)
        h.setSpacing(2)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("YYYY-MM-DD")
        self.edit.setMaxLength(10)
        self.edit.setFixedWidth(self.edit.fontMetrics().horizontalAdvance("0000-00-000") + 12)
        self.edit.setToolTip(tip)
        self.tip = tip
        self.pick = QToolButton()
        self.pick.setText("▾")
        self.pick.setToolTip("Pick the day on a calendar")
        self.pick.setPopupMode(QToolButton.InstantPopup)
        menu = QMenu(self.pick)
        self.calendar = QCalendarWidget()
        act = QWidgetAction(menu)
        act.setDefaultWidget(self.calendar)
        menu.addAction(act)
        self.pick.setMenu(menu)
        h.addWidget(self.edit)
        h.addWidget(self.pick)
        self._day: date | None = None
        self.edit.editingFinished.connect(self._typed)
        self.calendar.clicked.connect(self._picked)
        menu.aboutToShow.connect(self._show_day)

    def _show_day(self) -> None:
        """The calendar opens at the day in the field (it opened at today's month)."""
        if self._day is not None:
            day = QDate(self._day.year, self._day.month, self._day.day)
            self.calendar.setSelectedDate(day)
            self.calendar.setCurrentPage(day.year(), day.month())

    def date(self) -> date | None:
        return self._day

    def setDate(self, day: date | None) -> None:  # noqa: N802 - Qt's name
        self._day = day
        self.edit.setText(day.isoformat() if day else "")
        self._mark("")

    def _mark(self, problem: str) -> None:
        self.edit.setStyleSheet("border: 1px solid #c03030;" if problem else "")
        self.edit.setToolTip(problem or self.tip)

    def _typed(self) -> None:
        text = self.edit.text().strip()
        for fmt in ("%Y-%m-%d", "%Y-%m", "%Y", "%Y%m%d"):
            try:
                day = datetime.strptime(text, fmt).date()
                break
            except ValueError:
                continue
        else:
            self._mark(f"'{text}' is not a day: type it as YYYY-MM-DD (e.g. 2019-06-30)")
            return
        self.setDate(day)
        self.changed.emit()

    def _picked(self, qdate) -> None:
        self.pick.menu().hide()
        self.setDate(date(qdate.year(), qdate.month(), qdate.day()))
        self.changed.emit()
