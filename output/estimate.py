"""The window-estimate record, typed: `EstimateRecord`, read and written as JSON and Avro.

One record is one metric's estimate in one event-time window (one pane of it), field by field as
`schemas/window_estimate.avsc` and docs/output-format.md give them. The record format on disk is
unchanged: `to_json` writes the text the job has always written (`json.dumps` of the record with
sorted keys) and `to_avro` the same Avro record, so `from_json(...).to_json()` gives back the
bytes of any record a job wrote.

* Window bounds are kept once, as integer epoch milliseconds (`start_ms`, `end_ms`); the ISO-8601
  text on disk (`window_start`, `window_end`) is derived from them (`ldp.base.times.iso_from_ms`).
* Arrays (`estimate`, `std_error`, `unbiased_estimate`, `bucket_edges`, `unbiased_std_error`)
  are float64 numpy arrays; a sized domain's `labels` may be a lazy `IndexLabels`. Nested
  sections whose shape is the JSON one (`estimator`, `postprocess`, `privacy`, `integrity`,
  `quantiles`, `bands`, ...) stay mappings, as the schema gives them.
* `fields` is the record's layout: which optional fields it carries (a null one is written as
  null, an absent one not at all). It follows from the kind of record — a frequency oracle's
  version (with `integrity`), a numeric metric's (with its distribution's summaries) or a
  combined estimate (`combined_versions`) — and records read from older files keep their own.
  Fields a newer writer added are kept in `extra` and written back.

Normalised on reading (the writers never write otherwise): window bounds not in the writers'
form (`2024-03-01T00:00:00Z`, milliseconds shown only when not zero) and integer items of an
array (written back as floats).

`record_problem` says why a decoded JSON value is not a record a reader can use.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base.times import iso_from_ms, ms_from_iso
from ldp_telemetry.ldp.base.validation import is_int, is_number
from ldp_telemetry.output.compact import avro_values, plain_record
from ldp_telemetry.output.layout import COMBINED, WindowKey

_JSON = json.JSONEncoder(sort_keys=True)


@dataclass(frozen=True)
class Pane:
    """A record's pane: `timing` (EARLY, ON_TIME, LATE or UNKNOWN), `index` (the window's panes
    counted from 0) and `is_last`. A batch run's only pane is `Pane()`."""

    timing: str = "ON_TIME"
    index: int = 0
    is_last: bool = False

    @classmethod
    def from_json(cls, value: Mapping | None) -> Pane:
        """From a record's `pane` (missing parts take the batch pane's)."""
        value = value or {}
        return cls(str(value.get("timing", "ON_TIME")), int(value.get("index", 0)),
                   bool(value.get("is_last", False)))

    def to_json(self) -> dict:
        return {"timing": self.timing, "index": self.index, "is_last": self.is_last}


#: Fields every record has.
REQUIRED_FIELDS = ("metric", "window_start", "window_end", "n", "protocol", "epsilon",
                   "estimate", "pane")
#: The optional fields a frequency oracle's record of one configuration version carries.
FREQUENCY_FIELDS = frozenset({
    "config_version", "fingerprint", "combined_versions", "p_star", "q_star",
    "smallest_resolvable", "estimator", "privacy", "postprocess", "labels", "unbiased_estimate",
    "std_error", "integrity", "band_method"})
#: ... a combined estimate's (no integrity section).
COMBINED_FIELDS = FREQUENCY_FIELDS - {"integrity"}
#: ... a numeric metric's (its distribution's summaries and bands, no integrity section).
NUMERIC_FIELDS = COMBINED_FIELDS | {
    "bucket_edges", "mean", "variance", "quantiles", "mean_std_error", "quantile_std_errors",
    "bootstrap_replicates", "bands", "band_reasons"}
#: ... a string metric's (its heavy hitters as labels, how they were found; no integrity).
STRING_FIELDS = COMBINED_FIELDS | {"heavy_hitters"}
#: Every field this module knows, in the Avro schema's order.
KNOWN_FIELDS = ("metric", "window_start", "window_end", "n", "protocol", "epsilon", "p_star",
                "q_star", "smallest_resolvable", "config_version", "fingerprint",
                "combined_versions", "estimator", "postprocess", "labels", "estimate",
                "unbiased_estimate", "std_error", "pane", "bucket_edges", "mean", "variance",
                "quantiles", "mean_std_error", "quantile_std_errors", "bootstrap_replicates",
                "band_method", "bands", "band_reasons", "privacy", "integrity", "heavy_hitters",
                "parameters", "band_methods", "level_reports", "unbiased_std_error",
                "variance_std_error", "conservative_bands")
#: The postprocess fields of a replay's choice (`postprocess: "auto"`): absent from the JSON of
#: a fixed method's record, null in its Avro record.
_POSTPROCESS_CHOICE = ("chosen", "expected_mse")
_ARRAYS = ("estimate", "std_error", "unbiased_estimate", "bucket_edges", "unbiased_std_error")


@dataclass(frozen=True, kw_only=True, eq=False)
class EstimateRecord:
    """One window's estimate of one metric (see the module). Build it with keywords; `fields`
    defaults to the layout of its kind."""

    metric: str
    start_ms: int
    end_ms: int
    n: int
    protocol: str
    epsilon: float
    estimate: np.ndarray
    pane: Pane = field(default_factory=Pane)
    estimator: Mapping[str, Any] | None = None
    postprocess: Mapping[str, Any] | None = None
    labels: Sequence[str] = ()
    std_error: np.ndarray | None = None
    unbiased_estimate: np.ndarray | None = None
    p_star: float | None = None
    q_star: float | None = None
    smallest_resolvable: float | None = None
    config_version: int | None = None
    fingerprint: str | None = None
    combined_versions: tuple[int, ...] | None = None
    privacy: Mapping[str, Any] | None = None
    integrity: Mapping[str, Any] | None = None
    band_method: str | None = None
    bucket_edges: np.ndarray | None = None
    mean: float | None = None
    variance: float | None = None
    quantiles: Mapping[str, float] | None = None
    mean_std_error: float | None = None
    quantile_std_errors: Mapping[str, float] | None = None
    bootstrap_replicates: int | None = None
    bands: Mapping[str, Any] | None = None
    band_reasons: Mapping[str, str] | None = None
    #: statistic -> band method, for a numeric record's statistics whose band is not made as
    #: `band_method` says (absent from other records and older ones: `output.bands`)
    band_methods: Mapping[str, str] | None = None
    heavy_hitters: Mapping[str, Any] | None = None
    #: a pooled-hash oracle's sketch, {"k": K, "m": M} (absent from other records and older ones)
    parameters: Mapping[str, int] | None = None
    #: a hierarchical histogram's reports at every depth 1..h (absent from other records and
    #: older ones)
    level_reports: tuple[int, ...] | None = None
    #: a pooled-hash oracle's Wiener record: f~'s standard errors with the collision term, which
    #: its value bands are made from (`std_error` is the filter's; absent from other records
    #: and older ones: `output.bands`)
    unbiased_std_error: np.ndarray | None = None
    #: a numeric record's standard error of `variance` that its band is made from, kept where
    #: the variance is declared without a band (absent where the variance has none, from other
    #: records and from older ones)
    variance_std_error: float | None = None
    #: statistic (a quantile level; "mean" or "variance") -> its conservative band {lower, upper}
    #: (or null), of a CFO-binning or hierarchical-histogram record (its quantiles, and its mean or
    #: variance in a setting where that band over-covered) and of a Square Wave record with a
    #: quantile whose band over-covered in its setting or a mean or variance whose band the
    #: bucketing bound widened past its share: it holds the statistic in at least 95% of windows and
    #: is not a 95% band (`bands` has none for it; absent from other records and older ones:
    #: `output.bands.conservative_band`)
    conservative_bands: Mapping[str, Any] | None = None
    fields: frozenset[str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _ARRAYS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, np.ndarray)
                                          and value.dtype == np.float64):
                object.__setattr__(self, name, np.asarray(value, dtype=np.float64))
        for name in ("combined_versions", "level_reports"):
            value = getattr(self, name)
            if value is not None and type(value) is not tuple:
                object.__setattr__(self, name, tuple(value))
        if self.fields is None:
            layout = (NUMERIC_FIELDS if self.bucket_edges is not None else
                      STRING_FIELDS if self.heavy_hitters is not None else
                      COMBINED_FIELDS if self.combined_versions is not None else FREQUENCY_FIELDS)
            object.__setattr__(self, "fields", layout)

    # -- what readers ask -------------------------------------------------------------------------
    @property
    def window_start(self) -> str:
        """The window's inclusive start as ISO-8601 UTC text."""
        return iso_from_ms(self.start_ms)

    @property
    def window_end(self) -> str:
        """The window's exclusive end as ISO-8601 UTC text."""
        return iso_from_ms(self.end_ms)

    @property
    def version(self) -> str:
        """`v<N>`, COMBINED, or "" for a record written before records named versions
        (`output.layout.version_label`)."""
        if self.combined_versions is not None:
            return COMBINED
        return "" if self.config_version is None else f"v{self.config_version}"

    @property
    def key(self) -> WindowKey:
        """The record's window key (`output.layout.window_key`)."""
        return WindowKey(self.metric, self.start_ms, self.end_ms, self.version)

    @property
    def numeric(self) -> bool:
        """A numeric metric's record (it has bucket edges)."""
        return self.bucket_edges is not None

    @property
    def value_labels(self) -> list[str]:
        """One label per estimate: the record's, or the values' indices when it has none."""
        return list(self.labels) if len(self.labels) else [str(i) for i in
                                                            range(len(self.estimate))]

    def with_pane(self, pane: Pane) -> EstimateRecord:
        return dataclasses.replace(self, pane=pane)

    # -- JSON -------------------------------------------------------------------------------------
    @classmethod
    def from_json(cls, value: Mapping | str | bytes) -> EstimateRecord:
        """The record of a JSON object, decoded or as its text; ValueError saying what is wrong
        when it is not a window estimate (`record_problem`)."""
        return cls.from_value(json.loads(value) if isinstance(value, (str, bytes)) else value)

    @classmethod
    def from_value(cls, value: object) -> EstimateRecord:
        """The record of any decoded JSON value; ValueError saying what is wrong when it is not
        a window estimate (`record_problem`: checked once, here)."""
        problem = record_problem(value)
        if problem is not None:
            raise ValueError(f"not a window estimate: {problem}")
        assert isinstance(value, dict)  # record_problem found no problem: a JSON object
        return cls._from_fields(value, frozenset(value) - set(REQUIRED_FIELDS))

    def to_json(self) -> str:
        """The record's JSON text as a job writes it (sorted keys; no newline)."""
        return _JSON.encode(self.json_value())

    def json_value(self) -> dict:
        """The record as plain JSON values (lists, dicts), in the layout on disk: what a JSON
        payload that holds a record embeds."""
        return plain_record(self.layout())

    def layout(self) -> dict:
        """The record's fields as they are written, arrays still numpy and lazy labels still
        lazy (what the streaming JSON writer, `transforms.write.json_line_pieces`, takes)."""
        values = {"metric": self.metric, "window_start": self.window_start,
                  "window_end": self.window_end, "n": self.n, "protocol": self.protocol,
                  "epsilon": self.epsilon, "estimate": self.estimate,
                  "pane": self.pane.to_json()}
        assert self.fields is not None  # __post_init__ gives a record without one its kind's
        for name in KNOWN_FIELDS:
            if name in self.fields and name not in values:
                value = getattr(self, name)
                values[name] = (list(value) if name in ("combined_versions", "level_reports")
                                and value else value)
        values.update(self.extra)
        return values

    # -- Avro -------------------------------------------------------------------------------------
    @classmethod
    def from_avro(cls, value: Mapping) -> EstimateRecord:
        """The record of a decoded Avro record (`schemas/window_estimate.avsc`): its layout is
        its kind's, with any other field that is not null, so its `to_json` is the line the job
        wrote beside it."""
        layout = (NUMERIC_FIELDS if value.get("bucket_edges") is not None else
                  STRING_FIELDS if value.get("heavy_hitters") is not None else
                  COMBINED_FIELDS if value.get("combined_versions") is not None
                  else FREQUENCY_FIELDS)
        present = layout | {name for name in value
                            if name not in REQUIRED_FIELDS and value[name] is not None}
        postprocess = value.get("postprocess")
        if isinstance(postprocess, Mapping):  # a fixed method's record has no replay choice
            value = {**value, "postprocess": {
                key: item for key, item in postprocess.items()
                if not (key in _POSTPROCESS_CHOICE and item is None)}}
        return cls._from_fields(value, frozenset(present))

    def to_avro(self) -> dict:
        """The record for fastavro: arrays as lists (long ones converted a chunk at a time)."""
        return avro_values(self.layout())

    # -- equality ---------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        """Two records are equal when they write the same JSON text."""
        if not isinstance(other, EstimateRecord):
            return NotImplemented
        return self.to_json() == other.to_json()

    # mutable arrays inside: not hashable (None, which `object.__hash__`'s type does not allow)
    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def _from_fields(cls, value: Mapping, present: frozenset[str]) -> EstimateRecord:
        known = {name: value[name] for name in KNOWN_FIELDS
                 if name in value and name not in ("window_start", "window_end", "pane")}
        extra = {name: item for name, item in value.items() if name not in KNOWN_FIELDS}
        return cls(**known, start_ms=ms_from_iso(value["window_start"]),
                   end_ms=ms_from_iso(value["window_end"]), pane=Pane.from_json(value["pane"]),
                   fields=frozenset(present & set(KNOWN_FIELDS)), extra=extra)


def records_of(values: Iterable[EstimateRecord | Mapping | str | bytes],
               ) -> Iterator[EstimateRecord]:
    """Each of `values` as an EstimateRecord: a record as it is, a mapping (a decoded JSON
    record) read with `EstimateRecord.from_json`."""
    for value in values:
        yield value if isinstance(value, EstimateRecord) else EstimateRecord.from_json(value)


# -- what a reader can use ----------------------------------------------------------------------

def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_numbers(values: object) -> bool:
    """A list of numbers (`is_number`); a list of floats, what the writers write, is found
    without an ABC check per item."""
    return isinstance(values, list) and (all(type(v) is float for v in values)
                                         or all(is_number(v) for v in values))


#: Fields every estimate record has: (check, what the message calls the type).
_COMMON_FIELDS = {"metric": (_is_str, "str"), "window_start": (_is_str, "str"),
                  "window_end": (_is_str, "str"), "n": (is_int, "int"),
                  "protocol": (_is_str, "str"), "epsilon": (is_number, "number"),
                  "estimate": (lambda v: isinstance(v, list), "list"),
                  "pane": (lambda v: isinstance(v, dict), "dict")}
#: ... and the record of a frequency metric (one without `bucket_edges`).
_FREQUENCY_FIELDS = {"labels": (lambda v: isinstance(v, list), "list"),
                     "std_error": (lambda v: isinstance(v, list), "list"),
                     "postprocess": (lambda v: isinstance(v, dict), "dict")}
#: Optional facts of the metric's protocol: null or a number.
_OPTIONAL_NUMBERS = ("p_star", "q_star", "smallest_resolvable")
#: Optional sections: null or an object.
_OPTIONAL_OBJECTS = ("estimator", "privacy", "integrity", "quantiles", "quantile_std_errors",
                     "bands", "band_reasons", "band_methods", "parameters",
                     "conservative_bands")

#: Most reports a record read back may count: a window's count is an int64 in the job.
MAX_RECORD_REPORTS = 2 ** 63 - 1

#: Most versions a combined estimate read back may name (a registry lists at most 64 earlier
#: configurations of a metric, and its current one).
MAX_COMBINED_VERSIONS = 65


def version_problem(record: Mapping) -> str | None:
    """Why a record's or pane-log entry's version fields are not usable, or None:
    `config_version` null or a positive int, `combined_versions` null or a list of positive
    ints, `fingerprint` null or a string."""
    version = record.get("config_version")
    if version is not None and not (is_int(version) and version > 0):
        return "field 'config_version' must be null or a positive integer"
    combined = record.get("combined_versions")
    if combined is not None and not (isinstance(combined, list)
                                     and 2 <= len(combined) <= MAX_COMBINED_VERSIONS
                                     and all(is_int(v) and v > 0 for v in combined)
                                     and combined == sorted(set(combined))):
        return (f"field 'combined_versions' must be null or 2 to {MAX_COMBINED_VERSIONS} "
                "increasing positive integers")
    if combined is not None and version is not None:
        return "fields 'config_version' and 'combined_versions' cannot both be set"
    if record.get("fingerprint") is not None and not _is_str(record["fingerprint"]):
        return "field 'fingerprint' must be null or a string"
    return None


def _is_band(value: object) -> bool:
    """A band entry of a numeric record: null or {"lower": number, "upper": number}."""
    return value is None or (isinstance(value, dict) and is_number(value.get("lower"))
                             and is_number(value.get("upper")))


#: A numeric record's maps from a statistic's name: what each entry must be, and its test.
_STATISTIC_MAPS = {
    "quantiles": ("a number or null", lambda v: v is None or is_number(v)),
    "quantile_std_errors": ("a number or null", lambda v: v is None or is_number(v)),
    "bands": ('null or {"lower": number, "upper": number}', _is_band),
    "band_reasons": ("a string", lambda v: isinstance(v, str)),
    "conservative_bands": ('null or {"lower": number, "upper": number}', _is_band),
    "band_methods": ("a string", lambda v: isinstance(v, str)),
}


def _statistics_problem(record: dict) -> str | None:
    """Why a numeric record's per-statistic maps (`_STATISTIC_MAPS`) are not readable, or
    None: each present map's every entry as the map's rule says."""
    for name, (kind, check) in _STATISTIC_MAPS.items():
        entries = record.get(name) or {}
        bad = next((key for key, value in entries.items() if not check(value)), None)
        if bad is not None:
            return f"field {name!r} maps {str(bad)!r} to something not {kind}"  # repr: escaped
    return None


def record_problem(record: object) -> str | None:
    """Why a decoded JSON value is not a window estimate a reader can use, or None.

    `window_start` and `window_end` are ISO-8601 times; `estimate` and `std_error` hold one
    number per value; `labels` names them (or is empty, for a numeric metric whose buckets are
    given by `bucket_edges`: one more than the values, or the range's two for a mean-only
    protocol, whose `estimate` is empty); `unbiased_estimate` is such a list, or null for a
    numeric metric; `p_star`, `q_star` and `smallest_resolvable` are null or numbers when
    present; the sections (`estimator`, `privacy`, `integrity`, ...) null or objects; the
    version fields as `version_problem` says.
    """
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    numeric = record.get("bucket_edges") is not None
    fields = _COMMON_FIELDS if numeric else {**_COMMON_FIELDS, **_FREQUENCY_FIELDS}
    for name, (check, kind) in fields.items():
        if not check(record.get(name)):
            return f"field {name!r} is missing or not a {kind}"
    for name in ("window_start", "window_end"):
        try:
            ms_from_iso(record[name])
        except ValueError:
            return f"field {name!r} is not an ISO-8601 time"
    for name in _OPTIONAL_NUMBERS:
        if record.get(name) is not None and not is_number(record[name]):
            return f"field {name!r} must be null or a number"
    for name in _OPTIONAL_OBJECTS:
        if record.get(name) is not None and not isinstance(record[name], dict):
            return f"field {name!r} must be null or an object"
    if not 0 <= record["n"] <= MAX_RECORD_REPORTS:
        return f"field 'n' must be an integer in [0, {MAX_RECORD_REPORTS}]"
    problem = version_problem(record)
    if problem is not None:
        return problem
    size = len(record["estimate"])
    if not _is_numbers(record["estimate"]):
        return f"field 'estimate' must hold {size} numbers"
    if not is_int(record["pane"].get("index")):
        return "field 'pane' has no integer 'index'"
    reports = record.get("level_reports")  # any record's: the reader makes it a tuple
    if reports is not None and not (isinstance(reports, list)
                                    and all(is_int(r) and r >= 0 for r in reports)
                                    and sum(reports) == record["n"]):
        # every report of a hierarchy's window lands at exactly one depth
        return ("field 'level_reports' must be null or a list of non-negative integers "
                "summing to n")
    errors = record.get("unbiased_std_error")  # every kind's: the reader makes it an array
    if errors is not None and not (_is_numbers(errors) and len(errors) == size):
        return f"field 'unbiased_std_error' must be null or hold {size} numbers"
    if errors is not None and record.get("unbiased_estimate") is None:
        # its bands are f~ ± z · it: without f~ they would be centred on the filtered estimate
        return "field 'unbiased_std_error' needs 'unbiased_estimate', the estimate it is f~'s of"
    if numeric:
        edges = record["bucket_edges"]
        # a mean-only protocol's record (sr, pm) has no buckets: its edges are the range
        if not _is_numbers(edges) or len(edges) != size + 1 and not (size == 0
                                                                      and len(edges) == 2):
            return f"field 'bucket_edges' must hold {size + 1} numbers"
        errors = record.get("std_error")
        if errors is not None and not _is_numbers(errors):
            return "field 'std_error' must be null or hold numbers"
        unbiased = record.get("unbiased_estimate")
        if unbiased is not None and not (_is_numbers(unbiased) and len(unbiased) == size):
            return f"field 'unbiased_estimate' must be null or hold {size} numbers"
        return _statistics_problem(record)
    if len(record["std_error"]) != size or not _is_numbers(record["std_error"]):
        return f"field 'std_error' must hold {size} numbers"
    if record["labels"] and len(record["labels"]) != size:
        return f"field 'labels' must hold {size} labels, one per estimate"
    unbiased = record.get("unbiased_estimate")
    if unbiased is not None and not (_is_numbers(unbiased) and len(unbiased) == size):
        return f"field 'unbiased_estimate' must be null or hold {size} numbers"
    return None
