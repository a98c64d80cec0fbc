"""The local runners: FnApiRunner (batch, in this process or in worker processes) and
BundleBasedDirectRunner (streaming semantics with TestStream).

Beam's default DirectRunner first tries to download a "Prism" binary; these profiles always
name the runner. Worker processes of `multi_process_options()` are started with this
interpreter and import the project from its installation, or from the current directory when
run from the checkout's root.
"""
from __future__ import annotations


def in_process_options() -> list[str]:
    """Batch, every stage in this process (what `ldp run` uses without --runner)."""
    return ["--runner=FnApiRunner"]


def multi_process_options(workers: int = 2) -> list[str]:
    """Batch, bundles spread over `workers` SDK worker processes on this machine."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return ["--runner=FnApiRunner", "--direct_running_mode=multi_processing",
            f"--direct_num_workers={workers}"]


def streaming_options() -> list[str]:
    """Streaming semantics (watermarks, panes, lateness) on a bounded TestStream."""
    return ["--runner=BundleBasedDirectRunner", "--streaming"]
