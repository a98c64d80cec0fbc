"""Reading back the JSON-lines files a job wrote, for the tests' assertions."""
from __future__ import annotations

import glob
import json
from pathlib import Path


def json_lines(pattern: str | Path) -> list[dict]:
    """One object per line of every file matching the glob `pattern`, in path order (a blank
    line is an error: the job never writes one)."""
    rows = []
    for path in sorted(glob.glob(str(pattern))):
        with open(path, encoding="utf-8") as handle:
            rows += [json.loads(line) for line in handle]
    return rows


def job_json_lines(output: str | Path, name: str) -> list[dict]:
    """The records of a batch job's `<name>-*.jsonl` shards (`estimates`, `dead_letters`)."""
    return json_lines(Path(output) / f"{name}-*.jsonl")
