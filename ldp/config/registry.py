"""The metric registry: the contract between clients and the pipeline.

JSON of the form

    {"metrics": [{"name": "flight.dest", "protocol": "grr", "epsilon": 2.0,
                  "domain": {"labels": ["ATL", ...]} | {"size": 105},
                  "estimator": "unbiased", "postprocess": "norm-hyb",
                  "not_before": "2020-01-01"},
                 {"name": "rtt_ms", "protocol": "sw", "epsilon": 1.0,
                  "domain": {"low": 0, "high": 800, "buckets": 256}, "estimator": "ems"}]}

is loaded into frozen `MetricConfig` objects. `"protocol": "auto"` is resolved when the registry
is loaded by ldp_telemetry.ldp.config.planner.recommend (lowest analytical MSE for the metric's ε
and domain size); the choice and its reason are logged, and the resolved name is the metric's
protocol from then on (the estimates report it). A numeric protocol (`sw`, ...;
ldp_telemetry.ldp.protocols.NUMERIC_PROTOCOLS) takes a numeric domain {"low", "high",
"buckets"[, "output_buckets"]} and a numeric estimator that fits it (default: the protocol's
first, "ems" for sw). A string protocol (`pem`; ldp_telemetry.ldp.protocols.STRING_PROTOCOLS)
takes an open domain of UTF-8 strings {"strings": {"max_bytes": m[, "pool": K][,
"final_share": s][, "dictionary": [...]]}} and the estimator "heavy-hitters" (its `top`,
`threshold`, `width`). Every problem raises
ldp_telemetry.ldp.base.errors.RegistryError, its message naming the metric and the field
("metric 'rtt_ms': field 'epsilon' must ..."), its `field` the path of the field in the
registry (``metrics[1].epsilon``), before any report is read.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ldp_telemetry.ldp.base import validation
from ldp_telemetry.ldp.base.errors import ConfigError, RegistryError, UserError
from ldp_telemetry.ldp.base.registration import did_you_mean
from ldp_telemetry.ldp.base.times import ms_from_iso
from ldp_telemetry.ldp.base.validation import (EVENT_TIME_SPAN_TEXT, is_finite_number, is_int,
                                               is_valid_event_time)
from ldp_telemetry.ldp.config.cost import aggregation_rate_problem, cost_model
from ldp_telemetry.ldp.config.fingerprint import fingerprint
from ldp_telemetry.ldp.config.memoize import Memoization, parse_memoization, parse_reports_per_day
from ldp_telemetry.ldp.config.planner import recommend, recommend_two_stage
from ldp_telemetry.ldp.config.string_dictionary import dictionary_problem, read_dictionary_files
from ldp_telemetry.ldp.estimation.estimators import UNBIASED, EstimatorSpec
from ldp_telemetry.ldp.estimation.histograms import bucket_edges
from ldp_telemetry.ldp.estimation.postprocess import PostprocessSpec
from ldp_telemetry.ldp.integrity.spec import DEFAULT as INTEGRITY_DEFAULT
from ldp_telemetry.ldp.integrity.spec import IntegritySpec, parse_integrity
from ldp_telemetry.ldp.protocols import (NUMERIC_PROTOCOLS, PROTOCOLS, STRING_PROTOCOLS,
                                         FrequencyOracle, NumericProtocol, is_pooled,
                                         make_numeric_protocol, make_protocol,
                                         make_string_protocol)
from ldp_telemetry.ldp.protocols.base import FREQUENCY, NUMERIC, STRINGS, epsilon_problem
from ldp_telemetry.ldp.protocols.hash_pool import SKETCH_FIELDS, sketch_arguments
from ldp_telemetry.ldp.protocols.memoized import make_memoized_protocol
from ldp_telemetry.ldp.protocols.noise import SupportNoise
from ldp_telemetry.ldp.protocols.numeric import bucket_count_problem
from ldp_telemetry.ldp.protocols.pem import (DEFAULT_POOL, final_share_problem,
                                             string_domain_problem)

_METRIC_FIELDS = {"name", "version", "protocol", "epsilon", "domain", "estimator", "postprocess",
                  "not_before", "history", "memoize", "reports_per_day", "integrity",
                  "aggregation_rate", "sketch"}
#: Fields of an entry of a metric's `history` (an earlier configuration).
_HISTORY_FIELDS = {"version", "protocol", "epsilon", "domain", "estimator", "postprocess",
                   "memoize", "sketch"}
#: Most earlier configurations one metric may list.
MAX_HISTORY = 64
#: Highest configuration version.
MAX_VERSION = 1_000_000
AUTO = "auto"
#: Largest domain size d (defined in ldp.base.validation, which `ldp plan` reads too).
MAX_DOMAIN_SIZE = validation.MAX_DOMAIN_SIZE
#: Report counts at which post-processing is tried on a probe vector when the registry loads.
PROBE_REPORT_COUNTS = (1, 1_000, 1_000_000_000)
#: Length of the probe vector (or d, when smaller).
PROBE_VALUES = 64
#: `not_before` dates must be valid event times (`ldp.base.validation.is_valid_event_time`).
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricConfig:
    """One metric: its protocol, privacy level, domain, estimator and post-processing."""

    name: str
    protocol_name: str
    epsilon: float
    d: int
    labels: tuple[str, ...] | None
    postprocess: PostprocessSpec
    estimator: EstimatorSpec = EstimatorSpec(UNBIASED.name)
    low: float | None = None  # numeric metrics: the domain [low, high] in the metric's units
    high: float | None = None
    output_buckets: int | None = None  # numeric metrics: d̃ as given (None: the protocol's default)
    pool: int | None = None  # string metrics: hash functions per level (d is then max_bytes)
    #: string metrics: the candidate dictionary (UTF-8), decoded beside the prefix search; the
    #: server's choice, not fingerprinted (ldp_telemetry.ldp.estimation.heavy_hitters)
    dictionary: tuple[bytes, ...] = ()
    #: string metrics: the share of devices sent to level m (fingerprinted when not 0)
    final_share: float = 0.0

    not_before: str | None = None
    version: int = 1  # the configuration's version; a metric's current one is its highest
    #: two-stage reporting (ldp_telemetry.ldp.config.memoize): `epsilon` is then the per-report ε1
    memoize: Memoization | None = None
    reports_per_day: float | None = None  # the configured reporting rate (privacy budget only)
    #: integrity statistics' settings (ldp_telemetry.ldp.integrity.spec); None: integrity off
    integrity: IntegritySpec | None = INTEGRITY_DEFAULT
    #: reports per second per core the protocol must count (ldp_telemetry.ldp.config.cost):
    #: `"protocol": "auto"` chooses among the protocols that keep up; not fingerprinted
    aggregation_rate: float | None = None
    #: the pooled-hash oracles' `sketch` ({"k": K, "m": M}) as sorted items; empty: the
    #: protocol's defaults (ldp_telemetry.ldp.protocols.hash_pool; fingerprinted as k and m)
    sketch: tuple[tuple[str, int], ...] = ()

    @property
    def kind(self) -> str:
        """The protocol's kind: FREQUENCY for a frequency oracle, NUMERIC for a numeric one,
        STRINGS for a string protocol."""
        if self.protocol_name in STRING_PROTOCOLS:
            return STRINGS
        return NUMERIC if self.protocol_name in NUMERIC_PROTOCOLS else FREQUENCY

    @cached_property
    def fingerprint(self) -> bytes:
        """The configuration fingerprint (ldp_telemetry.ldp.config.fingerprint) reports carry."""
        return fingerprint(self)

    @property
    def version_label(self) -> str:
        """The version as records name it: "v1", "v2", ..."""
        return f"v{self.version}"

    @cached_property
    def not_before_ms(self) -> int | None:
        """`not_before` in epoch milliseconds: earlier event times are dead letters."""
        return None if self.not_before is None else ms_from_iso(self.not_before)

    @property
    def statistic_nbytes(self) -> int:
        """Bytes of one accumulator's statistic (per slice or window)."""
        size = getattr(self.protocol, "statistic_nbytes", None)
        return size() if size is not None else int(np.asarray(self.protocol.new_statistic()).nbytes)

    @cached_property
    def protocol(self) -> FrequencyOracle | NumericProtocol:
        if self.kind == NUMERIC:
            return make_numeric_protocol(self.protocol_name, self.epsilon, self.d,
                                         self.output_buckets)
        if self.kind == STRINGS:
            assert self.pool is not None, "a string metric's pool is set when it is parsed"
            # a PrefixExtension: the string kind's own interface, outside the two typed here
            return make_string_protocol(  # type: ignore[return-value]
                self.protocol_name, self.epsilon, self.d, self.pool, self.final_share)
        if self.memoize is not None:
            return make_memoized_protocol(self.protocol_name, self.epsilon, self.d,
                                          self.memoize.lifetime_epsilon, self.memoize.g_rule)
        return make_protocol(self.protocol_name, self.epsilon, self.d,
                             **sketch_arguments(dict(self.sketch)))

    @cached_property
    def bucket_edges(self) -> np.ndarray:
        """Numeric metrics: the d + 1 bucket edges in the metric's units."""
        assert self.low is not None and self.high is not None, "not a numeric metric"
        return bucket_edges(self.low, self.high, self.d)

    def to_unit(self, values: np.ndarray) -> np.ndarray:
        """Numeric metrics: values in [low, high] mapped onto [0, 1]."""
        assert self.low is not None and self.high is not None, "not a numeric metric"
        return (values - self.low) / (self.high - self.low)

    @property
    def value_labels(self) -> list[str]:
        """Labels of the domain values (their index as text for a sized domain; for a numeric
        domain each bucket as "[lo, hi)", the last one closed; none for a string metric, whose
        domain is open)."""
        if self.kind == STRINGS:
            return []
        if self.kind == NUMERIC:
            edges = self.bucket_edges.tolist()
            return [f"[{lo:g}, {hi:g}{']' if i == self.d - 1 else ')'}"
                    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True))]
        return list(self.labels) if self.labels is not None else [str(v) for v in range(self.d)]


@dataclass(frozen=True)
class Registry:
    """The metrics' current configurations (`metrics`) and their earlier ones (`history`)."""

    metrics: tuple[MetricConfig, ...]
    history: tuple[MetricConfig, ...] = ()

    @cached_property
    def by_name(self) -> dict[str, MetricConfig]:
        return {m.name: m for m in self.metrics}

    @cached_property
    def by_fingerprint(self) -> dict[bytes, MetricConfig]:
        """Every configuration, current or earlier, by its fingerprint."""
        return {config.fingerprint: config for config in (*self.history, *self.metrics)}

    @cached_property
    def _versions(self) -> dict[tuple[str, int], MetricConfig]:
        return {(config.name, config.version): config
                for config in (*self.history, *self.metrics)}

    def __getitem__(self, name: str) -> MetricConfig:
        """The current configuration of the metric `name`."""
        try:
            return self.by_name[name]
        except KeyError:
            raise RegistryError(f"metric {name!r} is not in the registry"
                                f"{did_you_mean(name, self.by_name)} (known: "
                                f"{sorted(self.by_name)})", "metric") from None

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def version(self, name: str, version: int | None) -> MetricConfig:
        """The configuration `version` of the metric `name` (None: its current one)."""
        if version is None:
            return self[name]
        try:
            return self._versions[name, version]
        except KeyError:
            known = [config.version for config in self.versions(name)]
            raise RegistryError(f"metric {name!r} has no version {version} (known: {known})",
                                "version") from None

    def versions(self, name: str) -> tuple[MetricConfig, ...]:
        """Every configuration of the metric `name`, oldest first (the current one last)."""
        current = self[name]
        return (*(config for config in self.history if config.name == name), current)


def load_registry(path: str | Path, announce: Collection[str] | None = None) -> Registry:
    """Read and validate a registry file; log how "auto" was resolved for the metrics named in
    `announce` (every metric when None)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RegistryError(f"cannot read registry {path}: {error.strerror}",
                            "registry") from None
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RegistryError(f"registry {path} is not UTF-8 text: byte {data[error.start]:#04x} "
                            f"at offset {error.start} ({error.reason})", "registry") from None
    except json.JSONDecodeError as error:
        raise RegistryError(f"registry {path} is not valid JSON: {error}", "registry") from None
    except RecursionError:
        raise RegistryError(f"registry {path} is nested too deeply to be a registry",
                            "registry") from None
    return parse_registry(read_dictionary_files(document, path.parent), announce)


def parse_registry(document: Any, announce: Collection[str] | None = None) -> Registry:
    """Validate an already-parsed registry document."""
    if not isinstance(document, Mapping) or not isinstance(document.get("metrics"), list):
        raise RegistryError('registry must be an object with a "metrics" list', "metrics")
    if not document["metrics"]:
        raise RegistryError('registry field "metrics" is empty', "metrics")
    metrics, history = [], []
    for position, entry in enumerate(document["metrics"]):
        metric = _parse_metric(entry, f"metrics[{position}]", announce=announce)
        metrics.append(metric)
        history.extend(_parse_history(entry, metric, f"metrics[{position}]"))
    names = [m.name for m in metrics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        second = [i for i, n in enumerate(names) if n == duplicates[0]][1]
        raise RegistryError(f"metric {duplicates[0]!r}: field 'name' appears more than once",
                            f"metrics[{second}].name")
    return Registry(tuple(metrics), tuple(history))


def _parse_history(entry: Mapping, current: MetricConfig, where: str) -> list[MetricConfig]:
    """The earlier configurations listed in a metric's `history`, oldest first.

    Each entry holds `version` and the fields of a configuration (protocol, epsilon, domain;
    estimator and postprocess default to the current configuration's; `not_before` is the
    metric's, for every version). Versions must increase
    along the list and stay below the current version; two versions may not share a
    configuration (their reports could not be told apart).
    """
    history = entry.get("history", [])
    name = current.name
    if not isinstance(history, list):
        raise RegistryError(f"metric {name!r}: field 'history' must be a list of earlier "
                            "configurations, oldest first", f"{where}.history")
    if len(history) > MAX_HISTORY:
        raise RegistryError(f"metric {name!r}: field 'history' lists {len(history)} "
                            f"configurations, more than MAX_HISTORY ({MAX_HISTORY})",
                            f"{where}.history")
    configs = []
    for position, earlier in enumerate(history):
        at = f"{where}.history[{position}]"
        if not isinstance(earlier, Mapping):
            raise RegistryError(f"metric {name!r}: {at[len(where) + 1:]} must be an object", at)
        unknown = sorted(set(earlier) - _HISTORY_FIELDS)
        if unknown:
            raise RegistryError(f"metric {name!r}: field '{unknown[0]}' of "
                                f"{at[len(where) + 1:]} is not a history field (expected "
                                f"{sorted(_HISTORY_FIELDS)})", f"{at}.{unknown[0]}")
        if "version" not in earlier:
            raise RegistryError(f"metric {name!r}: {at[len(where) + 1:]} needs a 'version'",
                                f"{at}.version")
        inherited = {key: entry[key] for key in ("estimator", "postprocess", "integrity")
                     if key in entry}
        if is_pooled(earlier.get("protocol")):  # no integrity statistics to inherit settings of
            inherited.pop("integrity", None)
        config = _parse_metric({**inherited, **earlier, "name": name}, at,
                               label=f"metric {name!r} version {earlier['version']!r}")
        configs.append(dataclasses.replace(config, not_before=current.not_before,
                                           reports_per_day=current.reports_per_day))
    previous = None
    for position, config in enumerate(configs):
        at = f"{where}.history[{position}].version"
        if previous is not None and config.version <= previous.version:
            raise RegistryError(f"metric {name!r}: history is out of order: version "
                                f"{config.version} follows version {previous.version} (list "
                                "earlier versions oldest first, each version once)", at)
        if config.version >= current.version:
            raise RegistryError(f"metric {name!r}: history version {config.version} is not "
                                f"below the current version {current.version} (give the "
                                f"current configuration a higher 'version')", at)
        previous = config
    seen: dict[bytes, MetricConfig] = {}
    for config in (*configs, current):
        other = seen.setdefault(config.fingerprint, config)
        if other is not config:
            raise RegistryError(
                f"metric {name!r}: versions {other.version} and {config.version} have the same "
                f"configuration (fingerprint {config.fingerprint.hex()}), so their reports "
                "cannot be told apart: remove one", f"{where}.history")
    return configs


def _parse_metric(entry: Any, where: str, label: str | None = None,
                  announce: Collection[str] | None = None) -> MetricConfig:
    """One configuration; `where` is its path in the registry (``metrics[3]``), `label` how
    messages name it (default ``metric 'name'``); `announce` as `load_registry`'s."""
    if not isinstance(entry, Mapping):
        raise RegistryError(f"{where} must be an object", where)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{where}: field 'name' must be a non-empty string",
                            f"{where}.name")
    label = label or f"metric {name!r}"

    def fail(field: str, message: str, path: str | None = None) -> RegistryError:
        """The error of `field` (the name in the message); `path`: a more precise field under
        it (``estimator.iterations``), for the error's `field`."""
        return RegistryError(f"{label}: field '{field}' {message}", f"{where}.{path or field}")

    def refail(field: str, error: ValueError) -> RegistryError:
        """`fail` for an error raised by a part of the library that names its own field."""
        path = error.field if isinstance(error, UserError) else None
        return fail(field, str(error), path if path and path.startswith(field) else None)

    unknown = sorted(set(entry) - _METRIC_FIELDS)
    if unknown:
        raise fail(unknown[0], f"is not a registry field (expected {sorted(_METRIC_FIELDS)})")
    version = entry.get("version", 1)
    if not is_int(version) or not 1 <= version <= MAX_VERSION:
        raise fail("version", f"must be an integer in [1, {MAX_VERSION}], got {version!r}")
    protocol: Any = entry.get("protocol")  # a registry value, checked here
    if (protocol not in PROTOCOLS and protocol not in NUMERIC_PROTOCOLS
            and protocol not in STRING_PROTOCOLS and protocol != AUTO):
        known = sorted(PROTOCOLS) + sorted(NUMERIC_PROTOCOLS) + sorted(STRING_PROTOCOLS) + [AUTO]
        raise fail("protocol", f"must be one of {known}, got {protocol!r}"
                               f"{did_you_mean(protocol, known)}")
    epsilon: Any = entry.get("epsilon")  # a registry value, checked here
    problem = epsilon_problem(epsilon)
    if problem:
        raise fail("epsilon", problem)
    not_before = entry.get("not_before")
    if not_before is not None:
        problem = _instant_problem(not_before)
        if problem:
            raise fail("not_before", problem)
    reports_per_day = parse_reports_per_day(entry.get("reports_per_day"), fail)
    memoize = None
    if entry.get("memoize") is not None:
        if protocol in NUMERIC_PROTOCOLS or protocol in STRING_PROTOCOLS:
            kind = "numeric" if protocol in NUMERIC_PROTOCOLS else "string"
            raise fail("memoize", f"needs a frequency protocol, not the {kind} {protocol!r}")
        memoize = parse_memoization(entry["memoize"],
                                    lambda field, message: fail(field, message))
    sketch = _parse_sketch(entry.get("sketch"), protocol, fail)
    integrity = parse_integrity(entry.get("integrity"), where, label)
    aggregation_rate = entry.get("aggregation_rate")
    if aggregation_rate is not None:
        problem = aggregation_rate_problem(aggregation_rate)
        if problem is None and (protocol in NUMERIC_PROTOCOLS or memoize is not None):
            problem = ("applies to one-stage frequency metrics only (the cost model measures "
                       "the frequency oracles)")
        if problem:
            raise fail("aggregation_rate", problem)
        aggregation_rate = float(aggregation_rate)
    if protocol in NUMERIC_PROTOCOLS:
        config = _parse_numeric_metric(entry, name, protocol, float(epsilon), fail, refail)
        return dataclasses.replace(config, not_before=not_before, version=version,
                                   reports_per_day=reports_per_day, integrity=None)
    if protocol in STRING_PROTOCOLS:
        config = _parse_string_metric(entry, name, protocol, float(epsilon), fail, refail)
        return dataclasses.replace(config, not_before=not_before, version=version,
                                   reports_per_day=reports_per_day, integrity=None)
    labels, d = _parse_domain(entry.get("domain"), fail)
    if protocol == AUTO and memoize is not None:
        problem = epsilon_problem(memoize.lifetime_epsilon)
        if problem or not float(epsilon) < memoize.lifetime_epsilon:
            raise fail("memoize.lifetime_epsilon", problem or
                       f"must exceed the per-report epsilon ({epsilon:g}), got "
                       f"{memoize.lifetime_epsilon:g}")
        protocol, reason = recommend_two_stage(float(epsilon), memoize.lifetime_epsilon, d,
                                               memoize.max_values)
        if announce is None or name in announce:
            log.info("%s: protocol 'auto' resolved to %r for ε1=%g, ε∞=%g, d=%d: %s", label,
                     protocol, epsilon, memoize.lifetime_epsilon, d, reason)
    elif protocol == AUTO:
        try:
            protocol, reason = recommend(float(epsilon), d, rate=aggregation_rate)
        except ConfigError as error:
            message = error.message.removeprefix("aggregation_rate: ")
            raise fail("aggregation_rate", message) from None
        if announce is None or name in announce:
            log.info("%s: protocol 'auto' resolved to %r for ε=%g, d=%d: %s",
                     label, protocol, epsilon, d, reason)
    if is_pooled(protocol):
        if entry.get("integrity") not in (None, False):
            chosen = " ('auto' chose it)" if entry.get("protocol") == AUTO else ""
            raise fail("integrity", f"is not available for protocol {protocol!r}{chosen}: its "
                                    "reports' support depends on the realised collisions of the "
                                    "public hash pool, which the integrity tests have no model "
                                    "of (docs/large-domains.md); leave it out")
        integrity = None
    try:
        postprocess = PostprocessSpec.parse(entry.get("postprocess"))
    except ValueError as error:
        raise refail("postprocess", error) from None
    try:
        estimator = EstimatorSpec.parse(entry.get("estimator", UNBIASED.name))
        estimator.check_fits(PROTOCOLS[protocol])
    except ValueError as error:
        raise refail("estimator", error) from None
    if estimator.definition.ordinal and labels is not None:
        log.warning("metric %r: estimator %r assumes neighbouring values are similar, and the "
                    "domain is a list of labels: check that their order means something",
                    name, estimator.method)
    if aggregation_rate is not None and entry.get("protocol") != AUTO:
        modelled = cost_model().reports_per_second(protocol, d)
        if modelled is not None and modelled < aggregation_rate:
            log.warning("%s: protocol %r counts about %s reports/s per core at d=%d by the cost "
                        "model, below its aggregation_rate %s", label, protocol,
                        f"{modelled:,.0f}", d, f"{aggregation_rate:,.0f}")
    config = MetricConfig(name, protocol, float(epsilon), d, labels, postprocess, estimator,
                          not_before=not_before, version=version, memoize=memoize,
                          reports_per_day=reports_per_day, integrity=integrity,
                          aggregation_rate=aggregation_rate, sketch=sketch)
    try:
        config.protocol  # noqa: B018 (built now: its own checks run before any report is read)
    except ValueError as error:
        field = error.field if isinstance(error, UserError) else None
        if field and field.startswith(("memoize", "sketch")):
            raise fail(field, str(error)) from None
        raise refail("protocol", error) from None
    problem = _postprocess_problem(config)
    if problem:
        raise fail("postprocess", problem)
    return config


def _parse_sketch(value: Any, protocol: Any, fail: Callable[..., RegistryError]
                  ) -> tuple[tuple[str, int], ...]:
    """The metric's `sketch`, {"k": K, "m": M} (either optional), as sorted items: the pool's
    hash functions and buckets of a pooled-hash oracle (FLH's m is its g). Their limits are the
    protocol's own (MAX_POOL_HASHES, MAX_SKETCH_BUCKETS, MAX_POOL_CELLS; HCMS: m a power of
    two), checked when it is built; absent: the protocol's defaults."""
    if value is None:
        return ()
    pooled = [name for name in PROTOCOLS if is_pooled(name)]
    if not is_pooled(protocol):
        hint = " (name one: 'auto' may choose an oracle without a pool)" if protocol == AUTO \
            else ""
        raise fail("sketch", f"applies to the pooled-hash oracles {pooled} only, not "
                             f"{protocol!r}{hint}")
    expected = '{"k": K, "m": M} (either optional)'
    if not isinstance(value, Mapping) or not value:
        raise fail("sketch", f"must be an object {expected}, got {value!r}")
    for key in sorted(value):
        if key not in SKETCH_FIELDS:
            raise fail(f"sketch.{key}", f"is not a sketch field ({expected})")
        if not is_int(value[key]):
            raise fail(f"sketch.{key}", f"must be an integer, got {value[key]!r}")
    return tuple(sorted((key, int(item)) for key, item in value.items()))


def _postprocess_problem(config: MetricConfig) -> str | None:
    """Why post-processing fails on a probe vector (a phrase), or None when it works.

    The probe is a noisy Zipf-like estimate of min(d, PROBE_VALUES) values, at each report count
    of PROBE_REPORT_COUNTS with the metric's p* and q*: parameters that overflow or give
    non-finite estimates (e.g. power's exponent 1e308) fail here, before a report is read.
    Metrics with the same post-processing, p*, q* and probe length share one probe.
    """
    protocol = config.protocol
    assert isinstance(protocol, FrequencyOracle), "numeric metrics are not post-processed"
    return _probe(config.postprocess, protocol.p_star, protocol.q_star,
                  min(config.d, PROBE_VALUES))


@lru_cache(maxsize=1024)
def _probe(postprocess: PostprocessSpec, p_star: float, q_star: float, size: int) -> str | None:
    shape = 1.0 / np.arange(1, size + 1)
    shape /= shape.sum()
    signs = np.where(np.arange(size) % 2 == 0, 1.0, -1.0)
    for n in PROBE_REPORT_COUNTS:
        noise = SupportNoise(p_star, q_star, n)
        probe = shape + signs * min(noise.sigma, 1.0) if math.isfinite(noise.sigma) else shape
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                estimate = np.asarray(postprocess.apply(probe, noise), dtype=np.float64)
        except (ArithmeticError, ValueError) as error:
            return (f"{postprocess.as_dict()} fails on a probe estimate of {n} reports: "
                    f"{type(error).__name__}: {error}")
        if estimate.shape != probe.shape or not np.isfinite(estimate).all():
            return (f"{postprocess.as_dict()} gives non-finite estimates on a probe "
                    f"estimate of {n} reports")
    return None


def _instant_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be an ISO-8601 date or time such as '2020-01-01', got {value!r}"
    try:
        moment_ms = ms_from_iso(value)
    except ValueError:
        return f"must be an ISO-8601 date or time such as '2020-01-01', got {value!r}"
    if not is_valid_event_time(moment_ms):
        return f"must lie in {EVENT_TIME_SPAN_TEXT}, got {value!r}"
    return None


def _parse_numeric_metric(entry: Mapping, name: str, protocol: str, epsilon: float,
                          fail: Callable[..., RegistryError],
                          refail: Callable[[str, ValueError], RegistryError]) -> MetricConfig:
    """A metric of a numeric protocol: numeric domain, numeric estimator that fits it."""
    mean_only = getattr(NUMERIC_PROTOCOLS[protocol], "mean_only", False)
    low, high, buckets, output_buckets = _parse_numeric_domain(entry.get("domain"), fail,
                                                               needs_buckets=not mean_only)
    if "postprocess" in entry and entry["postprocess"] not in ("none", "base", {"method": "none"}):
        raise fail("postprocess", f"does not apply to numeric protocol {protocol!r} (its "
                                  "estimator returns a distribution); leave it out")
    estimator = _parse_estimator(entry, NUMERIC_PROTOCOLS[protocol], refail)
    config = MetricConfig(name, protocol, epsilon, buckets, None, PostprocessSpec.parse("none"),
                          estimator, low, high, output_buckets)
    return _built(config, fail)


def _parse_string_metric(entry: Mapping, name: str, protocol: str, epsilon: float,
                         fail: Callable[..., RegistryError],
                         refail: Callable[..., RegistryError]) -> MetricConfig:
    """A metric of a string protocol: an open domain of strings, the heavy-hitters estimator.
    No post-processing (there is no domain to make consistent) and no integrity statistics
    (no support model for a string's reports exists here)."""
    expected = ('{"strings": {"max_bytes": M}} (optionally "pool", "final_share", "dictionary" '
                'or "dictionary_file")')
    domain = entry.get("domain")
    if not (isinstance(domain, Mapping) and set(domain) == {"strings"}
            and isinstance(domain["strings"], Mapping) and "max_bytes" in domain["strings"]):
        raise fail("domain", f"of a string protocol must be {expected}")
    strings = domain["strings"]
    unknown = sorted(set(strings) - {"max_bytes", "pool", "final_share", "dictionary"})
    if unknown == ["dictionary_file"]:
        raise fail("domain.strings.dictionary_file", "is read relative to the registry's file: "
                                                     "load the registry from its file")
    if unknown:
        raise fail(f"domain.strings.{unknown[0]}", f"is not a string domain field ({expected})")
    max_bytes, pool = strings["max_bytes"], strings.get("pool", DEFAULT_POOL)
    problem = string_domain_problem(max_bytes, pool)
    if problem:
        raise fail(f"domain.strings.{problem[0]}", problem[1])
    final_share = strings.get("final_share", 0.0)
    share_problem = final_share_problem(final_share)
    if share_problem:
        raise fail("domain.strings.final_share", share_problem)
    if "postprocess" in entry and entry["postprocess"] not in ("none", {"method": "none"}):
        raise fail("postprocess", f"does not apply to string protocol {protocol!r} (its "
                                  "estimator returns heavy hitters); leave it out")
    if entry.get("integrity") not in (None, False):
        raise fail("integrity", f"is not available for string protocol {protocol!r}: no "
                                "support model of its reports exists yet; leave it out")
    dictionary = _parse_dictionary(strings.get("dictionary", []), max_bytes, fail)
    estimator = _parse_estimator(entry, STRING_PROTOCOLS[protocol], refail)
    config = MetricConfig(name, protocol, epsilon, max_bytes, None, PostprocessSpec.parse("none"),
                          estimator, pool=pool, dictionary=dictionary,
                          final_share=float(final_share))
    return _built(config, fail)


def _parse_dictionary(values: Any, max_bytes: int, fail: Callable[..., RegistryError]
                      ) -> tuple[bytes, ...]:
    """A string metric's `domain.strings.dictionary` (ldp_telemetry.ldp.config.string_dictionary)
    as UTF-8 bytes."""
    problem = dictionary_problem(values, max_bytes)
    if problem:
        position, why = problem
        index = "" if position is None else f"[{position}]"
        raise fail(f"domain.strings.dictionary{index}", why)
    return tuple(value.encode("utf-8") for value in values)


def _parse_estimator(entry: Mapping, protocol: Any,
                     refail: Callable[[str, ValueError], RegistryError]) -> EstimatorSpec:
    """The metric's `estimator` (the protocol class's first by default), checked to fit it."""
    try:
        estimator = EstimatorSpec.parse(entry.get("estimator", protocol.estimators[0]))
        estimator.check_fits(protocol)
    except ValueError as error:
        raise refail("estimator", error) from None
    return estimator


def _built(config: MetricConfig, fail: Callable[..., RegistryError]) -> MetricConfig:
    """`config` with its protocol built now, so that the protocol's own checks run before any
    report is read (a RegistryError naming the field they name, else `protocol`)."""
    try:
        config.protocol  # noqa: B018 (built now: its own checks run before any report is read)
    except ValueError as error:
        field = error.field if isinstance(error, UserError) and error.field else "protocol"
        raise fail(field, str(error)) from None
    return config


def _parse_numeric_domain(domain: Any, fail: Callable[..., RegistryError],
                          needs_buckets: bool = True
                          ) -> tuple[float, float, int, int | None]:
    """low, high, buckets, output_buckets; a mean-only protocol (sr, pm) needs no buckets."""
    expected = '{"low": L, "high": H, "buckets": B} (optionally "output_buckets")'
    required = {"low", "high", "buckets"} if needs_buckets else {"low", "high"}
    if not isinstance(domain, Mapping) or not required <= set(domain):
        raise fail("domain", f"of a numeric protocol must be {expected}")
    if not needs_buckets:
        domain = {"buckets": 2, **domain}
    unknown = sorted(set(domain) - {"low", "high", "buckets", "output_buckets"})
    if unknown:
        raise fail(f"domain.{unknown[0]}", f"is not a numeric domain field ({expected})")
    bounds = []
    for key in ("low", "high"):
        value = domain[key]
        if not is_finite_number(value):
            raise fail(f"domain.{key}", f"must be a finite number, got {value!r}")
        bounds.append(float(value))
    if not bounds[0] < bounds[1]:
        raise fail("domain.high", f"must be greater than low ({bounds[0]:g}), got {bounds[1]:g}")
    problem = bucket_count_problem(domain["buckets"])
    if problem:
        raise fail("domain.buckets", problem)
    output_buckets = domain.get("output_buckets")
    if output_buckets is not None:
        problem = bucket_count_problem(output_buckets)
        if problem:
            raise fail("domain.output_buckets", problem)
    return bounds[0], bounds[1], domain["buckets"], output_buckets


def _parse_domain(domain: Any, fail: Callable[..., RegistryError]
                  ) -> tuple[tuple[str, ...] | None, int]:
    if not isinstance(domain, Mapping) or len(domain) != 1:
        raise fail("domain", 'must be {"labels": [...]} or {"size": N}')
    if "labels" in domain:
        labels = domain["labels"]
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise fail("domain.labels", "must be a list of strings")
        if len(set(labels)) != len(labels):
            repeated = next(x for x in labels if labels.count(x) > 1)
            raise fail("domain.labels", f"repeats the label {repeated!r}")
        if len(labels) < 2:
            raise fail("domain.labels", "must hold at least 2 labels")
        if len(labels) > MAX_DOMAIN_SIZE:
            raise fail("domain.labels", f"must hold at most {MAX_DOMAIN_SIZE:,} labels "
                                        f"(MAX_DOMAIN_SIZE), got {len(labels):,}")
        return tuple(labels), len(labels)
    if "size" in domain:
        size = domain["size"]
        if not is_int(size) or size < 2:
            raise fail("domain.size", f"must be an integer >= 2, got {size!r}")
        if size > MAX_DOMAIN_SIZE:
            raise fail("domain.size", f"must be at most {MAX_DOMAIN_SIZE:,} (MAX_DOMAIN_SIZE: one "
                                      f"window's statistic would need {8 * size / 2**30:.3g} GiB), "
                                      f"got {size:,}")
        return None, size
    raise fail("domain", 'must be {"labels": [...]} or {"size": N}')
