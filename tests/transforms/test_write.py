"""Writing estimate records one at a time: JSON in pieces, compact records (numpy arrays and
lazy labels) written to JSON and Avro exactly as their plain form, and the store sink's bound."""
from __future__ import annotations

import io
import json

import fastavro
import numpy as np

from ldp_telemetry.ldp.finalize import finalize_window
from ldp_telemetry.ldp.registry import parse_registry
from ldp_telemetry.schemas import load_schema
from ldp_telemetry.transforms.compact import IndexLabels, avro_values, plain_record
from ldp_telemetry.transforms.finalize import BATCH_PANE, window_estimate_record
from ldp_telemetry.transforms.store import STORE_FLUSH_VALUES, WritePanesToStoreFn
from ldp_telemetry.transforms.write import json_line_pieces


def test_json_pieces_are_exactly_json_dumps_for_any_piece_size():
    rng = np.random.default_rng(3)
    record = {"b": [float(x) for x in rng.normal(size=37)], "a": {"z": 1, "y": [None, "é"]},
              "labels": [f"v{i}\n\"" for i in range(37)], "empty": [], "n": 5, "x": None,
              "nan": [float("nan"), float("inf"), -0.0, 1e-320]}
    expected = json.dumps(record, sort_keys=True) + "\n"
    for piece_items in (1, 2, 5, 36, 37, 1000):
        assert "".join(json_line_pieces(record, piece_items)) == expected


def big_record(d: int, compact: bool) -> dict:
    config = parse_registry({"metrics": [{"name": "m", "protocol": "oue", "epsilon": 2.0,
                                          "domain": {"size": d}}]})["m"]
    statistic = config.protocol.new_statistic()
    rng = np.random.default_rng(5)
    config.protocol.accumulate(statistic, config.protocol.perturb(rng.integers(0, d, 50), rng))
    result = finalize_window(config, statistic, 50)
    return window_estimate_record(config, result, "a", "b", dict(BATCH_PANE), compact)


def test_a_compact_record_is_written_as_its_plain_form_to_json_and_avro():
    d = 40_000  # more than one piece (16,384 items) per array
    compact, plain = big_record(d, True), big_record(d, False)
    assert isinstance(compact["estimate"], np.ndarray) and compact["labels"] == IndexLabels(d)
    assert plain_record(compact) == plain and plain["labels"][:3] == ["0", "1", "2"]
    assert "".join(json_line_pieces(compact)) == json.dumps(plain, sort_keys=True) + "\n"
    schema = fastavro.parse_schema(load_schema("window_estimate"))
    written = {}
    for name, record in (("compact", avro_values(compact)), ("plain", plain)):
        buffer = io.BytesIO()
        fastavro.writer(buffer, schema, [record], codec="null", sync_marker=b"0" * 16)
        written[name] = buffer.getvalue()
    assert written["compact"] == written["plain"]


def test_index_labels_behave_as_the_list_of_indices():
    labels = IndexLabels(12)
    assert list(labels) == [str(v) for v in range(12)] == labels[:]
    assert labels[3] == "3" and labels[-1] == "11" and labels[2:5] == ["2", "3", "4"]
    assert len(labels) == 12 and labels != IndexLabels(11)


class RecordingStore:
    def __init__(self):
        self.calls = []

    def write_panes(self, records):
        self.calls.append(len(records))


def test_the_store_sink_writes_before_a_bundle_of_large_windows_is_held_whole():
    sink = WritePanesToStoreFn("sqlite:///unused.db")
    sink._store = RecordingStore()
    sink.start_bundle()
    per_record = STORE_FLUSH_VALUES // 4
    for _ in range(10):
        sink.process({"estimate": [0.0] * per_record})
    sink.finish_bundle()
    # Written every 4 records (the bound), then the bundle's last 2.
    assert sink._store.calls == [4, 4, 2]
