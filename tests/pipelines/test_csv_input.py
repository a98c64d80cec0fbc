"""`ldp simulate`'s CSV input: exact line numbers in every message, a byte-order mark tolerated,
rows with the wrong number of fields refused either way, out-of-domain values with their lines."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.pipelines.csv_input import read_true_values

REGISTRY = parse_registry({"metrics": [
    {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b", "c"]}},
    {"name": "x", "protocol": "sw", "epsilon": 1.0,
     "domain": {"low": 0, "high": 10, "buckets": 10}}]})
T0 = 1_709_251_200


def rows(count: int, start: int = 0) -> str:
    return "".join(f"{T0 + i},{'abc'[i % 3]}\n" for i in range(start, start + count))


def read(path, metric="m"):
    return read_true_values(str(path), REGISTRY[metric], "v", "t")


def message(path, metric="m") -> str:
    with pytest.raises(InputError) as caught:
        read(path, metric)
    return str(caught.value)


def test_a_bad_byte_is_reported_on_its_own_line_not_the_readers_row(tmp_path):
    path = tmp_path / "v.csv"
    path.write_bytes(b"t,v\n" + rows(99).encode() + f"{T0},\xe9\n".encode("latin-1")
                     + rows(500).encode())
    assert message(path) == (f"{path} line 101: not UTF-8 text (byte 0xe9 at column 12: "
                             "invalid continuation byte)")


def test_a_bad_byte_deep_in_a_gzip_file_names_its_line(tmp_path):
    path = tmp_path / "v.csv.gz"
    text = (b"t,v\n" + rows(29_999).encode() + f"{T0},\xff\n".encode("latin-1")
            + rows(2_000).encode())
    path.write_bytes(gzip.compress(text, mtime=0))
    assert message(path).startswith(f"{path} line 30001: not UTF-8 text (byte 0xff")


def test_a_byte_order_mark_is_tolerated(tmp_path):
    path = tmp_path / "v.csv"
    path.write_bytes(b"\xef\xbb\xbft,v\n" + rows(3).encode())
    truth = read(path)
    assert truth.values.tolist() == [0, 1, 2]
    assert truth.event_times_ms.tolist() == [T0 * 1000, T0 * 1000 + 1000, T0 * 1000 + 2000]


@pytest.mark.parametrize("bad_row, fields", [(f"{T0},a,extra", 3), (f"{T0}", 1)])
def test_rows_with_too_many_or_too_few_fields_are_refused(tmp_path, bad_row, fields):
    path = tmp_path / "v.csv"
    path.write_text("t,v\n" + rows(4) + bad_row + "\n" + rows(2))
    assert message(path) == f"{path} line 6: {fields} field(s), the header has 2"


def test_lines_are_counted_across_quoted_newlines_and_blank_lines(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text(f't,v\n{T0},"a"\n\n"{T0}\n",b\n{T0},d\n')
    # line 1 header, 2 a row, 3 blank, 4-5 one row whose time holds a newline, 6 the bad value
    assert message(path) == (f"{path}: 1 value(s) outside the domain of metric 'm' (first at "
                             "line 6: 'd')")


def test_out_of_domain_values_name_their_first_lines(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text("t,v\n" + rows(3) + f"{T0},z\n{T0},a\n{T0},y\n{T0},z\n{T0},w\n")
    assert message(path) == (f"{path}: 4 value(s) outside the domain of metric 'm' (first at "
                             "lines 5, 7, 8, …: 'z', 'y', 'z')")
    numeric = tmp_path / "n.csv"
    numeric.write_text(f"t,v\n{T0},1\n{T0},11\n{T0},2\n{T0},x\n")
    assert message(numeric, "x") == (f"{numeric}: 2 value(s) outside the domain [0, 10] of "
                                     "metric 'x' (first at lines 3, 5: '11', 'x')")


def test_event_times_outside_the_span_name_their_lines(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text(f"t,v\n{T0},a\n\n{T0 * 1000},b\n{T0},c\n")
    assert message(path).startswith(f"{path}: line 4: event time '{T0 * 1000}' is outside ")


def test_a_clean_file_reads_every_row(tmp_path):
    path = tmp_path / "v.csv"
    path.write_text("t,v\r\n" + rows(1000).replace("\n", "\r\n"))
    truth = read(path)
    np.testing.assert_array_equal(truth.values, np.arange(1000) % 3)
