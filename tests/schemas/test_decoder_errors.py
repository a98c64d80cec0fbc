"""A bug in the project's decoding code fails loudly; it never looks like bad data."""
from __future__ import annotations

import gc
import threading
from pathlib import Path

import fastavro.read
import numpy as np
import pytest

from ldp_telemetry.schemas import decompress, records, switches
from ldp_telemetry.schemas.batches import DeadLetter, ReportBatch
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.switches import decoding_switches
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
    assert gc.isenabled()  # the switches are restored on the way out
    assert fastavro.read.LOGICAL_READERS["long-timestamp-millis"] is not switches._identity


def test_the_switches_are_reference_counted_across_threads():
    original = fastavro.read.LOGICAL_READERS["long-timestamp-millis"]
    entered, release = threading.Barrier(5), threading.Event()
    states = []

    def user():
        with decoding_switches():
            entered.wait()
            release.wait()
            states.append((gc.isenabled(),
                           fastavro.read.LOGICAL_READERS["long-timestamp-millis"]))

    threads = [threading.Thread(target=user) for _ in range(4)]
    for thread in threads:
        thread.start()
    entered.wait()  # all four inside
    with decoding_switches():  # a fifth user, nested in this thread
        with decoding_switches():
            pass
        assert not gc.isenabled()
    release.set()
    for thread in threads:
        thread.join()
    assert states == [(False, switches._identity)] * 4  # still switched while any is inside
    assert gc.isenabled()
    assert fastavro.read.LOGICAL_READERS["long-timestamp-millis"] is original


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with decoding_switches():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_switches_are_not_held_while_batches_are_handed_out(tmp_path):
    """The decoder yields outside the switches: the consumer sees the process as it was."""
    decoder = ReportDecoder(REGISTRY, HOUR, chunk_records=10)
    for _ in decoder.decode_file(a_file(tmp_path)):
        assert gc.isenabled()
        assert fastavro.read.LOGICAL_READERS["long-timestamp-millis"] is not switches._identity


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
