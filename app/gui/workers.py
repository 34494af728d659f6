"""The GUI's one idiom for background work: the core runs its own threads (the library's writer,
the search worker) and reports through callbacks; `CoreBridge` turns every callback into a Qt
signal, which Qt queues to the GUI thread. Only the GUI thread touches widgets and QPixmap.

Images for the screen (thumbnails, the preview, the viewer) are decoded by `ImageLoader` on a
QThreadPool, last request first, into a cache bounded in bytes.
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from PySide6.QtCore import QBuffer, QByteArray, QObject, QRunnable, QSize, Qt, QThreadPool, Signal
from PySide6.QtGui import QImage, QImageReader

from ..core.errors import ImageError, InputError
from ..core.imageio import EXTENSIONS, decode
from ..core.library.service import Event, LibraryService
from ..core.pipeline.search import SearchRequest, Searcher, SearchWorker, on_copy

JPEG_FORMATS = {".jpg", ".jpeg", ".jpe"}


class CoreBridge(QObject):
    """Library events and search answers as signals on the GUI thread."""

    event = Signal(object)  # app.core.library.service.Event
    searchDone = Signal(object)  # SearchResult
    searchFailed = Signal(int, str)  # request id, message

    def __init__(self, svc: LibraryService, parent=None):
        super().__init__(parent)
        self.svc = svc
        self.searcher = Searcher(svc)
        self.worker = SearchWorker(self.searcher, self.searchDone.emit, self.searchFailed.emit)
        self.matches = MatchOverlays(self.searcher, self)
        svc.subscribe(self._forward)

    def _forward(self, ev: Event) -> None:  # called on the writer thread
        self.event.emit(ev)

    def search(self, req: SearchRequest) -> None:
        self.worker.submit(req)

    def shutdown(self, timeout: float = 5.0) -> None:
        self.svc.unsubscribe(self._forward)
        self.matches.shutdown(timeout)
        self.worker.stop(timeout)


class MatchOverlays(QObject):
    """The heat overlay of results: what in each result matches the current query
    (Searcher.match_grid: one CNN pass per photo), made on one Python thread, the photo asked for
    last first (the one just opened, the cells just scrolled into view). `grid(hit)` answers at
    once: the grid, or None after asking for it; `ready(image_id)` fires on the GUI thread when it
    is made. A new query (`set_query`) drops the old grids and the queue."""

    ready = Signal(int)  # image id, for the current query
    _made = Signal(int, int, object, bool)  # query number, image id, grid (None: not made), whether for good

    MAX_GRIDS = 400
    QUIET = 0.25  # s after a new query before its grids are made

    def __init__(self, searcher: Searcher, parent=None):
        super().__init__(parent)
        self.searcher = searcher
        self._query: tuple[int, object] | None = None  # (number, raw descriptor)
        self._cells = None  # the query's cells ((N, C), Searcher.match_grid's), or the library photo to take them from
        self._key = None  # what the grids were made for: (raw bytes, library generation)
        self._own = None  # (H, W) grid of a whole-photo query
        self._size = (0, 0)  # (w, h) of the whole-photo query
        self._busy: tuple[int, int] | None = None  # (query number, image id) being made: not queued again
        self._grids: OrderedDict[int, object] = OrderedDict()  # image id -> grid or None (failed)
        self._queue: list[tuple[int, str]] = []  # (image id, path); GUI thread and worker, under _cond
        self._cond = threading.Condition()
        self._stop = False
        self._n = 0
        self._quiet_until = 0.0
        self._made.connect(self._on_made)
        self._thread: threading.Thread | None = None

    def set_query(self, raw, own=None, size=(0, 0), generation: int = 0, cells=None) -> None:
        """A new query ((C,) raw descriptor, or None: no overlay to make; cells: its cells
        (SearchResult.query_cells), or the path of the library photo searched by its stored
        descriptor, whose cells are made once before its first grid; own: the (H, W) heat
        grid of a whole-photo query, which its own file and its copies show, turned as each lies:
        the gradient of the cosine vanishes on them, and a copy at a third of the size came out
        warm elsewhere; size: that query's (w, h); generation: the library's, whose model, mean and
        whitening the grids are made with). The same query on the same library (another
        filter, count or cut-off) keeps the grids made."""
        key = (raw.tobytes(), generation) if raw is not None else None
        with self._cond:
            if key is not None and key == self._key:
                self._own, self._size = own, tuple(size)
                return
            self._n += 1  # grids made for an earlier query are dropped when they arrive
            self._query = (self._n, raw) if raw is not None else None
            self._key, self._own, self._size, self._cells = key, own, tuple(size), cells
            self._queue.clear()
            self._quiet_until = time.monotonic() + self.QUIET
        self._grids.clear()

    def _lies_as_query(self, hit) -> bool:
        """Whether the query's own grid lies on `hit` as on the query: its file, or a copy of the
        whole photo with the query's frame once turned (a copy with a border added, matched on
        its trimmed picture, has another frame: its own match grid is made)."""
        if hit.duplicate:
            return True
        if not hit.copy or not all(self._size) or not hit.width or not hit.height:
            return False
        w, h = (hit.height, hit.width) if hit.turn >= 4 else (hit.width, hit.height)  # the turns that transpose
        return abs(w / h - self._size[0] / self._size[1]) <= 0.01 * self._size[0] / self._size[1]

    def grid(self, hit):
        """(H, W) float32 grid of `hit` for the current query, or None (being made, or no query)."""
        if self._query is None:
            return None
        if hit.image_id in self._grids:
            self._grids.move_to_end(hit.image_id)
            return self._grids[hit.image_id]
        if self._own is not None and self._lies_as_query(hit):  # the query's own photo: its own heat
            self._grids[hit.image_id] = on_copy(self._own, hit.turn if hit.copy else 0)
            return self._grids[hit.image_id]
        with self._cond:
            item = (hit.image_id, hit.path)
            if self._busy == (self._query[0], hit.image_id):
                return None
            if item in self._queue:
                self._queue.remove(item)
            self._queue.append(item)  # newest first
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="heatsearch-match-overlays", daemon=True)
            self._thread.start()
        return None

    def made(self, hit) -> bool:
        """Whether `hit`'s grid for the current query is made (or could not be)."""
        return self._query is None or hit.image_id in self._grids

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or (self._queue and self._query is not None))
                if self._stop:
                    return
                quiet = self._quiet_until - time.monotonic()
                if quiet > 0:  # a box being dragged searches many times a second: the engine is theirs
                    self._cond.wait(quiet)
                    continue
                image_id, path = self._queue.pop()
                n, raw = self._query
                cells = self._cells
                self._busy = (n, image_id)
            final = True
            if isinstance(cells, str):  # a library photo's: one CNN pass, then every grid uses them
                cells = self._query_cells(n, cells)
            try:
                grid = self.searcher.match_grid(raw, path, cells)
            except (ImageError, InputError):  # an unreadable or vanished photo: no overlay (the photo says why)
                grid = None
            except Exception:  # noqa: BLE001 - a library being switched or refitted: asked again at the next paint
                grid, final = None, False
            with self._cond:
                self._busy = None
                if self._stop:  # shut down meanwhile: this object may be gone
                    return
                self._made.emit(n, image_id, grid, final)

    def _query_cells(self, n: int, path: str):
        """The cells of the library photo at `path`, the query numbered `n` (kept for its next
        grids); None when its file cannot be read now (moved, unmounted): the grids are made
        without them (describe.match_heat), never lost with them."""
        try:
            cells = self.searcher.query_cells(path)
        except Exception:  # noqa: BLE001 - the query's own file; the results' grids do not depend on it
            cells = None
        with self._cond:
            if self._query is not None and self._query[0] == n:
                self._cells = cells
        return cells

    def _on_made(self, n: int, image_id: int, grid, final: bool) -> None:
        if self._query is None or n != self._query[0] or (grid is None and not final):
            return  # made for an earlier query, or to be asked again
        self._grids[image_id] = grid
        while len(self._grids) > self.MAX_GRIDS:
            self._grids.popitem(last=False)
        if grid is not None:
            self.ready.emit(image_id)

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stop = True
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)


def read_qimage(path: str, box: QSize | None = None) -> tuple[QImage, str]:
    """Decode a photo for the screen, EXIF-oriented exactly as the core sees it, scaled to fit
    `box` (None: full size). Returns (image, error); the image is null on error.

    JPEG goes through Qt's reader (it decodes at reduced size and honours EXIF orientation); every
    other format through the core's decoder, so a PNG, WebP or TIFF carrying an orientation is
    turned once, as the core turns it (Qt ignores it there: a drawn box selected another region),
    and no Qt plugin sees a buffer that may be freed before it (a TIFF shown crashed the app).
    Safe for any file name: the bytes are read by Python."""
    ext = os.path.splitext(path)[1].lower()
    if ext in JPEG_FORMATS:
        try:
            with open(path, "rb") as fh:
                data = QByteArray(fh.read())
        except OSError as e:
            return QImage(), _plain(e)
        buf = QBuffer(data)
        buf.open(QBuffer.ReadOnly)
        reader = QImageReader(buf)
        try:
            reader.setAutoTransform(True)  # EXIF orientation, like the core's decoder
            raw = reader.size()
            if box is not None and raw.isValid():  # decode at reduced size (JPEG scaling)
                reader.setScaledSize(raw.scaled(box * 2, Qt.KeepAspectRatio) if raw.width() > box.width() * 2 else raw)
            img = reader.read()
            err = reader.errorString()
        finally:
            reader.setDevice(None)  # the reader lets go of the buffer before the buffer goes
            buf.close()
        if img.isNull():
            return img, err
    elif ext in EXTENSIONS:
        try:
            photo = decode(path, draft_side=max(box.width(), box.height()) if box is not None else None)
        except Exception as e:  # noqa: BLE001 - shown as the reason
            return QImage(), _plain(e)
        im = photo.image
        img = QImage(im.tobytes(), im.width, im.height, 3 * im.width, QImage.Format_RGB888).copy()
    else:
        return QImage(), "not a photo format HeatSearch reads"
    if box is not None and (img.width() > box.width() or img.height() > box.height()):
        img = img.scaled(box, Qt.KeepAspectRatio, Qt.SmoothTransformation)
    return img, ""


def _plain(e: Exception) -> str:
    """A reason in words (an OSError's text, not its class)."""
    if isinstance(e, OSError):
        return e.strerror or str(e) or "cannot read the file"
    return str(e) or type(e).__name__


class _Task(QRunnable):
    def __init__(self, loader: "ImageLoader"):
        super().__init__()
        self.loader = loader

    def run(self):
        key = self.loader._next()
        if key is None:
            return
        path, w, h = key
        img, err = QImage(), "cannot read the file"
        try:
            img, err = read_qimage(path, QSize(w, h) if w else None)
        finally:  # delivered whatever happens: it is no longer being read
            self.loader._deliver(key, img, err)


class ImageLoader(QObject):
    """Screen images off the GUI thread, newest request first (the cells just scrolled into view),
    cached by (path, size) up to `cache_bytes`. `loaded(path)` fires on the GUI thread; then
    `get(path, size)` returns the QImage (null when the file could not be read; `error()` says why)."""

    loaded = Signal(str)

    def __init__(self, cache_bytes: int = 96 << 20, threads: int = 2, parent=None):
        super().__init__(parent)
        self._cache: OrderedDict[tuple, QImage] = OrderedDict()
        self._errors: dict[tuple, str] = {}
        self._bytes = 0
        self.cache_bytes = cache_bytes
        self._queue: list[tuple] = []
        self._queued: set[tuple] = set()
        self._forgotten: set[tuple] = set()  # sizes let go (`forget`) and not asked for since
        self._reading: set[tuple] = set()  # taken from the queue, not delivered yet (asked again: read once)
        self._lock = threading.Lock()
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(threads)

    @staticmethod
    def _key(path: str, size: QSize | None) -> tuple:
        return (path, size.width(), size.height()) if size is not None else (path, 0, 0)

    def get(self, path: str, size: QSize | None = None) -> QImage | None:
        key = self._key(path, size)
        with self._lock:
            img = self._cache.get(key)
            if img is not None:
                self._cache.move_to_end(key)
            return img

    def error(self, path: str, size: QSize | None = None) -> str:
        return self._errors.get(self._key(path, size), "")

    def request(self, path: str, size: QSize | None = None) -> None:
        key = self._key(path, size)
        with self._lock:
            self._forgotten.discard(key[1:])
            if key in self._cache or key in self._reading:
                return
            if key in self._queued:
                self._queue.remove(key)
            self._queue.append(key)  # LIFO: newest request served first
            self._queued.add(key)
        self.pool.start(_Task(self))

    def clear_queue(self) -> None:
        with self._lock:
            self._queue.clear()
            self._queued.clear()

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def forget(self, size: QSize) -> None:
        """Drop the images at `size` (the viewer's, up to 64 MB each, once it closes): cached,
        queued, and those being read now, which are not cached when they come (until `size` is
        asked for again)."""
        dims = (size.width(), size.height())
        with self._lock:
            for key in [k for k in self._cache if k[1:] == dims]:
                self._bytes -= self._cache.pop(key).sizeInBytes()
            self._queue = [k for k in self._queue if k[1:] != dims]
            self._queued = {k for k in self._queued if k[1:] != dims}
            self._forgotten.add(dims)

    def _next(self):
        with self._lock:
            if not self._queue:
                return None
            key = self._queue.pop()
            self._queued.discard(key)
            self._reading.add(key)
            return key

    def _deliver(self, key, img: QImage, err: str) -> None:
        with self._lock:
            self._reading.discard(key)
            if key[1:] in self._forgotten:  # read for a viewer closed since
                return
            old = self._cache.pop(key, None)
            if old is not None:
                self._bytes -= old.sizeInBytes()
            self._cache[key] = img
            self._bytes += img.sizeInBytes()
            if err:
                self._errors[key] = err
            while self._bytes > self.cache_bytes and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._bytes -= dropped.sizeInBytes()
        self.loaded.emit(key[0])

    def shutdown(self, ms: int = 5000) -> None:
        self.clear_queue()
        self.pool.waitForDone(ms)


class Background(QObject):
    """A short job off the GUI thread (a catalog read), its answer back on the GUI thread."""

    _done = Signal(object, object)  # callback, result (or the exception)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._done.connect(lambda cb, result: cb(result))

    def run(self, fn, callback) -> threading.Thread:
        def work():
            try:
                result = fn()
            except Exception as e:  # noqa: BLE001 - handed to the callback, which decides
                result = e
            self._done.emit(callback, result)

        t = threading.Thread(target=work, name="heatsearch-background", daemon=True)
        t.start()
        return t
