"""The `--json PATH` output every benchmark script shares: one JSON file per run.

A file holds what the script printed, as numbers, with what is needed to read them:

    {"benchmark": "throughput",              the script's name (benchmarks/<name>.py)
     "command": "python benchmarks/...",     the command line that produced the file
     "parameters": {...},                    the script's settings, defaults included
     "machine": {...},                       cores, Python and library versions, niceness,
                                             and the 1-minute load average sampled during the run
     "started_at", "finished_at",            UTC, ISO-8601
     "results": {...}}                       the figures (seconds, reports/s, MB, ...)

`benchmarks/report.py` renders docs/benchmarks.md from a folder of these files.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import itertools
import json
import os
import platform
import shlex
import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Seconds between two samples of the load average while a benchmark runs.
LOAD_SAMPLE_S = 5.0
LIBRARIES = ("ldp-telemetry", "apache-beam", "numpy", "scipy", "fastavro")


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the results, parameters and machine load as JSON")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed from the checkout's root: `python benchmarks/NAME.py ARGS`, without
    an option whose value is an absolute path (`--datasets-dir /data/x`, `--workdir=/tmp/w`):
    a path of this machine, which `_recorded` keeps out of the parameters for the same reason
    (the option's default, or the reader's own path, stands in for it)."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    shown = f"benchmarks/{script.name}" if script.suffix == ".py" else argv[0]
    kept: list[str] = []
    rest = iter(argv[1:])
    for arg in rest:
        if arg.startswith("--") and "=" in arg and os.path.isabs(arg.split("=", 1)[1]):
            continue
        if kept and kept[-1].startswith("--") and os.path.isabs(arg):
            kept.pop()
            continue
        kept.append(arg)
    return " ".join(["python", shown, *map(shlex.quote, kept)])


#: Most windows per cell of a benchmark that simulates its windows through the clients.
MAX_WINDOWS = 1_000
#: Most reports per simulated window (--sizes): a client simulation holds every report of one.
MAX_SIZE = 10_000_000


def simulation_problem(folder: Path, windows: int, sizes: list[int]) -> str | None:
    """Why a simulating benchmark cannot run on `folder` (the shared data sets), W = `windows`
    and `sizes` reports per window, or None."""
    if not folder.is_dir():
        return f"no data sets at {folder}: set LDP_DATASETS"
    if not 1 <= windows <= MAX_WINDOWS:
        return f"--windows must lie in [1, {MAX_WINDOWS}], got {windows}"
    wrong = [n for n in sizes if not 1 <= n <= MAX_SIZE]
    if wrong:
        return f"--sizes must lie in [1, {MAX_SIZE:,}], got {wrong[0]}"
    return None


def grid_cells(datasets: list[str], load: Callable[[str], Any], names: list[str],
               epsilons: list[float], sizes: list[int]) -> Iterator[tuple]:
    """(data set name, data set, name, ε, n) for every cell of a simulating benchmark's grid,
    data set by data set (each loaded once, `load`(its name)), then name, ε and n."""
    for dataset_name in datasets:
        dataset = load(dataset_name)
        for name, epsilon, n in itertools.product(names, epsilons, sizes):
            yield dataset_name, dataset, name, epsilon, n


def epsilons_problem(epsilons: list[float]) -> str | None:
    """Why --epsilons cannot be simulated (one not positive and finite), or None."""
    bad = [e for e in epsilons if not 0.0 < e < float("inf")]
    return f"--epsilons must be positive and finite, got {bad[0]:g}" if bad else None


def default_datasets_dir() -> str:
    """The shared data sets: $LDP_DATASETS, else the `shared/datasets` folder beside the
    checkout."""
    checkout = Path(__file__).resolve().parent.parent
    return os.environ.get("LDP_DATASETS", str(checkout.parent / "shared" / "datasets"))


def _recorded(name: str, value: object) -> bool:
    """Whether a parameter goes into the results file: not the output path, and not a path of
    this machine (an absolute path says nothing about the run that another machine could use)."""
    return name not in ("json", "one") and not (isinstance(value, str) and os.path.isabs(value))


class Run:
    """Context of one benchmark run: samples the load average in a daemon thread and writes
    the JSON file on `save` (nothing when the path is None).

        with Run("throughput", args.json, vars(args)) as run:
            ...
            run.save({"protocols": rows})
    """

    def __init__(self, benchmark: str, path: str | None, parameters: dict):
        self.benchmark, self.path = benchmark, path
        self.parameters = {k: v for k, v in parameters.items() if _recorded(k, v)}
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self._samples.append(os.getloadavg()[0])
            if self._stop.wait(LOAD_SAMPLE_S):
                return

    def __enter__(self) -> Run:
        self.started_at = _now()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def machine(self) -> dict:
        end = os.getloadavg()[0]
        samples = [*self._samples, end]
        return {"cpus": os.cpu_count(), "platform": platform.platform(),
                "python": platform.python_version(), "niceness": os.nice(0),
                "libraries": {name: _version(name) for name in LIBRARIES},
                "load_average": {"start": samples[0], "end": end,
                                 "median": statistics.median(samples), "max": max(samples),
                                 "samples": len(samples), "every_s": LOAD_SAMPLE_S}}

    def save(self, results: dict) -> None:
        if self.path is None:
            return
        document = {"benchmark": self.benchmark, "command": command_line(),
                    "parameters": self.parameters, "machine": self.machine(),
                    "started_at": self.started_at, "finished_at": _now(), "results": results}
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        Path(self.path).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
        print(f"results written to {self.path}", file=sys.stderr)
