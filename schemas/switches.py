"""The two process-wide settings that decoding changes, held by one reference-counted context.

fastavro turns timestamp-millis into timezone-aware datetimes through its documented
`fastavro.read.LOGICAL_READERS` table; building a datetime per report would cost more than the
rest of the decode, so an identity reader is installed while decoding, and the event time stays
epoch milliseconds (an int). (The report decoder now also hands fastavro its writer schema
without logical types, `compatibility.without_logical_types`, which spares the call per report;
the identity reader stays as the guard of any other timestamp-millis decoded under the switch.)
Decoding also allocates a dict per record, all freed by reference
counting; while a chunk of them is alive the cyclic garbage collector would scan them again and
again for nothing (measured: decode runs ~1.5x faster without it), so it is paused.

Both are process-wide, so both are switched together under one lock and one count: the first
thread to enter switches them, the last one to leave restores what it found. Other code that
reads timestamp-millis with fastavro in the same process while a decode is under way would see
milliseconds too: keep the block short (the decoder holds it for one chunk at a time, never
across a `yield`).
"""
from __future__ import annotations

import contextlib
import gc
import threading

import fastavro.read

_TIMESTAMP_READER = "long-timestamp-millis"
_lock = threading.Lock()
_users = 0
_saved_reader = None
_gc_was_enabled = False


def _identity(datum, *_):
    return datum


@contextlib.contextmanager
def decoding_switches():
    """Within the block: timestamp-millis decode to int milliseconds, and no cyclic GC."""
    global _users, _saved_reader, _gc_was_enabled
    with _lock:
        if _users == 0:
            _saved_reader = fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER]
            fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER] = _identity
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                fastavro.read.LOGICAL_READERS[_TIMESTAMP_READER] = _saved_reader
                _saved_reader = None
                if _gc_was_enabled:
                    gc.enable()
