"""A bug in the project's decoding code fails loudly; it never looks like bad data."""
from __future__ import annotations

import gc
import threading
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.schemas import decompress, records
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.switches import collector_paused
from tests.schemas.avro_blocks import write_blocks
from tests.schemas.test_codec import HOUR, REGISTRY, good


def a_file(tmp_path, codec="null"):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, m) for i in range(50) for m in ("g", "h")]], codec=codec)
    return str(path)


def injected(error):
    def broken(*args, **kwargs):
        raise error("injected programming error")
    return broken


@pytest.mark.parametrize("error", [TypeError, AttributeError, NameError])
@pytest.mark.parametrize("where", [
    "a protocol's payload check",
    "the block record decoder",
    "the deflate decompressor",
    "a protocol's payload columns",
    "the slicing",
])
def test_an_injected_programming_error_surfaces(tmp_path, monkeypatch, error, where):
    codec = "null"
    if where == "a protocol's payload check":
        monkeypatch.setattr(type(REGISTRY["g"].protocol), "check_payloads", injected(error))
    elif where == "the block record decoder":
        monkeypatch.setattr(records.BlockRecords, "decode", injected(error))
    elif where == "the deflate decompressor":
        monkeypatch.setitem(decompress._DECOMPRESSORS, "deflate", injected(error))
        codec = "deflate"
    elif where == "a protocol's payload columns":
        monkeypatch.setattr(type(REGISTRY["g"].protocol), "payloads_from_avro", injected(error))
    else:
        monkeypatch.setattr("ldp_telemetry.schemas.codec.split_by_slice", injected(error))
    decoder = ReportDecoder(REGISTRY, HOUR)
    with pytest.raises(error, match="injected programming error"):
        list(decoder.decode_file(a_file(tmp_path, codec)))
    assert gc.isenabled()  # the collector is restored on the way out


def test_the_pause_is_reference_counted_across_threads():
    entered, release = threading.Barrier(5), threading.Event()
    states = []

    def user():
        with collector_paused():
            entered.wait()
            release.wait()
            states.append(gc.isenabled())

    threads = [threading.Thread(target=user) for _ in range(4)]
    for thread in threads:
        thread.start()
    entered.wait()  # all four inside
    with collector_paused():  # a fifth user, nested in this thread
        with collector_paused():
            pass
        assert not gc.isenabled()
    release.set()
    for thread in threads:
        thread.join()
    assert states == [False] * 4  # still paused while any is inside
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_pause_is_not_held_while_batches_are_handed_out(tmp_path):
    """The decoder yields outside the pause: the consumer sees the process as it was."""
    decoder = ReportDecoder(REGISTRY, HOUR, chunk_records=10)
    for _ in decoder.decode_file(a_file(tmp_path)):
        assert gc.isenabled()


def test_bad_data_is_still_a_dead_letter(tmp_path):
    """The same places, fed damaged bytes instead of a bug: dead letters, no exception."""
    path = a_file(tmp_path, "deflate")
    data = bytearray(Path(path).read_bytes())
    data[-40:-20] = np.random.default_rng(0).integers(0, 256, 20, dtype=np.uint8).tobytes()
    Path(path).write_bytes(bytes(data))
    decoder = ReportDecoder(REGISTRY, HOUR)
    items = list(decoder.decode_file(path))
    dead = sum(item.records for item in items if isinstance(item, DeadLetter))
    assert dead > 0 and decoder.records_read == 100
    assert sum(item.n for item in items if isinstance(item, ReportBatch)) + dead == 100
