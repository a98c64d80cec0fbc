"""The job's memory model, checked against `--memory-budget` before any report is read.

What a job holds beyond its start-up (interpreter, Beam, numpy: about 260 MB on FnApiRunner):

* accumulators: the statistic of one slice of every metric and of the window / period
  windows it is added into, d x statistic bytes x (1 + windows per slice) per metric
  (`accumulator_bytes`), each with its integrity sample (`integrity_nbytes`: up to
  2 x 65,536 rows by default, within 2 x 2 MiB; docs/integrity.md);
* one window being finalized and written (`window_bytes`): windows are finalized one at a time
  per worker and each record is written as it is made (transforms/write.py), so this is the
  largest metric's working set, not a sum over windows: its statistic, finalize's arrays and
  temporaries, the record (numpy arrays, lazy labels) and fastavro's encoded block with its
  compressed copy. Per domain value (measured with tracemalloc and peak RSS,
  `benchmarks/window_memory.py`): `WINDOW_BYTES_PER_VALUE` for frequency oracles,
  `NUMERIC_WINDOW_BYTES_PER_VALUE` per bucket for numeric metrics (EMS, bootstrap), plus
  `AMRP_WINDOW_BYTES` for AMRP's permutation blocks, a string metric's statistic and decoding
  (`decode_nbytes` of ldp/estimation/heavy_hitters.py) whatever its domain, plus, with `--store`,
  `STORE_BYTES_PER_VALUE` and the store sink's waiting records (`store_pending_bytes`);
* dead letters (`dead_letter_bytes`): a fixed amount whatever their number. Each is written by
  the step that makes it (transforms/sinks.py, never grouped or flattened whole), the first
  `MAX_VERBATIM_DEAD_LETTERS` of each (file, reason) as they are and the rest aggregated
  (transforms/dead_letters.py), so what is held is one reader chunk's dead letters
  (`CHUNK_RECORDS` of schemas/codec.py, with the decoded records they come from) and the
  waiting aggregates (`MAX_AGGREGATES`), `DEAD_LETTER_BYTES` each.

A live run over a directory also holds the report ids of its open slices to count each id once
(`ldp_telemetry.pipelines.slice_ids`): `REPORT_ID_BYTES` per distinct report of each open slice
(for fixed windows, each open window), dropped when the slice closes (`report_id_bytes`). It
grows with the reports of the open windows, which no flag fixes in advance: status.json shows
it (`report_id_bytes`) as the run goes. A streaming graph through Beam (Pub/Sub,
MatchContinuously) holds the same 8 bytes per report in the state of its "DeduplicateSlices"
step (`transforms.dedupe`), per open slice, on its workers.

A batch run without panes counts each file's reports before the grouping by slice
(`ldp_telemetry.ldp.engine.partials`): the reader holds the open partial statistics of the file
it decodes, within `MAX_OPEN_PARTIAL_BYTES` (64 MiB) beyond the one it is adding to.

Not modelled: the reports themselves, which a runner may hold while it groups them by slice
(FnApiRunner materialises every grouped collection; in a batch run without panes only partial
statistics and 8 bytes of id per report are grouped), and, for sliding windows in a batch run,
the statistics of every window at the merge step (their number depends on the data's span).
Each worker process of a multi-process runner needs the budget on its own, and a worker that
runs bundles on several threads (Dataflow's) holds one window being finalized per thread.
"""
from __future__ import annotations

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.ldp.config.registry import MetricConfig, Registry
from ldp_telemetry.ldp.config.windows import WindowSpec
from ldp_telemetry.ldp.integrity.accumulate import sample_nbytes
from ldp_telemetry.ldp.protocols.base import NUMERIC, STRINGS

#: Default budget (MB) for the accumulators and the window being finalized and written.
DEFAULT_MEMORY_BUDGET_MB = 4096.0

#: Bytes per value of one frequency-oracle window being finalized and written: statistic 8,
#: finalize's estimate, unbiased estimate, standard error and temporaries 66-76, the Avro
#: block and its deflated copy about 30 more, allocator slack (peak RSS: 160 at d = 10^6).
WINDOW_BYTES_PER_VALUE = 160
#: Bytes per bucket of one numeric metric's window (EMS iterations and the bootstrap's
#: replicates; tracemalloc: 1,110 at B = 1,024).
NUMERIC_WINDOW_BYTES_PER_VALUE = 1_280
#: Bytes per value of one window also written to the store (`--store`): its plain record
#: (Python floats and label strings), its JSON text and the rows being made (peak RSS above
#: the same job without a store: 318 at d = 10^6, `benchmarks/window_memory.py --store`).
STORE_BYTES_PER_VALUE = 320
#: Bytes per value of a plain record waiting in the store sink (a float of each of three arrays
#: and a label string: at 10^5 x 20 windows the store's extra peak is 52 MB above one window's,
#: for the about 2.6 * 10^5 values waiting).
PLAIN_BYTES_PER_VALUE = 200


#: Bytes a live run over a directory holds per distinct report id of an open slice (an int64 in
#: a sorted numpy level, `ldp.engine.counting.IdSet`; twice that for a moment while levels merge).
REPORT_ID_BYTES = 8


def report_id_bytes(open_reports: int) -> int:
    """Bytes of the report ids held for `open_reports` distinct reports in open slices."""
    return REPORT_ID_BYTES * open_reports


def store_pending_bytes() -> int:
    """The store sink's other records waiting for a write: up to `STORE_FLUSH_VALUES` plain
    values (imported here: the sink's module imports Beam, and `ldp run --help` must not)."""
    from ldp_telemetry.transforms.store import STORE_FLUSH_VALUES
    return STORE_FLUSH_VALUES * PLAIN_BYTES_PER_VALUE


#: Bytes per dead letter held while a reader chunk is decoded: the decoded record, its JSON
#: text and the DeadLetter (tracemalloc at 200,000 dead letters of short reports: about 1,900),
#: with the allocator's slack (peak RSS above the start-up at 2,000,000 dead letters: 211 MB,
#: 3,180 per dead letter of a chunk and the aggregates; `benchmarks/dead_letter_memory.py`). A
#: report's text is cut to --max-dead-letter-report-chars, and a chunk of larger records holds
#: fewer of them (a chunk is also bounded by --max-block-bytes).
DEAD_LETTER_BYTES = 3_200


def dead_letter_bytes() -> int:
    """What dead letters hold, whatever their number: one reader chunk's and the waiting
    aggregates (imported here: transforms/ modules import Beam, and `ldp run --help` must
    not)."""
    from ldp_telemetry.schemas.codec import CHUNK_RECORDS
    from ldp_telemetry.transforms.dead_letters import MAX_AGGREGATES
    return (CHUNK_RECORDS + MAX_AGGREGATES) * DEAD_LETTER_BYTES


#: AMRP's permutations, made in blocks of 2^20 entries whatever d (keys, orders, transforms).
AMRP_WINDOW_BYTES = 48 * 2 ** 20


def accumulator_bytes(registry: Registry, windows: WindowSpec) -> dict[str, int]:
    """Bytes of accumulators per metric for one slice: its statistic and those of the
    window / period windows it is added into (d x statistic size x (1 + windows per slice)),
    one statistic per configuration version (a slice may hold reports of every version).
    """
    open_per_slice = 1 + (0 if windows.is_fixed else windows.windows_per_slice)
    return {m.name: (_statistic_nbytes(registry, m.name) + integrity_nbytes(registry, m.name))
            * open_per_slice for m in registry.metrics}


def integrity_nbytes(registry: Registry, name: str) -> int:
    """Bytes of the integrity samples of every configuration version of the metric `name`
    (`ldp_telemetry.ldp.integrity.accumulate.sample_nbytes`: at most twice the sample's rows x
    bytes per row while it counts; 0 with integrity off)."""
    return sum(sample_nbytes(config) for config in registry.versions(name))


def _statistic_nbytes(registry: Registry, name: str) -> int:
    """Bytes of the statistics of every configuration version of the metric `name`."""
    return sum(config.statistic_nbytes for config in registry.versions(name))


def window_bytes(metric: MetricConfig, store: bool = False) -> int:
    """Bytes held while one window of `metric` is finalized and written (module docstring)."""
    per_value, fixed = _window_terms(metric, store)
    return metric.d * per_value + fixed


def _window_terms(metric: MetricConfig, store: bool = False) -> tuple[int, int]:
    """(bytes per domain value, bytes whatever the domain) of `window_bytes`. A string metric has
    no domain: its statistic and the decoding's candidates (`decode_nbytes`) are fixed bytes."""
    if metric.kind == STRINGS:
        from ldp_telemetry.ldp.estimation.heavy_hitters import decode_nbytes
        params = dict(metric.estimator.params)
        fixed = metric.statistic_nbytes + decode_nbytes(metric.protocol,
                                                        params["width"] or 2 * params["top"],
                                                        len(metric.dictionary))
        return 0, fixed + (store_pending_bytes() if store else 0)
    per_value = NUMERIC_WINDOW_BYTES_PER_VALUE if metric.kind == NUMERIC else WINDOW_BYTES_PER_VALUE
    fixed = AMRP_WINDOW_BYTES if metric.estimator.method == "amrp" else 0
    if store:
        per_value += STORE_BYTES_PER_VALUE
        fixed += store_pending_bytes()
    return per_value, fixed


def job_memory_bytes(registry: Registry, windows: WindowSpec, store: bool = False) -> int:
    """The model's total: every metric's accumulators plus the largest window working set plus
    the dead letters' fixed share."""
    return (sum(accumulator_bytes(registry, windows).values())
            + max((window_bytes(m, store) for m in registry.metrics), default=0)
            + dead_letter_bytes())


def check_memory_budget(registry: Registry, windows: WindowSpec, budget_mb: float,
                        store: bool = False) -> None:
    """ConfigError (field `memory_budget`) when the accumulators plus one window being finalized
    and written (and, with `store`, stored) plus the dead letters' fixed share need more than
    `budget_mb` MB, saying which metrics weigh most and what would fit."""
    if not (budget_mb > 0 and budget_mb < float("inf")):
        raise ConfigError(f"memory_budget must be a positive number of MB, got {budget_mb}",
                          field="memory_budget")
    if not registry.metrics:
        return
    accumulators = accumulator_bytes(registry, windows)
    window = {m.name: window_bytes(m, store) for m in registry.metrics}
    largest_window = max(window, key=window.get)
    letters = dead_letter_bytes()
    total = sum(accumulators.values()) + window[largest_window] + letters
    if total <= budget_mb * 2 ** 20:
        return
    budget = budget_mb * 2 ** 20 - letters  # what the accumulators and a window may take
    mb = 2 ** 20
    heaviest = sorted(accumulators, key=lambda name: accumulators[name] + window[name],
                      reverse=True)[:3]
    listing = ", ".join(f"{name!r} {accumulators[name] / mb:,.0f} + {window[name] / mb:,.0f} MB "
                        f"(d={registry[name].d:,}, {registry[name].protocol_name})"
                        for name in heaviest)
    raise ConfigError(
        f"memory_budget of {budget_mb:,.0f} MB is too small: the job needs {total / mb:,.0f} MB: "
        f"the accumulators "
        f"{sum(accumulators.values()) / mb:,.0f} MB (statistic size x (1 + windows per slice), "
        f"summed over {len(accumulators)} metrics) and one window being finalized and written"
        f"{' and stored' if store else ''} "
        f"{window[largest_window] / mb:,.0f} MB (the largest, {largest_window!r}) and the "
        f"dead letters {letters / mb:,.0f} MB; "
        f"largest (accumulators + window): {listing}; "
        f"{_what_fits(registry, windows, budget, accumulators, window, store)}, "
        f"or raise the memory budget", field="memory_budget")


def _what_fits(registry: Registry, windows: WindowSpec, budget: float,
               accumulators: dict[str, int], window: dict[str, int], store: bool) -> str:
    """The hint of `check_memory_budget`: windows per report, else the largest domain, that fit."""
    per_slice = sum(_statistic_nbytes(registry, m.name) + integrity_nbytes(registry, m.name)
                    for m in registry.metrics)
    room = budget - max(window.values())
    fits = int(room // per_slice) - 1 if room > 0 else 0
    if fits >= 1 and not windows.is_fixed:
        return (f"at most {fits} windows per report fit (window / period; now "
                f"{windows.windows_per_slice})")
    name = max(registry.metrics, key=lambda m: accumulators[m.name] + window[m.name]).name
    metric = registry[name]
    others_accumulators = sum(accumulators.values()) - accumulators[name]
    others_window = max((window[m] for m in window if m != name), default=0)
    per_value, fixed = _window_terms(metric, store)
    accumulator_per_value = accumulators[name] / metric.d
    # need(d) = others_accumulators + d x accumulator_per_value
    #           + max(others_window, d x per_value + fixed) <= budget
    largest_d = min((budget - others_accumulators - fixed) / (per_value + accumulator_per_value),
                    (budget - others_accumulators - others_window) / accumulator_per_value)
    if largest_d >= 2:
        return f"{name!r} fits with a domain of at most {int(largest_d):,} values"
    return "even the other metrics alone do not fit: lower their domain sizes"
