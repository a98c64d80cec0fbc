"""The metric registry: the contract between clients and the pipeline.

JSON of the form

    {"metrics": [{"name": "flight.dest", "protocol": "grr", "epsilon": 2.0,
                  "domain": {"labels": ["ATL", ...]} | {"size": 105},
                  "estimator": "unbiased", "postprocess": "norm-hyb"}]}

is loaded into frozen `MetricConfig` objects. `"protocol": "auto"` is resolved when the registry
is loaded by ldp_telemetry.ldp.planner.recommend (lowest analytical MSE for the metric's ε and domain size);
the choice and its reason are logged, and the resolved name is the metric's protocol from then
on (the estimates report it). Every problem raises `RegistryError` naming the
metric and the field, before any report is read.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from ldp_telemetry.ldp.estimators import EstimatorSpec
from ldp_telemetry.ldp.planner import recommend
from ldp_telemetry.ldp.postprocess import PostprocessSpec
from ldp_telemetry.ldp.protocols import PROTOCOLS, FrequencyOracle, make_protocol
from ldp_telemetry.ldp.protocols.base import epsilon_problem

_METRIC_FIELDS = {"name", "protocol", "epsilon", "domain", "estimator", "postprocess"}
AUTO = "auto"
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
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RegistryError(f"cannot read registry {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise RegistryError(f"registry {path} is not valid JSON: {error}") from None
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
    config = MetricConfig(name, protocol, float(epsilon), d, labels, postprocess, estimator)
    try:
        config.protocol
    except ValueError as error:
        raise fail("protocol", str(error)) from None
    return config


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
        return tuple(labels), len(labels)
    if "size" in domain:
        size = domain["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise fail("domain.size", f"must be an integer >= 2, got {size!r}")
        return None, size
    raise fail("domain", 'must be {"labels": [...]} or {"size": N}')
