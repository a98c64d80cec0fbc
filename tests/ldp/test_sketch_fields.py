"""The pooled-hash oracles' sketch in the registry (`sketch`: k hash functions, m buckets), in the
fingerprint, in the window-estimate record (`parameters`) and wherever a reader rebuilds the
protocol (`ldp query`), in `ldp plan`; integrity refused for them.
"""
from __future__ import annotations

import copy
import io
import json
import subprocess
import sys

import fastavro
import numpy as np
import pytest
from jsonschema import Draft202012Validator

from ldp_telemetry.ldp.base.errors import ConfigError, RegistryError
from ldp_telemetry.ldp.base.validation import MAX_DOMAIN_SIZE
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.config.cost import cost_model
from ldp_telemetry.ldp.config.planner import plan
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.engine.batches import ReportBatch
from ldp_telemetry.ldp.engine.finalize import finalize_window
from ldp_telemetry.ldp.estimation.queries import WindowEstimate, set_indicator
from ldp_telemetry.ldp.protocols import PROTOCOLS
from ldp_telemetry.ldp.protocols.hash_pool import MAX_POOL_HASH_EVALUATIONS
from ldp_telemetry.output.estimate import EstimateRecord
from ldp_telemetry.output.records import window_estimate_record
from ldp_telemetry.schemas import SCHEMA_DIR, load_schema
from ldp_telemetry.schemas.codec import ReportDecoder, write_reports

POOLED = ("cms", "hcms", "flh")
START, END = ms_from_iso("2024-03-01T00:00:00Z"), ms_from_iso("2024-03-01T01:00:00Z")
SCHEMA = Draft202012Validator(json.loads((SCHEMA_DIR / "registry.schema.json").read_text()))


def metric(protocol="cms", **fields) -> dict:
    return {"name": "app", "protocol": protocol, "epsilon": 2.0, "domain": {"size": 500},
            **fields}


def registry(*entries) -> object:
    return parse_registry({"metrics": list(entries)})


@pytest.mark.parametrize("name", POOLED)
def test_the_sketch_builds_the_protocol_and_is_fingerprinted(name):
    chosen = registry(metric(name, sketch={"k": 32, "m": 64}))["app"]
    default = registry(metric(name))["app"]
    assert (chosen.protocol.k, chosen.protocol.m) == (32, 64)
    assert (default.protocol.k, default.protocol.m) == (default.protocol.default_k(),
                                                        default.protocol.default_m())
    assert chosen.fingerprint != default.fingerprint
    only_k = registry(metric(name, sketch={"k": 32}))["app"].protocol
    assert (only_k.k, only_k.m) == (32, default.protocol.m)
    # the defaults written out are the same configuration: the same reports, the same fingerprint
    spelled = registry(metric(name, sketch={"k": default.protocol.k,
                                            "m": default.protocol.m}))["app"]
    assert spelled.fingerprint == default.fingerprint
    assert SCHEMA.is_valid({"metrics": [metric(name, sketch={"k": 32, "m": 64})]})


@pytest.mark.parametrize("entry, field, words", [
    (metric("oue", sketch={"k": 8}), "sketch", "pooled-hash oracles"),
    (metric("auto", sketch={"k": 8}), "sketch", "name one"),
    (metric(sketch={}), "sketch", "must be an object"),
    (metric(sketch=[8, 16]), "sketch", "must be an object"),
    (metric(sketch={"k": 8, "g": 4}), "sketch.g", "not a sketch field"),
    (metric(sketch={"k": True}), "sketch.k", "integer"),
    (metric(sketch={"k": 8.5}), "sketch.k", "integer"),
    (metric(sketch={"k": 0}), "sketch.k", "MAX_POOL_HASHES"),
    (metric("flh", sketch={"k": 65537}), "sketch.k", "MAX_POOL_HASHES"),
    (metric(sketch={"m": 1}), "sketch.m", "MAX_SKETCH_BUCKETS"),
    (metric("hcms", sketch={"m": 96}), "sketch.m", "power of two"),
    (metric(sketch={"k": 65536, "m": 1024}), "sketch", "MAX_POOL_CELLS"),
    # finalize hashes every value under every hash: k·d is bounded (2^34, ~80 s a window)
    ({**metric("flh", sketch={"k": 2048}), "domain": {"size": 1 << 24}}, "sketch.k",
     "MAX_POOL_HASH_EVALUATIONS"),
    ({**metric(sketch={"k": 65536, "m": 2}), "domain": {"size": (1 << 18) + 1}}, "sketch.k",
     "at most k = 65,535 at d = 262,145"),
])
def test_a_bad_sketch_is_an_error_naming_its_field(entry, field, words):
    with pytest.raises(RegistryError, match=words) as raised:
        registry(entry)
    assert raised.value.field == f"metrics[0].{field}"
    assert f"field '{field}'" in str(raised.value)


def test_the_json_schema_rejects_what_it_can_say():
    for bad in ({}, {"k": 0}, {"m": 1}, {"k": 8, "g": 4}, {"k": "8"}):
        assert not SCHEMA.is_valid({"metrics": [metric(sketch=bad)]}), bad


def test_a_changed_k_is_a_new_version_and_each_report_is_read_under_its_own():
    document = {"metrics": [metric(version=2, sketch={"k": 64}, history=[
        {"version": 1, "protocol": "cms", "epsilon": 2.0, "domain": {"size": 500},
         "sketch": {"k": 16}}])]}
    loaded = parse_registry(document)
    old, new = loaded.version("app", 1), loaded.version("app", 2)
    assert (old.protocol.k, new.protocol.k) == (16, 64)
    assert old.fingerprint != new.fingerprint
    for config in (old, new):
        rng = np.random.default_rng(config.version)
        columns = config.protocol.perturb(rng.integers(0, 500, 300), rng)
        data = io.BytesIO()
        write_reports(data, "app", config.protocol, np.arange(300), START + np.arange(300),
                      columns, fingerprint=config.fingerprint)
        decoder = ReportDecoder(loaded, 3_600_000)
        written = data.getvalue()
        items = list(decoder.decode_file("x.avro", opener=lambda *_, b=written: io.BytesIO(b)))
        batches = [item for item in items if isinstance(item, ReportBatch)]
        assert sum(b.n for b in batches) == 300
        assert {b.version for b in batches} == {config.version}
    same = copy.deepcopy(document)
    same["metrics"][0]["sketch"] = {"k": 16}
    with pytest.raises(RegistryError, match="same configuration"):
        parse_registry(same)


@pytest.mark.parametrize("name", POOLED)
def test_integrity_is_refused_and_off_for_the_pooled_oracles(name):
    with pytest.raises(RegistryError, match="hash pool") as raised:
        registry(metric(name, integrity={"top_k": 5}))
    assert raised.value.field == "metrics[0].integrity"
    assert registry(metric(name))["app"].integrity is None
    assert registry(metric(name, integrity=False))["app"].integrity is None
    assert registry(metric("olh"))["app"].integrity is not None


def window(config, n=4000, seed=5):
    protocol = config.protocol
    rng = np.random.default_rng(seed)
    values = np.minimum(rng.zipf(1.5, n) - 1, protocol.d - 1)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(values, rng))
    result = finalize_window(config, statistic, n)
    return window_estimate_record(config, result, START, END)


def avro_round_trip(record: EstimateRecord) -> EstimateRecord:
    out = io.BytesIO()
    fastavro.writer(out, load_schema("window_estimate"), [record.to_avro()])
    out.seek(0)
    return EstimateRecord.from_avro(next(iter(fastavro.reader(out))))


@pytest.mark.parametrize("name", POOLED)
def test_records_carry_the_sketch_and_queries_rebuild_the_protocol_with_it(name):
    config = registry(metric(name, sketch={"k": 8, "m": 16}, postprocess="none"))["app"]
    record = window(config)
    assert record.parameters == {"k": 8, "m": 16}
    for read in (EstimateRecord.from_json(record.to_json()), avro_round_trip(record)):
        assert read.to_json() == record.to_json()
        rebuilt = WindowEstimate.from_record(read).protocol
        assert (rebuilt.k, rebuilt.m) == (8, 16)
    # the set answer's standard error is the k = 8, m = 16 protocol's, not the defaults'
    answer = WindowEstimate.from_record(record).set_sum(range(10))
    default = PROTOCOLS[name](epsilon=2.0, d=500)
    plug_in = WindowEstimate.from_record(record).plug_in
    ours = config.protocol.linear_variance(record.n, set_indicator(500, range(10)), plug_in)
    theirs = default.linear_variance(record.n, set_indicator(500, range(10)), plug_in)
    assert answer.std_error_kind == "exact"
    assert answer.std_error == pytest.approx(ours ** 0.5, rel=1e-12)
    assert abs(ours - theirs) > 0.05 * ours


@pytest.mark.parametrize("name", POOLED)
def test_a_record_written_before_the_field_reads_as_the_defaults(name):
    record = window(registry(metric(name))["app"])
    assert record.parameters == {"k": record_protocol(record).k, "m": record_protocol(record).m}
    older = json.loads(record.to_json())
    del older["parameters"]
    read = EstimateRecord.from_json(older)
    assert read.parameters is None and "parameters" not in json.loads(read.to_json())
    rebuilt = WindowEstimate.from_record(read).protocol
    default = PROTOCOLS[name](epsilon=2.0, d=500)
    assert (rebuilt.k, rebuilt.m) == (default.k, default.m)
    avro_older = {**record.to_avro(), "parameters": None}
    out = io.BytesIO()
    fastavro.writer(out, load_schema("window_estimate"), [avro_older])
    out.seek(0)
    read = EstimateRecord.from_avro(next(iter(fastavro.reader(out))))
    assert WindowEstimate.from_record(read).protocol.k == default.k


def record_protocol(record):
    return WindowEstimate.from_record(record).protocol


def test_other_protocols_records_are_unchanged():
    record = window(registry(metric("olh"))["app"])
    assert "parameters" not in json.loads(record.to_json())
    assert avro_round_trip(record).to_json() == record.to_json()


def test_a_record_with_parameters_no_protocol_takes_is_unreadable():
    record = json.loads(window(registry(metric("cms", sketch={"k": 8}))["app"]).to_json())
    for bad in ({"k": 0}, {"k": 8, "q": 3}):
        with pytest.raises(ValueError):
            WindowEstimate.from_record(EstimateRecord.from_json({**record, "parameters": bad}))
    with pytest.raises(ValueError, match="parameters"):
        EstimateRecord.from_json({**record, "parameters": [8]})


def test_the_plan_shows_the_chosen_sketch_its_mse_and_cost():
    n, d = 100_000, 5000
    model = cost_model()
    default = {row.protocol: row for row in plan(2.0, d, n)}
    chosen = {row.protocol: row for row in plan(2.0, d, n, sketch={"k": 64, "m": 256})}
    for name in POOLED:
        protocol = PROTOCOLS[name](epsilon=2.0, d=d, hashes=64, buckets=256)
        row = chosen[name]
        assert row.parameter == "k=64, g=256" if name == "flh" else "k=64, m=256"
        assert row.collision_mse == pytest.approx(1 / (64 * 255), rel=1e-12)
        assert row.mse == pytest.approx(protocol.n_mse() / n + 1 / (64 * 255), rel=1e-12)
        scale_k = 64 / PROTOCOLS[name](epsilon=2.0, d=d).k
        assert row.finalize_seconds == pytest.approx(
            model.finalize_seconds(name, d) * scale_k, rel=1e-12)
        scale_m = 256 / PROTOCOLS[name](epsilon=2.0, d=d).m if name == "cms" else 1.0
        assert row.reports_per_second == pytest.approx(
            model.reports_per_second(name, d) / scale_m, rel=1e-12)
    for name in set(default) - set(POOLED):
        assert chosen[name] == default[name]
    with pytest.raises(ConfigError, match="power of two") as raised:
        plan(2.0, d, sketch={"m": 100})
    assert raised.value.field == "sketch_m"


@pytest.mark.slow  # a subprocess
def test_ldp_plan_takes_the_sketch_flags():
    command = [sys.executable, "-m", "ldp_telemetry.pipelines.cli", "plan", "--epsilon", "2",
               "--domain", "5000", "--n", "100000", "--sketch-k", "64", "--sketch-m", "256"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "k=64, m=256" in done.stdout and "k=64, g=256" in done.stdout
    done = subprocess.run([*command[:-1], "100"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("ldp plan: error: --sketch-m for hcms"), done.stderr


def test_registry_diff_names_a_changed_sketch():
    from ldp_telemetry.pipelines.registry_tools import describe_changes
    old = registry(metric(sketch={"k": 64}))["app"]
    new = registry(metric(sketch={"k": 256, "m": 1024}))["app"]
    assert describe_changes(old, new) == ["sketch k=64, m=512 -> k=256, m=1024"]
    assert describe_changes(old, registry(metric("oue"))["app"]) == ["protocol cms -> oue"]


def test_an_earlier_pooled_version_does_not_inherit_the_current_integrity_settings():
    loaded = registry(metric("olh", version=2, integrity={"top_k": 5}, history=[
        {"version": 1, "protocol": "flh", "epsilon": 2.0, "domain": {"size": 500}}]))
    assert loaded.version("app", 1).integrity is None
    assert loaded.version("app", 2).integrity.top_k == 5


def test_ldp_show_names_the_sketch_of_a_pooled_window():
    from ldp_telemetry.output.text import format_top
    shown = format_top(window(registry(metric(sketch={"k": 8, "m": 16}))["app"]), 3)
    assert "  cms (k=8, m=16) ε=2  " in shown.splitlines()[0]
    plain = format_top(window(registry(metric("olh"))["app"]), 3)
    assert "  olh ε=2  " in plain.splitlines()[0]


def test_the_defaults_at_the_largest_domain_stay_within_the_hash_evaluation_limit():
    """FLH's default k = 1,024 at d = 2^24 is the limit itself; CMS and HCMS stay below it."""
    for name in ("cms", "hcms", "flh"):
        config = registry({**metric(name), "domain": {"size": MAX_DOMAIN_SIZE}})["app"]
        assert config.protocol.k * MAX_DOMAIN_SIZE <= MAX_POOL_HASH_EVALUATIONS
    edge = registry({**metric(sketch={"k": 65536, "m": 2}), "domain": {"size": 1 << 18}})
    assert edge["app"].protocol.k == 65536
