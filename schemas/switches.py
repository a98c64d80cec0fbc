"""The cyclic garbage collector, paused while a chunk of records is decoded.

Decoding allocates a dict per record, all freed by reference counting; while a chunk of them is
alive the cyclic garbage collector would scan them again and again for nothing (measured: decode
runs ~1.5x faster without it), so it is paused. Event times need no such switch: the decoder
hands fastavro the writer schema without logical types (`compatibility.without_logical_types`),
so timestamp-millis decode to int milliseconds.

The collector is process-wide, so it is switched under one lock and one count: the first thread
to enter pauses it, the last one to leave restores what it found. Keep the block short (the
decoder holds it for one chunk at a time, never across a `yield`).
"""
from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_users = 0
_gc_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Within the block: no cyclic garbage collection (reference-counted across threads)."""
    global _users, _gc_was_enabled
    with _lock:
        if _users == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _gc_was_enabled:
                gc.enable()
