"""Test vectors of the client library: configuration, seed, value -> exact report bytes.

    python -m ldp_telemetry.client.vectors client/test_vectors.json

regenerates `test_vectors.json` (installed beside this module, `VECTORS_PATH`) from `CASES`.
Each vector holds a registry entry, its canonical text and fingerprint, a seed, a value, an event
time and a report id; the report `encode` makes of them (numpy's default_rng(seed) drawing the
perturbation) as the payload and as the exact Avro bytes of the record (schemaless binary
encoding against schemas/report.avsc); and the report's support set as the server's own code
counts it (the payload decoded, then the protocol's `accumulate` into an empty statistic). The
format is in docs/client.md.

`MEMO_CASES` adds memoized (two-stage) configurations under the key "memoized_vectors": each
also holds the device secret, the PRR item, the HMAC-SHA-256 key of its stream and the permanent
response (ldp_telemetry.ldp.config.memoize; deterministic given the secret), then the report
`encode` makes with `DeviceMemo(secret)` and default_rng(seed) drawing the instantaneous response.
"""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import fastavro
import numpy as np

from ldp_telemetry.client.device import DeviceMemo
from ldp_telemetry.client.encoder import encode
from ldp_telemetry.client.values import domain_points
from ldp_telemetry.ldp.config.fingerprint import WIRE_FORMAT, canonical_text, real_text
from ldp_telemetry.ldp.config.memoize import prr_key, words_for
from ldp_telemetry.ldp.config.registry import MetricConfig, parse_registry
from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS, FrequencyOracle
from ldp_telemetry.ldp.protocols.memoized import BUCKET, VALUE, TwoStage
from ldp_telemetry.schemas import load_schema

VECTORS_PATH = Path(__file__).with_name("test_vectors.json")
T0 = 1_717_200_000_000  # 2024-06-01T00:00:00Z
LABELS = ["ATL", "BOS", "DEN", "JFK", "LAX", "ORD", "SEA", "SFO"]
#: Registry entries and the (seed, value) pairs encoded under each: every frequency protocol,
#: labelled and sized domains, non-ASCII labels, a numeric Square Wave metric.
CASES: tuple[tuple[dict, tuple[tuple[int, object], ...]], ...] = (
    ({"name": "v.grr", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": LABELS}},
     ((1, "JFK"), (2, "ATL"))),
    ({"name": "v.grr.sized", "protocol": "grr", "epsilon": 2.5, "domain": {"size": 5}},
     ((3, 4), (4, 0))),
    ({"name": "v.oue", "protocol": "oue", "epsilon": 2.0, "domain": {"labels": LABELS}},
     ((5, "SEA"), (6, 1))),
    ({"name": "v.sue", "protocol": "sue", "epsilon": 1.5, "domain": {"size": 13}},
     ((7, 12), (8, 3))),
    ({"name": "v.rue", "protocol": "rue", "epsilon": 1.0, "domain": {"size": 9}},
     ((9, 2), (10, 8))),
    ({"name": "v.olh", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 20}},
     ((11, 7), (12, 19))),
    ({"name": "v.blh", "protocol": "blh", "epsilon": 1.0, "domain": {"labels": LABELS}},
     ((13, "LAX"), (14, "ORD"))),
    ({"name": "v.rlh", "protocol": "rlh", "epsilon": 3.0, "domain": {"size": 30}},
     ((15, 0), (16, 29))),
    ({"name": "v.hr", "protocol": "hr", "epsilon": 1.0, "domain": {"size": 12}},
     ((17, 5), (18, 11))),
    ({"name": "v.ss", "protocol": "ss", "epsilon": 0.5, "domain": {"size": 10}},
     ((19, 6), (20, 1))),
    ({"name": "v.rws", "protocol": "rws", "epsilon": 2.0, "domain": {"size": 16}},
     ((21, 9), (22, 15))),
    ({"name": "v.cms", "protocol": "cms", "epsilon": 2.0, "domain": {"size": 24}},
     ((23, 7), (24, 23))),
    ({"name": "v.hcms", "protocol": "hcms", "epsilon": 1.0, "domain": {"labels": LABELS}},
     ((25, "DEN"), (26, "SFO"))),
    ({"name": "v.flh", "protocol": "flh", "epsilon": 2.0, "domain": {"size": 40}},
     ((27, 0), (28, 39))),
    ({"name": "v.städte", "protocol": "grr", "epsilon": 2.0,
      "domain": {"labels": ["Zürich", "São Paulo", "東京", "Kraków", "🚀 base"]}},
     ((23, "東京"), (24, "🚀 base"))),
    ({"name": "v.rtt_ms", "protocol": "sw", "epsilon": 1.0,
      "domain": {"low": 0, "high": 800, "buckets": 16}},
     ((25, 123.5), (26, 800))),
    ({"name": "v.app", "protocol": "pem", "epsilon": 2.0,
      "domain": {"strings": {"max_bytes": 8, "pool": 16}}},
     ((27, "mail"), (28, "Zürich"))),
    ({"name": "v.app.final", "protocol": "pem", "epsilon": 2.0,
      "domain": {"strings": {"max_bytes": 8, "pool": 16, "final_share": 0.5}}},
     ((29, "mail"), (30, "Zürich"))),
)


#: Memoized registry entries and the (secret, seed, value) triples encoded under each.
MEMO_CASES: tuple[tuple[dict, tuple[tuple[str, int, object], ...]], ...] = (
    ({"name": "v.memo.grr", "protocol": "grr", "epsilon": 1.07, "domain": {"labels": LABELS},
      "memoize": {"lifetime_epsilon": 4.39, "max_values": 4}, "reports_per_day": 24},
     (("00" * 32, 31, "JFK"), ("ff" * 16, 32, "SFO"))),
    ({"name": "v.memo.oue", "protocol": "oue", "epsilon": 1.0, "domain": {"size": 12},
      "memoize": {"lifetime_epsilon": 3.0}},
     (("0123456789abcdef" * 2, 33, 7), ("fedcba9876543210" * 4, 34, 0))),
    ({"name": "v.memo.sue", "protocol": "sue", "epsilon": 0.5, "domain": {"size": 9},
      "memoize": {"lifetime_epsilon": 2.0, "on_limit": "repeat", "max_values": 1}},
     (("a5" * 20, 35, 8),)),
    ({"name": "v.memo.olh", "protocol": "olh", "epsilon": 2.0, "domain": {"size": 40},
      "memoize": {"lifetime_epsilon": 5.0}, "reports_per_day": 96},
     (("5a" * 24, 36, 39), ("00" * 32, 37, 3))),
)


def registry_document() -> dict:
    """The registry of every case's metric."""
    return {"metrics": [entry for entry, _ in CASES]}


def memo_vectors() -> list[dict]:
    """The memoized vectors (see the module docstring)."""
    registry = parse_registry({"metrics": [entry for entry, _ in MEMO_CASES]})
    schema = load_schema("report")
    out = []
    for number, (entry, triples) in enumerate(MEMO_CASES):
        config = registry[entry["name"]]
        protocol = config.protocol
        assert isinstance(protocol, TwoStage), "a memoized metric"
        for offset, (secret_hex, seed, value) in enumerate(triples):
            secret = bytes.fromhex(secret_hex)
            point = int(domain_points(config, [value])[0])
            words = words_for(secret, config)
            item = protocol.prr_item(point, words)
            kind = BUCKET if hasattr(protocol, "g") else VALUE
            prr = protocol.permanent_response(item, words)
            event_time_ms = T0 + 60_000 * (2 * number + offset)
            report_id = (1 << 61) + 1_000 * number + offset
            record = encode(config, value, np.random.default_rng(seed),
                            event_time_ms=event_time_ms, report_id=report_id,
                            device=DeviceMemo(secret))
            encoded = io.BytesIO()
            fastavro.schemaless_writer(encoded, schema, record)
            assert record is not None, "a case that reports (no max_values reached)"
            branch, payload = record["payload"]
            prr_payload = next(protocol.payloads_to_avro(prr))
            out.append({
                "registry_entry": entry, "canonical_text": canonical_text(config),
                "fingerprint": config.fingerprint.hex(), "device_secret": secret_hex,
                "value": value, "prr_item": {"kind": kind, "item": item},
                "prr_key": prr_key(secret, config.name, config.fingerprint, kind, item).hex(),
                "stages": {name: {"p": real_text(stage.p), "q": real_text(stage.q)}
                           for name, stage in zip(("prr", "irr"), protocol.stages(), strict=True)},
                "permanent_response": _json_fields(prr_payload),
                "seed": seed, "event_time_ms": event_time_ms, "report_id": report_id,
                "payload": {"record": branch.rsplit(".", 1)[1], "fields": _json_fields(payload)},
                "avro": encoded.getvalue().hex(), "support_of": "values",
                "support": server_support(config, encoded.getvalue()),
            })
    return out


def vectors() -> dict:
    """The test vectors document (see the module docstring)."""
    registry = parse_registry(registry_document())
    schema = load_schema("report")
    out = []
    for number, (entry, pairs) in enumerate(CASES):
        config = registry[entry["name"]]
        for offset, (seed, value) in enumerate(pairs):
            event_time_ms = T0 + 60_000 * (2 * number + offset)
            report_id = (1 << 62) + 1_000 * number + offset
            record = encode(config, value, np.random.default_rng(seed),
                            event_time_ms=event_time_ms, report_id=report_id)
            encoded = io.BytesIO()
            fastavro.schemaless_writer(encoded, schema, record)
            assert record is not None, "a metric that is not memoized always reports"
            branch, payload = record["payload"]
            out.append({
                "registry_entry": entry, "canonical_text": canonical_text(config),
                "fingerprint": config.fingerprint.hex(), "seed": seed, "value": value,
                "event_time_ms": event_time_ms, "report_id": report_id,
                "payload": {"record": branch.rsplit(".", 1)[1], "fields": _json_fields(payload)},
                "avro": encoded.getvalue().hex(),
                "support_of": {NUMERIC: "report_buckets",
                               STRINGS: "statistic_cells"}.get(config.kind, "values"),
                "support": server_support(config, encoded.getvalue()),
            })
    return {"format": WIRE_FORMAT, "schema": "schemas/report.avsc",
            "rng": "numpy.random.default_rng(seed) (PCG64), numpy's own draws",
            "vectors": out, "memoized_vectors": memo_vectors()}


def server_support(config: MetricConfig, avro: bytes) -> list[int]:
    """The support set of one schemaless-encoded report as the server counts it: indices in
    [0, d) of the values it supports (a frequency metric), or of the report-histogram buckets it
    adds to (a numeric metric's statistic), or the cells of a string metric's statistic it adds
    one to (its level's report count, then its (level, hash, y) count)."""
    record = fastavro.schemaless_reader(io.BytesIO(avro), load_schema("report"), None,
                                        return_record_name=True)
    assert isinstance(record, dict), "the report schema is a record"
    protocol = config.protocol
    columns, invalid = protocol.payloads_from_avro([record["payload"][1]])
    if invalid.any():
        raise ValueError(f"vector of {config.name}: the payload is outside the output space")
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, columns)
    # a numeric or string metric's statistic is what the report adds to
    counts = (protocol.support_counts(statistic) if isinstance(protocol, FrequencyOracle)
              else statistic)
    support: list[int] = np.flatnonzero(counts).tolist()
    return support


def _json_fields(payload: dict) -> dict:
    """A payload record as JSON: bytes as lower-case hex, everything else as it is."""
    return {key: value.hex() if isinstance(value, bytes) else value
            for key, value in payload.items()}


def vectors_text() -> str:
    """The test vectors as the file holds them (UTF-8 JSON, one-space indent)."""
    return json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else VECTORS_PATH
    target.write_text(vectors_text(), encoding="utf-8")
    print(f"test vectors written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
