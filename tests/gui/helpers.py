"""Steps the GUI tests share, each as a person does it (a click, a key, a dialog answered)."""
from pathlib import Path

import numpy as np
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication

from tests.conftest import write_photo
from tests.gui.conftest import index_folder, when_modal

ROOT = Path(__file__).resolve().parents[2]


def search(qtbot, window, path):
    with qtbot.waitSignal(window.searchFinished, timeout=30000) as blocker:
        window.set_query_path(str(path))
    return blocker.args[0]


def open_viewer(qtbot, window, row=0):
    view = window.results_view
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.visualRect(window.results_model.index(row)).center())
    qtbot.keyClick(view, Qt.Key_Return)
    qtbot.waitUntil(lambda: getattr(window, "_viewer", None) is not None and window._viewer.isVisible(), timeout=5000)
    return window._viewer


def add_watching(window, folder) -> list:
    """`folder` added to the library; returns the live list of the run's progress counts."""
    seen = []
    window.bridge.event.connect(lambda ev: ev.kind == "progress" and seen.append(ev.data.done))
    window.add_folder(str(folder))
    return seen


def remove_folder(qtbot, window, name: str, key="Alt+R") -> str:
    """The library folder ending in `name` clicked in the Library pane, then Remove, and `key`
    pressed on the question (Alt+R: its Remove button); returns the question asked."""
    lib = window.library.folder_list
    row = next(i for i in range(lib.count()) if lib.item(i).data(Qt.UserRole).endswith(name))
    qtbot.mouseClick(lib.viewport(), Qt.LeftButton, pos=lib.visualItemRect(lib.item(row)).center())
    asked = []

    def answer(dlg):
        asked.append(dlg.text())
        qtbot.keySequence(dlg, QKeySequence(key)) if isinstance(key, str) else qtbot.keyClick(dlg, key)

    when_modal(answer)
    qtbot.mouseClick(window.library.remove_btn, Qt.LeftButton)
    return asked[0]


def searched_library(qtbot, window, root, n: int):
    """`root` filled with n small photos k00.png..., indexed, and searched with k01.png (its
    photo shown in the query pane); returns root."""
    for i in range(n):
        write_photo(root / f"k{i:02d}.png", i, size=(120, 90))
    index_folder(qtbot, window, root)
    search(qtbot, window, root / "k01.png")
    qtbot.waitUntil(lambda: window.query_view.image is not None, timeout=10000)
    return root


def menu_action(window, text: str):
    """The window's menu action whose words are `text`."""
    return next(a for a in window.findChildren(type(window.dup_action)) if a.text().replace("&", "") == text)


def shown_whole(tree, item, column: int) -> bool:
    """Whether the view draws `item`'s text in `column` whole: on one line, or wrapped onto lines
    that its row has room for."""
    from PySide6.QtGui import QFontMetrics
    from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

    index = tree.indexFromItem(item, column)
    rect = tree.visualRect(index)
    opt = QStyleOptionViewItem()
    opt.initFrom(tree)
    opt.rect = rect
    tree.itemDelegateForIndex(index).initStyleOption(opt, index)
    text_rect = tree.style().subElementRect(QStyle.SE_ItemViewItemText, opt, tree)
    fm = QFontMetrics(opt.font)
    room = text_rect.width() - 2 * (tree.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, tree) + 1)
    if not opt.features & QStyleOptionViewItem.WrapText:
        return fm.horizontalAdvance(item.text(column)) <= room
    lines = fm.boundingRect(0, 0, room, 10_000, Qt.TextWordWrap, item.text(column))
    return lines.height() <= text_rect.height()


def wheel(widget, steps: int, modifiers=Qt.NoModifier):
    """A mouse wheel turned `steps` notches (positive: away from the person) over the widget's centre."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QWheelEvent

    pos = QPointF(widget.rect().center())
    ev = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, 120 * steps),
                     Qt.NoButton, modifiers, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, ev)


def rgb(img) -> np.ndarray:
    """(h, w, 3) float64 of a QImage."""
    img = img.convertToFormat(img.Format.Format_RGB888)
    return np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, : img.width() * 3] \
        .reshape(img.height(), img.width(), 3).astype(np.float64)


def warmth_of(plain, shown) -> np.ndarray:
    """(h, w): how much the heat overlay raised red against blue in each pixel of a photo."""
    d = rgb(shown) - rgb(plain)
    return d[..., 0] - d[..., 2]


def viewer_heat(qtbot, window, row: int) -> np.ndarray:
    """The viewer opened on result `row` with Enter, H pressed: warmth_of its picture."""
    viewer = open_viewer(qtbot, window, row=row)
    if viewer.heat_check.isChecked():
        qtbot.keyClick(viewer.scroll, Qt.Key_H)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=10000)
    qtbot.wait(300)  # the window at its size
    plain = viewer.picture.shown_image()
    qtbot.keyClick(viewer.scroll, Qt.Key_H)
    qtbot.waitUntil(lambda: viewer.picture.shown_image() != plain
                    and viewer.picture.shown_image().size() == plain.size(), timeout=10000)
    warmth = warmth_of(plain, viewer.picture.shown_image())
    qtbot.keyClick(viewer.scroll, Qt.Key_Escape)
    return warmth


def results_with_the_keyboard(qtbot, window, photo_dir) -> None:
    """A search's results in an active window, the keyboard on the grid (a window's keys: under a
    bare X server too)."""
    index_folder(qtbot, window, photo_dir)
    search(qtbot, window, photo_dir / "scene1" / "img1.jpg")
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    window.results_view.setFocus()


def viewer_on_a_new_photo(qtbot, window, path, size):
    """A photo of `size` (w, h) written at `path` in the searched library, found by Rescan (a
    click) among the results, and opened in the viewer (a click and Enter), drawn fitted."""
    write_photo(path, 9, size=size)
    window.activateWindow()
    qtbot.mouseClick(window.library.reindex_btn, Qt.LeftButton)
    qtbot.waitUntil(lambda: any(h.path == str(path) for h in window.results_model.hits), timeout=60000)
    row = next(i for i, h in enumerate(window.results_model.hits) if h.path == str(path))
    viewer = open_viewer(qtbot, window, row=row)
    qtbot.waitUntil(lambda: not viewer.picture.shown_size().isEmpty(), timeout=20000)
    qtbot.wait(200)  # at its size
    return viewer
