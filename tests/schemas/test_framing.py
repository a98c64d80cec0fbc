"""Framing integrity: a block counts only if its announced records fill exactly its bytes."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from ldp_telemetry.ldp.engine.batches import DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.limits import DecodeLimits
from tests.schemas.avro_blocks import join_container, split_container, write_blocks
from tests.schemas.test_codec import HOUR, REGISTRY, accepted, dead_lettered, good, grr_values

CODECS = ["null", "deflate", "bzip2", "xz", "snappy"]


def three_blocks(path, codec):
    """Three blocks of 100 GRR reports, ids 0..299 (value = id % 8); (header, blocks, sync)."""
    write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)],
                 codec=codec)
    return split_container(path.read_bytes())


def decode(path, limits=DecodeLimits()):
    decoder = ReportDecoder(REGISTRY, HOUR, limits=limits)
    items = list(decoder.decode_file(str(path)))
    batches = [i for i in items if isinstance(i, ReportBatch)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert decoder.records_read == accepted(batches) + dead_lettered(letters)
    return decoder, batches, letters


def with_count(path, codec, block, count):
    header, blocks, sync = three_blocks(path, codec)
    blocks[block] = (count, blocks[block][1])
    path.write_bytes(join_container(header, blocks, sync))


OUTER = [i % 8 for i in list(range(100)) + list(range(200, 300))]  # blocks 1 and 3


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("count", [-101, -1, 0, 60, 99, 101, 140])
def test_a_damaged_record_count_loses_its_block_and_no_more(tmp_path, codec, count):
    """A sign flip (zigzag's low bit: 100 -> -101), a smaller or larger count: fastavro alone
    yields nothing for a negative count and silently drops the rest of a block for a smaller
    one; here the block is one dead letter standing for the count it announces."""
    path = tmp_path / "r.avro"
    with_count(path, codec, 1, count)
    decoder, batches, letters = decode(path)
    assert grr_values(batches) == OUTER
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE, letter.detail
    assert letter.records == max(abs(count), 1)
    assert f"{count} records" in letter.detail


@pytest.mark.parametrize("codec", CODECS)
def test_a_count_of_2_to_the_62_is_bounded_by_the_limit(tmp_path, codec):
    """It crashed the job with OverflowError; two such files wrapped the 64-bit counters."""
    path = tmp_path / "r.avro"
    with_count(path, codec, 1, 2 ** 62)
    limits = DecodeLimits(max_block_records=1000)
    decoder, batches, letters = decode(path, limits)
    assert grr_values(batches) == OUTER
    [letter] = letters
    assert letter.reason == Reason.BLOCK_TOO_LARGE and letter.records == 1000
    assert str(2 ** 62) in letter.detail and "--max-block-records" in letter.detail


def test_counts_beyond_64_bits_never_overflow(tmp_path):
    path = tmp_path / "r.avro"
    header, blocks, sync = three_blocks(path, "null")
    counts = [2 ** 62, -2 ** 63, 2 ** 70]  # the last one is 11 varint bytes: no framing at all
    framed = [(c, data) for c, (_, data) in zip(counts, blocks, strict=True)]
    path.write_bytes(join_container(header, framed, sync))
    decoder, batches, letters = decode(path)
    assert batches == []
    limit = DecodeLimits().max_block_records
    assert [letter.records for letter in letters] == [limit, limit, 1]
    assert decoder.records_read == 2 * limit + 1 < 2 ** 63


def test_a_count_larger_than_the_block_bytes_is_refused_before_decoding(tmp_path):
    path = tmp_path / "r.avro"
    header, blocks, sync = three_blocks(path, "null")
    size = len(blocks[1][1])
    blocks[1] = (size + 1, blocks[1][1])  # every report takes at least one byte
    path.write_bytes(join_container(header, blocks, sync))
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.records == size + 1 and f"only {size} bytes" in letter.detail
    assert grr_values(batches) == OUTER


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_trailing_bytes_after_the_records_lose_the_block(tmp_path, codec):
    """Records that decode but leave bytes unread: the count or the data is damaged."""
    path = tmp_path / "r.avro"
    header, blocks, sync = three_blocks(path, "null")
    blocks[1] = (100, blocks[1][1] + b"\x02\x04")  # a plausible start of one more record
    if codec == "deflate":
        header = header.replace(b"\x08null", b"\x0edeflate", 1)
        blocks = [(count, deflate_all(raw)) for count, raw in blocks]
    path.write_bytes(join_container(header, blocks, sync))
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.records == 100 and "end at byte" in letter.detail, letter.detail
    assert grr_values(batches) == OUTER


def deflate_all(raw: bytes) -> bytes:
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    return deflate.compress(raw) + deflate.flush()


def test_every_block_of_a_long_file_is_checked(tmp_path):
    """Damage in many blocks of one file: each costs exactly its own records."""
    rng = np.random.default_rng(3)
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(k * 10, k * 10 + 10)] for k in range(50)])
    header, blocks, sync = split_container(path.read_bytes())
    damaged = sorted(rng.choice(50, 12, replace=False).tolist())
    counts = {k: int(rng.choice([-11, 0, 3, 9, 11, 2 ** 40])) for k in damaged}
    blocks = [(counts.get(k, count), data) for k, (count, data) in enumerate(blocks)]
    path.write_bytes(join_container(header, blocks, sync))
    decoder, batches, letters = decode(path)
    kept = [k for k in range(50) if k not in counts]
    assert grr_values(batches) == [i % 8 for k in kept for i in range(k * 10, k * 10 + 10)]
    limit = DecodeLimits().max_block_records
    assert sorted(letter.records for letter in letters) == sorted(
        min(max(abs(c), 1), limit) for c in counts.values())
