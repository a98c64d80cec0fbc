"""Decoding a string metric against a candidate dictionary: the registry field and its errors,
the fingerprint it leaves alone, a dictionary string the prefix search misses, the provenance of
each heavy hitter, and estimates equal to the search's and to `estimate_strings`.

Tolerances: an estimate is within K = 4.5 of its standard errors (two-sided 6.8e-6 per check);
each test states its false-failure rate; every seed is fixed.
"""
from __future__ import annotations

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.config.registry import parse_registry
from ldp_telemetry.ldp.estimation.heavy_hitters import (BOTH, DICTIONARY, SEARCH, decode_nbytes,
                                                        estimate_strings, find_heavy_hitters)
from ldp_telemetry.ldp.protocols import make_string_protocol
from ldp_telemetry.ldp.protocols.pem import MAX_CANDIDATES
from ldp_telemetry.ldp.protocols.string_keys import padded_rows

K = 4.5


def entry(dictionary, **strings):
    return {"metrics": [{"name": "app", "protocol": "pem", "epsilon": 2.0,
                         "domain": {"strings": {"max_bytes": 6, **strings,
                                                "dictionary": dictionary}}}]}


def test_the_dictionary_is_the_servers_choice_not_in_the_fingerprint():
    plain = parse_registry({"metrics": [{"name": "app", "protocol": "pem", "epsilon": 2.0,
                                         "domain": {"strings": {"max_bytes": 6}}}]})["app"]
    config = parse_registry(entry(["mail", "café", ""]))["app"]
    assert config.dictionary == (b"mail", "café".encode(), b"")
    assert plain.dictionary == ()
    assert config.fingerprint == plain.fingerprint  # devices report the same either way


@pytest.mark.parametrize("dictionary, field, message", [
    ("mail", "domain.strings.dictionary", "must be a list of strings, got str"),
    (["mail", 3], "domain.strings.dictionary[1]", "must be a string, got 3"),
    (["mail", "browser"], "domain.strings.dictionary[1]", "is 7 bytes long in UTF-8"),
    (["a\0b"], "domain.strings.dictionary[0]", "NUL"),
    (["mail", "maps", "mail"], "domain.strings.dictionary[2]", "listed twice (also at [0])"),
    (["\ud800"], "domain.strings.dictionary[0]", "lone surrogate"),
    ([str(i) for i in range(MAX_CANDIDATES + 1)], "domain.strings.dictionary",
     "more than MAX_CANDIDATES"),
])
def test_dictionary_errors_name_their_field(dictionary, field, message):
    with pytest.raises(RegistryError) as error:
        parse_registry(entry(dictionary))
    assert error.value.field == f"metrics[0].{field}"
    assert message in str(error.value) and "metric 'app'" in str(error.value)


def window(seed=21, n=120_000):
    """ε = 4, m = 6, K = 256: "aa" 30%, "bb" 25%, "cc" 20%, "zebra" 15%, and 10% spread over
    2,000 random 5-letter strings (at most ~0.01% each)."""
    rng = np.random.default_rng(seed)
    others = [bytes(rng.integers(100, 123, size=5, dtype=np.uint8)) for _ in range(2_000)]
    held = rng.choice(5, size=n, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    named = [b"aa", b"bb", b"cc", b"zebra"]
    values = [named[i] if i < 4 else others[rng.integers(len(others))] for i in held]
    protocol = make_string_protocol("pem", 4.0, 6, 256)
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(padded_rows(values, 6), rng))
    return protocol, statistic


def test_the_dictionary_finds_a_string_the_search_misses():
    """With width 2 the search keeps "a…" and "b…" at level 1 and drops "z…" (15% against 25%;
    one level's standard error is about 0.2%, so the margin is ~45σ: it never keeps it), so it
    misses "zebra". Told the dictionary {zebra, aa}, the window's heavy hitters are zebra (the
    dictionary's), aa (the search completed it too: both) and bb (the search's, which kept it
    with the width aa no longer takes). Each estimate is within K standard errors of its true
    share (3 checks: false failure < 3e-5); cc (20%), in neither, is missed."""
    protocol, statistic = window()
    plain = find_heavy_hitters(protocol, statistic, top=5, threshold=0.05, width=2)
    assert b"zebra" not in plain.values and plain.found_by == ()
    result = find_heavy_hitters(protocol, statistic, top=5, threshold=0.05, width=2,
                                dictionary=[b"zebra", b"aa"])
    assert result.values == [b"aa", b"bb", b"zebra"]
    assert result.found_by == (BOTH, SEARCH, DICTIONARY)
    truth = np.array([0.3, 0.25, 0.15])
    assert np.all(np.abs(result.estimate - truth) <= K * result.std_error)
    direct = estimate_strings(protocol, statistic, [b"aa", b"zebra"])
    assert result.estimate[0] == direct.estimate[0] and result.estimate[2] == direct.estimate[1]


def test_a_dictionary_string_the_search_finds_has_the_searchs_estimate():
    """With a wide search every named string is found either way: adding a dictionary that
    holds some of them (and a string of max_bytes, which never completes with a NUL) changes
    no estimate, only the provenance."""
    protocol, statistic = window(seed=22)
    plain = find_heavy_hitters(protocol, statistic, top=4, width=20)
    result = find_heavy_hitters(protocol, statistic, top=4, width=20,
                                dictionary=[b"cc", b"zebra", b"absent", b""])
    assert result.values == plain.values == [b"aa", b"bb", b"cc", b"zebra"]
    np.testing.assert_array_equal(result.estimate, plain.estimate)
    np.testing.assert_array_equal(result.std_error, plain.std_error)
    assert result.found_by == (SEARCH, SEARCH, BOTH, BOTH)


def test_dictionary_decoding_errors_and_memory_model():
    protocol, statistic = window(seed=23, n=2_000)
    with pytest.raises(ValueError, match="appears more than once"):
        find_heavy_hitters(protocol, statistic, dictionary=[b"aa", b"aa"])
    with pytest.raises(ValueError, match="is 7 bytes long"):
        find_heavy_hitters(protocol, statistic, dictionary=[b"toolong"])
    assert (decode_nbytes(protocol, 20, 1_000) - decode_nbytes(protocol, 20)
            == 1_000 * (96 + protocol.d))


def test_decoding_with_a_dictionary_stays_within_the_memory_model():
    """tracemalloc's peak while a window is decoded with a dictionary of ~16,000 strings is at
    most `decode_nbytes` with the dictionary, and not far below it."""
    import tracemalloc

    rng = np.random.default_rng(12)
    protocol = make_string_protocol("pem", 2.0, 10, 1024)
    words = [bytes(rng.integers(97, 100, size=rng.integers(1, 10), dtype=np.uint8))
             for _ in range(20_000)]
    statistic = protocol.new_statistic()
    protocol.accumulate(statistic, protocol.perturb(padded_rows(words, 10), rng))
    dictionary = list(dict.fromkeys(bytes(rng.integers(97, 123, size=rng.integers(1, 11),
                                                       dtype=np.uint8)) for _ in range(20_000)))
    tracemalloc.start()
    find_heavy_hitters(protocol, statistic, top=10, dictionary=dictionary)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    model = decode_nbytes(protocol, 20, len(dictionary))
    assert 0.7 * model <= peak <= model


def test_a_dictionary_file_is_read_relative_to_the_registry(tmp_path):
    """`dictionary_file` names a UTF-8 file beside the registry, one string per line (CR LF or
    LF; a blank line is the empty string); history entries may name one too."""
    import json

    from ldp_telemetry.ldp.config.registry import load_registry

    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "apps.txt").write_bytes("mail\r\ncafé\n\nmaps\n".encode())
    document = entry([])
    strings = document["metrics"][0]["domain"]["strings"]
    del strings["dictionary"]
    strings["dictionary_file"] = "lists/apps.txt"
    document["metrics"][0]["version"] = 2
    document["metrics"][0]["history"] = [
        {"version": 1, "protocol": "pem", "epsilon": 1.0,
         "domain": {"strings": {"max_bytes": 6, "dictionary_file": "lists/apps.txt"}}}]
    (tmp_path / "registry.json").write_text(json.dumps(document), encoding="utf-8")
    registry = load_registry(tmp_path / "registry.json")
    assert registry["app"].dictionary == (b"mail", "café".encode(), b"", b"maps")
    assert registry.version("app", 1).dictionary == registry["app"].dictionary
    with pytest.raises(RegistryError) as error:  # no folder to read it from
        parse_registry(document)
    assert error.value.field == "metrics[0].domain.strings.dictionary_file"


@pytest.mark.parametrize("content, strings, message", [
    (None, {}, "cannot be read (apps.txt: No such file or directory)"),
    (b"mail\nbrowser\n", {}, "(apps.txt) line 2: 'browser' is 7 bytes long"),
    (b"mail\nmail", {}, "line 2: 'mail' is listed twice"),
    (b"mail\n\xff\n", {}, "apps.txt is not UTF-8 text (line 2"),
    (b"mail\n", {"dictionary": ["maps"]}, "not both"),
])
def test_dictionary_file_errors_name_the_field_and_line(tmp_path, content, strings, message):
    import json

    from ldp_telemetry.ldp.config.registry import load_registry

    if content is not None:
        (tmp_path / "apps.txt").write_bytes(content)
    document = entry([])
    document["metrics"][0]["domain"]["strings"] = {"max_bytes": 6, **strings,
                                                   "dictionary_file": "apps.txt"}
    (tmp_path / "registry.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(RegistryError) as error:
        load_registry(tmp_path / "registry.json")
    assert error.value.field == "metrics[0].domain.strings.dictionary_file"
    assert message in str(error.value)


def test_a_dictionary_file_beyond_its_limit_is_refused(tmp_path, monkeypatch):
    import json

    import ldp_telemetry.ldp.config.string_dictionary as string_dictionary
    from ldp_telemetry.ldp.config.registry import load_registry

    monkeypatch.setattr(string_dictionary, "MAX_DICTIONARY_FILE_BYTES", 10)
    (tmp_path / "apps.txt").write_bytes(b"mail\nmaps\n")  # 10 bytes: accepted
    document = entry([])
    document["metrics"][0]["domain"]["strings"] = {"max_bytes": 6, "dictionary_file": "apps.txt"}
    (tmp_path / "registry.json").write_text(json.dumps(document), encoding="utf-8")
    assert load_registry(tmp_path / "registry.json")["app"].dictionary == (b"mail", b"maps")
    (tmp_path / "apps.txt").write_bytes(b"mail\nmaps\nx\n")
    with pytest.raises(RegistryError, match="more than MAX_DICTIONARY_FILE_BYTES"):
        load_registry(tmp_path / "registry.json")


def test_ranking_by_the_lower_end_of_the_band():
    """`rank`: "estimate" orders by estimate; "lower" (the default) by the estimate minus 1.96
    sampling standard errors, so that of two equal estimates the one pooled over more reports
    ranks first. Either way each string's estimate is the same."""
    from ldp_telemetry.ldp.estimation.heavy_hitters import rank_scores
    from ldp_telemetry.ldp.estimation.uncertainty import Z95

    protocol = make_string_protocol("pem", 2.0, 6, 64)
    estimate, pooled = np.array([0.1, 0.1, 0.2]), np.array([1_000, 100_000, 1_000])
    assert rank_scores(protocol, estimate, pooled, "estimate") is estimate
    lower = rank_scores(protocol, estimate, pooled, "lower")
    p, q = protocol.p_star, protocol.q_star
    sampling = (0.1 * p * (1 - p) + 0.9 * q * (1 - q)) / (1_000 * (p - q) ** 2)
    assert lower[0] == pytest.approx(0.1 - Z95 * np.sqrt(sampling), rel=1e-12)
    assert lower[1] > lower[0]
    protocol, statistic = window(seed=24)
    by_estimate = find_heavy_hitters(protocol, statistic, top=20, rank="estimate")
    by_lower = find_heavy_hitters(protocol, statistic, top=20, rank="lower")
    assert np.all(np.diff(by_estimate.estimate) <= 0)
    common = {v: e for v, e in zip(by_estimate.values, by_estimate.estimate, strict=True)}
    assert all(common[v] == e for v, e in zip(by_lower.values, by_lower.estimate, strict=True)
               if v in common)


def test_an_unknown_rank_is_a_registry_error():
    document = entry([])
    document["metrics"][0]["estimator"] = {"method": "heavy-hitters", "rank": "z"}
    with pytest.raises(RegistryError) as error:
        parse_registry(document)
    assert error.value.field == "metrics[0].estimator.rank"
    assert "'estimate' or 'lower'" in str(error.value)
