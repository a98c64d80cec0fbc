"""The metric registry: the contract between clients and the pipeline.

JSON of the form

    {"metrics": [{"name": "flight.dest", "protocol": "grr", "epsilon": 2.0,
                  "domain": {"labels": ["ATL", ...]} | {"size": 105},
                  "estimator": "unbiased", "postprocess": "norm-hyb",
                  "not_before": "2020-01-01"}]}

is loaded into frozen `MetricConfig` objects. `"protocol": "auto"` is resolved when the registry
is loaded by ldp_telemetry.ldp.planner.recommend (lowest analytical MSE for the metric's ε and domain size);
the choice and its reason are logged, and the resolved name is the metric's protocol from then
on (the estimates report it). Every problem raises `RegistryError` naming the
metric and the field, before any report is read.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import math
import warnings
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ldp_telemetry.ldp.estimation import SupportNoise
from ldp_telemetry.ldp.estimators import EstimatorSpec
from ldp_telemetry.ldp.planner import recommend
from ldp_telemetry.ldp.postprocess import PostprocessSpec
from ldp_telemetry.ldp.protocols import PROTOCOLS, FrequencyOracle, make_protocol
from ldp_telemetry.ldp.protocols.base import epsilon_problem

_METRIC_FIELDS = {"name", "protocol", "epsilon", "domain", "estimator", "postprocess",
                  "not_before"}
AUTO = "auto"
#: Largest domain size d: a statistic of d int64 counts is then at most 128 MiB (HR's table of
#: 2 x K, K the next power of two, at most 256 MiB), and an estimate record about 1.2 GB of JSON.
MAX_DOMAIN_SIZE = 1 << 24
#: Report counts at which post-processing is tried on a probe vector when the registry loads.
PROBE_REPORT_COUNTS = (1, 1_000, 1_000_000_000)
#: Length of the probe vector (or d, when smaller).
PROBE_VALUES = 64
#: `not_before` dates must lie in [1970-01-01, 2200-01-01), the event times a report may carry.
_NOT_BEFORE_RANGE = (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
                     dt.datetime(2200, 1, 1, tzinfo=dt.timezone.utc))
log = logging.getLogger(__name__)


class RegistryError(ValueError):
    """A registry that cannot be used; the message names the metric and the field."""


@dataclass(frozen=True)
class MetricConfig:
    """One metric: its protocol, privacy level, domain, estimator and post-processing."""

    name: str
    protocol_name: str
    epsilon: float
    d: int
    labels: tuple[str, ...] | None
    postprocess: PostprocessSpec
    estimator: EstimatorSpec = EstimatorSpec("unbiased")
    not_before: str | None = None

    @cached_property
    def not_before_ms(self) -> int | None:
        """`not_before` in epoch milliseconds: earlier event times are dead letters."""
        return None if self.not_before is None else _parse_instant_ms(self.not_before)

    @property
    def statistic_nbytes(self) -> int:
        """Bytes of one accumulator's statistic (per slice or window)."""
        return self.protocol.statistic_nbytes()

    @cached_property
    def protocol(self) -> FrequencyOracle:
        return make_protocol(self.protocol_name, self.epsilon, self.d)

    @property
    def value_labels(self) -> list[str]:
        """Labels of the domain values (their index as text for a sized domain)."""
        return list(self.labels) if self.labels is not None else [str(v) for v in range(self.d)]


@dataclass(frozen=True)
class Registry:
    metrics: tuple[MetricConfig, ...]

    @cached_property
    def by_name(self) -> dict[str, MetricConfig]:
        return {m.name: m for m in self.metrics}

    def __getitem__(self, name: str) -> MetricConfig:
        try:
            return self.by_name[name]
        except KeyError:
            raise RegistryError(f"metric {name!r} is not in the registry "
                                f"(known: {sorted(self.by_name)})") from None

    def __contains__(self, name: object) -> bool:
        return name in self.by_name


def load_registry(path: str | Path) -> Registry:
    """Read and validate a registry file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RegistryError(f"cannot read registry {path}: {error.strerror}") from None
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RegistryError(f"registry {path} is not UTF-8 text: byte {data[error.start]:#04x} "
                            f"at offset {error.start} ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise RegistryError(f"registry {path} is not valid JSON: {error}") from None
    except RecursionError:
        raise RegistryError(f"registry {path} is nested too deeply to be a registry") from None
    return parse_registry(document)


def parse_registry(document: Any) -> Registry:
    """Validate an already-parsed registry document."""
    if not isinstance(document, Mapping) or not isinstance(document.get("metrics"), list):
        raise RegistryError('registry must be an object with a "metrics" list')
    if not document["metrics"]:
        raise RegistryError('registry field "metrics" is empty')
    metrics = []
    for position, entry in enumerate(document["metrics"]):
        metrics.append(_parse_metric(entry, position))
    names = [m.name for m in metrics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RegistryError(f"metric {duplicates[0]!r}: field 'name' appears more than once")
    return Registry(tuple(metrics))


def _parse_metric(entry: Any, position: int) -> MetricConfig:
    if not isinstance(entry, Mapping):
        raise RegistryError(f"metrics[{position}] must be an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise RegistryError(f"metrics[{position}]: field 'name' must be a non-empty string")

    def fail(field: str, message: str) -> RegistryError:
        return RegistryError(f"metric {name!r}: field '{field}' {message}")

    unknown = sorted(set(entry) - _METRIC_FIELDS)
    if unknown:
        raise fail(unknown[0], f"is not a registry field (expected {sorted(_METRIC_FIELDS)})")
    protocol = entry.get("protocol")
    if protocol not in PROTOCOLS and protocol != AUTO:
        raise fail("protocol", f"must be one of {sorted(PROTOCOLS) + [AUTO]}, got {protocol!r}")
    epsilon = entry.get("epsilon")
    problem = epsilon_problem(epsilon)
    if problem:
        raise fail("epsilon", problem)
    labels, d = _parse_domain(entry.get("domain"), fail)
    if protocol == AUTO:
        protocol, reason = recommend(float(epsilon), d)
        log.info("metric %r: protocol 'auto' resolved to %r for ε=%g, d=%d: %s",
                 name, protocol, epsilon, d, reason)
    try:
        postprocess = PostprocessSpec.parse(entry.get("postprocess", "norm-hyb"))
    except ValueError as error:
        raise fail("postprocess", str(error)) from None
    try:
        estimator = EstimatorSpec.parse(entry.get("estimator", "unbiased"))
        estimator.check_family(PROTOCOLS[protocol].estimator_family, protocol)
    except ValueError as error:
        raise fail("estimator", str(error)) from None
    if estimator.definition.ordinal and labels is not None:
        log.warning("metric %r: estimator %r assumes neighbouring values are similar, and the "
                    "domain is a list of labels: check that their order means something",
                    name, estimator.method)
    not_before = entry.get("not_before")
    if not_before is not None:
        problem = _instant_problem(not_before)
        if problem:
            raise fail("not_before", problem)
    config = MetricConfig(name, protocol, float(epsilon), d, labels, postprocess, estimator,
                          not_before)
    try:
        config.protocol
    except ValueError as error:
        raise fail("protocol", str(error)) from None
    problem = _postprocess_problem(config)
    if problem:
        raise fail("postprocess", problem)
    return config


def _postprocess_problem(config: MetricConfig) -> str | None:
    """Why post-processing fails on a probe vector (a phrase), or None when it works.

    The probe is a noisy Zipf-like estimate of min(d, PROBE_VALUES) values, at each report count
    of PROBE_REPORT_COUNTS with the metric's p* and q*: parameters that overflow or give
    non-finite estimates (e.g. power's exponent 1e308) fail here, before a report is read.
    Metrics with the same post-processing, p*, q* and probe length share one probe.
    """
    protocol = config.protocol
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
        moment = _parse_instant(value)
    except ValueError:
        return f"must be an ISO-8601 date or time such as '2020-01-01', got {value!r}"
    if not _NOT_BEFORE_RANGE[0] <= moment < _NOT_BEFORE_RANGE[1]:
        return f"must lie in [1970-01-01, 2200-01-01), got {value!r}"
    return None


def _parse_instant(text: str) -> dt.datetime:
    """An ISO-8601 date or date-time (UTC unless it names an offset; 'Z' accepted)."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = dt.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def _parse_instant_ms(text: str) -> int:
    delta = _parse_instant(text) - _NOT_BEFORE_RANGE[0]
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _parse_domain(domain: Any, fail) -> tuple[tuple[str, ...] | None, int]:
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
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise fail("domain.size", f"must be an integer >= 2, got {size!r}")
        if size > MAX_DOMAIN_SIZE:
            raise fail("domain.size", f"must be at most {MAX_DOMAIN_SIZE:,} (MAX_DOMAIN_SIZE: one "
                                      f"window's statistic would need {8 * size / 2**30:.3g} GiB), "
                                      f"got {size:,}")
        return None, size
    raise fail("domain", 'must be {"labels": [...]} or {"size": N}')
