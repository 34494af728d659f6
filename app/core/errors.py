"""Typed errors of the core. One root, so the CLI and the GUI catch and show them in one place:
the message of every HeatSearchError is a sentence for the user, with a hint where one helps."""


class HeatSearchError(Exception):
    """Root of every error the core raises on purpose; its message is shown to the user as is."""


class ImageError(HeatSearchError):
    """A file could not be read as a photo (corrupt, truncated, not an image, too large, unreadable).

    retry: the cause is this machine, not the file (no permission, an I/O error, no decoder for its
    format here): the file is kept and tried again at every scan."""

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry


class WeightsMissingError(HeatSearchError):
    """A backbone's weights are not on this machine; the message names the file and where to put it."""


class WeightsLoadError(HeatSearchError):
    """A weights file exists but cannot be loaded safely (not a plain state dict, wrong keys)."""


class EngineError(HeatSearchError):
    """No inference engine can run the model (runtime missing, export failed, device absent)."""


class CatalogError(HeatSearchError):
    """The catalog is unusable (newer schema, locked, corrupt)."""


class ServerUnreachable(CatalogError):
    """A shared library's server does not answer (stopped, unreachable, the connection dropped).
    A state, not a fault of the call: the service reports it once, fails fast while it lasts and
    retries by itself; the message says where, in one line."""


class StaleSnapshotError(CatalogError):
    """A reader's snapshot points at vectors the writer has since replaced (a refit on a shared
    library): take a fresh snapshot and search again."""


class LibraryBusyError(HeatSearchError):
    """Another process holds the library's write lock; the message names it."""


class LockLostError(LibraryBusyError):
    """The writer lock was lost while writing (its connection to the server dropped): the writer
    stops before its next batch and goes on once it holds the lock again."""


class ReadOnlyError(HeatSearchError):
    """A change was asked of a library this client may only search (a searcher role, a read-only
    data folder)."""


class InputError(HeatSearchError):
    """A flag, a box, a queries line or a setting has a value that cannot be used."""


class Cancelled(HeatSearchError):
    """A background job was cancelled by the user; the UI ignores it."""
