"""The command a results file records is one another machine can run: no path of this one.

benchmarks/bench_json.command_line drops an option whose value is an absolute path (the data
sets' folder, a scratch directory, an output file outside the checkout), as `_recorded` keeps
such values out of the parameters; its default, or the reader's own path, stands in for it.
"""
from __future__ import annotations

import json
import os
import shlex

from tests.benchmark_scripts import BENCHMARKS, loaded_scripts


def test_the_recorded_command_drops_options_whose_value_is_an_absolute_path():
    with loaded_scripts("bench_json") as scripts:
        command_line = scripts["bench_json"].command_line
        assert command_line(["/x/benchmarks/selective_top_k.py", "--unfiltered", "--datasets-dir",
                             "/data/sets", "--seed", "34", "--workdir=/tmp/w", "--datasets",
                             "taxi 48", "--json", "benchmarks/results/a.json"]) == (
            "python benchmarks/selective_top_k.py --unfiltered --seed 34 --datasets 'taxi 48' "
            "--json benchmarks/results/a.json")
        assert command_line(["benchmarks/report.py", "--check"]) == (
            "python benchmarks/report.py --check")


def test_no_committed_results_file_records_a_path_of_the_machine_that_ran_it():
    for path in sorted((BENCHMARKS / "results").glob("*.json")):
        command = json.loads(path.read_text(encoding="utf-8")).get("command")
        if not isinstance(command, str):
            continue
        absolute = [arg for arg in shlex.split(command)[2:]
                    if os.path.isabs(arg.split("=", 1)[-1])]
        assert not absolute, (path.name, absolute)
