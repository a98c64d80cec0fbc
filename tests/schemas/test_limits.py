"""Resource limits: what a file can make the reader allocate, decode or store is bounded."""
from __future__ import annotations

import argparse
import bz2
import io
import json
import lzma
import tracemalloc
import zlib

import cramjam
import fastavro
import pytest

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import CUT_MARK, DeadLetter, ReportBatch
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.pipelines.arguments import add_job_arguments
from ldp_telemetry.pipelines.job import job_from_arguments
from ldp_telemetry.schemas import load_schema, report_schema_json
from ldp_telemetry.schemas.codec import ReportDecoder
from ldp_telemetry.schemas.container import Container
from ldp_telemetry.schemas.decompress import codec_problem
from ldp_telemetry.schemas.limits import MIB, DecodeLimits
from ldp_telemetry.transforms.read import ReadReportBatches
from tests.schemas.avro_blocks import join_container, split_container, write_blocks
from tests.schemas.test_codec import (GRR, HOUR, OUE, REGISTRY, accepted, dead_lettered, good,
                                      grr_values, report)


def decode(path, limits=DecodeLimits()):
    decoder = ReportDecoder(REGISTRY, HOUR, limits=limits)
    items = list(decoder.decode_file(str(path)))
    batches = [i for i in items if isinstance(i, ReportBatch)]
    letters = [i for i in items if isinstance(i, DeadLetter)]
    assert decoder.records_read == accepted(batches) + dead_lettered(letters)
    return decoder, batches, letters


def zstd_compress(raw: bytes) -> bytes:
    import zstandard
    return zstandard.ZstdCompressor().compress(raw)


def snappy_compress(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw)) + zlib.crc32(raw).to_bytes(4, "big")


def deflate(raw: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(raw) + compressor.flush()


# xz at preset 1 (a 1 MiB dictionary): its decoder's window, bounded apart by
# CODEC_MEMORY_LIMIT, stays out of the measured peak.
COMPRESSORS = {"deflate": deflate, "bzip2": bz2.compress,
               "xz": lambda raw: lzma.compress(raw, preset=1),
               "snappy": snappy_compress, "zstandard": zstd_compress}


def codec_file(path, codec, blocks):
    """A report file of `codec` whose blocks are (count, raw data) compressed here."""
    write_blocks(path, [[good(0, "g")]])  # a null-codec file: its header, with the codec renamed
    header, _, sync = split_container(path.read_bytes())
    name = codec.encode()
    header = header.replace(b"\x08null", bytes([2 * len(name)]) + name, 1)
    path.write_bytes(join_container(header, [(count, COMPRESSORS[codec](raw))
                                             for count, raw in blocks], sync))


def good_block(first, n=100):
    buffer = io.BytesIO()
    for i in range(first, first + n):
        fastavro.schemaless_writer(buffer, load_schema("report"), good(i, "g"))
    return n, buffer.getvalue()


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_a_decompression_bomb_is_refused_while_decompressing(tmp_path, codec):
    if codec_problem(codec):
        pytest.skip(codec_problem(codec))
    limit = 1 * MIB
    path = tmp_path / "bomb.avro"
    codec_file(path, codec, [good_block(0), (5, b"\x00" * (16 * limit)), good_block(200)])
    assert path.stat().st_size < limit  # 16 MiB of zeros compress to kilobytes
    tracemalloc.start()
    try:
        decoder, batches, letters = decode(path, DecodeLimits(max_block_bytes=limit))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit, peak  # never the 16 MiB
    [letter] = letters
    assert letter.reason == Reason.BLOCK_TOO_LARGE and letter.records == 5, letter.detail
    assert "--max-block-bytes" in letter.detail
    assert grr_values(batches) == [i % 8 for i in list(range(100)) + list(range(200, 300))]


def test_a_deflate_bomb_under_the_default_limit(tmp_path):
    """The reported case: ~0.5 MB of deflate expanding to 1.25 GB; here 128 MiB of zeros."""
    path = tmp_path / "bomb.avro"
    codec_file(path, "deflate", [(1, b"\x00" * (128 * MIB))])
    tracemalloc.start()
    try:
        decoder, batches, letters = decode(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    [letter] = letters
    assert letter.reason == Reason.BLOCK_TOO_LARGE and batches == []
    assert peak < 3 * DecodeLimits().max_block_bytes, peak


def test_a_stored_block_beyond_the_limit_is_skipped_unread(tmp_path):
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(i, "g") for i in range(k * 100, k * 100 + 100)] for k in range(3)])
    sizes = [len(data) for _, data in split_container(path.read_bytes())[1]]
    decoder, batches, letters = decode(path, DecodeLimits(max_block_bytes=min(sizes) - 1,
                                                          max_record_bytes=100))
    assert batches == [] and len(letters) == 3
    assert all(letter.reason == Reason.BLOCK_TOO_LARGE and letter.records == 100
               for letter in letters)


def encoded_size(record) -> int:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, load_schema("report"), record)
    return len(buffer.getvalue())


def test_a_record_beyond_the_limit_is_a_dead_letter_of_bounded_size(tmp_path):
    """The reported case: a 50 MB metric name became a 100 MB dead-letters file."""
    huge = report(7, "x" * (3 * MIB), (GRR, {"value": 1}))
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(1, "g"), huge, good(2, "g")]])
    decoder, batches, letters = decode(path)
    assert grr_values(batches) == [1, 2]
    [letter] = letters
    assert letter.reason == Reason.RECORD_TOO_LARGE and letter.records == 1
    assert letter.report_bytes == encoded_size(huge) > 3 * MIB
    limit = DecodeLimits().max_dead_letter_report_chars
    assert len(letter.report) == limit and letter.report.endswith(CUT_MARK)
    assert len(json.dumps(letter.as_dict())) < limit + 1000


def test_a_metric_name_beyond_the_limit_is_a_dead_letter(tmp_path):
    long_name = report(8, "n" * 257, (GRR, {"value": 1}))
    at_limit = report(9, "m" * 256, (GRR, {"value": 1}))
    path = tmp_path / "r.avro"
    write_blocks(path, [[long_name, at_limit, good(3, "g")]])
    decoder, batches, letters = decode(path)
    assert grr_values(batches) == [3]
    reasons = {json.loads(letter.report)["report_id"]: letter for letter in letters}
    assert reasons[8].reason == Reason.METRIC_NAME_TOO_LONG
    assert "257 characters" in reasons[8].detail and len(reasons[8].detail) < 300
    assert reasons[9].reason == Reason.UNKNOWN_METRIC
    assert reasons[8].report_bytes == encoded_size(long_name)


def test_stored_reports_are_cut_to_the_limit_and_keep_their_size(tmp_path):
    bits = report(10, "nope", (OUE, {"bits": bytes(range(256)) * 4}))
    small = report(11, "nope", (GRR, {"value": 1}))
    path = tmp_path / "r.avro"
    write_blocks(path, [[bits, small]])
    decoder, batches, letters = decode(path, DecodeLimits(max_dead_letter_report_chars=200))
    cut, whole = letters
    assert len(cut.report) == 200 and cut.report.endswith(CUT_MARK)
    assert cut.report_bytes == encoded_size(bits)
    assert json.loads(whole.report)["report_id"] == 11
    assert whole.report_bytes == encoded_size(small)


def test_a_header_beyond_the_limit_is_a_dead_letter(tmp_path):
    schema = report_schema_json()
    schema["doc"] = "d" * (2 * MIB)
    path = tmp_path / "r.avro"
    write_blocks(path, [[good(1, "g")]], schema=schema)
    decoder, batches, letters = decode(path)
    [letter] = letters
    assert letter.reason == Reason.UNDECODABLE and "--max-header-bytes" in letter.detail
    decoder, batches, letters = decode(path, DecodeLimits(max_header_bytes=4 * MIB))
    assert letters == [] and grr_values(batches) == [1]


@pytest.mark.parametrize("field, value, words", [
    ("max_block_bytes", 0, "max_block_bytes must be a positive integer"),
    ("max_block_records", -5, "max_block_records"),
    ("max_metric_name_chars", True, "max_metric_name_chars"),
    ("max_record_bytes", 2 * DecodeLimits().max_block_bytes, "cannot exceed max_block_bytes"),
])
def test_limits_are_checked_when_made(field, value, words):
    with pytest.raises(ConfigError, match=words) as caught:
        DecodeLimits(**{field: value})
    assert caught.value.field == field and "--" not in str(caught.value)


def test_a_registry_name_beyond_the_limit_fails_when_the_job_is_built():
    registry = parse_registry({"metrics": [
        {"name": "m" * 300, "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}}]})
    with pytest.raises(ConfigError, match=r"longer than max_metric_name_chars \(256\)") as caught:
        ReadReportBatches(registry, HOUR)
    assert caught.value.field == "max_metric_name_chars"
    ReadReportBatches(registry, HOUR, limits=DecodeLimits(max_metric_name_chars=300))


def test_each_limit_has_a_job_flag(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [
        {"name": "g", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 8}}]}))
    write_blocks(tmp_path / "r.avro", [[good(1, "g")]])
    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    common = ["--registry", str(registry), "--input", str(tmp_path / "*.avro"),
              "--output", str(tmp_path / "out"), "--window", "3600"]
    assert job_from_arguments(parser.parse_args(common)).limits == DecodeLimits()
    flags = ["--max-block-bytes", "1000", "--max-block-records", "20", "--max-record-bytes", "500",
             "--max-metric-name-chars", "30", "--max-dead-letter-report-chars", "100",
             "--max-header-bytes", "5000"]
    assert job_from_arguments(parser.parse_args(common + flags)).limits == DecodeLimits(
        1000, 20, 500, 30, 100, 5000)
    with pytest.raises(ConfigError, match="max_block_records must be a positive integer"):
        job_from_arguments(parser.parse_args(common + ["--max-block-records", "0"]))


def test_a_chunk_is_bounded_by_its_dead_letters_and_bytes(tmp_path, monkeypatch):
    """Thousands of damaged blocks of a few bytes, or blocks of big records: the decoder hands
    them out chunk by chunk instead of gathering a whole file first."""
    walked = []
    real_blocks = Container.blocks

    def counted_blocks(self):
        for block in real_blocks(self):
            walked.append(block)
            yield block
    monkeypatch.setattr(Container, "blocks", counted_blocks)

    def blocks_walked_before_the_first_output(decoder, path):
        items = decoder.decode_file(str(path))
        next(items)
        before = len(walked)
        rest = list(items)
        return before, rest

    path = tmp_path / "r.avro"
    write_blocks(path, [[good(0, "g")]])
    header, [(_, data)], sync = split_container(path.read_bytes())
    path.write_bytes(join_container(header, [(-5, data)] * 5000 + [(1, data)], sync))
    decoder = ReportDecoder(REGISTRY, HOUR, chunk_records=100)
    before, _ = blocks_walked_before_the_first_output(decoder, path)
    assert before == 100 and len(walked) == 5001
    assert decoder.records_read == 5 * 5000 + 1

    walked.clear()
    limits = DecodeLimits(max_block_bytes=8192, max_record_bytes=1024)
    write_blocks(path, [[good(i, "o") for i in range(k * 100, k * 100 + 100)] for k in range(40)])
    block_bytes = len(split_container(path.read_bytes())[1][0][1])
    decoder = ReportDecoder(REGISTRY, HOUR, limits=limits)
    before, _ = blocks_walked_before_the_first_output(decoder, path)
    assert 8192 // block_bytes <= before <= 8192 // block_bytes + 2 and decoder.records_read == 4000
