"""Counters as the portable runners report them: committed only, attempted only, or both."""
from __future__ import annotations

from apache_beam.metrics import monitoring_infos
from apache_beam.portability.api import beam_job_api_pb2
from apache_beam.runners.portability.portable_runner import PortableMetrics

from ldp_telemetry.pipelines.counters import record_counters, summary_line


class FakeResult:
    def __init__(self, committed=(), attempted=()):
        self._metrics = PortableMetrics(beam_job_api_pb2.GetJobMetricsResponse(
            metrics=beam_job_api_pb2.MetricResults(committed=committed, attempted=attempted)))

    def metrics(self):
        return self._metrics


def counter(name, value, step="ReadReports/DecodeReports", namespace="ldp"):
    return monitoring_infos.int64_user_counter(namespace, name, value, ptransform=step)


def test_committed_only_as_the_local_job_service_reports():
    result = FakeResult(committed=[counter("records_read", 10), counter("records_accepted", 9),
                                   counter("records_counted", 9),
                                   counter("dead_letter.undecodable", 1),
                                   counter("windows_finalized", 2, step="FinalizeEstimates"),
                                   counter("records_read", 99, namespace="other")])
    counters = record_counters(result)
    assert counters == {"records_read": 10, "records_accepted": 9, "records_counted": 9,
                        "dead_letter.undecodable": 1, "windows_finalized": 2}
    assert summary_line(counters) == ("records read: 10, accepted: 9, dead-lettered: 1 "
                                      "(undecodable=1), windows: 2")


def test_attempted_only_is_used_when_nothing_is_committed():
    result = FakeResult(attempted=[counter("records_read", 7), counter("records_accepted", 7)])
    assert record_counters(result) == {"records_read": 7, "records_accepted": 7}


def test_committed_wins_over_attempted_even_when_zero():
    result = FakeResult(committed=[counter("records_read", 0), counter("records_accepted", 4)],
                        attempted=[counter("records_read", 3), counter("records_accepted", 6)])
    assert record_counters(result) == {"records_read": 0, "records_accepted": 4}


def test_the_same_counter_in_several_steps_is_summed():
    result = FakeResult(committed=[counter("records_read", 5, step="a"),
                                   counter("records_read", 6, step="b")])
    assert record_counters(result) == {"records_read": 11}
