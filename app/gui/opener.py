"""Opening a library for the window: this computer's (the data folder) or a shared one (a
PostgreSQL URL). Opening takes no lock and writes nothing: several windows, and other computers,
may have one library open at once; each write waits its turn. The settings are never changed
here: a model whose weights file is not reachable (an unplugged drive) leaves the library
answering as indexed, and the window says why."""
from __future__ import annotations

from pathlib import Path

MODEL_WAITS = "Indexing waits: the model cannot run here (the Library pane says why)"


def open_library(home: Path, library: str | None = None):
    """(LibraryService, problems to show). Raises HeatSearchError when it cannot be opened at all."""
    from ..core.config import Settings
    from ..core.errors import HeatSearchError
    from ..core.library.service import LibraryService

    settings = Settings.load(home)
    problems = list(settings.problems)
    svc = LibraryService(home, settings, library=library)
    try:
        svc.wait_ready(120)
    except HeatSearchError as e:
        problems.append(str(e))
    if svc.unusable:
        problems.append(MODEL_WAITS)
    return svc, problems
