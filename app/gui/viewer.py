"""The built-in viewer (double-click or Enter on a result): the photo large, fitted or zoomed (F,
+/-, the wheel), previous/next through the results (Left/Right, also when the picture has the
focus: the scroll area would take them to scroll), the heat overlay (H, Ctrl+H), "Search with
this photo", "Draw a box here", and the system viewer / file manager with a visible message when
there is none."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication, QImage, QPainter
from PySide6.QtWidgets import (QCheckBox, QDialog, QHBoxLayout, QMessageBox, QPushButton, QScrollArea, QSizePolicy,
                               QVBoxLayout, QWidget)

from ..core.heatmap import overlay_rgba
from ..core.paths import display
from ..core.library.service import return_freed_memory
from .query_view import rgba_qimage
from .results import copies_words, shown_score
from .widgets import ElidedLabel
from .workers import ImageLoader

VIEWER_LOAD = QSize(4096, 4096)  # fitted and zoomed out: up to 16 MP, a larger photo scaled to 4096 px (memory)
FULL_PIXELS = 64_000_000  # zoomed past that copy, photos up to 64 MP are read whole (256 MB at most)
MAX_ZOOM = 16.0  # screen px per photo px at most (drawn part by part: no memory grows with it)
OVERLAY_SIDE = 2048  # px: the heat overlay's long side at most (its grid is coarse; drawn stretched)


def open_externally(parent, path: str, folder: bool = False) -> bool:
    """Open a photo in the system viewer (or its folder in the file manager); say so visibly when
    the system has no program for it."""
    target = str(Path(path).parent) if folder else path
    ok = QDesktopServices.openUrl(QUrl.fromLocalFile(target))
    if not ok:
        what = "file manager" if folder else "photo viewer"
        QMessageBox.information(parent, "HeatSearch", f"No {what} is set up on this computer to open\n{display(target)}\n\n"
                                "Its path can be copied from the result's menu (Copy path).")
    return ok


class PhotoCanvas(QWidget):
    """The viewer's photo, drawn at the size it is shown, fitted or zoomed, only the part on screen:
    what it holds is never larger than the loaded photo (a zoomed copy, as a label's pixmap held
    it, took 3.2 GB at 8x of a 12 MP photo, twice over while it was made)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Ignored)
        self.base: QImage | None = None  # the photo, scaled down when shown smaller
        self.overlay: QImage | None = None  # the heat overlay (ARGB32, translucent), drawn over it stretched
        self.size_shown = QSize()  # the photo's size on screen, px
        self.text = "Loading…"  # said instead, while there is no photo

    def show_photo(self, base: QImage, shown: QSize, overlay: QImage | None = None) -> None:
        """Draw `base` stretched to `shown` (w, h px), centred when the widget is larger, and
        `overlay` over it, stretched to the same place. The photo is never painted on: at actual
        size `base` is the loaded photo itself, not a copy."""
        self.base, self.overlay, self.size_shown, self.text = base, overlay, QSize(shown), ""
        self.update()

    def show_text(self, text: str) -> None:
        self.base, self.overlay, self.size_shown, self.text = None, None, QSize(), text
        self.update()

    def shown_size(self) -> QSize:
        """px: the photo as drawn (empty with none)."""
        return QSize(self.size_shown) if self.base is not None else QSize()

    def photo_rect(self) -> QRect:
        """Where the photo is drawn in the widget (empty with none)."""
        s = self.shown_size()
        return QRect(max(0, (self.width() - s.width()) // 2), max(0, (self.height() - s.height()) // 2), s.width(), s.height())

    def shown_image(self) -> QImage:
        """The photo as a person sees it (tests, checks): the widget's pixels over the photo."""
        return self.grab(self.photo_rect()).toImage()

    def paintEvent(self, e) -> None:  # noqa: N802
        p = QPainter(self)
        if self.base is None:
            p.setPen(self.palette().windowText().color())
            p.drawText(self.rect(), Qt.AlignCenter | Qt.TextWordWrap, self.text)
            return
        r = self.photo_rect()
        part = e.rect() & r
        if part.isEmpty():
            return
        for img in (self.base, self.overlay):
            if img is not None:
                sx, sy = img.width() / r.width(), img.height() / r.height()
                source = QRectF((part.x() - r.x()) * sx, (part.y() - r.y()) * sy, part.width() * sx, part.height() * sy)
                p.setRenderHint(QPainter.SmoothPixmapTransform, img.size() != r.size())
                p.drawImage(QRectF(part), img, source)


class ViewerDialog(QDialog):
    searchWith = Signal(str)
    drawBoxOn = Signal(str)
    heatToggled = Signal(bool)  # the overlay is one choice for the whole app: the window follows
    currentChanged = Signal(int)  # row in the results

    def __init__(self, loader, parent=None):
        super().__init__(parent)
        self.setWindowTitle("HeatSearch viewer")
        self.loader = loader
        self.heat_of = lambda hit: None  # the heat overlay's grid of a result (None: not yet): MatchOverlays.grid
        self.hits = []
        self.row = 0
        self._end = ""  # "the last result" when a step went past an end
        self.fit = True
        self.zoom = 1.0  # when not fitted: screen pixels per pixel of the photo's file (100 %: actual size)
        # the photo read whole when zoomed past its 4096-px copy, one at a time, apart from the
        # shared cache (one 96 MB photo would push every thumbnail out of it)
        self.whole = ImageLoader(cache_bytes=0, threads=1, parent=self)
        self._whole_of = ""  # the path of the photo it reads for (another shown: let go)
        v = QVBoxLayout(self)
        self.scroll = QScrollArea()
        self.scroll.setAlignment(Qt.AlignCenter)
        self.picture = PhotoCanvas()
        self.scroll.setWidget(self.picture)
        self.scroll.setWidgetResizable(True)
        v.addWidget(self.scroll, 1)
        # cut in its middle, not widening the window (a 217-character name made it 1,869 px
        # wide on a 1,366 px screen, its buttons off the edge)
        self.caption = ElidedLabel(mode=Qt.ElideMiddle)
        v.addWidget(self.caption)
        row = QHBoxLayout()
        self.prev_btn = QPushButton("◀ Previous")
        self.next_btn = QPushButton("Next ▶")
        self.fit_btn = QPushButton("Actual size")
        self.heat_check = QCheckBox("Heat overlay")
        self.search_btn = QPushButton("Search with this photo")
        self.box_btn = QPushButton("Draw a box here")
        self.open_btn = QPushButton("Open in system viewer")
        self.reveal_btn = QPushButton("Show in folder")
        tips = {self.prev_btn: "Previous result (Left arrow)", self.next_btn: "Next result (Right arrow)",
                self.fit_btn: "Switch between fitting the window and actual pixels (F; zoom with the wheel, + and -)",
                self.heat_check: "Show which parts of the photo carried its description (H or Ctrl+H)",
                self.search_btn: "Use this photo as the query", self.box_btn: "Use this photo as the query and draw a box on it",
                self.open_btn: "Open the photo in your system's viewer", self.reveal_btn: "Open its folder in your file manager"}
        for w, tip in tips.items():
            w.setToolTip(tip)
            row.addWidget(w)
        v.addLayout(row)
        self.prev_btn.clicked.connect(lambda: self.step(-1))
        self.next_btn.clicked.connect(lambda: self.step(1))
        self.fit_btn.clicked.connect(self.toggle_fit)
        self.heat_check.toggled.connect(self._heat_toggled)
        self.search_btn.clicked.connect(lambda: self._emit(self.searchWith))
        self.box_btn.clicked.connect(lambda: self._emit(self.drawBoxOn))
        self.open_btn.clicked.connect(lambda: self.hit and open_externally(self, self.hit.path))
        self.reveal_btn.clicked.connect(lambda: self.hit and open_externally(self, self.hit.path, folder=True))
        # the dialog's keys, also when the picture (the scroll area, which would scroll with the
        # arrows) has the focus
        self._keys = {Qt.Key_Left: lambda: self.step(-1), Qt.Key_Right: lambda: self.step(1), Qt.Key_F: self.toggle_fit,
                      Qt.Key_H: self.heat_check.toggle, Qt.Key_Plus: lambda: self.zoom_by(1.25),
                      Qt.Key_Equal: lambda: self.zoom_by(1.25), Qt.Key_Minus: lambda: self.zoom_by(0.8)}
        # the buttons are reached with Tab (Space or Enter presses the one with the focus), not
        # by a click, which leaves the focus on the picture; on them too the arrows page through
        # the results (a button's arrows would move the focus to the next button). No button is
        # the dialog's default: Enter on the picture pressed "Previous" (a dialog makes its first
        # auto-default button the default).
        self._buttons = (self.prev_btn, self.next_btn, self.fit_btn, self.heat_check, self.search_btn, self.box_btn,
                         self.open_btn, self.reveal_btn)
        for b in self._buttons:
            b.setFocusPolicy(Qt.TabFocus)
            b.installEventFilter(self)
            if isinstance(b, QPushButton):
                b.setAutoDefault(False)
        for w in (self.scroll, self.scroll.viewport(), self.picture):
            w.installEventFilter(self)
        loader.loaded.connect(self._on_loaded)
        self.whole.loaded.connect(self._on_loaded)
        # most of the screen it opens on (not 1000x700 on a 1920x1080 screen), inside it
        # (taller than a 768-px screen, its buttons fell off the bottom)
        room = (parent.screen() if parent is not None else QGuiApplication.primaryScreen()).availableGeometry()
        self.resize(min(max(1000, round(room.width() * 0.75)), room.width() - 40),
                    min(max(700, round(room.height() * 0.8)), room.height() - 60))

    def _key(self, e):
        """The viewer's action for a key press, or None. Ctrl+H toggles the overlay as in the main
        window; other keys count without Ctrl or Alt."""
        mods = e.modifiers() & (Qt.ControlModifier | Qt.AltModifier)
        if e.key() == Qt.Key_H and mods == Qt.ControlModifier:
            return self._keys[Qt.Key_H]
        return None if mods else self._keys.get(e.key())

    def keyPressEvent(self, e):
        fn = self._key(e)
        if fn is not None:
            fn()
        else:
            super().keyPressEvent(e)

    def eventFilter(self, obj, e):
        t = e.type()
        if t == QEvent.Wheel and e.angleDelta().y() and not e.modifiers() & Qt.ShiftModifier:
            # the wheel zooms, as in photo viewers (Shift+wheel and the scroll bars move a zoomed photo)
            pos, vp = e.position().toPoint(), self.scroll.viewport()
            anchor = pos if obj is vp else self.picture.mapTo(vp, pos) if obj is self.picture else None
            self.zoom_by(1.25 if e.angleDelta().y() > 0 else 0.8, anchor)
            return True
        if t == QEvent.KeyPress and obj in self._buttons and e.key() in (Qt.Key_Return, Qt.Key_Enter) \
                and not e.modifiers() & (Qt.ControlModifier | Qt.AltModifier | Qt.ShiftModifier):
            obj.click()
            return True
        if t in (QEvent.KeyPress, QEvent.ShortcutOverride) and self._key(e) is not None:
            if t == QEvent.KeyPress:
                self._key(e)()
            e.accept()
            return True
        return super().eventFilter(obj, e)

    def zoom_by(self, factor: float, anchor: QPoint | None = None) -> None:
        """Zoom in or out from what is shown (from the fitted size when fitted); `anchor` (a point
        of the scroll area's viewport, the mouse's) keeps the part of the photo under it in place
        (the wheel zoomed about the photo's top-left corner)."""
        if anchor is None:  # the keys zoom about the middle of what is shown (not its top-left corner)
            anchor = self.scroll.viewport().rect().center()
        # a photo loaded but not drawn yet zooms about its middle (a + pressed before it was drawn,
        # after a step or a resize, left the zoomed photo at its top-left corner)
        at = self._photo_point(anchor) or (0.5, 0.5)
        img = self.loader.get(self.hit.path, VIEWER_LOAD) if self.hit is not None else None
        if self.fit:
            self.zoom = self._fitted_zoom(self._photo_size(img)) if img is not None and not img.isNull() else 1.0
            self.fit = False
            self.fit_btn.setText("Fit to window")
            self.scroll.setWidgetResizable(False)
        # up to MAX_ZOOM (or the fitted size of a small photo, which may already be more): zooming in
        # never shrinks, zooming out never grows
        z = self.zoom * factor
        self.zoom = min(z, max(MAX_ZOOM, self.zoom)) if factor > 1 else max(z, min(0.05, self.zoom))
        self._render()
        self._keep_in_place(at, anchor)

    def _keep_in_place(self, at: tuple[float, float], anchor: QPoint) -> None:
        """Scroll the zoomed photo so that its point `at` (fractions of its width and height) lies
        under `anchor` (viewport px)."""
        size = self.picture.shown_size()
        if not size.isEmpty():
            def place():
                self.scroll.horizontalScrollBar().setValue(round(at[0] * size.width() - anchor.x()))
                self.scroll.verticalScrollBar().setValue(round(at[1] * size.height() - anchor.y()))

            place()
            # and again once the scroll area has taken the picture's new size: the bars' ranges
            # follow a layout pass, and the first zoom from the fitted photo stayed at the top-left
            QTimer.singleShot(0, self, place)  # dropped with the dialog

    def _photo_point(self, anchor: QPoint) -> tuple[float, float] | None:
        """Where `anchor` (viewport pixels) lies on the photo shown, as fractions of its width and
        height (clipped to it); None when nothing is shown."""
        r = self.picture.photo_rect()
        if r.isEmpty():
            return None
        p = self.picture.mapFrom(self.scroll.viewport(), anchor)
        return (min(max((p.x() - r.x()) / r.width(), 0.0), 1.0), min(max((p.y() - r.y()) / r.height(), 0.0), 1.0))

    @property
    def hit(self):
        return self.hits[self.row] if 0 <= self.row < len(self.hits) else None

    def show_results(self, hits, row: int, heat: bool, fitted: bool = False) -> None:
        """Show result `row` of `hits`; fitted: opened afresh, so the photo fits the window whatever
        zoom it was closed at (else it reopened at 47 %, a small photo tiny)."""
        self.hits, self.row, self._end = list(hits), row, ""
        self.heat_check.setChecked(heat)
        if fitted and not self.fit:
            self.toggle_fit()
        self._render()

    def step(self, d: int) -> None:
        """The next (d = 1) or previous (-1) result; at either end it stays and says so (going
        round from the last to the first looked like keys that did nothing)."""
        if not self.hits:
            return
        row = self.row + d
        self._end = "" if 0 <= row < len(self.hits) else ("the last result" if d > 0 else "the first result")
        if not self._end:
            self.row = row
            self.currentChanged.emit(self.row)
        self._render()

    def toggle_fit(self) -> None:
        """Fitted <-> actual size (100 %: a pixel of the file on a pixel of the screen), about the
        middle of what is shown (not at the photo's top-left corner, its sky)."""
        middle = self.scroll.viewport().rect().center()
        at = self._photo_point(middle) or (0.5, 0.5)
        self.fit = not self.fit
        self.zoom = 1.0
        self.fit_btn.setText("Actual size" if self.fit else "Fit to window")
        self.scroll.setWidgetResizable(self.fit)
        self._render()
        if not self.fit:
            self._keep_in_place(at, middle)

    def _heat_toggled(self, on: bool) -> None:
        self._render()
        self.heatToggled.emit(on)

    def _emit(self, signal) -> None:
        if self.hit is not None:
            signal.emit(self.hit.path)
            self.close()

    def done(self, r: int) -> None:
        """Closed (Esc, its window's close, Find similar): its photos, up to 64 MB each, leave the
        shared image cache and the heap (else 100 MB stayed after the viewer closed)."""
        super().done(r)
        self.picture.show_text("")
        self.loader.forget(VIEWER_LOAD)
        self.whole.forget(QSize(0, 0))
        return_freed_memory()

    def heat_ready(self, image_id: int) -> None:
        """The overlay's grid of a result was made: drawn if it is the photo shown."""
        if self.isVisible() and self.heat_check.isChecked() and self.hit is not None and self.hit.image_id == image_id:
            self._render()

    def _on_loaded(self, path: str) -> None:
        # closed, it asks for nothing (a thumbnail of its photo loaded for the grid made it decode its
        # 64 MB copy again, just let go)
        if self.isVisible() and self.hit is not None and path == self.hit.path:
            self._render()

    def resizeEvent(self, e):
        super().resizeEvent(e)
        if self.isVisible():
            self._render()

    def _fit_room(self) -> QSize:
        """px: the room a photo fitted to the window takes at most."""
        return self.scroll.viewport().size() - QSize(4, 4)

    def _fitted_zoom(self, photo: QSize) -> float:
        """The scale of a photo of `photo` px fitted to the window."""
        room = self._fit_room()
        return min(room.width() / photo.width(), room.height() / photo.height())

    def _photo_size(self, copy: QImage) -> QSize:
        """px: the shown photo's own size (its file's, turned upright), which `copy`, its loaded
        copy (not null), may be scaled down from; the copy's size when the library's differs in
        shape (the file changed since) or is not known."""
        hit, own = self.hit, copy.size()
        if hit is None or hit.width < own.width() or hit.height < own.height():
            return own
        if abs(hit.width * own.height() - hit.height * own.width()) > 0.02 * hit.width * own.height():
            return own
        return QSize(hit.width, hit.height)

    def _source(self, copy: QImage, photo: QSize, size: QSize) -> tuple[QImage, str]:
        """The image to draw `size` px from, and what the caption adds: `copy` (the loaded copy),
        unless it is shown larger than it holds and the photo is larger; then the photo read whole
        (asked for, `copy` meanwhile) up to FULL_PIXELS."""
        if size.width() <= copy.width() or photo.width() <= copy.width():
            return copy, ""
        if photo.width() * photo.height() > FULL_PIXELS:
            return copy, f" (from a {max(copy.width(), copy.height())}-px copy)"
        whole = self.whole.get(self.hit.path)
        if whole is None:
            self.whole.clear_queue()  # photos paged past at actual size are not read after it
            self.whole.request(self.hit.path)
            return copy, " (reading the whole photo…)"
        if whole.isNull() or whole.size() != photo:
            return copy, f" (from a {max(copy.width(), copy.height())}-px copy)"
        return whole, ""

    def _render(self) -> None:
        hit = self.hit
        if hit is None:
            return
        self.setWindowTitle(f"{Path(display(hit.path)).name} — HeatSearch viewer")
        if hit.path != self._whole_of:  # another photo: the last one read whole (up to 256 MB) goes
            self.whole.forget(QSize(0, 0))
            self._whole_of = hit.path
        img = self.loader.get(hit.path, VIEWER_LOAD)
        ready = img is not None and not img.isNull()
        photo = self._photo_size(img) if ready else QSize()
        # the zoom is of the photo's own pixels (not its 4096-px copy's: a 6144-px
        # photo "fitted 23 %" was drawn at 16 %, and at "100 %" two thirds of its pixels showed)
        if self.fit:
            size = photo.scaled(self._fit_room(), Qt.KeepAspectRatio) if ready else QSize()
        else:
            size = QSize(max(1, round(photo.width() * self.zoom)), max(1, round(photo.height() * self.zoom)))
        source, whence = self._source(img, photo, size) if ready else (img, "")
        if not self.fit:
            zoom = f" · {self.zoom:.0%}{whence}"
        else:  # said too, not only once zoomed
            zoom = f" · fitted {size.width() / photo.width():.0%}" if ready else ""
        end = f" · {self._end}" if self._end else ""
        more = f" (and {copies_words(len(hit.hidden_copies))}, One per duplicate)" if hit.hidden_copies else ""
        # the buttons say where the ends are (else Next stayed enabled on the last result);
        # a focused button about to be greyed hands the focus to the other one, or to the photo
        # (Qt would pass it on to the next button: Space on Next at the end then changed the zoom)
        ends = {self.prev_btn: self.row > 0, self.next_btn: self.row < len(self.hits) - 1}
        for b, on in ends.items():
            if not on and b.hasFocus():
                other = self.next_btn if b is self.prev_btn else self.prev_btn
                (other if ends[other] else self.scroll).setFocus()
            b.setEnabled(on)
        self.caption.setText(f"#{hit.rank} of {len(self.hits)}{end} · relevance {shown_score(hit.score):.2f}{zoom} · {display(hit.path)}{more}")
        if img is None:
            self.loader.request(hit.path, VIEWER_LOAD)
            self.picture.show_text("Loading…")
            return
        if img.isNull():
            self.picture.show_text(f"Cannot show this photo: {self.loader.error(hit.path, VIEWER_LOAD) or 'unreadable'}")
            return
        # held at most at its pixels (the copy's, or the whole photo's): shown larger, it is
        # stretched as it is drawn; the whole photo shown smaller too (only the part on screen is
        # drawn: scaling all of it at each zoom step took the GUI thread's time)
        base = source.scaled(size, Qt.IgnoreAspectRatio, Qt.SmoothTransformation) \
            if size.width() < source.width() and source is img else source
        overlay = None
        if self.heat_check.isChecked():
            grid = self.heat_of(hit)
            if grid is not None:
                side = base.size().scaled(OVERLAY_SIDE, OVERLAY_SIDE, Qt.KeepAspectRatio) \
                    if max(base.width(), base.height()) > OVERLAY_SIDE else base.size()
                overlay = rgba_qimage(overlay_rgba(grid, (side.width(), side.height()), 110))
        self.picture.show_photo(base, size, overlay)
        if not self.fit:
            self.picture.resize(size)
