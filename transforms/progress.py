"""What this process has read so far: report files decoded and records read, for a line that
says what an interrupted run had read (`pipelines.stopping`).

Counted by `transforms.read.DecodeReportFilesFn` as each file ends, in the process that decodes
it: exact for the runners that run in this process (FnApiRunner, BundleBasedDirectRunner), 0
where workers are other processes. Beam's counters are the run's record; they cannot be read
before the run ends.
"""
from __future__ import annotations

import threading


class ReadProgress:
    """Files decoded and records read, added to from any thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self.files = 0
        self.records = 0

    def add(self, files: int, records: int) -> None:
        with self._lock:
            self.files += files
            self.records += records


#: This process's progress.
PROGRESS = ReadProgress()
