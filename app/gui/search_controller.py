"""Searching as the window does it: the query (a photo file, or pixels pasted or read off the
screen), the requests made of it (a new id each; only the latest one's answer is shown), the answer
shown, a query that could not be read (the last search stays), and a search made again when the
library changed under the answer shown.

It holds that state as named fields and decides; the window renders (the query pane, the grid,
the status words). Requests go to the search worker through the LibraryController's bridge.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from PIL import Image as PILImage
from PySide6.QtCore import QObject, Signal

from ..core import verification
from ..core.paths import display
from ..core.pipeline.search import Searcher, SearchRequest, SearchResult, request_from_settings
from ..core.features.registry import REGISTRY
from .library_controller import LibraryController


@dataclass
class KeptQuery:
    """The answered query a new one replaced, given back when the new photo cannot be read: its
    photo (path or pixels), its size, what the query pane showed (image, size, box) and its request."""

    path: str | None
    pixels: PILImage.Image | None
    orig: tuple | None
    image: object
    orig_size: tuple | None
    box: tuple | None
    request: SearchRequest | None


class SearchController(QObject):
    """State: `query_path` / `query_pixels` (the photo searched with), `query_orig` (its size, (w,
    h), oriented), `last_request` (the latest asked), `last_result` (the latest answer shown),
    `kept` (the answered query a new one replaced), `failed` (the last search failed for a reason
    a library change may mend), `again` (the request a library change made), `next_note` (words
    for the next answer's status line), `deleted_query` (the query file last found deleted),
    `scroll_top` (the next answer is shown from its top)."""

    asked = Signal(object)  # a SearchRequest was submitted
    said = Signal(str)  # words for the status line (no answer to show)

    def __init__(self, library: LibraryController, parent=None):
        super().__init__(parent)
        self.lib = library
        self._req_id = 0
        self.query_path: str | None = None
        self.query_pixels: PILImage.Image | None = None
        self.query_orig: tuple | None = None
        self.last_request: SearchRequest | None = None
        self.last_result: SearchResult | None = None
        self.shown_request: SearchRequest | None = None
        self.kept: KeptQuery | None = None
        self.failed = False
        self.again: SearchRequest | None = None
        self.answering = None  # the space whose descriptions answered searches when last looked at
        self.next_note = ""
        self.deleted_query: str | None = None
        self.scroll_top = False

    def reset(self) -> None:
        """Another library opened: no query, no answer."""
        self.query_path, self.query_pixels, self.last_request, self.last_result = None, None, None, None
        self.kept, self.shown_request, self.failed, self.again = None, None, False, None

    @property
    def has_query(self) -> bool:
        return self.query_path is not None or self.query_pixels is not None

    def answered(self, image_shown: bool) -> bool:
        """Whether the query pane's photo (`image_shown`) and the results are of one search, answered."""
        return self.last_result is not None and self.last_request is not None and image_shown \
            and self.last_result.request_id == self.last_request.id

    def begin(self, path: str | None, pixels: PILImage.Image | None, orig: tuple | None, kept: KeptQuery | None) -> None:
        """A new photo to search with (a file, or pixels); `kept`: what the answered query it
        replaces looked like, given back if the new photo cannot be read. Its answer is shown from
        its top."""
        self.kept = kept
        self.query_path, self.query_pixels, self.query_orig = path, pixels, orig
        self.scroll_top = True

    def from_screen(self, pixels: PILImage.Image) -> str | None:
        """The query file is gone (deleted, its drive away): searched from now on as shown.
        Returns the path that went."""
        gone, self.query_path, self.query_pixels = self.query_path, None, pixels
        self.next_note = f"; {os.path.basename(display(gone))} was deleted: searched as shown"
        self.deleted_query = gone
        return gone

    def ask(self, box, moving: bool, top: int, filters, hide_duplicates: bool) -> SearchRequest | None:
        """Submit a request for the query with these inputs (moving: the box is being dragged:
        the photo's map alone answers, at once). None when there is no query."""
        svc = self.lib.svc
        if not self.has_query or svc is None or self.lib.bridge is None:
            return None
        self._req_id += 1
        extra = {"mode": "map"} if moving else {}
        req = request_from_settings(svc.settings, id=self._req_id, path=self.query_path, image=self.query_pixels, box=box,
                                    top=top, filters=filters, hide_duplicates=hide_duplicates, **extra)
        self.last_request = req
        self.lib.bridge.search(req)
        self.asked.emit(req)
        return req

    def take(self, res: SearchResult):
        """An answer arrived. None when it is not for the latest request (a stale answer never
        replaces a newer one); else (the answer shown before, whether it is the same query as the
        one shown, whether it is the library-change search again, keep selection)."""
        if self.last_request is None or res.request_id != self.last_request.id:
            return None
        before, self.last_result = self.last_result, res
        shown, self.shown_request = self.shown_request, self.last_request
        self.failed = False
        self.kept = None  # answered: the query it replaced is not to come back
        req = self.last_request
        same = shown is not None and shown.path == req.path and shown.image is req.image and shown.box == req.box
        again, self.again = self.again is req, None
        return before, same, again

    def words(self, res: SearchResult, before: SearchResult | None, same: bool, again: bool) -> tuple[str, str]:
        """(the status line after an answer, its tooltip: how the answer was made)."""
        svc = self.lib.svc
        space = svc.snapshot().space if svc is not None else None
        # another model's descriptions answer the same query (a weights file back)
        moved = (f"; redone with {model_words(space)} now in use"
                 if again and same and before is not None and before.space_id not in (0, res.space_id)
                 and space is not None and space.id == res.space_id else "")
        t = res.timings
        # a whole photo's results come first; then its turns are searched and the first results'
        # details compared with the photo's (Searcher.search's early answers)
        took = t.get("elapsed_ms", t.get("query_ms", 0) + t.get("total_ms", 0))
        first = ("; refining…" if not res.settled else
                 f" (first results in {t['shown_ms']:.0f} ms)" if "shown_ms" in t else "")
        text = f"Search took {took:.0f} ms{' (box)' if res.box else ''}{first}{moved}{self.next_note}"
        if res.settled:
            self.next_note = ""
        plan, how = res.plan, []
        if plan is not None and plan.qe:
            how.append("the photo was blended with its closest matches (query expansion)")
        if plan is not None and plan.her:
            how.append("the best results were reordered by how they resemble each other (heat re-ranking)")
        if not res.settled:
            how.append("the photo is also searched turned (a photo stored sideways) and the first results are compared"
                       " detail by detail with it")
        if plan is not None and plan.verified:
            how.append(f"the first results were compared detail by detail with the photo: {plan.verified} share many"
                       f" of its details, those sharing few read {verification.BELOW_STEP:.2f} at most, as do the"
                       f" results after the first {Searcher.VERIFIED}")
        if plan is not None and plan.unmatched:
            how.append(f"its first results share few of the photo's details: the library may not hold its subject,"
                       f" every result reads {verification.BELOW_STEP:.2f} of its number")
        return text, (text + "; " + "; ".join(how)) if how else ""

    def fail(self, req_id: int, msg: str) -> str | None:
        """A search failed. None when not for the latest request; "keep" when the new photo cannot
        be read and the last search stays (`kept`); "unreadable" when nothing stays; "" otherwise
        (the message is said)."""
        if self.last_request is None or req_id != self.last_request.id:
            return None
        unreadable = "cannot read the query" in msg or "no such photo" in msg
        self.failed = not unreadable
        self.scroll_top = False
        if unreadable and self.kept is not None and self.last_request.path != self.kept.path:
            return "keep"
        return "unreadable" if unreadable else ""

    def restore(self) -> KeptQuery:
        """Give back the kept query (the new photo could not be read)."""
        k = self.kept
        self.query_path, self.query_pixels, self.query_orig, self.last_request = k.path, k.pixels, k.orig, k.request
        return k

    def again_if_changed(self) -> bool:
        """Whether the answer shown is from a library that has changed since (photos added or
        removed, another model) or the last search failed for a reason a change may mend: then
        it is asked again (the caller does) and its answer says when another model answers. When
        there is none to redo but another model answers now, that is said."""
        svc = self.lib.svc
        if svc is None:
            return False
        snap, res = svc.snapshot(), self.last_result
        space = snap.space.id if snap.space is not None else 0
        moved, self.answering = self.answering not in (None, 0, space), space
        if (res is not None and (res.generation, res.space_id) != (snap.generation, space)) or self.failed:
            return True
        if moved and snap.space is not None:
            self.said.emit(f"Searches now use {model_words(snap.space)}")
        return False

    def mark_again(self) -> None:
        """The request just asked is the library-change search again."""
        self.again = self.last_request


def model_words(space) -> str:
    """A space's model, photo size and precision as Settings names them: "EfficientNet-Lite0
    (512 px)", "ResNet50 (512 px, 8-bit)"."""
    spec = REGISTRY.get(space.backbone)
    name = spec.label.split(" (")[0] if spec is not None and spec.label else space.backbone
    bits = {"int8": ", 8-bit", "bf16": ", 16-bit"}.get(space.precision, "")
    return f"{name} ({space.max_side} px{bits})"
