"""The command line's error taxonomy: a problem in what the user gave (`ldp.base.errors.UserError`)
is one line naming the flag and exit status 2; anything else is a bug, shown with its traceback
(exit status 1), never dressed up as a mistyped flag."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ldp_telemetry.ldp.base.errors import ConfigError, InputError, RegistryError, UserError
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.pipelines.cli import user_message
from ldp_telemetry.pipelines.parser import build_parser, flag_table
from ldp_telemetry.schemas.codec import write_reports

T0_MS = 1_709_251_200_000  # 2024-03-01T00:00:00Z
GRR = {"name": "m", "protocol": "grr", "epsilon": 1.0, "domain": {"labels": ["a", "b", "c"]}}

#: `ldp` with a bug injected into finalize: GRR's support counts come back as a 2-D array (a
#: shape mismatch numpy reports as a ValueError deep inside the job).
INJECTED_BUG = """
import sys
import numpy as np
from ldp_telemetry.ldp.protocols import make_protocol
from ldp_telemetry.pipelines.cli import main
GRR = type(make_protocol("grr", 1.0, 3))
counts = GRR.support_counts
GRR.support_counts = lambda self, statistic: np.stack([counts(self, statistic)] * 2)
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def job_files(tmp_path):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [GRR]}))
    protocol = make_protocol("grr", 1.0, 3)
    rng = np.random.default_rng(1)
    write_reports(str(tmp_path / "r.avro"), "m", protocol, np.arange(50),
                  T0_MS + rng.integers(0, 3_600_000, 50),
                  protocol.perturb(rng.integers(0, 3, 50), rng))
    return registry, tmp_path / "r.avro", tmp_path / "out"


def ldp(*args, code: str | None = None) -> subprocess.CompletedProcess:
    command = ([sys.executable, "-c", code] if code is not None
               else [sys.executable, "-m", "ldp_telemetry.pipelines.cli"])
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow  # subprocesses
def test_a_bug_in_the_job_is_a_traceback_with_exit_status_1(job_files):
    registry, reports, out = job_files
    done = ldp("run", "--registry", registry, "--input", reports, "--output", out,
               "--window", "3600", code=INJECTED_BUG)
    assert done.returncode == 1, done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert "ValueError" in done.stderr
    assert "ldp run: error:" not in done.stderr


@pytest.mark.slow  # subprocesses
def test_the_same_job_without_the_bug_succeeds(job_files):
    registry, reports, out = job_files
    done = ldp("run", "--registry", registry, "--input", reports, "--output", out,
               "--window", "3600")
    assert done.returncode == 0, done.stderr
    assert "records read: 50, accepted: 50" in done.stdout


@pytest.mark.slow  # subprocesses
@pytest.mark.parametrize("flags, message", [
    (["--window", "3600", "--window-offset", "1e20"],
     "ldp run: error: --window-offset must be at most 7258118400 s in size"),
    (["--window", "3600", "--period", "0"],
     "ldp run: error: --period must be in [0.001 s, window]"),
    (["--window", "3600", "--memory-budget", "-1"],
     "ldp run: error: --memory-budget must be a positive number of MB, got -1.0"),
    (["--window", "3600", "--allowed-lateness", "-1"],
     "ldp run: error: --allowed-lateness must be in [0, 7258118400] s, got -1 s"),
    (["--window", "3600", "--early-every", "1.5"],
     "ldp run: error: --early-every must be a positive whole number of seconds, got 1.5 s"),
    (["--window", "3600", "--max-block-records", "0"],
     "ldp run: error: --max-block-records must be a positive integer, got 0"),
    (["--window", "3600", "--max-record-bytes", "99999999999"],
     "ldp run: error: --max-record-bytes (99999999999) cannot exceed --max-block-bytes "
     "(67108864): a record is inside a block"),
    (["--window", "3600", "--runner=BogusRunner"],
     "ldp run: error: runner 'BogusRunner' is not a runner Beam knows: "),
    (["--window", "3600", "--output", "out[1]"],
     "ldp run: error: --output: the output folder 'out[1]' holds [, which file systems read "
     "as a pattern"),
])
def test_a_user_error_exits_2_naming_the_flag(job_files, flags, message):
    registry, reports, out = job_files
    done = ldp("run", "--registry", registry, "--input", reports, "--output", out, *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # subprocesses
def test_a_path_that_cannot_be_opened_is_a_user_error(job_files, tmp_path):
    registry, reports, out = job_files
    missing = ldp("run", "--registry", tmp_path / "nowhere.json", "--input", reports,
                  "--output", out, "--window", "60")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"cannot read registry {tmp_path / 'nowhere.json'}" in missing.stderr
    nothing = ldp("run", "--registry", registry, "--input", tmp_path / "none-*.avro",
                  "--output", out, "--window", "60")
    assert nothing.returncode == 2 and "Traceback" not in nothing.stderr
    assert f"--input '{tmp_path / 'none-*.avro'}' matches no file" in nothing.stderr
    no_csv = ldp("simulate", "--registry", registry, "--metric", "m", "--input",
                 tmp_path / "none.csv", "--value-column", "v", "--time-column", "t",
                 "--out", tmp_path / "reports")
    assert no_csv.returncode == 2 and "Traceback" not in no_csv.stderr
    assert f"--input: {tmp_path / 'none.csv'} cannot be read: No such file" in no_csv.stderr


@pytest.fixture(scope="module")
def flags():
    return flag_table(build_parser(job_arguments=True))


def test_one_table_maps_every_setting_to_its_flag(flags):
    assert {field: flags[field] for field in (
        "window", "period", "window_offset", "allowed_lateness", "early_every", "registry",
        "input", "output", "memory_budget", "store", "follow", "source", "max_out_of_order",
        "idle_advance", "poll", "until", "stop_when_idle", "max_block_bytes",
        "reports_per_file", "top", "param")} == {
        "window": "--window", "period": "--period", "window_offset": "--window-offset",
        "allowed_lateness": "--allowed-lateness", "early_every": "--early-every",
        "registry": "--registry", "input": "--input", "output": "--output",
        "memory_budget": "--memory-budget", "store": "--store", "follow": "--follow",
        "source": "--source", "max_out_of_order": "--max-out-of-order",
        "idle_advance": "--idle-advance", "poll": "--poll", "until": "--until",
        "stop_when_idle": "--stop-when-idle", "max_block_bytes": "--max-block-bytes",
        "reports_per_file": "--reports-per-file", "top": "--top", "param": "--param"}
    assert "help" not in flags


@pytest.mark.parametrize("error, shown", [
    (ConfigError("window must be at least 0.001 s", field="window"),
     "--window must be at least 0.001 s"),
    (ConfigError("window / period must be at most 1000; for a 3600 s window use a period of "
                 "at least 3.6 s", field="period"),
     "--window / --period must be at most 1000; for a 3600 s window use a period of at least "
     "3.6 s"),
    (ConfigError("input or follow is required", field="input"), "--input or --follow is required"),
    (ConfigError("window_offset must be at most 1 s", field="window_offset"),
     "--window-offset must be at most 1 s"),
    (InputError("output '/x' cannot be written", field="output"),
     "--output '/x' cannot be written"),
    # not led by its field: the flag goes in front
    (ConfigError("the job needs 618 MB", field="memory_budget"),
     "--memory-budget: the job needs 618 MB"),
    # a leading word that is a setting but not the error's field is left alone
    (ConfigError("metric 'x' is numeric", field="quantile"), "--quantile: metric 'x' is numeric"),
    # the command line's own checks name their flags already
    (ConfigError("--speedup and --rate need --live", field="speedup"),
     "--speedup and --rate need --live"),
    # registry field paths, and errors without a field, are shown as they are
    (RegistryError("metric 'm': field 'epsilon' must be positive", field="metrics[0].epsilon"),
     "metric 'm': field 'epsilon' must be positive"),
    (UserError("window of 'm' holds no reports"), "window of 'm' holds no reports"),
    # other multi-word settings inside the message are written as their flags too
    (ConfigError("max_record_bytes (9) cannot exceed max_block_bytes (5)",
                 field="max_record_bytes"),
     "--max-record-bytes (9) cannot exceed --max-block-bytes (5)"),
    (ConfigError("the file /tmp/max_block_bytes/x is odd", field="max_record_bytes"),
     "--max-record-bytes: the file /tmp/max_block_bytes/x is odd"),
])
def test_user_message_writes_the_setting_as_its_flag(flags, error, shown):
    assert user_message(error, flags) == shown


@pytest.mark.parametrize("args, message", [
    (["--epsilon", "0", "--domain", "10"], "--epsilon must lie in [1e-06, 20], got 0.0"),
    (["--epsilon", "1", "--domain", "1"], "--domain size must be an integer >= 2, got 1"),
    (["--epsilon", "1", "--domain", "10", "--n", "0"],
     "--n must be a positive number of reports, got 0"),
    (["--epsilon", "1", "--domain", "10", "--max-bytes", "0"],
     "--max-bytes: no protocol fits in 0 bytes per report"),
])
def test_plan_refuses_what_no_protocol_can_do_naming_the_flag(capsys, args, message):
    from ldp_telemetry.pipelines.cli import main
    assert main(["plan", *args]) == 2
    assert f"ldp plan: error: {message}" in capsys.readouterr().err


def test_dashboard_port_in_use_and_unwritable_export_name_their_flags(tmp_path, capsys):
    import socket

    from ldp_telemetry.pipelines.cli import main
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "estimates-00000-of-00001.jsonl").write_text("")
    (tmp_path / "a-file").write_text("")
    assert main(["dashboard", "--output", str(tmp_path / "out"), "--export",
                 str(tmp_path / "a-file" / "site")]) == 2
    assert (f"ldp dashboard: error: --export '{tmp_path / 'a-file' / 'site'}' cannot be "
            f"written") in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["dashboard", "--output", str(tmp_path / "out"), "--port", str(port)]) == 2
    assert (f"ldp dashboard: error: --port {port} on 127.0.0.1 cannot be served"
            in capsys.readouterr().err)


def test_a_command_names_only_its_own_flags():
    """`ldp query` never shows a flag of `ldp plan` (both read settings called epsilon)."""
    parser = build_parser(job_arguments=False)
    assert flag_table(parser, "plan")["epsilon"] == "--epsilon"
    assert "epsilon" not in flag_table(parser, "query")
    assert user_message(ConfigError("epsilon must be positive", field="epsilon"),
                        flag_table(parser, "query")) == "epsilon must be positive"


def test_simulate_into_a_folder_that_cannot_be_made_or_holds_reports(tmp_path, capsys):
    from ldp_telemetry.pipelines.cli import main
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"metrics": [GRR]}))
    table = tmp_path / "in.csv"
    table.write_text("v,t\na,1700000000\n")
    (tmp_path / "a-file").write_text("")
    args = ["simulate", "--registry", str(registry), "--metric", "m", "--input", str(table),
            "--value-column", "v", "--time-column", "t", "--out"]
    assert main([*args, str(tmp_path / "a-file" / "reports")]) == 2
    assert (f"ldp simulate: error: --out '{tmp_path / 'a-file' / 'reports'}' cannot be "
            "written: Not a directory") in capsys.readouterr().err
    assert main([*args, str(tmp_path / "reports")]) == 0
    assert main([*args, str(tmp_path / "reports")]) == 2
    assert "ldp simulate: error: --overwrite is not set and " in capsys.readouterr().err


def test_a_record_no_job_wrote_is_a_user_error_of_query(job_files, capsys):
    """Records that hold what no job writes: exit 2 naming the output folder, not a traceback
    — the reader's shape check names the file and line (a section that is not an object), the
    query the window (what passes that check but cannot be queried)."""
    from ldp_telemetry.pipelines.cli import main
    registry, reports, out = job_files
    assert main(["run", "--registry", str(registry), "--input", str(reports), "--output",
                 str(out), "--window", "3600"]) == 0
    [shard] = sorted(out.glob("estimates-*.jsonl"))
    records = [json.loads(line) for line in shard.read_text().splitlines()]
    by_window = ("the estimate of metric 'm' at ", f" in {out} cannot be read: ")
    by_line = (f"{shard} line 1: not a window estimate: ",
               "field 'estimator' must be null or an object")
    for damage, (start, inside) in (({"postprocess": {"params": {}}}, by_window),  # no method
                                    ({"estimator": "iiw"}, by_line),  # not an object
                                    ({"unbiased_estimate": None}, by_window)):  # frequency
        shard.write_text("".join(json.dumps({**r, **damage}) + "\n" for r in records))
        capsys.readouterr()
        assert main(["query", "--output", str(out), "--metric", "m", "--window", "0",
                     "--top", "2"]) == 2, damage
        error = capsys.readouterr().err
        assert error.startswith(f"ldp query: error: --output: {start}"), error
        assert inside in error, error


#: Every numeric flag of run, simulate, convert and plan, with the values of each class that
#: must be refused (negative, zero where it means nothing, NaN, infinities, beyond its limit).
NUMBERS = ("-1", "nan", "inf", "-inf", "1e400")
SWEEP = {
    "run": (["--window", "--period", "--window-offset", "--allowed-lateness", "--memory-budget",
             "--early-every"], ("nan", "inf", "-inf", "1e400")),
    "run-int": (["--max-block-bytes", "--max-block-records", "--max-record-bytes",
                 "--max-metric-name-chars", "--max-dead-letter-report-chars",
                 "--max-header-bytes", "--max-envelope-reports", "--max-envelope-bytes"],
                ("-1", "0", "nan", "inf", "1e400", "1.5")),
    "follow": (["--max-out-of-order", "--idle-advance", "--until", "--stop-when-idle", "--poll"],
               NUMBERS + ("1e30",)),
    "simulate": (["--seed", "--reports-per-file", "--devices", "--envelope"],
                 ("-1", "nan", "inf", "1e400")),
    "simulate-live": (["--speedup", "--rate", "--file-every"], NUMBERS + ("0",)),
    "convert": (["--envelope"], ("-1", "0", "nan", "inf", "1e30")),
    "plan": (["--epsilon", "--lifetime-epsilon"], NUMBERS + ("0", "1e30")),
    "plan-int": (["--domain", "--max-values", "--n"], ("-1", "0", "nan", "inf", "1e30",
                                                       str(10 ** 30))),
}


@pytest.fixture(scope="module")
def sweep_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    registry = folder / "registry.json"
    registry.write_text(json.dumps({"metrics": [GRR]}))
    (folder / "in.csv").write_text("v,t\na,1709251200\nb,1709251201\n")
    protocol = make_protocol("grr", 1.0, 3)
    rng = np.random.default_rng(1)
    write_reports(str(folder / "r.avro"), "m", protocol, np.arange(5), np.full(5, T0_MS),
                  protocol.perturb(rng.integers(0, 3, 5), rng))
    (folder / "follow").mkdir()
    return folder


def sweep_cases():
    for group, (names, values) in SWEEP.items():
        for flag in names:
            for value in values:
                if flag == "--n" and value == str(10 ** 30):
                    continue  # a window of 10^30 reports is only a large number: allowed
                yield pytest.param(group, flag, value, id=f"{group}{flag}={value}")


def base_arguments(group: str, folder) -> list[str]:
    registry, csv = str(folder / "registry.json"), str(folder / "in.csv")
    simulate = ["simulate", "--registry", registry, "--metric", "m", "--input", csv,
                "--value-column", "v", "--time-column", "t", "--out", str(folder / "sim"),
                "--overwrite"]
    return {
        "run": ["run", "--registry", registry, "--input", str(folder / "r.avro"), "--output",
                str(folder / "out"), "--window", "60"],
        "follow": ["run", "--registry", registry, "--follow", str(folder / "follow"),
                   "--output", str(folder / "live"), "--window", "60", "--until", "1",
                   "--stop-when-idle", "1"],
        "simulate": simulate,
        "simulate-live": [*simulate, "--live"],
        "convert": ["convert", "--registry", registry, "--to", "envelope", "--out",
                    str(folder / "converted"), "--overwrite", str(folder / "r.avro")],
        "plan": ["plan", "--epsilon", "1", "--domain", "8", "--lifetime-epsilon", "3"],
    }[group.removesuffix("-int")]


@pytest.mark.parametrize("group, flag, value", list(sweep_cases()))
def test_every_numeric_flag_refuses_negative_nan_infinite_and_huge_values(
        sweep_files, capsys, group, flag, value):
    """Issue 29: `simulate --seed -1` was a traceback, `--until nan` and `--idle-advance nan`
    were accepted; every numeric flag of run, simulate, convert and plan is swept for the same
    classes. Each is refused before anything runs: exit 2, one line naming its flag."""
    from ldp_telemetry.pipelines.cli import main
    argv = base_arguments(group, sweep_files)
    if flag in argv:  # replace the base's own value
        del argv[argv.index(flag):argv.index(flag) + 2]
    try:
        status = main([*argv, f"{flag}={value}"])
    except SystemExit as exit_:  # argparse's own type check
        status = exit_.code
    error = capsys.readouterr().err
    assert status == 2, error
    lines = [line for line in error.splitlines() if ": error: " in line]
    assert len(lines) == 1 and flag in lines[0], error
    assert "Traceback" not in error


@pytest.mark.slow  # subprocesses
def test_the_issues_three_arguments_are_messages_not_tracebacks(sweep_files):
    folder = sweep_files
    seed = ldp(*base_arguments("simulate", folder), "--seed", "-1")
    assert seed.returncode == 2 and "Traceback" not in seed.stderr
    assert "ldp simulate: error: --seed must be a non-negative integer, got -1" in seed.stderr
    for flag in ("--until", "--idle-advance"):
        argv = base_arguments("follow", folder)
        done = ldp(*argv, flag, "nan")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"ldp run: error: {flag} must be a finite number of seconds, got nan" \
            in done.stderr
