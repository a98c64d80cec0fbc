"""The estimation graph: Avro reports in, per-window estimates with error bars out.

    files -> ReadReportBatches -+-> dead letters ---------------------------+-> the job's sinks
                                +-> CountSupport per (metric, slice) -> windows |
                                    -> FinalizeEstimates -> estimate records ---+

`build_pipeline` is the batch job. `build_streaming_pipeline` is the same graph behind any
source of timestamped (metric, ReportBatch) elements and dead letters (`transforms.sources`, or
`ldp_telemetry.transforms.replay.ReplayReportFiles` locally), returning the estimate and
dead-letter records for the caller's sinks; the job's WindowSpec says which panes (early,
on-time, late) it emits. `job_sinks` is the one list of sinks of every kind of run.
"""
from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.engine.counting import DUPLICATES
from ldp_telemetry.pipelines.job import EstimateJob
from ldp_telemetry.transforms.count import CountKeyedWindows, CountWindowPanes
from ldp_telemetry.transforms.estimate_windows import FinalizeEstimatesFn, FinalizePanesFn
from ldp_telemetry.transforms.read import BATCHES, DEAD_LETTERS, ReadReportBatches
from ldp_telemetry.transforms.sinks import (DeadLetterFiles, DeadLetterShards, EstimateShards,
                                            PaneFiles, Sink, StoreSink, write_to_sinks)


def build_pipeline(pipeline: beam.Pipeline, job: EstimateJob) -> None:
    """Add the batch job to `pipeline`: report files in, `job_sinks(job)` out.

    ConfigError (field `early_every`) for early panes: a fixed set of files gives each window
    one ON_TIME pane (early panes need a streaming source, see `build_streaming_pipeline`).
    """
    if job.windows.early_every_ms is not None:
        raise ConfigError("early_every needs a streaming source: reading a fixed set of files "
                          "gives each window one on-time pane", field="early_every")
    streaming = pipeline.options.view_as(StandardOptions).streaming
    # Without panes, each file's reports are counted where they are decoded: only partial
    # statistics and report ids cross the grouping by slice (transforms.count).
    pre_count = not (streaming or job.windows.has_pane_options)
    reader = ReadReportBatches(job.registry, job.windows.slice_ms,
                               slice_offset_ms=job.windows.slice_offset_ms, limits=job.limits,
                               pre_count=pre_count)
    read = (pipeline
            | "ListFiles" >> beam.Create(list(job.files))
            | "ReadReports" >> reader)
    # Typed records (numpy arrays, lazy labels) to the sinks: each writes them its own way.
    estimates, dead_letters = _estimate(read, job, streaming, flatten=False,
                                        batches_of=reader.recount() if pre_count else None)
    write_to_sinks(job_sinks(job), estimates, dead_letters)


def build_streaming_pipeline(pipeline: beam.Pipeline, job: EstimateJob, source: beam.PTransform,
                             dedupe: bool = True) -> tuple[beam.PCollection, beam.PCollection]:
    """Add the estimation graph behind `source`; returns (estimate records, dead-letter records).

    `source` is applied to the pipeline's root and must give `batches`: (metric, ReportBatch)
    stamped with the batch's slice start, and `dead_letters`: DeadLetter (as `ReadReportBatches`
    and every `transforms.sources.ReportSource` do). Estimates are `EstimateRecord`s
    (`output.estimate`), dead letters dicts of the dead_letter schema, one estimate per
    (metric, window, pane), emitted in the windows they describe. `job.files` and `job.output`
    are not used.

    Report ids are counted once per (metric, slice) across panes (`transforms.dedupe`) unless
    `dedupe` is False: a followed directory's follower has deduplicated the batches already.

    ConfigError (field `early_every`) for early panes when the pipeline is not streaming.
    """
    streaming = pipeline.options.view_as(StandardOptions).streaming
    if job.windows.early_every_ms is not None and not streaming:
        raise ConfigError("early_every needs a streaming pipeline (the pipeline option "
                          "streaming): processing-time panes do not exist in a batch run",
                          field="early_every")
    return _estimate(pipeline | "ReadReports" >> source, job, streaming, dedupe=dedupe)


def job_sinks(job: EstimateJob, panes: PaneFiles | None = None,
              dead_letters: bool = True, store_rejects: bool = True) -> list[Sink]:
    """The job's sinks, in the order they are applied.

    Estimates: a batch run's shard files, or `panes` (a live run's pane files). Dead letters
    (unless `dead_letters` is False: a followed directory's follower writes them itself): a
    batch run's shard files, or one file each in a live run. Then the store, when the job names
    one; it receives the estimates as the pane sink wrote them (pane indices continued after a
    restart); and the dead-letter counts unless
    `store_rejects` is False (a followed directory's follower writes them itself).
    """
    batch = panes is None
    sinks: list[Sink] = [EstimateShards(job.output) if batch else panes]
    if dead_letters:
        sinks.append(DeadLetterShards(job.output) if batch else DeadLetterFiles(job.output))
    if job.store is not None:
        sinks.append(StoreSink(job.store, job.windows, rejects=store_rejects,
                               run=job.store_run))
    return sinks


def _estimate(read, job: EstimateJob, streaming: bool, dedupe: bool = True,
              flatten: bool = True, batches_of=None
              ) -> tuple[beam.PCollection, beam.PCollection | tuple]:
    """Count and finalize: on the pane path (streaming, or pane options) in Beam windows, else
    with plain window keys (`transforms.count`; `batches_of`: the reader counted before the
    shuffle).

    Dead letters: one PCollection, or with `flatten=False` a tuple of two (the reader's and the
    duplicates), so that each is written by the step that makes it: a batch run's reader may
    make millions, and FnApiRunner materialises an input of a Flatten it cannot fuse."""
    panes = streaming or job.windows.has_pane_options
    count = (CountWindowPanes(job.registry, job.windows, dedupe) if panes
             else CountKeyedWindows(job.registry, job.windows, batches_of))
    counted = read[BATCHES] | "CountSupport" >> count
    finalize = FinalizePanesFn if panes else FinalizeEstimatesFn
    estimates = counted["windows"] | "FinalizeEstimates" >> beam.ParDo(
        finalize(job.registry))
    if not flatten:
        return estimates, (
            read[DEAD_LETTERS] | "DeadLetterRecords" >> beam.Map(_as_dict),
            counted[DUPLICATES] | "DuplicateRecords" >> beam.Map(_as_dict))
    dead_letters = ((read[DEAD_LETTERS], counted[DUPLICATES])
                    | "AllDeadLetters" >> beam.Flatten()
                    | "DeadLetterRecords" >> beam.Map(lambda letter: letter.as_dict()))
    return estimates, dead_letters


def _as_dict(letter) -> dict:
    return letter.as_dict()
