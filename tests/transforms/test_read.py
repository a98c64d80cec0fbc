"""Reading report files: input patterns, and a job on every kind of bad input."""
from __future__ import annotations

import itertools

import glob
import io
import json
import os
import zlib

import fastavro
import pytest

from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.schemas import report_schema_json
from ldp_telemetry.transforms.read import expand_file_patterns
from tests.schemas.avro_blocks import join_container, split_container, write_blocks
from ldp_telemetry.ldp.config.windows import WindowSpec
from tests.json_lines import job_json_lines


@pytest.fixture
def reports(tmp_path):
    for name in ("a.avro", "b.avro", "c.json"):
        (tmp_path / name).write_bytes(b"")
    return tmp_path


def test_overlapping_patterns_give_each_file_once_in_first_seen_order(reports, monkeypatch):
    monkeypatch.chdir(reports)
    files = expand_file_patterns([str(reports / "b.avro"), "./*.avro", "a.avro", "./*"])
    assert files == [str(reports / "b.avro"), "./a.avro", "./c.json"]


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_directory_is_refused_with_a_pattern_to_use_instead(reports, suffix):
    pattern = str(reports) + suffix
    with pytest.raises(ValueError, match="is a directory") as error:
        expand_file_patterns([pattern])
    assert repr(pattern) in str(error.value)
    assert repr(os.path.join(pattern, "*.avro")) in str(error.value)


def test_a_pattern_matching_nothing_is_refused(reports):
    with pytest.raises(ValueError, match="matches no file"):
        expand_file_patterns([str(reports / "*.parquet")])


HOUR = 3_600_000
T0 = 1_717_200_000_000  # 2024-06-01T00:00:00Z
GRR, OLH = "ldp.telemetry.GrrPayload", "ldp.telemetry.OlhPayload"


_IDS = itertools.count(1)  # every report its own id: repeated ids are counted once


def good(rid, metric, t=T0):
    payload = (GRR, {"value": rid % 3}) if metric == "g" else (OLH, {"seed": rid, "y": rid % 2})
    return {"report_id": next(_IDS), "metric": metric, "event_time": t, "payload": payload}


def adversarial_inputs(root):
    """Report files and paths of every kind the reader must survive; (paths, expected counts)."""
    root.mkdir()
    expected = {"records_read": 0, "records_accepted": 0}

    def add(read, accepted=0, **dead):
        expected["records_read"] += read
        expected["records_accepted"] += accepted
        for reason, n in dead.items():
            expected[f"dead_letter.{reason}"] = expected.get(f"dead_letter.{reason}", 0) + n

    def hundreds():  # three blocks of 100 reports, each report a fresh id
        return [[good(i, "g", T0 + i * 60_000) for i in range(k * 100, k * 100 + 100)]
                for k in range(3)]
    valid = root / "valid.avro"
    write_blocks(valid, [[good(i, m, T0 + i * 30_000) for i in range(200) for m in "gh"],
                         [good(500, "g", 5)]])  # a device clock reset to 1970
    add(401, 401)
    times = root / "times.avro"
    write_blocks(times, [[good(1, "h", t) for t in (-1, 7_258_118_400_000, T0 * 1000, 2 ** 62,
                                                    -2 ** 63)] + [good(2, "g"), good(3, "h")],
                         [good(4, "nope"), {**good(5, "g"), "payload": (GRR, {"value": 7})}]])
    add(9, 2, invalid_event_time=5, unknown_metric=1, invalid_payload=1)
    corrupt = root / "corrupt.avro"
    write_blocks(corrupt, hundreds(), codec="deflate")
    data = bytearray(corrupt.read_bytes())
    second = data.find(data[-16:], data.find(data[-16:]) + 16) + 16  # after block 1's marker
    data[second + 6:second + 30] = b"\xff" * 24
    corrupt.write_bytes(bytes(data))
    add(300, 200, undecodable=100)
    snappy = root / "snappy.avro"
    write_blocks(snappy, hundreds()[:1], codec="snappy")
    add(100, 100)
    brotli = root / "brotli.avro"
    write_blocks(brotli, hundreds())
    brotli.write_bytes(brotli.read_bytes().replace(b"\x08null", b"\x0cbrotli", 1))
    add(300, undecodable=300)
    letters = root / "dead_letters-00000-of-00001.avro"  # an earlier job's output
    write_blocks(letters, [[{"source": "x", "reason": "r", "detail": "d", "records": 1,
                             "report": None}] * 2], schema="dead_letter")
    add(2, incompatible_schema=2)
    micros = report_schema_json()
    micros["fields"][2]["type"]["logicalType"] = "timestamp-micros"
    micros_file = root / "micros.avro"
    write_blocks(micros_file, [[good(i, "g", T0 * 1000) for i in range(3)]], schema=micros)
    add(3, incompatible_schema=3)
    truncated = root / "truncated.avro"
    write_blocks(truncated, hundreds(), codec="deflate")
    truncated.write_bytes(truncated.read_bytes()[:-30])
    add(201, 200, undecodable=1)
    (root / "junk.avro").write_bytes(b"not avro at all")
    add(1, undecodable=1)
    negative = root / "negative_count.avro"  # block 3's count 100 with its sign bit flipped
    write_blocks(negative, hundreds())
    header, blocks, sync = split_container(negative.read_bytes())
    negative.write_bytes(join_container(header, blocks[:2] + [(-101, blocks[2][1])], sync))
    add(301, 200, undecodable=101)  # the block stands for the 101 it announces
    for name in ("count_2_62_a.avro", "count_2_62_b.avro"):  # crashed the job; wrapped counters
        (root / name).write_bytes(join_container(header, [(2 ** 62, blocks[0][1])], sync))
        add(1_000_000, block_too_large=1_000_000)
    bomb = root / "bomb.avro"  # 128 MiB of zeros in a deflate block of 128 KiB
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    header = header.replace(b"\x08null", b"\x0edeflate", 1)
    bomb.write_bytes(join_container(header, [(3, deflate.compress(bytes(128 << 20)) +
                                              deflate.flush())], sync))
    add(3, block_too_large=3)
    write_blocks(root / "long_name.avro", [[{**good(7, "g"), "metric": "x" * (2 << 20)},
                                            {**good(8, "g"), "metric": "y" * 300}, good(9, "g")]])
    add(3, 1, record_too_large=1, metric_name_too_long=1)
    os.mkfifo(root / "pipe.avro")  # hung the job forever
    os.symlink(root / "nowhere", root / "dangling.avro")
    os.symlink(root / "loop.avro", root / "loop.avro")
    add(3, not_a_regular_file=1, broken_link=2)

    files = expand_file_patterns([str(root / "*.avro"), str(valid), str(root / "c*.avro")])
    assert len(files) == 17
    (root / "a_directory").mkdir()
    files += [str(root / "a_directory"), str(root / "gone.avro")]  # matched, then not readable
    add(2, undecodable=1, not_a_regular_file=1)
    return files, expected


def test_an_adversarial_job_accounts_for_every_record(tmp_path):
    registry = parse_registry({"metrics": [
        {"name": "g", "protocol": "grr", "epsilon": 1.0, "domain": {"size": 3}},
        {"name": "h", "protocol": "olh", "epsilon": 1.0, "domain": {"size": 4}}]})
    assert registry["h"].protocol.g == 4
    files, expected = adversarial_inputs(tmp_path / "in")
    out = tmp_path / "out"
    counters = run_job(EstimateJob(registry, tuple(files), str(out), WindowSpec(HOUR, HOUR)), [],
                       out=io.StringIO())
    dead = {k: v for k, v in counters.items() if k.startswith("dead_letter.")}
    assert counters["records_read"] == counters["records_accepted"] + sum(dead.values())
    assert {k: counters.get(k, 0) for k in expected} == expected
    assert counters["records_counted"] == counters["records_accepted"]

    letters = job_json_lines(out, "dead_letters")
    by_reason = {}
    for letter in letters:
        key = f"dead_letter.{letter['reason']}"
        by_reason[key] = by_reason.get(key, 0) + letter["records"]
    assert by_reason == dead
    assert max(len(json.dumps(letter)) for letter in letters) < 6000  # stored reports are cut
    [avro_letters] = glob.glob(str(out / "dead_letters-*.avro"))
    with open(avro_letters, "rb") as handle:
        assert sorted(json.dumps(r, sort_keys=True) for r in fastavro.reader(handle)) == \
            sorted(json.dumps(r, sort_keys=True) for r in letters)
    estimates = job_json_lines(out, "estimates")
    assert sum(e["n"] for e in estimates) == counters["records_accepted"]
