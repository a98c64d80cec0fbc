"""Per-window estimators: the step between a window's counts and its post-processing.

A metric's registry entry chooses one with the field `"estimator"`: a method name, or an object
`{"method": name, **params}` (for example `{"method": "iiw", "iterations": 30}`). Each method
belongs to a family, the kind of protocol whose sufficient statistic it reads:

* `frequency`: every pure frequency oracle (p*, q*). Its `run(unbiased, noise, protocol,
  **params)` takes the unbiased estimate f~ and its noise model and returns an
  `EstimatorOutput`; the metric's post-processing is applied afterwards.
* `numeric`: numeric protocols (Square Wave and the baselines), whose methods read their own
  statistic; they register the same way with a family of their own.

Adding a method is one `register(EstimatorMethod(...))` call in the module that implements it,
imported by `load_methods`. Unknown methods, unknown parameters and invalid values are
ValueErrors naming the method and the parameter; the registry turns them into errors naming the
metric and the field.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ldp_telemetry.ldp.estimation import SupportNoise

FREQUENCY = "frequency"
NUMERIC = "numeric"

#: Modules that register estimator methods when imported (see `load_methods`).
METHOD_MODULES: list[str] = ["ldp_telemetry.ldp.wiener", "ldp_telemetry.ldp.em",
                              "ldp_telemetry.ldp.binning", "ldp_telemetry.ldp.admm"]


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
class Parameter:
    """One parameter of a method: its default and what makes a value valid."""

    default: Any
    is_valid: Callable[[Any], bool]
    expected: str


@dataclass(frozen=True)
class EstimatorMethod:
    """A named estimator: its family, parameters and the function that runs it."""

    name: str
    family: str
    run: Callable[..., EstimatorOutput]
    parameters: Mapping[str, Parameter] = field(default_factory=dict)
    ordinal: bool = False  # assumes neighbouring values are similar (warn on unordered labels)
    summary: str = ""


METHODS: dict[str, EstimatorMethod] = {}


def register(method: EstimatorMethod) -> EstimatorMethod:
    """Make `method` selectable by name; a name can be registered once."""
    if method.name in METHODS and METHODS[method.name] is not method:
        raise ValueError(f"estimator {method.name!r} is registered twice")
    METHODS[method.name] = method
    return method


def load_methods() -> dict[str, EstimatorMethod]:
    """Every registered method, after importing the modules that register them."""
    for module in METHOD_MODULES:
        importlib.import_module(module)
    return METHODS


@dataclass(frozen=True)
class EstimatorSpec:
    """A validated method and its parameters, defaults filled in."""

    method: str
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        methods = load_methods()
        if self.method not in methods:
            raise ValueError(f"unknown estimator {self.method!r}; known: "
                             f"{', '.join(sorted(methods))}")
        declared = methods[self.method].parameters
        try:
            given = dict(self.params)
        except (TypeError, ValueError):
            raise ValueError(f"params must be (name, value) pairs, got {self.params!r}") from None
        unknown = sorted(set(given) - set(declared), key=str)
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for "
                             f"estimator {self.method!r}; accepted: "
                             f"{', '.join(declared) or 'none'}")
        values = {}
        for name, parameter in declared.items():
            value = given.get(name, parameter.default)
            if name in given and not parameter.is_valid(value):
                raise ValueError(f"parameter {name!r} of estimator {self.method!r} must be "
                                 f"{parameter.expected}, got {value!r}")
            values[name] = value
        object.__setattr__(self, "params", tuple(sorted(values.items())))

    @property
    def definition(self) -> EstimatorMethod:
        return METHODS[self.method]

    @classmethod
    def parse(cls, value: str | Mapping[str, Any] | EstimatorSpec) -> EstimatorSpec:
        """From a registry value: a method name or {"method": name, **params}."""
        if isinstance(value, EstimatorSpec):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            if "method" not in value:
                raise ValueError(f"estimator config needs a 'method' field, got {dict(value)!r}")
            return cls(value["method"],
                       tuple((k, v) for k, v in value.items() if k != "method"))
        raise ValueError("estimator must be a method name or an object with a 'method' field, "
                         f"got {type(value).__name__}: {value!r}")

    def check_family(self, family: str, protocol_name: str) -> None:
        """ValueError unless the method reads the statistic of `protocol_name`'s family."""
        if self.definition.family != family:
            fitting = sorted(name for name, m in METHODS.items() if m.family == family)
            raise ValueError(f"estimator {self.method!r} does not fit protocol "
                             f"{protocol_name!r}; it takes one of {fitting}")

    def run(self, *args, **kwargs) -> EstimatorOutput:
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


def _unbiased(unbiased: np.ndarray, noise: SupportNoise, protocol) -> EstimatorOutput:
    """The support-set estimate itself, f~ = (c/n − q*)/(p* − q*) ([Wang20] journal eq. 2)."""
    return EstimatorOutput(np.asarray(unbiased, dtype=np.float64))


UNBIASED = register(EstimatorMethod(
    "unbiased", FREQUENCY, _unbiased,
    summary="the unbiased support-set estimate; the default for frequency oracles"))
