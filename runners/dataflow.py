"""Google Cloud Dataflow: option profile, offline dry run, what the workers need.

Submitting needs `apache-beam[gcp]` on the submitting machine (`pip install '.[dataflow]'`), a
project, a region and a `gs://` temp location. Dataflow's workers run Beam's SDK container
(`gcr.io/cloud-dataflow/v1beta3/beam_python3.X_sdk:<beam version>`), which has Beam and numpy but
not this project: `--setup_file ./setup.py` builds an sdist of the project at submission, stages
it and pip-installs it (with scipy and fastavro) on every worker at start-up. For faster start-up,
build a custom image with the project installed and pass `--sdk_container_image` instead.

`--dry_run=True --no_auth` builds and validates the job without credentials or network access
and returns without submitting it: the result's `job` holds the Dataflow job request and the
portable pipeline proto (`built_pipeline()`). The bucket names must be valid (3-63 characters of
a-z 0-9 - _ .): an invalid temp location makes Beam look up a default bucket online.
"""
from __future__ import annotations

import os
import re

from ldp_telemetry.ldp.base.errors import ConfigError

_GCS_PATH = re.compile(r"gs://[a-z0-9][-_a-z0-9.]{1,61}[a-z0-9]/.+")


def dataflow_options(project: str, region: str, temp_location: str,
                     staging_location: str | None = None,
                     setup_file: str | None = None,
                     sdk_container_image: str | None = None,
                     requirements_file: str | None = None, job_name: str | None = None,
                     max_num_workers: int | None = None, dry_run: bool = False) -> list[str]:
    """Pipeline arguments for DataflowRunner (batch).

    The workers need the project: name its `setup.py` as `setup_file` (an sdist is built and
    installed on every worker), or an `sdk_container_image` with the project installed. With
    neither, ConfigError: a job whose workers cannot import `ldp_telemetry` would fail on its
    first bundle. A `setup_file` that does not exist is a ConfigError too. `dry_run` adds
    `--dry_run=True --no_auth`: build and validate offline, submit nothing.
    """
    if not setup_file and not sdk_container_image:
        raise ConfigError("Dataflow workers need the project: pass setup_file (the project's "
                          "setup.py) or sdk_container_image (an image with it installed)",
                          field="setup_file")
    if setup_file and not os.path.isfile(setup_file):
        raise ConfigError(f"setup_file {setup_file!r} does not exist (give the path of the "
                          f"project's setup.py in a checkout or unpacked sdist)",
                          field="setup_file")
    for name, path in (("temp_location", temp_location), ("staging_location", staging_location)):
        if path is not None and not _GCS_PATH.fullmatch(path):
            raise ConfigError(f"{name} must be gs://BUCKET/PATH with a valid bucket name, "
                              f"got {path!r}", field=name)
    args = ["--runner=DataflowRunner", f"--project={project}", f"--region={region}",
            f"--temp_location={temp_location}",
            f"--staging_location={staging_location or temp_location.rstrip('/') + '/staging'}"]
    if setup_file:
        args.append(f"--setup_file={setup_file}")
    if sdk_container_image:
        args.append(f"--sdk_container_image={sdk_container_image}")
    if requirements_file:
        args.append(f"--requirements_file={requirements_file}")
    if job_name:
        args.append(f"--job_name={job_name}")
    if max_num_workers is not None:
        args.append(f"--max_num_workers={max_num_workers}")
    if dry_run:
        args += ["--dry_run=True", "--no_auth"]
    return args


def unavailable_reason() -> str | None:
    """Why DataflowRunner cannot build a job here (gcp extras missing), or None when it can."""
    try:
        from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
    except ImportError as error:
        return f"apache-beam[gcp] is not installed ({error})"
    return None


def built_pipeline(result):
    """The portable pipeline proto of a dry-run (or submitted) DataflowRunner result."""
    job = getattr(result, "job", None)
    if job is None:
        raise ValueError("the result holds no Dataflow job (not a DataflowRunner result)")
    return job.proto_pipeline
