"""Durable small files: written under a unique temporary name, fsynced, renamed, folder synced;
and one writer at a time through an exclusive lock.

`write_durably(path, data)` returns only once `data` is on disk under `path` (the file and its
folder fsynced): after a power cut the path holds the old bytes or the new ones, never a mix and
never nothing; `exclusive=True` refuses to replace an existing file (the new name is linked,
not renamed, so two writers cannot both create it). `settle(path)` makes a file as it stands
durable the same way (bytes another writer renamed into place, whose folder sync may have
failed). `locked(path)` holds an exclusive `fcntl.flock` on `path` (created once, never removed:
removing a lock file lets two writers lock two files); under it, `remove_temporaries(path)`
removes what a writer killed mid-write left.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator

try:  # POSIX; a platform without it cannot lock, and `locked` says so
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def sync_folder(folder: str, strict: bool = False) -> None:
    """Make a rename in `folder` durable. Where the platform cannot open a folder (Windows) this
    is a no-op unless `strict`, which then raises the OSError."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        if strict and os.name == "posix":
            raise
        return
    try:
        os.fsync(descriptor)
    except OSError:
        if strict:
            raise
    finally:
        os.close(descriptor)


def write_durably(path: str | os.PathLike, data: bytes, exclusive: bool = False) -> None:
    """Write `data` to `path` durably (module docstring); the temporary file is removed after any
    failure. `exclusive`: FileExistsError if `path` exists."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            os.link(temporary, path)
        else:
            os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    sync_folder(folder, strict=True)


def remove_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporary files `write_durably(path, ...)` left behind when its process died
    between creating and renaming them (they may hold what `path` holds, a secret included).
    Call it only while holding the lock that every writer of `path` holds. Returns their names."""
    path = os.fspath(path)
    folder, name = os.path.dirname(path) or ".", os.path.basename(path)
    pattern = re.compile(re.escape(name) + r"\.[a-z0-9_]{8}\.tmp")  # mkstemp's random names
    removed = []
    for entry in os.listdir(folder):
        if pattern.fullmatch(entry):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, entry))
                removed.append(entry)
    return removed


def settle(path: str | os.PathLike) -> None:
    """fsync the file `path` and its folder (module docstring); OSError when either fails."""
    path = os.fspath(path)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    sync_folder(os.path.dirname(path) or ".", strict=True)


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (created 0600 when absent) for the block."""
    if fcntl is None:  # pragma: no cover - Windows
        raise OSError("exclusive file locks need POSIX fcntl, which this platform lacks")
    descriptor = os.open(os.fspath(path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the last descriptor releases the lock
