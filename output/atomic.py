"""Write a whole file or nothing: the temporary-name-then-rename convention.

A reader (a dashboard, `ldp show`, a restarted run, another process) must never see half a
file. A file is written under a hidden temporary name in its own folder (``.<name>.<unique>.tmp``,
which no reader lists) and renamed onto its final name. Locally the rename is atomic
(`os.replace`) and the data is flushed to disk first; a remote path (``gs://…``, any URL with a
scheme) goes through Beam's file systems, which are imported only then, so this module stays
Beam-free for local use.
"""
from __future__ import annotations

import os
import re
import tempfile
import threading
import uuid

from ldp_telemetry.ldp.base.errors import ConfigError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(path: str) -> bool:
    """True when `path` is a URL such as ``gs://bucket/x`` rather than a local path."""
    return bool(_SCHEME.match(path))


def temporary_name(name: str) -> str:
    """The hidden temporary name a file called `name` is written under before its rename."""
    return f".{name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.tmp"


def check_writable_folder(folder: str, field: str) -> None:
    """Create the local `folder` where absent and check that a file can be written in it, before
    a job or an export starts; ConfigError naming the setting `field` and the folder otherwise.
    A remote folder is left to the runner to check."""
    if is_remote(folder):
        return
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ConfigError(f"{field} {folder!r} cannot be written: {error.strerror or error}",
                          field) from None


def write_atomically(path: str, data: str | bytes, fsync: bool = True) -> None:
    """Write `data` (text is UTF-8 encoded) to `path` so that readers see all of it or none.

    Local folders are created as needed; `fsync` flushes the file to disk before the rename
    (a checkpoint must survive a crash; a pane that is rewritten anyway need not).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if is_remote(path):
        _write_remote(path, payload)
        return
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, temporary_name(os.path.basename(path)))
    try:
        with open(temporary, "wb") as handle:
            handle.write(payload)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:  # after a failed write the temporary file is removed; after the rename it is gone
        if os.path.exists(temporary):
            os.unlink(temporary)


def _write_remote(path: str, payload: bytes) -> None:
    from apache_beam.io.filesystems import FileSystems

    folder, name = path.rstrip("/").rsplit("/", 1)
    temporary = f"{folder}/{temporary_name(name)}"
    with FileSystems.create(temporary) as handle:
        handle.write(payload)
    FileSystems.rename([temporary], [path])
