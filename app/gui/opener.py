"""Opening a library for the window: this computer's (the data folder) or a shared one (a
PostgreSQL URL), writable, or read-only beside another HeatSearch when the user agrees. The
settings are never changed here: a model whose weights file is not reachable (an unplugged drive)
leaves the library answering as indexed, and the window says why."""
from __future__ import annotations

from pathlib import Path

MODEL_WAITS = "Indexing waits: the model cannot run here (the Library pane says why)"


def open_library(home: Path, library: str | None = None, parent=None, interactive: bool = True):
    """(LibraryService, problems to show). Raises HeatSearchError when it cannot be opened at all."""
    from PySide6.QtWidgets import QMessageBox

    from ..core.config import Settings
    from ..core.errors import HeatSearchError, LibraryBusyError
    from ..core.library.service import LibraryService

    settings = Settings.load(home)
    problems = list(settings.problems)
    try:
        svc = LibraryService(home, settings, library=library)
    except LibraryBusyError as e:
        if not interactive or _ask_read_only(f"{str(e)[:1].upper()}{str(e)[1:]}.\n\nOpen it read-only (search only)?",
                                             parent) != QMessageBox.Yes:
            raise
        svc = LibraryService(home, settings, library=library, read_only=True)
    try:
        svc.wait_ready(120)
    except HeatSearchError as e:
        problems.append(str(e))
    if svc.writer.unusable:
        problems.append(MODEL_WAITS)
    return svc, problems


def _ask_read_only(text: str, parent=None) -> int:
    """The question of a second start, in front of the first HeatSearch's window (trial 20: it
    opened behind it, and the start looked like it did nothing). Returns the button chosen."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Question, "HeatSearch is already open", text, QMessageBox.Yes | QMessageBox.No, parent)
    box.setWindowFlag(Qt.WindowStaysOnTopHint, True)
    box.show()
    box.raise_()
    box.activateWindow()
    answer = box.exec()
    box.deleteLater()  # with a parent (a library switched from the window) it stayed behind, hidden
    return answer
