"""Bounds on what one report file can make the reader allocate, decode or store.

Every size and count that a report file controls is checked against one of these before it is
allocated or trusted; what exceeds a bound becomes a dead letter, never an allocation. The
defaults hold every file a standard Avro writer produces (fastavro and Java write blocks of
16-64 KB) with a wide margin, and bound one decoding thread's memory to a few times
`max_block_bytes` plus about 1 KB per record of `max_block_records`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.base.validation import is_positive_int

MIB = 1 << 20


@dataclass(frozen=True)
class DecodeLimits:
    """The reader's limits, each a job setting of the same name; ConfigError (naming the
    setting) when one is not a positive integer or a record could not fit in a block.

    max_block_bytes: largest block, in bytes, both as stored and once decompressed; a larger
        one (a decompression bomb, or a block no standard writer makes) is refused while it
        is being decompressed, without ever holding more than this many bytes.
    max_block_records: most records one block may announce.
    max_record_bytes: largest encoded record, bytes; a larger one is a dead letter.
    max_metric_name_chars: longest metric name, characters; a longer one is a dead letter.
    max_dead_letter_report_chars: longest report text stored in a dead letter; a longer one is
        cut (its encoded size is kept in the dead letter's `report_bytes`).
    max_header_bytes: longest file header (magic, metadata and writer schema), bytes.
    max_envelope_reports: most reports one report envelope (schemas/envelope.avsc) may hold; an
        envelope announcing more is a dead letter standing for 1 report.
    max_envelope_bytes: largest encoded report envelope, bytes; a larger one is a dead letter
        standing for the reports it announces (an envelope is inside a block: max_block_bytes
        bounds it too).
    """

    max_block_bytes: int = 64 * MIB
    max_block_records: int = 1_000_000
    max_record_bytes: int = 1 * MIB
    max_metric_name_chars: int = 256
    max_dead_letter_report_chars: int = 4096
    max_header_bytes: int = 1 * MIB
    max_envelope_reports: int = 1_000_000
    max_envelope_bytes: int = 64 * MIB

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not is_positive_int(value):
                raise ConfigError(f"{field.name} must be a positive integer, got {value!r}",
                                  field.name)
        if self.max_record_bytes > self.max_block_bytes:
            raise ConfigError(f"max_record_bytes ({self.max_record_bytes}) cannot exceed "
                              f"max_block_bytes ({self.max_block_bytes}): a record is inside "
                              f"a block", "max_record_bytes")


HELP = {
    "max_block_bytes": "largest Avro block, bytes, as stored and once decompressed; a larger "
                       "block is a dead letter, refused while decompressing",
    "max_block_records": "most records an Avro block may announce; a block announcing more is "
                         "a dead letter",
    "max_record_bytes": "largest encoded report, bytes; a larger one is a dead letter",
    "max_metric_name_chars": "longest metric name in a report, characters; a report with a "
                             "longer one is a dead letter",
    "max_dead_letter_report_chars": "longest report text stored in a dead letter; a longer one "
                                    "is cut, its encoded size kept",
    "max_header_bytes": "longest Avro file header (writer schema included), bytes; a file with "
                        "a longer one is a dead letter",
    "max_envelope_reports": "most reports one report envelope may hold; an envelope announcing "
                            "more is a dead letter",
    "max_envelope_bytes": "largest encoded report envelope, bytes; a larger one is a dead "
                          "letter standing for its reports",
}
