"""No behaviour change: the typed record writes what the dict-based writer wrote.

`golden/` holds the output of `golden_job.py`'s demo-sized job as the dict-based writer wrote
it (its JSON lines, and its Avro shard's records decoded). The job runs again here, on the
current writer, and must give the same records: every key, string and integer exactly, every
float to `golden_job.FLOAT_TOLERANCE` relative (the job is deterministic — one seed,
FnApiRunner, the EMS bootstrap seeded — but OpenBLAS chooses its kernels by CPU, and AVX-512
and AVX2 round the last bits of EMS's products differently: a byte-for-byte comparison failed
on one machine and passed on another).
"""
from __future__ import annotations

from tests.output.golden_job import (assert_same_records, avro_lines, json_lines, read_golden,
                                     run_golden_job)


def test_the_demo_sized_job_writes_the_golden_records(tmp_path):
    output = run_golden_job(tmp_path)
    written, golden = json_lines(output), read_golden("estimates.jsonl.gz")
    assert len(written) == len(golden) == 24
    assert_same_records(written, golden)
    assert_same_records(avro_lines(output), read_golden("estimates.avro.jsonl.gz"))


def test_ldp_show_reads_every_kind_of_record_the_job_wrote(tmp_path, capsys):
    """Mean-only records (pm: no buckets, the range's two edges) included: they were refused as
    "not a window estimate" before."""
    from ldp_telemetry.pipelines.cli import main
    output = run_golden_job(tmp_path)
    assert main(["show", "--output", str(output), "--windows", "1"]) == 0
    shown = capsys.readouterr().out
    for title in ("g.labels v1", "o.sized v1", "u.plain v1", "s.num v1", "p.mean v1",
                  "v.versions v1", "v.versions v2", "v.versions combined v1+v2"):
        assert shown.count(title + "  [2013-01-02T00:00:00Z") == 1
