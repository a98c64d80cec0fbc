"""Which Beam runner executes a job, named explicitly.

Without `--runner` the job runs on Beam's FnApiRunner in this process: it never downloads
anything (Beam's default DirectRunner first tries to fetch a "Prism" binary). Any other runner is
passed to Beam by name with its own options:

* `--runner=FnApiRunner [--direct_running_mode=multi_processing --direct_num_workers=2]`
* `--runner=BundleBasedDirectRunner --streaming` (local streaming semantics)
* `--runner=PortableRunner --job_endpoint=localhost:PORT --environment_type=LOOPBACK`
  (a local job service, or a Flink job server exposing the same Job API)
* `--runner=FlinkRunner --flink_master=HOST:PORT`
* `--runner=dask [--dask_workers=N | --dask_client_address=tcp://HOST:8786]` (Beam's DaskRunner
  on a local dask.distributed cluster started for the run, or on a running one)
* `--runner=DataflowRunner --project ... --region ... --temp_location gs://...`
  (`--dry_run=True` builds and validates the job without submitting it)

Remote workers import the project, so they need it installed: pass `--setup_file ./setup.py`.

One module per runner family holds its option profiles and launch helpers:
`ldp_telemetry.runners.direct` (FnApiRunner in worker processes), `ldp_telemetry.runners.portable`
(a local job service and worker pool), `ldp_telemetry.runners.flink` and
`ldp_telemetry.runners.dataflow`, and `ldp_telemetry.runners.dask` (a dask.distributed
cluster).
"""
from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import create_runner

from ldp_telemetry.ldp.base.errors import ConfigError

DEFAULT_RUNNER = "FnApiRunner"
#: `--runner` names of `ldp_telemetry.runners.dask.ClusterDaskRunner` (compared in lower case).
DASK_RUNNER_NAMES = ("dask", "daskrunner")


def unknown_pipeline_flags(args: list[str]) -> list[str]:
    """Names of the options in `args` that no Beam PipelineOptions class defines.

    Beam passes such options on to portable job servers (they may be the Java runner's own) and
    only logs a warning, so a misspelt flag silently keeps its default.
    """
    known = set(PipelineOptions([]).get_all_options())
    given = PipelineOptions(args).get_all_options(retain_unknown_options=True)
    return sorted(set(given) - known)


def make_runner(options: PipelineOptions):
    """The runner object to hand to `beam.Pipeline`: FnApiRunner when none is named, else the
    runner `--runner` names; ConfigError (field `runner`) when Beam knows no such runner."""
    name = options.view_as(StandardOptions).runner
    if name in (None, DEFAULT_RUNNER):
        return FnApiRunner()
    if name.lower() in DASK_RUNNER_NAMES:
        return _dask_runner()
    try:
        return create_runner(name)
    except ValueError as error:  # Beam's word for an unknown runner name
        raise ConfigError(f"runner {name!r} is not a runner Beam knows: {error}",
                          "runner") from None


def _dask_runner():
    """The Dask runner; ConfigError (field `runner`) when dask.distributed is not installed."""
    try:
        from ldp_telemetry.runners.dask import ClusterDaskRunner
    except ImportError as error:
        raise ConfigError(f"the Dask runner needs dask.distributed ({error}): "
                          f"pip install 'ldp-telemetry[dask]'", "runner") from None
    return ClusterDaskRunner()
