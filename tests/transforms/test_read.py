"""Input file patterns: each file once, directories refused with a hint."""
from __future__ import annotations

import os

import pytest

from transforms.read import expand_file_patterns


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
