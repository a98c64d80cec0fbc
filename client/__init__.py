"""The client library: what a device needs to report a metric under local differential privacy.

    from ldp_telemetry.client import ReportFile, encode_many
    from ldp_telemetry.ldp.config.registry import load_registry

    config = load_registry("registry.json")["flight.dest"]
    reports = encode_many(config, ["ATL", "BOS"], rng, event_times_ms=[t0, t1])
    with ReportFile("outbox/batch-0001.avro") as out:
        out.write(reports)

Light and Beam-free: numpy, fastavro and the project's `ldp` and `schemas` layers (no scipy,
no Apache Beam on import). `EnvelopeFile` writes batches of reports as columnar envelopes
(docs/envelopes.md). Reports carry their configuration's fingerprint. The test vectors
other implementations are checked against are `test_vectors.json` beside this module
(`vectors.VECTORS_PATH`); docs/client.md describes the library, the files and the vectors.
"""
from __future__ import annotations

from ldp_telemetry.client.encoder import EncodedReports, encode, encode_many, encode_points
from ldp_telemetry.client.envelopes import EnvelopeFile, write_envelope_file
from ldp_telemetry.client.files import ReportFile, write_report_file
from ldp_telemetry.client.values import domain_points

__all__ = ["EncodedReports", "EnvelopeFile", "ReportFile", "domain_points", "encode",
           "encode_many", "encode_points", "write_envelope_file", "write_report_file"]
