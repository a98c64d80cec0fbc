"""No behaviour change: the typed record writes the bytes the dict-based writer wrote.

`golden/` holds the output of `golden_job.py`'s demo-sized job as the dict-based writer wrote
it (its JSON lines, and its Avro shard's records decoded). The job runs again here, on the
current writer, and must give the same JSON bytes line for line and the same Avro records.
The job is deterministic (one seed, FnApiRunner, the EMS bootstrap seeded), so the comparison
is exact: no tolerance, no false failure.
"""
from __future__ import annotations

from tests.output.golden_job import avro_lines, json_lines, read_golden, run_golden_job


def test_the_demo_sized_job_writes_the_golden_records_byte_for_byte(tmp_path):
    output = run_golden_job(tmp_path)
    written, golden = json_lines(output), read_golden("estimates.jsonl.gz")
    assert len(written) == len(golden) == 24
    for line, expected in zip(written, golden, strict=True):
        assert line == expected
    assert avro_lines(output) == read_golden("estimates.avro.jsonl.gz")
