"""The one idiom for background work: a core generator or function runs in a QThread; results
come back to the GUI thread by queued signals. Only the GUI thread touches widgets and QPixmap;
workers hand back plain objects and QImage.
"""
from __future__ import annotations

import threading
import traceback
from collections import OrderedDict

from PySide6.QtCore import QObject, QRunnable, QSize, Qt, QThread, QThreadPool, Signal
from PySide6.QtGui import QImage, QImageReader

from ..core.errors import HeatSearchError
from ..core.library import Library
from ..core.pipeline.indexer import JobControl, Progress, index_library
from ..core.pipeline.search import SearchRequest, Searcher


class IndexJob(QThread):
    """Runs `index_library` in its own thread (the catalog's one writer)."""

    progressed = Signal(object)  # Progress
    completed = Signal(object)  # last Progress
    failed = Signal(str)

    def __init__(self, lib: Library, parent=None):
        super().__init__(parent)
        self.lib = lib
        self.control = JobControl()
        self.setObjectName("heatsearch-index")

    def run(self):
        last = Progress("done")
        try:
            for last in index_library(self.lib, self.control):
                self.progressed.emit(last)
            self.completed.emit(last)
        except HeatSearchError as e:
            self.failed.emit(str(e))
        except Exception as e:  # noqa: BLE001 - shown to the user, never a silent thread death
            traceback.print_exc()
            self.failed.emit(f"indexing stopped: {e}")


class SearchThread(QThread):
    """Answers search requests one at a time, newest first: a request that was superseded before
    it started is skipped (box dragging sends many)."""

    resultReady = Signal(object)  # SearchResult
    failed = Signal(int, str)  # request id, message

    def __init__(self, searcher: Searcher, parent=None):
        super().__init__(parent)
        self.searcher = searcher
        self._cond = threading.Condition()
        self._pending: SearchRequest | None = None
        self._stop = False
        self.setObjectName("heatsearch-search")

    def submit(self, req: SearchRequest):
        with self._cond:
            self._pending = req
            self._cond.notify()

    def stop(self):
        with self._cond:
            self._stop = True
            self._cond.notify()
        self.wait()

    def run(self):
        while True:
            with self._cond:
                while self._pending is None and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                req, self._pending = self._pending, None
            try:
                self.resultReady.emit(self.searcher.search(req))
            except HeatSearchError as e:
                self.failed.emit(req.id, str(e))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                self.failed.emit(req.id, f"search failed: {e}")


class _ThumbTask(QRunnable):
    def __init__(self, loader: "ThumbnailLoader"):
        super().__init__()
        self.loader = loader

    def run(self):
        path = self.loader._next()
        if path is None:
            return
        reader = QImageReader(path)
        reader.setAutoTransform(True)  # EXIF orientation, like the core's decoder
        raw = reader.size()
        if raw.isValid():  # decode at reduced size (JPEG scaling): cheap thumbnails of big photos
            reader.setScaledSize(raw.scaled(self.loader.size * 2, Qt.KeepAspectRatio))
        img = reader.read()
        if not img.isNull():
            img = img.scaled(self.loader.size, Qt.KeepAspectRatio, Qt.SmoothTransformation)
        self.loader._deliver(path, img)


class ThumbnailLoader(QObject):
    """Thumbnails off the GUI thread, last requested first (the cells just scrolled into view),
    with an LRU of QImage. `loaded(path)` fires on the GUI thread; call `get(path)` then."""

    loaded = Signal(str)

    def __init__(self, size: QSize = QSize(160, 160), cache_items: int = 600, parent=None):
        super().__init__(parent)
        self.size = size
        self._cache: OrderedDict[str, QImage] = OrderedDict()
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._cache_items = cache_items
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(2)

    def get(self, path: str) -> QImage | None:
        with self._lock:
            img = self._cache.get(path)
            if img is not None:
                self._cache.move_to_end(path)
            return img

    def request(self, path: str):
        with self._lock:
            if path in self._cache:
                return
            if path in self._queued:
                self._queue.remove(path)
            self._queue.append(path)  # LIFO: newest request served first
            self._queued.add(path)
        self.pool.start(_ThumbTask(self))

    def clear_queue(self):
        with self._lock:
            self._queue.clear()
            self._queued.clear()

    def _next(self) -> str | None:
        with self._lock:
            if not self._queue:
                return None
            p = self._queue.pop()
            self._queued.discard(p)
            return p

    def _deliver(self, path: str, img: QImage):
        with self._lock:
            self._cache[path] = img
            while len(self._cache) > self._cache_items:
                self._cache.popitem(last=False)
        self.loaded.emit(path)

    def shutdown(self):
        self.clear_queue()
        self.pool.waitForDone(5000)

