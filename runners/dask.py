"""Dask: the batch job on a dask.distributed cluster, through Beam's DaskRunner.

`--runner=dask` (or `DaskRunner`) runs the job on a local cluster of `--dask_workers` worker
processes started for the run (bound to 127.0.0.1, one thread each, stopped when the job ends or
fails), or on a running cluster named by Beam's own `--dask_client_address=tcp://HOST:8786`
(or `--dask_scheduler_file`). Needs `pip install 'ldp-telemetry[dask]'`.

`ClusterDaskRunner` is Beam's `DaskRunner` (its option class, graph overrides, translation into
dask bags and visitor are used as they are) with four documented changes, each needed by the
job (found on Beam 2.77):

* **Tagged outputs.** Beam's translation puts every output of a multi-output ParDo into one bag,
  the main and the tagged ones mixed, and each consumer of any of its outputs reads all of them
  (`ReadReports` and `CountReports` split dead letters from batches so). Here such a ParDo runs
  as one ParDo whose elements are (tag, value), followed by one selecting step per output.
* **Bundles.** Beam's ParDo translation gives every bundle (bag partition) one shared list of
  outputs, so bundles that run in one process see each other's outputs, and it collects that
  list before `finish_bundle`, dropping what `finish_bundle` emits (the sinks' shard names).
  Here each bundle runs its own copy of the DoFn with its own outputs (`_run_bundle`).
* **Every sink computed, and `Impulse`.** Beam computes only the bag of the last transform it
  visited, which leaves every other branch unrun (the job has two sinks, or three with a store),
  and has no translation for `Impulse` (the sinks' start signal), whose consumer then fails
  with `'NoneType' object has no attribute 'map'`. Here every bag that no step reads is
  computed, and an `Impulse` is a one-element `Create`.
* **Counters.** Beam's DaskRunner reports no metrics (`metrics()` raises) and its workers drop
  every counter update. Here each of the project's DoFns counts into a metrics container per
  bundle and emits its counters as one more tagged output, which is gathered with the sinks'
  results: the counters are those of the bundles whose output the job used, exactly once
  (reported as committed), so the summary line adds up as on FnApiRunner.

Beam's DaskRunner is batch only and keeps no Beam windows past a grouping (every element is in
the global window): a streaming run, or a batch run with pane options (allowed lateness, which
use Beam windows), is refused at start with a ConfigError naming the runner.
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.metrics.execution import MetricKey, MetricResult, MetricsContainer
from apache_beam.metrics.metric import MetricResults
from apache_beam.metrics.metricbase import MetricName
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.pipeline import PTransformOverride
from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, _OutputHandler
from apache_beam.runners.dask import transform_evaluator
from apache_beam.runners.dask.dask_runner import DaskOptions, DaskRunner
from apache_beam.runners.dask.overrides import _Create, dask_overrides
from apache_beam.runners.runner import PipelineResult, PipelineState
from apache_beam.runners.worker import statesampler
from apache_beam.transforms import window as beam_window
from apache_beam.transforms.core import _DoFnParam
from apache_beam.utils.counters import CounterFactory
from apache_beam.utils.windowed_value import WindowedValue

from ldp_telemetry.ldp.base.errors import ConfigError

#: The most worker processes a local cluster may be asked to start.
MAX_WORKERS = 256
#: Bag partitions per worker thread when `--dask_npartitions` is not given: more than one so
#: that a worker that finishes early takes another partition.
PARTITIONS_PER_THREAD = 2
#: The host every process of a local cluster binds to.
LOCAL_HOST = "127.0.0.1"
_PROJECT_MODULES = "ldp_telemetry."
_METRICS_TAG = "ldp_dask_metrics"


class DaskClusterOptions(PipelineOptions):
    """`--dask_workers`: the local cluster started when no scheduler is named."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--dask_workers", "--dask-workers", dest="dask_workers", type=int,
                            default=None,
                            help="worker processes of the local Dask cluster started for the "
                                 "run when no --dask_client_address is given (default: the "
                                 f"number of CPUs; at most {MAX_WORKERS})")


def dask_options(workers: int | None = None, address: str | None = None,
                 partitions: int | None = None) -> list[str]:
    """Pipeline arguments for a Dask run: a local cluster of `workers` processes, or the running
    scheduler at `address` (tcp://HOST:PORT); `partitions` bag partitions of the input files."""
    if workers is not None and address is not None:
        raise ConfigError("give dask workers (a local cluster) or a scheduler address, not both",
                          field="dask_workers")
    args = ["--runner=dask"]
    if workers is not None:
        args.append(f"--dask_workers={_check_workers(workers)}")
    if address is not None:
        args.append(f"--dask_client_address={address}")
    if partitions is not None:
        args.append(f"--dask_npartitions={partitions}")
    return args


def _check_workers(workers) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--dask_workers must be an integer in [1, {MAX_WORKERS}], got "
                          f"{workers!r}", field="dask_workers")
    return workers


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[object]:
    """A dask.distributed LocalCluster of `workers` processes of one thread each, every process
    listening on 127.0.0.1 only; closed (its processes stopped) on exit, also when the body
    raises."""
    from distributed import LocalCluster
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(logging.WARNING)  # distributed logs each connection at INFO
    try:
        # The scheduler's HTTP routes on a free port (the default, 8787, may be taken).
        cluster = LocalCluster(n_workers=_check_workers(workers), threads_per_worker=1,
                               processes=True, host=LOCAL_HOST, scheduler_port=0,
                               dashboard_address=f"{LOCAL_HOST}:0", worker_dashboard_address=None,
                               silence_logs=logging.WARNING)
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        quiet.setLevel(level)


# -- the graph overrides -------------------------------------------------------------------------

class _TaggedOutputsFn(beam.DoFn):
    """Runs a DoFn and emits each of its outputs as (tag, value), the main output's tag None;
    counts its metrics per bundle and emits them, tagged `_METRICS_TAG`, at the bundle's end."""

    def __init__(self, fn: beam.DoFn, step: str, count: bool):
        self._fn, self._step, self._count = fn, step, count

    def setup(self):
        self._fn.setup()

    def start_bundle(self):
        self._container = MetricsContainer(self._step)
        self._sampler = statesampler.StateSampler(self._step, CounterFactory())
        self._state = self._sampler.scoped_state(self._step, "process",
                                                 metrics_container=self._container)
        with self._counted():
            self._fn.start_bundle()

    def process(self, element, *args, **kwargs):
        with self._counted():
            outputs = list(self._fn.process(element, *args, **kwargs) or ())
        for output in outputs:
            yield _tagged(output)

    def finish_bundle(self):
        with self._counted():
            outputs = list(self._fn.finish_bundle() or ())
        for output in outputs:  # finish_bundle yields WindowedValues
            yield _tagged(output)
        counters = [((key.metric.namespace, key.metric.name), value)
                    for key, value in self._container.get_cumulative().counters.items()]
        if self._count and counters:
            yield WindowedValue((_METRICS_TAG, (self._step, counters)), 0,
                                (beam_window.GlobalWindow(),))

    def teardown(self):
        self._fn.teardown()

    @contextlib.contextmanager
    def _counted(self):
        """Counter updates made in the body go to this bundle's container."""
        previous = statesampler.get_current_tracker()
        statesampler.set_current_tracker(self._sampler)
        try:
            with self._state:
                yield
        finally:
            statesampler.set_current_tracker(previous)


def _tagged(output):
    """One DoFn output as (tag, value), keeping a timestamp or windows it carries."""
    tag = None
    if isinstance(output, beam.pvalue.TaggedOutput):
        tag, output = output.tag, output.value
    if isinstance(output, WindowedValue):
        return output.with_value((tag, output.value))
    if isinstance(output, beam_window.TimestampedValue):
        return beam_window.TimestampedValue((tag, output.value), output.timestamp)
    return tag, output


class _SelectFn(beam.DoFn):
    """(tag, value) -> value, for one tag."""

    def __init__(self, tag):
        self._tag = tag

    def process(self, element):
        if element[0] == self._tag:
            yield element[1]


class _SplitOutputs(beam.PTransform):
    """A ParDo as one ParDo of (tag, value) elements and one selecting step per output; its
    counters in a dangling collection that the runner gathers."""

    def __init__(self, applied, count: bool):
        super().__init__()
        self._transform = applied.transform
        self._step = applied.full_label
        self._tags = list(applied.outputs)
        self._count = count

    def expand(self, pcoll):
        transform = self._transform
        tagged = pcoll | "Tag" >> beam.ParDo(_TaggedOutputsFn(transform.fn, self._step,
                                                              self._count),
                                             *transform.args, **transform.kwargs)
        outputs = {tag: tagged | f"Select{'' if tag is None else ' ' + str(tag)}"
                   >> beam.ParDo(_SelectFn(tag)) for tag in self._tags}
        if self._count:
            _ = tagged | "Counters" >> beam.ParDo(_SelectMetricsFn(_METRICS_TAG))
        return outputs


class _SelectMetricsFn(_SelectFn):
    """The counters of one step's bundles: a bag the runner gathers."""


class _SplitOutputsOverride(PTransformOverride):
    """ParDos with tagged outputs, and the project's DoFns (which count), as `_SplitOutputs`."""

    def matches(self, applied) -> bool:
        if applied.transform.__class__ is not beam.ParDo:
            return False
        if not (_is_project_fn(applied.transform.fn) or len(applied.outputs) > 1):
            return False
        _check_plain(applied)
        return True

    def get_replacement_transform_for_applied_ptransform(self, applied):
        return _SplitOutputs(applied, count=_is_project_fn(applied.transform.fn))


def _is_project_fn(fn) -> bool:
    """A DoFn of this project (they count), not one of this module's wrappers."""
    return (type(fn).__module__.startswith(_PROJECT_MODULES)
            and not isinstance(fn, (_TaggedOutputsFn, _SelectFn)))


def _check_plain(applied) -> None:
    """The wrapper passes the element and the ParDo's own arguments only: no side inputs, no
    DoFn parameters (window, timestamp, state)."""
    transform = applied.transform
    process = inspect.signature(transform.fn.process).parameters.values()
    if transform.side_inputs or any(isinstance(p.default, _DoFnParam) for p in process):
        raise NotImplementedError(f"step {applied.full_label!r}: the Dask runner's override "
                                  f"takes DoFns without side inputs or DoFn parameters")


class _ImpulseOverride(PTransformOverride):
    """`Impulse` (one empty element) as the one-element `Create` Beam's DaskRunner translates."""

    def matches(self, applied) -> bool:
        return applied.transform.__class__ is beam.Impulse

    def get_replacement_transform_for_applied_ptransform(self, applied):
        return _Create((b"",))


def _check_batch(pipeline, options) -> None:
    """ConfigError (field `runner`) for what Beam's DaskRunner would run wrongly: a streaming
    run, or Beam windows (it keeps none past a grouping)."""
    if options.view_as(StandardOptions).streaming:
        raise ConfigError("the Dask runner runs batch jobs only (not --streaming or --follow)",
                          field="runner")

    class Windows(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            transform = node.transform
            if isinstance(transform, beam.WindowInto) and not isinstance(
                    transform.get_windowing(None).windowfn, beam_window.GlobalWindows):
                raise ConfigError(f"the Dask runner keeps no Beam windows, which step "
                                  f"{node.full_label!r} assigns (a run with allowed lateness or "
                                  f"early panes): run it on FnApiRunner", field="runner")
    pipeline.visit(Windows())


# -- the runner and its result -------------------------------------------------------------------

class ClusterDaskRunner(DaskRunner):
    """Beam's DaskRunner with the overrides above, a local cluster started for the run when no
    scheduler is named, and the job's counters."""

    @staticmethod
    def to_dask_bag_visitor(bag_kwargs=None):
        """Beam's visitor, with each ParDo run by `_run_bundle` (`_BundleParDo`)."""
        beam_visitor = DaskRunner.to_dask_bag_visitor(bag_kwargs)

        class Visitor(type(beam_visitor)):
            def visit_transform(self, node):
                if node.transform.__class__ is not beam.ParDo:
                    return super().visit_transform(node)
                if node.side_inputs or len(node.main_inputs) != 1:
                    raise NotImplementedError(f"step {node.full_label!r}: the Dask runner's "
                                              f"override takes ParDos of one input")
                [main] = node.main_inputs.values()
                self.bags[node] = _BundleParDo(node, bag_kwargs or {}).apply(
                    self.bags[main.producer])
        return Visitor()

    def run_pipeline(self, pipeline, options):
        import dask.distributed as ddist

        _check_batch(pipeline, options)
        pipeline.replace_all([_ImpulseOverride(), _SplitOutputsOverride()])
        client_options = options.view_as(DaskOptions).get_all_options(drop_default=True,
                                                                      current_only=True)
        bag_options = DaskOptions._extract_bag_kwargs(client_options)
        workers = options.view_as(DaskClusterOptions).dask_workers
        scheduler = client_options.get("address") or client_options.get("scheduler_file")
        if scheduler and workers is not None:
            raise ConfigError("--dask_workers sizes the local cluster started for the run: "
                              "give it or --dask_client_address / --dask_scheduler_file, not "
                              "both", field="dask_workers")
        with contextlib.ExitStack() as stack:
            if not scheduler:
                workers = (os.cpu_count() or 1) if workers is None else _check_workers(workers)
                cluster = stack.enter_context(local_cluster(workers))
                client_options["address"] = cluster.scheduler_address
                print(f"started a local Dask cluster of {len(cluster.workers)} worker "
                      f"processes at {cluster.scheduler_address} for this run", file=sys.stderr)
            try:
                client = stack.enter_context(ddist.Client(**client_options))
            except OSError as error:  # distributed's word for a scheduler that did not answer
                if not scheduler:
                    raise
                raise ConfigError(f"no Dask scheduler answered at {scheduler}: {error}",
                                  field="dask_client_address") from None
            if not bag_options:
                threads = sum(client.nthreads().values()) or 1
                bag_options = {"npartitions": PARTITIONS_PER_THREAD * threads}
            pipeline.replace_all(dask_overrides())
            visitor = self.to_dask_bag_visitor(bag_options)
            pipeline.visit(visitor)
            sinks, counters = _unread_bags(visitor.bags)
            futures = client.compute(sinks + counters)
            return ClusterResult(futures[:len(sinks)], futures[len(sinks):], stack.pop_all())


class _BundleParDo(transform_evaluator.ParDo):
    """Beam's ParDo translation with each bundle (a bag partition) run by `_run_bundle`."""

    def apply(self, input_bag, side_inputs=None):
        main = next(iter(self.applied.main_inputs.values()))
        window_fn = main.windowing.windowfn
        return input_bag.map(transform_evaluator.get_windowed_value, window_fn).map_partitions(
            _run_bundle, pickler.dumps(self.transform.fn), self.transform.label, window_fn,
            list(self.transform.args), dict(self.transform.kwargs))


def _run_bundle(items, fn_bytes: bytes, label: str, window_fn, args: list, kwargs: dict) -> list:
    """One bundle of a DoFn: its own copy of the DoFn and its own receivers (Beam's translation
    shares one list of outputs between every bundle that a process runs, and collects it before
    `finish_bundle`, losing what that emits). Returns the outputs, main ones without windows
    (as Beam's translation does)."""
    receivers = transform_evaluator.OneReceiver()
    handler = _OutputHandler(window_fn=window_fn, main_receivers=receivers[None],
                             tagged_receivers=receivers, per_element_output_counter=None,
                             output_batch_converter=None, process_yields_batches=False,
                             process_batch_yields_elements=False)
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(pickler.loads(fn_bytes)), handler,
        context=DoFnContext(label, state=None), side_inputs=None, input_args=args,
        input_kwargs=kwargs, user_state_context=None,
        bundle_finalizer_param=beam.DoFn.BundleFinalizerParam())
    invoker.invoke_setup()
    try:
        invoker.invoke_start_bundle()
        for item in items:
            invoker.invoke_process(item)
        invoker.invoke_finish_bundle()
    finally:
        invoker.invoke_teardown()
    return [output.value for output in receivers.values]


def _unread_bags(bags: dict) -> tuple[list, list]:
    """The bags no step reads: (the sinks', the counters')."""
    read = set()
    for node in bags:
        read.update(value.producer for value in node.inputs
                    if isinstance(value, beam.pvalue.PCollection))
        read.update(side.pvalue.producer for side in node.side_inputs)
    sinks, counters = [], []
    for node, bag in bags.items():
        if node in read or bag is None:
            continue
        fn = getattr(node.transform, "fn", None)
        (counters if isinstance(fn, _SelectMetricsFn) else sinks).append(bag)
    return sinks, counters


class ClusterResult(PipelineResult):
    """A Dask run: waits for every sink and gathers the counters; then closes the client and
    the local cluster it started (also when the job fails)."""

    def __init__(self, sinks, counters, resources: contextlib.ExitStack):
        super().__init__(PipelineState.RUNNING)
        self._sinks, self._counters, self._resources = sinks, counters, resources
        self._metrics = None

    def wait_until_finish(self, duration=None):
        from distributed import wait
        if self._state != PipelineState.RUNNING:
            return self._state
        try:
            with self._resources:
                if duration is not None:
                    done = wait(self._sinks + self._counters, timeout=duration / 1000,
                                return_when="ALL_COMPLETED")
                    if done.not_done:
                        self._resources = self._resources.pop_all()
                        return self._state
                for future in self._sinks:
                    future.result()  # a worker's error is raised here
                totals: dict = {}
                for future in self._counters:
                    for step, counters in future.result():
                        for (namespace, name), value in counters:
                            key = MetricKey(step, MetricName(namespace, name))
                            totals[key] = totals.get(key, 0) + value
                self._metrics = CollectedMetrics(totals)
        except BaseException:
            self._state = PipelineState.FAILED
            raise
        self._state = PipelineState.DONE
        return self._state

    def cancel(self):
        for future in self._sinks + self._counters:
            future.cancel()
        self._resources.close()
        self._state = PipelineState.CANCELLED
        return self._state

    def metrics(self):
        if self._metrics is None:
            raise RuntimeError("the Dask run's counters are known once it has finished")
        return self._metrics


class CollectedMetrics(MetricResults):
    """Counters gathered from the workers (committed: from the bundles the job used)."""

    def __init__(self, counters: dict):
        self._counters = counters

    def query(self, filter=None):
        return {self.COUNTERS: [MetricResult(key, value, value)
                                for key, value in self._counters.items()
                                if self.matches(filter, key)],
                self.DISTRIBUTIONS: [], self.GAUGES: [], self.STRINGSETS: [],
                self.BOUNDED_TRIES: []}
