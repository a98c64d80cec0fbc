"""FnApiRunner with its SDK workers in local processes.

Without `--runner` a job runs on FnApiRunner in this process (`ldp_telemetry.runners`); live
runs of a followed directory run on BundleBasedDirectRunner (`ldp_telemetry.pipelines.live`).
Beam's default DirectRunner first tries to download a "Prism" binary; these options always name
the runner. Worker processes of `multi_process_options()` are started with this interpreter and
import the project from its installation, or from the current directory when run from the
checkout's root.
"""
from __future__ import annotations

from ldp_telemetry.ldp.base.errors import ConfigError


def multi_process_options(workers: int = 2) -> list[str]:
    """Batch, bundles spread over `workers` SDK worker processes on this machine."""
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}", field="workers")
    return ["--runner=FnApiRunner", "--direct_running_mode=multi_processing",
            f"--direct_num_workers={workers}"]
