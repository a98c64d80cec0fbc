"""Long fuzzing run of the report reader: fresh random damaged files, printing cases/s.

The property of tests/schemas/test_fuzz_reports.py (no exception, read = accepted +
dead-lettered, dead letters and memory bounded), with hypothesis drawing new cases on every run
(or reproducibly with --seed), for as many cases as asked. Each case damages a per-report
seed file, an envelope seed file (the same container edits) and the envelopes of an envelope
seed (`envelope_plans`: their fields) alike:

    python -m benchmarks.fuzz_reports --cases 200000

Run it from the checkout's root, as a module: it reuses the test suite's fuzzing helpers
(`tests/schemas/report_fuzzing.py`), found there, and the installed `ldp_telemetry`.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.schemas import report_fuzzing as fuzz


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=None, help="reproduce a run")
    parser.add_argument("--memory-every", type=int, default=8, metavar="N",
                        help="check the memory bound on 1 case in N (tracing memory slows "
                             "decoding several times); 0: never")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as directory:
        files = fuzz.seed_files(Path(directory))
        envelope_files = fuzz.envelope_seed_files(Path(directory))
    seeds = {name: (data, fuzz.Layout.of(data)) for name, data in files.items()}
    envelope_seeds = {name: (data, fuzz.Layout.of(data))
                      for name, data in envelope_files.items()}
    totals = {"cases": 0, "read": 0, "accepted": 0, "dead": 0}

    @settings(max_examples=-(-args.cases // len(fuzz.CODECS)), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(metric=st.sampled_from(fuzz.METRICS), blob=fuzz.plans(),
           fields=fuzz.envelope_plans())
    def case(metric, blob, fields):  # one plan, on the metric's seed files in every codec
        plan = fuzz.plan_of(blob)
        damaged_files = [(fuzz.apply_envelope_edits(fuzz.seed_envelopes(metric),
                                                    fuzz.envelope_plan_of(fields)), "null")]
        for codec in fuzz.CODECS:
            for kind in (seeds, envelope_seeds):
                data, layout = kind[f"{metric} {codec}"]
                damaged_files.append((fuzz.apply(data, layout, plan), codec))
        for damaged, codec in damaged_files:
            if args.memory_every and totals["cases"] % args.memory_every == 0:
                read, accepted, dead = fuzz.check_with_memory(damaged, codec)
            else:
                read, accepted, dead = fuzz.check(damaged)
            totals["cases"] += 1
            totals["read"] += read
            totals["accepted"] += accepted
            totals["dead"] += dead

    if args.seed is not None:
        case = seed(args.seed)(case)
    print(f"{len(seeds)} seed files ({', '.join(sorted(seeds))}) and as many of envelopes; "
          f"{args.cases:,} cases asked")
    start = time.perf_counter()
    case()
    elapsed = time.perf_counter() - start
    print(f"{totals['cases']:,} cases in {elapsed:.1f} s: "
          f"{totals['cases'] / elapsed:,.0f} cases/s; "
          f"records read {totals['read']:,} = accepted {totals['accepted']:,} + dead-lettered "
          f"{totals['dead']:,}; no failure")


if __name__ == "__main__":
    main()
