"""Bounds on what one report file can make the reader allocate, decode or store.

Every size and count that a report file controls is checked against one of these before it is
allocated or trusted; what exceeds a bound becomes a dead letter, never an allocation. The
defaults hold every file a standard Avro writer produces (fastavro and Java write blocks of
16-64 KB) with a wide margin, and bound one decoding thread's memory to a few times
`max_block_bytes` plus about 1 KB per record of `max_block_records`.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ldp_telemetry.ldp.errors import ConfigError

MIB = 1 << 20


@dataclass(frozen=True)
class DecodeLimits:
    """The reader's limits; each has a job flag (`ldp run --max-...`) of the same name.

    max_block_bytes: largest block, in bytes, both as stored and once decompressed; a larger
        one (a decompression bomb, or a block no standard writer makes) is refused while it
        is being decompressed, without ever holding more than this many bytes.
    max_block_records: most records one block may announce.
    max_record_bytes: largest encoded record, bytes; a larger one is a dead letter.
    max_metric_name_chars: longest metric name, characters; a longer one is a dead letter.
    max_dead_letter_report_chars: longest report text stored in a dead letter; a longer one is
        cut (its encoded size is kept in the dead letter's `report_bytes`).
    max_header_bytes: longest file header (magic, metadata and writer schema), bytes.
    """

    max_block_bytes: int = 64 * MIB
    max_block_records: int = 1_000_000
    max_record_bytes: int = 1 * MIB
    max_metric_name_chars: int = 256
    max_dead_letter_report_chars: int = 4096
    max_header_bytes: int = 1 * MIB

    def __post_init__(self):
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"--{field.name.replace('_', '-')} must be a positive integer, "
                                  f"got {value!r}", field=field.name)
        if self.max_record_bytes > self.max_block_bytes:
            raise ConfigError(f"--max-record-bytes ({self.max_record_bytes}) cannot exceed "
                              f"--max-block-bytes ({self.max_block_bytes}): a record is inside "
                              f"a block", field="max_record_bytes")


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
}
