"""The typed window-estimate record: JSON and Avro round trips of every kind of record the
pipeline makes, byte for byte, and of any record a reader accepts (hypothesis).

Exact comparisons throughout (JSON text, decoded Avro records): nothing here is statistical.
"""
from __future__ import annotations

import dataclasses
import io
import json

import fastavro
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.output.compact import IndexLabels
from ldp_telemetry.output.estimate import (COMBINED_FIELDS, FREQUENCY_FIELDS, KNOWN_FIELDS,
                                           NUMERIC_FIELDS, EstimateRecord, Pane, record_problem)
from ldp_telemetry.output.layout import WindowKey
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.schemas import load_schema
from tests.output.golden_job import read_golden

SCHEMA = fastavro.parse_schema(load_schema("window_estimate"))
T0 = 1_709_251_200_000  # 2024-03-01T00:00:00Z
HOUR = 3_600_000


def avro_round_trip(values: list[dict]) -> list[dict]:
    """`values` written to an Avro container with the record schema and read back."""
    buffer = io.BytesIO()
    fastavro.writer(buffer, SCHEMA, values)
    buffer.seek(0)
    return list(fastavro.reader(buffer))


def golden_records() -> list[bytes]:
    return read_golden("estimates.jsonl.gz")


def kind_of(record: EstimateRecord) -> str:
    return ("numeric" if record.numeric else "combined" if record.combined_versions
            else "frequency")


def test_the_golden_job_holds_every_kind_of_record():
    records = [EstimateRecord.from_json(line) for line in golden_records()]
    assert {kind_of(r) for r in records} == {"numeric", "combined", "frequency"}
    assert {r.protocol for r in records} == {"grr", "olh", "oue", "sw", "pm", "combined"}
    assert any(r.integrity is not None for r in records)  # integrity sections
    assert any(r.integrity is None and "integrity" in r.fields for r in records)  # off
    assert any(r.bands and None in r.bands.values() for r in records)  # null bands
    assert any(r.numeric and not len(r.estimate) for r in records)  # mean only (pm)
    assert any(r.band_methods for r in records)  # per-statistic band methods (sw)


def test_every_golden_record_reads_and_writes_back_to_its_own_bytes():
    for line in golden_records():
        record = EstimateRecord.from_json(line)
        assert record.to_json().encode() + b"\n" == line
        assert json.loads(line)["window_start"] == record.window_start == iso_from_ms(
            record.start_ms)
        # a Square Wave record names its mean's and variance's band method (`band_methods`)
        # and keeps its variance's standard error (`variance_std_error`)
        own = ({"band_methods"} if record.band_methods else set()) | (
            {"variance_std_error"} if record.variance_std_error is not None else set())
        assert record.fields == {"numeric": NUMERIC_FIELDS, "combined": COMBINED_FIELDS,
                                 "frequency": FREQUENCY_FIELDS}[kind_of(record)] | own


def test_an_avro_record_reads_back_to_the_json_line_the_job_wrote_beside_it():
    by_key = {}
    for line in golden_records():
        record = EstimateRecord.from_json(line)
        by_key[(record.key, record.pane.index)] = line
    decoded = [json.loads(line) for line in read_golden("estimates.avro.jsonl.gz")]
    assert len(decoded) == len(by_key)
    for value in decoded:
        record = EstimateRecord.from_avro(value)
        assert record.to_json().encode() + b"\n" == by_key[(record.key, record.pane.index)]
        # and Avro -> record -> Avro -> record is the same record
        [again] = avro_round_trip([record.to_avro()])
        assert EstimateRecord.from_avro(again).to_json() == record.to_json()


REGISTRY = parse_registry({"metrics": [
    {"name": "g", "protocol": "grr", "epsilon": 2.0, "domain": {"labels": ["a", "b", "c"]}},
    {"name": "sized", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 6}},
    {"name": "s", "protocol": "sw", "epsilon": 1.0,
     "domain": {"low": 0, "high": 10, "buckets": 8},
     "estimator": {"method": "ems", "bootstrap": 5}}]})


def empty_window(name: str) -> EstimateRecord:
    config = REGISTRY[name]
    result = finalize_window(config, config.protocol.new_statistic(), 0)
    return window_estimate_record(config, result, T0, T0 + HOUR, Pane("LATE", 2, True))


@pytest.mark.parametrize("name", ["g", "sized", "s"])
def test_an_empty_window_round_trips_through_json_and_avro(name):
    record = empty_window(name)
    assert record.n == 0 and record.smallest_resolvable is None
    text = record.to_json()
    again = EstimateRecord.from_json(text)
    assert again.to_json() == text and again == record
    assert again.pane == Pane("LATE", 2, True) and again.key == WindowKey(name, T0, T0 + HOUR,
                                                                          "v1")
    [decoded] = avro_round_trip([record.to_avro()])
    assert EstimateRecord.from_avro(decoded).to_json() == text
    if name == "sized":  # labels made lazily until written
        assert record.labels == IndexLabels(6) and json.loads(text)["labels"][5] == "5"


def test_window_bounds_are_kept_once_in_milliseconds():
    record = dataclasses.replace(empty_window("g"), start_ms=T0 + 250, end_ms=T0 + HOUR + 250)
    value = json.loads(record.to_json())
    assert (value["window_start"], value["window_end"]) == ("2024-03-01T00:00:00.250Z",
                                                            "2024-03-01T01:00:00.250Z")
    assert EstimateRecord.from_json(value).start_ms == T0 + 250
    assert "window_start" not in vars(record) and "start_ms" in vars(record)


def test_a_record_written_before_a_field_existed_keeps_its_layout():
    """Old files lack p_star, privacy, integrity, band_method...: read back, they are null
    and written back absent; a field of a newer writer is kept as it is."""
    old = json.loads(golden_records()[0])
    for name in ("p_star", "q_star", "smallest_resolvable", "config_version", "fingerprint",
                 "combined_versions", "privacy", "integrity", "band_method"):
        old.pop(name, None)
    old["from_the_future"] = {"x": [1, 2]}
    text = json.dumps(old, sort_keys=True)
    record = EstimateRecord.from_json(text)
    assert record.privacy is None and record.p_star is None and record.version == ""
    assert record.extra == {"from_the_future": {"x": [1, 2]}}
    assert record.to_json() == text


def test_what_is_not_a_record_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="field 'window_start' is missing"):
        EstimateRecord.from_json({"metric": "m"})
    line = json.loads(golden_records()[0])
    with pytest.raises(ValueError, match="field 'privacy' must be null or an object"):
        EstimateRecord.from_json({**line, "privacy": [1]})


# -- any record a reader accepts (hypothesis) ---------------------------------------------------

NUMBERS = st.floats(allow_nan=True, allow_infinity=True)
TEXT = st.text(max_size=12)
MS = st.integers(min_value=-2**40, max_value=2**42)  # 1935 to 2109
PANES = st.builds(lambda timing, index, last: {"timing": timing, "index": index,
                                               "is_last": last},
                  st.sampled_from(["EARLY", "ON_TIME", "LATE", "UNKNOWN"]),
                  st.integers(0, 2**40), st.booleans())
PARAMS = st.dictionaries(TEXT, st.one_of(st.none(), st.booleans(), st.integers(-2**62, 2**62),
                                         NUMBERS, TEXT), max_size=3)


@st.composite
def json_records(draw) -> dict:
    """A record a reader accepts: the required fields, any subset of the optional ones (null or
    a value), maybe a field of a newer writer; window bounds in the writers' form."""
    size = draw(st.integers(0, 6))
    numeric = draw(st.booleans())
    arrays = st.lists(NUMBERS, min_size=size, max_size=size)
    start = draw(MS)
    value = {"metric": draw(TEXT), "window_start": iso_from_ms(start),
             "window_end": iso_from_ms(start + draw(st.integers(1, 10**9))),
             "n": draw(st.integers(0, 2**62)), "protocol": draw(TEXT), "epsilon": draw(NUMBERS),
             "estimate": draw(arrays), "pane": draw(PANES)}
    optional = {
        "p_star": st.one_of(st.none(), NUMBERS), "q_star": st.one_of(st.none(), NUMBERS),
        "smallest_resolvable": st.one_of(st.none(), NUMBERS),
        "config_version": st.one_of(st.none(), st.integers(1, 2**40)),
        "fingerprint": st.one_of(st.none(), TEXT),
        "estimator": st.fixed_dictionaries({"method": TEXT, "params": PARAMS,
                                            "iterations": st.none(), "last_change": NUMBERS}),
        "privacy": st.one_of(st.none(), st.fixed_dictionaries({"per_report": NUMBERS})),
        "band_method": st.one_of(st.none(), TEXT),
        "unbiased_estimate": st.one_of(st.none(), arrays)}
    if numeric:
        optional.update({
            "bucket_edges": st.lists(NUMBERS, min_size=size + 1, max_size=size + 1),
            "mean": st.one_of(st.none(), NUMBERS), "variance": st.one_of(st.none(), NUMBERS),
            "quantiles": st.dictionaries(TEXT, NUMBERS, max_size=3),
            "bands": st.dictionaries(TEXT, st.one_of(st.none(), st.fixed_dictionaries(
                {"lower": NUMBERS, "upper": NUMBERS})), max_size=3),
            "bootstrap_replicates": st.integers(0, 1000)})
    else:
        value.update({"labels": draw(st.lists(TEXT, min_size=size, max_size=size)),
                      "std_error": draw(arrays),
                      "postprocess": {"method": draw(TEXT), "params": draw(PARAMS)}})
        optional["integrity"] = st.one_of(st.none(), st.fixed_dictionaries(
            {"flagged": st.booleans(), "implicated": st.lists(TEXT, max_size=3)}))
    for name in draw(st.sets(st.sampled_from(sorted(optional)))):
        value[name] = draw(optional[name])
    if numeric:
        value["bucket_edges"] = value.get("bucket_edges") or [0.0] * (size + 1)
    if draw(st.booleans()):
        value[draw(TEXT.filter(lambda key: key not in KNOWN_FIELDS))] = draw(
            st.one_of(st.none(), st.integers(), TEXT))
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_records())
def test_any_record_a_reader_accepts_writes_back_to_its_own_text(value):
    assert record_problem(value) is None
    text = json.dumps(value, sort_keys=True)
    record = EstimateRecord.from_json(text)
    assert record.to_json() == text
    assert record.start_ms == (record.key.start_ms) and record.window_start == value[
        "window_start"]
    assert EstimateRecord.from_json(record.json_value()).to_json() == text


@st.composite
def built_records(draw) -> EstimateRecord:
    """A record as the pipeline builds one (every field of its kind's layout), with values the
    Avro schema takes."""
    size = draw(st.integers(0, 5))
    arrays = st.lists(NUMBERS, min_size=size, max_size=size).map(np.array)
    kind = draw(st.sampled_from(["frequency", "numeric", "combined"]))
    start = draw(MS)
    common = dict(
        metric=draw(TEXT), start_ms=start, end_ms=start + draw(st.integers(1, 10**9)),
        n=draw(st.integers(0, 2**62)), protocol=draw(TEXT), epsilon=draw(NUMBERS),
        estimate=draw(arrays), std_error=draw(arrays),
        pane=Pane(**draw(PANES)),
        estimator={"method": draw(TEXT), "params": draw(PARAMS),
                   "iterations": draw(st.one_of(st.none(), st.integers(0, 10**6))),
                   "last_change": draw(st.one_of(st.none(), NUMBERS))},
        postprocess={"method": draw(TEXT), "params": draw(st.dictionaries(
            TEXT, st.one_of(st.none(), NUMBERS), max_size=2))},
        labels=draw(st.lists(TEXT, min_size=size, max_size=size)),
        band_method=draw(st.one_of(st.none(), TEXT)))
    if kind == "numeric":
        return EstimateRecord(**common, bucket_edges=draw(
            st.lists(NUMBERS, min_size=size + 1, max_size=size + 1)),
            mean=draw(NUMBERS), variance=draw(st.one_of(st.none(), NUMBERS)),
            quantiles=draw(st.dictionaries(TEXT, NUMBERS, max_size=3)),
            bands=draw(st.dictionaries(TEXT, st.one_of(st.none(), st.fixed_dictionaries(
                {"lower": NUMBERS, "upper": NUMBERS})), max_size=3)),
            bootstrap_replicates=draw(st.integers(0, 100)))
    if kind == "combined":
        versions = sorted(draw(st.sets(st.integers(1, 65), min_size=2, max_size=4)))
        return EstimateRecord(**common, combined_versions=versions,
                              unbiased_estimate=common["estimate"].copy())
    return EstimateRecord(**common, config_version=draw(st.integers(1, 2**40)),
                          fingerprint=draw(TEXT), unbiased_estimate=draw(arrays),
                          p_star=draw(NUMBERS), q_star=draw(NUMBERS))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(built_records())
def test_a_built_record_round_trips_through_avro_and_json(record):
    [decoded] = avro_round_trip([record.to_avro()])
    again = EstimateRecord.from_avro(decoded)
    assert again.to_json() == record.to_json() and again == record
    assert again.fields == record.fields


def test_records_compare_by_what_they_write():
    record = empty_window("g")
    assert record == EstimateRecord.from_json(record.to_json())
    assert record != dataclasses.replace(record, n=1)
