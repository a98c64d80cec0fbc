"""Opening local report files: regular files only, never blocking.

An input glob can match more than report files. A FIFO blocks whoever opens it until a writer
appears (forever, in a batch job); a device or socket is no file of reports; a dangling link or a
link loop has nothing to read. Each of these is refused with a `RefusedInput` that names the
dead-letter reason, before anything is opened: the path is checked with `os.stat`, then opened
without blocking (`O_NONBLOCK`) and checked again on the open descriptor, so that a path
swapped for a FIFO in between is refused too.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from ldp_telemetry.ldp.engine.reasons import Reason

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


class RefusedInput(OSError):
    """A path that must not be read as a report file; `reason` is its dead-letter reason."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def open_report_file(path: str, mode: str = "rb") -> BinaryIO:
    """A binary stream of the regular file at `path` (following links).

    Raises RefusedInput for anything that is not a regular file, and OSError when the file
    cannot be opened (missing, no permission).
    """
    if mode != "rb":
        raise ValueError(f"report files are opened 'rb', not {mode!r}")
    try:
        _check(os.stat(path).st_mode)
    except FileNotFoundError:
        if os.path.islink(path):
            raise RefusedInput(Reason.BROKEN_LINK,
                               f"dangling symbolic link to {os.readlink(path)!r}") from None
        raise
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RefusedInput(Reason.BROKEN_LINK, "symbolic link loop") from None
        raise
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    handle = None
    try:
        _check(os.fstat(descriptor).st_mode)
        os.set_blocking(descriptor, True)
        handle = os.fdopen(descriptor, "rb")
    finally:
        if handle is None:
            os.close(descriptor)
    return handle


def _check(mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise RefusedInput(Reason.NOT_A_REGULAR_FILE, f"{kind}, not a regular file: not opened")
