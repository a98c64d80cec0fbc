"""Property-based fuzzing of report files (see tests/schemas/report_fuzzing.py).

10,000 damaged files through the decoder (derandomized: the same cases on every run), and a
dozen through the real job. `benchmarks/fuzz_reports.py` runs the same property for longer,
with fresh random cases.
"""
from __future__ import annotations

import functools
import io
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.pipelines.batch import run_job
from ldp_telemetry.pipelines.counters import accepted
from ldp_telemetry.pipelines.job import EstimateJob
from tests.schemas import report_fuzzing as fuzz

pytestmark = pytest.mark.slow  # fuzzing
CI_CASES = 10_000
MEMORY_SAMPLE = 8


@functools.cache
def seeds() -> dict[str, tuple[bytes, fuzz.Layout]]:
    with tempfile.TemporaryDirectory() as directory:
        files = fuzz.seed_files(Path(directory))
    return {name: (data, fuzz.Layout.of(data)) for name, data in files.items()}


def test_the_seed_files_cover_every_codec_and_decode_whole():
    names = sorted(seeds())
    assert names == sorted(f"{metric} {codec}" for metric in fuzz.METRICS for codec in fuzz.CODECS)
    assert {"null", "deflate", "snappy"} <= set(fuzz.CODECS)
    for name in names:
        data, layout = seeds()[name]
        assert len(layout.blocks) >= 3, name
        assert fuzz.check(data) == (24, 24, 0), name


@settings(max_examples=-(-CI_CASES // len(fuzz.CODECS)), deadline=None, derandomize=True,
          database=None, suppress_health_check=list(HealthCheck))
@given(metric=st.sampled_from(fuzz.METRICS), blob=fuzz.plans())
def test_damaged_files_lose_nothing(metric, blob):
    """Each example damages the seed file of `metric` in every codec alike: CI_CASES files."""
    plan = fuzz.plan_of(blob)
    for codec in fuzz.CODECS:
        data, layout = seeds()[f"{metric} {codec}"]
        damaged = fuzz.apply(data, layout, plan)
        if zlib.crc32(damaged) % MEMORY_SAMPLE == 0:  # tracing memory is slow: a sample
            fuzz.check_with_memory(damaged, codec)
        else:
            fuzz.check(damaged)


def test_damaged_files_through_the_job_lose_nothing(tmp_path):
    """A dozen damaged files through the real job: its counters add up as the decoder's do."""
    rng = np.random.default_rng(2024)
    names = sorted(seeds())
    files, expected = [], np.zeros(3, dtype=np.int64)
    for k in range(12):
        name = names[k % len(names)]
        data, layout = seeds()[name]
        damaged = fuzz.apply(data, layout, fuzz.plan_of(rng.bytes(8 * int(rng.integers(1, 7)))))
        path = tmp_path / f"damaged-{k}.avro"
        path.write_bytes(damaged)
        files.append(str(path))
        expected += fuzz.check(damaged)
    counters = run_job(EstimateJob(fuzz.REGISTRY, tuple(files), str(tmp_path / "out"),
                                   WindowSpec(fuzz.HOUR, fuzz.HOUR)), [], out=io.StringIO())
    # Copies of one seed file repeat its report ids: the job finds those as duplicates after
    # decoding, moving them from the decoder's accepted to the dead-lettered.
    duplicates = counters.get("dead_letter.duplicate", 0)
    dead = sum(v for k, v in counters.items() if k.startswith("dead_letter."))
    read, decoded = counters["records_read"], counters.get("records_accepted", 0)
    assert (read, decoded, dead - duplicates) == tuple(expected.tolist())
    assert read == accepted(counters) + dead and dead > 0


# -- report envelopes --------------------------------------------------------------------------

ENVELOPE_CASES = 3_000


@functools.cache
def envelope_seeds() -> dict[str, tuple[bytes, fuzz.Layout]]:
    with tempfile.TemporaryDirectory() as directory:
        files = fuzz.envelope_seed_files(Path(directory))
    return {name: (data, fuzz.Layout.of(data)) for name, data in files.items()}


def test_the_envelope_seed_files_decode_whole():
    for name, (data, layout) in envelope_seeds().items():
        assert len(layout.blocks) >= 3, name
        assert fuzz.check(data) == (24, 24, 0), name


@settings(max_examples=-(-ENVELOPE_CASES // len(fuzz.CODECS)), deadline=None, derandomize=True,
          database=None, suppress_health_check=list(HealthCheck))
@given(metric=st.sampled_from(fuzz.METRICS), blob=fuzz.plans())
def test_damaged_envelope_files_lose_nothing(metric, blob):
    """The container edits of `test_damaged_files_lose_nothing` on envelope files: reports read
    (an unreadable block: its envelopes) = accepted + dead-lettered."""
    plan = fuzz.plan_of(blob)
    for codec in fuzz.CODECS:
        data, layout = envelope_seeds()[f"{metric} {codec}"]
        damaged = fuzz.apply(data, layout, plan)
        if zlib.crc32(damaged) % MEMORY_SAMPLE == 0:
            fuzz.check_with_memory(damaged, codec)
        else:
            fuzz.check(damaged)


@settings(max_examples=ENVELOPE_CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(metric=st.sampled_from(fuzz.METRICS), blob=fuzz.envelope_plans())
def test_damaged_envelopes_lose_nothing(metric, blob):
    """Envelopes with damaged fields in a well-formed file: each malformed envelope one dead
    letter, each invalid report in a sound one counted, reports conserved."""
    damaged = fuzz.apply_envelope_edits(fuzz.seed_envelopes(metric), fuzz.envelope_plan_of(blob))
    if zlib.crc32(damaged) % MEMORY_SAMPLE == 0:
        read, accepted_, dead = fuzz.check_with_memory(damaged, "null")
    else:
        read, accepted_, dead = fuzz.check(damaged)
    assert accepted_ <= fuzz.ENVELOPE_SEED_REPORTS


def test_each_kind_of_envelope_damage_is_a_dead_letter():
    """One edit of each kind the fuzzer draws, on the GRR seed: each ends in dead letters (or,
    for a flip inside a column, perhaps in a still-valid report), never in an exception."""
    kinds = set()
    for field in fuzz.ENVELOPE_FIELDS:
        for operation in fuzz.ENVELOPE_OPERATIONS:
            for value in (0, 1, 5, -7):
                edit = fuzz.EnvelopeEdit(field, operation, 0, value)
                damaged = fuzz.apply_envelope_edits(fuzz.seed_envelopes("fuzz.grr"), [edit])
                read, accepted_, dead = fuzz.check(damaged)
                kinds.add((field, dead > 0))
    assert {field for field, dead in kinds if dead} == set(fuzz.ENVELOPE_FIELDS)
