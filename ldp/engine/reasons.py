"""Why a record became a dead letter. The strings are the wire format: they are written in the
`reason` field of dead-letter records, in the store's reject tables and in counter names
(``dead_letter.<reason>``), and never change."""
from __future__ import annotations

from enum import Enum


class Reason(str, Enum):
    """A dead-letter reason; a `str`, equal to and formatted as its wire string."""

    UNDECODABLE = "undecodable"
    UNKNOWN_METRIC = "unknown_metric"
    PROTOCOL_MISMATCH = "protocol_mismatch"
    INVALID_PAYLOAD = "invalid_payload"
    INCOMPATIBLE_SCHEMA = "incompatible_schema"
    INVALID_EVENT_TIME = "invalid_event_time"
    BLOCK_TOO_LARGE = "block_too_large"
    RECORD_TOO_LARGE = "record_too_large"
    METRIC_NAME_TOO_LONG = "metric_name_too_long"
    NOT_A_REGULAR_FILE = "not_a_regular_file"
    BROKEN_LINK = "broken_link"
    BEFORE_NOT_BEFORE = "before_not_before"
    DUPLICATE = "duplicate"
    #: The report's configuration fingerprint is none of its metric's versions in the registry
    #: (an unknown configuration, another metric's, or not FINGERPRINT_BYTES long).
    CONFIG_MISMATCH = "config_mismatch"
    #: A report file of a followed directory that changed after the live run read it (it grew,
    #: was rewritten, or its name was reused): its new content is not counted.
    FILE_CHANGED = "file_changed"
    #: Not a dead-letter record: reports a live run found later than the allowed lateness,
    #: counted per window (too_late.jsonl) and shown beside the rejects.
    TOO_LATE = "too_late"

    __str__ = str.__str__
    __format__ = str.__format__  # type: ignore[assignment]  # format as the plain value

    @property
    def counter(self) -> str:
        """The name of the job counter of this reason."""
        return f"dead_letter.{self.value}"


#: Reasons whose dead letters belong to no window of their metric (no metric known to the
#: registry, or no valid event time): the store and the dashboard show them apart.
UNATTRIBUTED_REASONS = frozenset({Reason.INVALID_EVENT_TIME, Reason.UNKNOWN_METRIC})
