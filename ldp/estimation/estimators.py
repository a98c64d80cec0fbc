"""Per-window estimators: the step between a window's counts and its post-processing.

A metric's registry entry chooses one with the field `"estimator"`: a method name, or an object
`{"method": name, **params}` (for example `{"method": "iiw", "iterations": 30}`). Each method
has the kind of the protocols whose sufficient statistic it reads (`FREQUENCY`, `NUMERIC`: the
protocol's own `kind`):

* `frequency`: every pure frequency oracle (p*, q*). Its `run(unbiased, noise, protocol,
  **params)` takes the unbiased estimate f~ and its noise model and returns an
  `EstimatorOutput`; the metric's post-processing is applied afterwards.
* `numeric`: numeric protocols (Square Wave and the baselines), whose methods read their own
  statistic (`run(statistic, n, protocol, **params)`); each numeric protocol names the methods
  that fit it (`estimators`, its default first).

Adding a method is one `METHODS.register(EstimatorMethod(...))` call in the module that
implements it, that module named in `METHOD_MODULES`. Unknown methods, unknown parameters and
invalid values are `RegistryError`s naming the method and the parameter; the registry adds the
metric and the field.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.registration import Catalog, MethodChoice, Parameter
from ldp_telemetry.ldp.protocols.base import FREQUENCY, FrequencyOracle
from ldp_telemetry.ldp.protocols.noise import SupportNoise
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol

#: Modules that register estimator methods when imported (loaded on the catalog's first use).
METHOD_MODULES: list[str] = ["ldp_telemetry.ldp.estimation.wiener",
                              "ldp_telemetry.ldp.estimation.em",
                              "ldp_telemetry.ldp.estimation.binning",
                              "ldp_telemetry.ldp.estimation.admm",
                              "ldp_telemetry.ldp.estimation.heavy_hitters"]


@dataclass(frozen=True)
class EstimatorOutput:
    """What an estimator returns for one window.

    `estimate`: the estimated distribution before post-processing; `std_error`: its standard
    error per value, or None to report the unbiased estimate's; `iterations` and `last_change`:
    for iterative methods, how many iterations ran and the size of the last update.
    """

    estimate: np.ndarray
    std_error: np.ndarray | None = None
    iterations: int | None = None
    last_change: float | None = None


@dataclass(frozen=True)
class EstimatorMethod:
    """A named estimator: the kind of protocol it reads, its parameters and its function."""

    name: str
    kind: str
    run: Callable[..., EstimatorOutput]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    ordinal: bool = False  # assumes neighbouring values are similar (warn on unordered labels)
    summary: str = ""


METHODS: Catalog[EstimatorMethod] = Catalog("estimator", "estimator", modules=METHOD_MODULES)


@dataclass(frozen=True)
class EstimatorSpec(MethodChoice):
    """A validated estimator method and its parameters, defaults filled in."""

    catalog: ClassVar[Catalog] = METHODS

    def check_fits(self, protocol: type[FrequencyOracle] | type[NumericProtocol]) -> None:
        """RegistryError unless the method reads the statistic of `protocol` (a protocol class):
        a method of its kind, and one it names among its `estimators` when it names some."""
        fitting = getattr(protocol, "estimators", None)
        if fitting is None:
            fitting = sorted(name for name, m in METHODS.items() if m.kind == protocol.kind)
        if self.definition.kind != protocol.kind or self.method not in fitting:
            raise RegistryError(f"estimator {self.method!r} does not fit protocol "
                                f"{protocol.name!r}; it takes one of {list(fitting)}",
                                METHODS.field)

    def run(self, *args: Any, **kwargs: Any) -> EstimatorOutput:
        return self.definition.run(*args, **kwargs, **dict(self.params))

    def record(self, output: EstimatorOutput | None = None) -> dict[str, Any]:
        """The `estimator` field of a window-estimate record."""
        return {"method": self.method,
                "params": {k: _plain(v) for k, v in self.params},
                "iterations": None if output is None else output.iterations,
                "last_change": None if output is None or output.last_change is None
                else float(output.last_change)}


def _plain(value: Any) -> Any:
    """A parameter value as a plain JSON/Avro value."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return float(value)


def _unbiased(unbiased: np.ndarray, noise: SupportNoise, protocol: FrequencyOracle
              ) -> EstimatorOutput:
    """The support-set estimate itself, f~ = (c/n − q*)/(p* − q*) ([Wang20] journal eq. 2)."""
    return EstimatorOutput(np.asarray(unbiased, dtype=np.float64))


UNBIASED = METHODS.register(EstimatorMethod(
    "unbiased", FREQUENCY, _unbiased,
    summary="the unbiased support-set estimate; the default for frequency oracles"))
