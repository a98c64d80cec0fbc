"""The one registration helper behind protocols, numeric protocols, estimators and
post-processing methods: catalogs, lookups that name the nearest name, parameters."""
from __future__ import annotations

import inspect
import sys
import threading
import types
from dataclasses import dataclass

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError, UserError
from ldp_telemetry.ldp.base.registration import (Catalog, MethodChoice, Parameter, bind_parameters,
                                                 did_you_mean)
from ldp_telemetry.ldp.base.validation import is_positive_int
from ldp_telemetry.ldp.estimation import estimators, postprocess
from ldp_telemetry.ldp.protocols import (NUMERIC_PROTOCOLS, PROTOCOLS, STRING_PROTOCOLS,
                                         make_numeric_protocol, make_protocol)
from ldp_telemetry.ldp.protocols.base import FREQUENCY, NUMERIC, STRINGS


@dataclass(frozen=True)
class Entry:
    name: str
    parameters: dict


def test_a_catalog_lists_its_entries_in_registration_order():
    catalog = Catalog("widget", "widget")
    first, second = Entry("b", {}), Entry("a", {})
    assert catalog.register(first) is first and catalog.register(second) is second
    assert catalog.names() == list(catalog) == ["b", "a"] and len(catalog) == 2
    assert catalog.lookup("a") is second and catalog["b"] is first and "a" in catalog
    catalog.register(first)  # the same entry again is no second registration
    with pytest.raises(ValueError, match="widget 'b' is registered twice"):
        catalog.register(Entry("b", {}))


def test_a_lookup_names_the_nearest_and_every_known_name():
    catalog = Catalog("widget", "widget", aliases={"plain": "norm-sub"})
    catalog.register(Entry("norm-sub", {}))
    catalog.register(Entry("norm-hyb", {}))
    with pytest.raises(RegistryError) as caught:
        catalog.lookup("norm-hyd")
    assert str(caught.value) == ("unknown widget 'norm-hyd' (did you mean 'norm-hyb'?); "
                                 "known: norm-hyb, norm-sub, plain")
    assert caught.value.field == "widget"
    assert "did you mean 'norm-sub'" in str(pytest.raises(RegistryError, catalog.lookup,
                                                           "Norm-Sub").value)
    assert "did you mean" not in str(pytest.raises(RegistryError, catalog.lookup, "zzz").value)
    assert catalog.lookup("plain") is catalog["norm-sub"] and catalog.canonical("plain") == \
        "norm-sub"
    assert "plain" not in catalog and catalog.aliases == {"plain": "norm-sub"}


@pytest.mark.parametrize("name", [3, None, ["a"], {"a": 1}, b"a"])
def test_a_name_that_is_not_a_string_is_unknown(name):
    catalog = Catalog("widget", "widget")
    catalog.register(Entry("a", {}))
    assert name not in catalog
    with pytest.raises(RegistryError, match="unknown widget"):
        catalog.lookup(name)


def test_a_catalog_imports_its_modules_on_first_use(monkeypatch):
    catalog = Catalog("widget", "widget", modules=["widget_module_of_this_test"])
    module = types.ModuleType("widget_module_of_this_test")
    imported = []

    def exec_module():
        imported.append(True)
        catalog.register(Entry("late", {}))

    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name != module.__name__:
                return None
            from importlib.machinery import ModuleSpec
            loader = types.SimpleNamespace(create_module=lambda spec: module,
                                           exec_module=lambda m: exec_module())
            return ModuleSpec(name, loader)

    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    try:
        catalog.register(Entry("early", {}))
        assert imported == []
        assert catalog.names() == ["early", "late"] and imported == [True]
        assert "late" in catalog and imported == [True]
    finally:
        sys.modules.pop(module.__name__, None)


def test_a_second_thread_waits_until_every_module_has_registered(monkeypatch):
    catalog = Catalog("widget", "widget", modules=["slow_widget_module_of_this_test"])
    module = types.ModuleType("slow_widget_module_of_this_test")
    started, release = threading.Event(), threading.Event()

    def exec_module(_):
        catalog.register(Entry("first", {}))
        assert catalog.names() == ["first"]  # the importing thread sees what is there so far
        started.set()
        release.wait(10)
        catalog.register(Entry("second", {}))

    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name != module.__name__:
                return None
            from importlib.machinery import ModuleSpec
            loader = types.SimpleNamespace(create_module=lambda spec: module,
                                           exec_module=exec_module)
            return ModuleSpec(name, loader)

    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    seen = {}
    try:
        first = threading.Thread(target=lambda: seen.setdefault("first", catalog.names()))
        first.start()
        assert started.wait(10)
        second = threading.Thread(target=lambda: seen.setdefault("second", catalog.names()))
        second.start()
        second.join(0.2)
        assert second.is_alive()  # waiting for the import, not reading a partial catalog
        release.set()
        first.join(10)
        second.join(10)
    finally:
        release.set()
        sys.modules.pop(module.__name__, None)
    assert seen == {"first": ["first", "second"], "second": ["first", "second"]}


def test_monkeypatch_setitem_registers_for_a_test_and_unregisters_after():
    catalog = Catalog("widget", "widget")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(catalog, "temporary", Entry("temporary", {}))
        assert catalog.names() == ["temporary"]
    assert catalog.names() == []


def test_parameters_are_bound_checked_and_converted():
    declared = {"k": Parameter(3, is_positive_int, "a positive integer"),
                "x": Parameter(None, lambda v: v is None or isinstance(v, int), "an int",
                               lambda v: None if v is None else float(v))}
    assert bind_parameters(declared, (), "widget 'w'", "widget") == {"k": 3, "x": None}
    assert bind_parameters(declared, [("x", 2)], "widget 'w'", "widget") == {"k": 3, "x": 2.0}
    with pytest.raises(RegistryError, match=r"parameter 'k' of widget 'w' must be a positive "
                                            r"integer, got True") as caught:
        bind_parameters(declared, {"k": True}, "widget 'w'", "widget")
    assert caught.value.field == "widget.k"
    with pytest.raises(RegistryError, match=r"unknown parameter\(s\) 'kk' for widget 'w' "
                                            r"\(did you mean 'k'\?\); accepted: k, x") as caught:
        bind_parameters(declared, {"kk": 1}, "widget 'w'", "widget")
    assert caught.value.field == "widget.kk"
    with pytest.raises(RegistryError, match="params must be"):
        bind_parameters(declared, 5, "widget 'w'", "widget")


def test_a_method_choice_parses_names_objects_and_itself():
    catalog = Catalog("widget", "widget", aliases={"other": "w"})
    catalog.register(Entry("w", {"k": Parameter(3, is_positive_int, "a positive integer")}))

    @dataclass(frozen=True)
    class Choice(MethodChoice):
        pass

    Choice.catalog = catalog
    assert Choice.parse("w") == Choice("other") == Choice.parse({"method": "w", "k": 3})
    assert Choice.parse("w").params == (("k", 3),) and Choice.parse("other").method == "w"
    choice = Choice.parse({"method": "w", "k": 5})
    assert Choice.parse(choice) is choice and choice.definition is catalog["w"]
    with pytest.raises(RegistryError, match="needs a 'method' field") as caught:
        Choice.parse({"k": 5})
    assert caught.value.field == "widget"
    with pytest.raises(RegistryError, match="must be a method name or an object"):
        Choice.parse(["w"])


# -- the four catalogs of the package ----------------------------------------------------------


def test_the_four_catalogs_are_catalogs_with_their_registry_field():
    for catalog, field in [(PROTOCOLS, "protocol"), (NUMERIC_PROTOCOLS, "protocol"),
                           (estimators.METHODS, "estimator"), (postprocess.METHODS, "postprocess")]:
        assert isinstance(catalog, Catalog) and catalog.field == field
        assert all(name == entry.name for name, entry in catalog.items())
    assert not set(PROTOCOLS) & set(NUMERIC_PROTOCOLS)


def test_unknown_names_are_registry_errors_with_the_nearest_name():
    with pytest.raises(RegistryError, match=r"unknown protocol 'olhh' \(did you mean 'olh'\?\)"):
        make_protocol("olhh", 1.0, 4)
    with pytest.raises(RegistryError, match=r"unknown numeric protocol 'sww' \(did you mean 'sw"):
        make_numeric_protocol("sww", 1.0, 16)
    with pytest.raises(RegistryError, match=r"unknown estimator 'iiv' \(did you mean 'iiw'\?\)"):
        estimators.EstimatorSpec("iiv")
    with pytest.raises(RegistryError, match=r"'norm-hyd' \(did you mean 'norm-hyb'\?\)"):
        postprocess.PostprocessSpec("norm-hyd")


def test_one_word_for_the_kind_of_protocol():
    """A protocol class, a metric and an estimator method all have a `kind`, one of three."""
    assert {cls.kind for cls in PROTOCOLS.values()} == {FREQUENCY}
    assert {cls.kind for cls in NUMERIC_PROTOCOLS.values()} == {NUMERIC}
    assert {cls.kind for cls in STRING_PROTOCOLS.values()} == {STRINGS}
    assert {method.kind for method in estimators.METHODS.values()} == {FREQUENCY, NUMERIC,
                                                                       STRINGS}
    for cls in NUMERIC_PROTOCOLS.values():  # the methods a numeric protocol names are numeric
        assert cls.estimators and all(estimators.METHODS[name].kind == NUMERIC
                                      for name in cls.estimators), cls.name


@pytest.mark.parametrize("name", list(postprocess.METHODS))
def test_post_processing_parameters_are_the_methods_keyword_parameters(name):
    method = postprocess.METHODS[name]
    signature = inspect.signature(method.run)
    keywords = {key: parameter.default for key, parameter in signature.parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {key: p.default for key, p in method.parameters.items()} == keywords


@pytest.mark.parametrize("spec, field", [
    (lambda: estimators.EstimatorSpec("iiw", (("iterations", -1),)), "estimator.iterations"),
    (lambda: estimators.EstimatorSpec("iiw", (("rounds", 1),)), "estimator.rounds"),
    (lambda: postprocess.PostprocessSpec("power", (("exponent", -1),)), "postprocess.exponent"),
    (lambda: make_protocol("grr", 0.0, 4), "epsilon"),
    (lambda: make_protocol("grr", 1.0, 1), "domain.size"),
    (lambda: make_numeric_protocol("sw", 1.0, 1), "domain.buckets"),
    (lambda: make_numeric_protocol("hh", 1.0, 8), "domain.buckets"),
    (lambda: make_numeric_protocol("sw", 1.0, 16, 1), "domain.output_buckets"),
])
def test_parameter_errors_are_registry_errors_naming_the_field(spec, field):
    with pytest.raises(UserError) as caught:
        spec()
    assert isinstance(caught.value, RegistryError) and caught.value.field == field


def test_did_you_mean_is_empty_without_a_near_name():
    assert did_you_mean("zzzz", ["grr", "olh"]) == ""
    assert did_you_mean(np.int64(3), ["grr"]) == ""
    assert did_you_mean("GRR", ["grr", "olh"]) == " (did you mean 'grr'?)"
