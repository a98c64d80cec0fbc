"""Named catalogs: how protocols, numeric protocols, estimators, post-processing methods and
live-run sources are registered, looked up and listed.

A `Catalog` maps names to entries (a protocol class, an `EstimatorMethod`, a
`PostprocessMethod`, a source factory), in the order they were registered. An entry joins with
`register(entry)`; a catalog may also name `modules` that register their entries when imported,
imported on first use (estimator modules import the catalog, so it cannot import them first).
`lookup(name)` resolves a name or one of its `aliases` and fails with a user error (a
`RegistryError` unless the catalog names another class, such as the `ConfigError` of a job
setting) that names the catalog's field, the nearest known name ("did you mean") and every known
one.

A method's parameters are declared as `Parameter`s (default, check from
ldp_telemetry.ldp.base.validation, what a valid value is); `MethodChoice` is a validated choice of a
method and its parameters, as a metric's `estimator` or `postprocess` field gives it.
"""
from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from ldp_telemetry.ldp.base.errors import RegistryError, UserError

T = TypeVar("T")
_Choice = TypeVar("_Choice", bound="MethodChoice")


def did_you_mean(name: Any, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' naming the known name nearest to `name`, or '' when none is near."""
    if not isinstance(name, str):
        return ""
    folded = {candidate.casefold(): candidate for candidate in known}
    close = difflib.get_close_matches(name.casefold(), folded, n=1, cutoff=0.6)
    return f" (did you mean {folded[close[0]]!r}?)" if close else ""


class Catalog(MutableMapping[str, T], Generic[T]):
    """Entries by registry name, in registration order.

    `noun` names an entry in messages ("estimator"); `field` is the registry field whose value
    names one ("estimator"), the `field` of the lookup error. Reading the catalog (lookup,
    iteration, `in`) first imports `modules`. Setting an item registers it and deleting one
    unregisters it, so a test can register an entry for its duration with monkeypatch.setitem.
    """

    def __init__(self, noun: str, field: str, *, modules: Iterable[str] = (),
                 aliases: Mapping[str, str] | None = None,
                 error: type[UserError] = RegistryError):
        self.noun = noun
        self.field = field
        self._error = error
        self._modules = tuple(modules)
        self._loaded = not self._modules
        self._loading = False  # the thread holding _lock is importing the modules
        self._lock = threading.RLock()
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = dict(aliases or {})

    def register(self, entry: T, name: str | None = None) -> T:
        """Make `entry` selectable as `name` (default: its `name` attribute); returns it.

        A name is registered once: a second, different entry under it is a ValueError."""
        name = entry.name if name is None else name  # type: ignore[attr-defined]
        if not isinstance(name, str) or not name:
            raise ValueError(f"every {self.noun} needs a non-empty name, got {name!r}")
        if self._entries.get(name, entry) is not entry or name in self._aliases:
            raise ValueError(f"{self.noun} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    @property
    def aliases(self) -> dict[str, str]:
        """Other names of entries: {alias: name}."""
        return dict(self._aliases)

    def canonical(self, name: Any) -> str:
        """The registered name `name` stands for (itself, or the entry an alias names)."""
        self._load()
        resolved = self._aliases.get(name, name) if isinstance(name, str) else None
        if resolved not in self._entries:
            known = [*self._entries, *self._aliases]
            raise self._error(f"unknown {self.noun} {name!r}{did_you_mean(name, known)}; "
                              f"known: {', '.join(sorted(known))}", self.field)
        return resolved

    def lookup(self, name: Any) -> T:
        """The entry `name` (or an alias) stands for; RegistryError naming the near and the known
        names when there is none."""
        return self._entries[self.canonical(name)]

    def names(self) -> list[str]:
        """Every registered name (aliases left out), in registration order."""
        return list(self)

    def _load(self) -> None:
        """Import the modules once. Another thread waits until they are all imported; the
        importing thread itself (a module reading the catalog) sees what is registered so far."""
        if self._loaded:
            return
        with self._lock:
            # another thread may have loaded them since the check above
            if self._loaded or self._loading:  # type: ignore[redundant-expr]
                return
            self._loading = True
            try:
                for module in self._modules:
                    importlib.import_module(module)
                self._loaded = True
            finally:
                self._loading = False

    def __getitem__(self, name: str) -> T:
        self._load()
        return self._entries[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self.register(entry, name)

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._entries)

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load()
        return isinstance(name, str) and name in self._entries

    def __repr__(self) -> str:
        return f"Catalog({self.noun!r}, {list(self)})"


@dataclass(frozen=True)
class Parameter:
    """One parameter of a method: its default, the check a given value must pass, and what a
    valid value is (for messages). `convert` turns a valid given value into the stored one."""

    default: Any
    is_valid: Callable[[Any], bool]
    expected: str
    convert: Callable[[Any], Any] | None = None


def bind_parameters(declared: Mapping[str, Parameter], given: Any, owner: str,
                    field: str) -> dict[str, Any]:
    """Every declared parameter's value: the given one (checked, converted) or its default.

    `given`: (name, value) pairs; `owner` names the method in messages ("estimator 'iiw'");
    `field` is the registry field holding the parameters. RegistryError for pairs that are not
    pairs, unknown names and invalid values, naming the parameter."""
    try:
        given = dict(given)
    except (TypeError, ValueError):
        raise RegistryError(f"params must be (name, value) pairs, got {given!r}", field) from None
    unknown = sorted(set(given) - set(declared), key=str)
    if unknown:
        raise RegistryError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for {owner}"
                            f"{did_you_mean(unknown[0], declared)}; accepted: "
                            f"{', '.join(declared) or 'none'}", f"{field}.{unknown[0]}")
    values = {}
    for name, parameter in declared.items():
        if name not in given:
            values[name] = parameter.default
            continue
        value = given[name]
        if not parameter.is_valid(value):
            raise RegistryError(f"parameter {name!r} of {owner} must be {parameter.expected}, "
                                f"got {value!r}", f"{field}.{name}")
        values[name] = value if parameter.convert is None else parameter.convert(value)
    return values


@dataclass(frozen=True)
class MethodChoice:
    """A validated choice of a catalog's method and its parameters, defaults filled in, an alias
    resolved to its name. Subclasses set `catalog`; its entries have `name` and `parameters`."""

    method: str
    params: tuple[tuple[str, Any], ...] = ()

    catalog: ClassVar[Catalog]

    def __post_init__(self) -> None:
        definition = self.catalog.lookup(self.method)
        values = bind_parameters(definition.parameters, self.params,
                                 f"{self.catalog.noun} {definition.name!r}", self.catalog.field)
        object.__setattr__(self, "method", definition.name)
        object.__setattr__(self, "params", tuple(sorted(values.items())))

    @property
    def definition(self) -> Any:
        """The catalog's entry for `method`."""
        return self.catalog[self.method]

    @classmethod
    def parse(cls: type[_Choice], value: Any) -> _Choice:
        """From a registry value: a method name, or an object {"method": name, **params}."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)
        # The messages complete "field 'estimator' ...", as the registry prints them.
        if isinstance(value, Mapping):
            if "method" not in value:
                raise RegistryError(f"needs a 'method' field, got {dict(value)!r}",
                                    cls.catalog.field)
            return cls(value["method"],
                       tuple((name, v) for name, v in value.items() if name != "method"))
        raise RegistryError(f"must be a method name or an object with a 'method' field, got "
                            f"{type(value).__name__}: {value!r}", cls.catalog.field)
