"""How `ldp run` stops on Ctrl-C (SIGINT) and SIGTERM.

* A live run (`StopSignals`): both signals set an event the run's loop watches; the run then
  closes its stream, Beam fires every open window's final pane, and the summary is printed. The
  handlers stay in place until the run has ended, and `ldp run` then ignores both while it
  exits, so the SIGTERM a wrapper script sends on top of the terminal's SIGINT (demo/live.sh)
  can neither cut the last panes short nor turn a complete run's exit status into 143.
* A batch run on a runner in this process (`interrupt_batch_on_sigint`): Ctrl-C prints one
  line, what was read and what was written, and ends the process with status 130. Beam turns a
  KeyboardInterrupt inside a step into a RuntimeError and logs it with its traceback, and its
  threads would print more at exit: the process ends at once instead. Nothing of a batch run's
  files exists before its end; what the store holds is whole transactions (an open one is
  rolled back by the database).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module loads before Beam: `ldp run --follow` takes Ctrl-C at once
    from ldp_telemetry.pipelines.job import EstimateJob

#: `ldp run`'s exit status when interrupted (128 + SIGINT, as shells report it).
INTERRUPTED = 130

#: How long the interrupted line waits to mark the run interrupted in a store another thread of
#: this process may hold (its transaction is rolled back when the process ends).
INTERRUPT_STORE_WAIT_S = 1.0

#: Runners that run the job in this process, where Ctrl-C reaches the job.
LOCAL_RUNNERS = ("FnApiRunner", "BundleBasedDirectRunner")


class StopSignals:
    """From construction until `restore()`: SIGINT and SIGTERM set `event` instead of ending the
    process (only the main thread may install handlers; elsewhere nothing is installed)."""

    def __init__(self):
        self.event = threading.Event()
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._stop)
                              for sig in (signal.SIGINT, signal.SIGTERM)}

    def _stop(self, signum, frame) -> None:
        self.event.set()

    def ignore(self) -> None:
        """Ignore both signals from now on: for a process whose run has ended and which is
        exiting (Python resets its own handlers to the default early in its exit, where a late
        SIGTERM would end it with status 143 after a complete run; an ignored signal stays
        ignored)."""
        if self._previous:
            for sig in self._previous:
                signal.signal(sig, signal.SIG_IGN)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}


def interrupted_line(job: EstimateJob) -> str:
    """What an interrupted batch run had read and written, in one line."""
    from ldp_telemetry.ldp.base.errors import StoreError
    from ldp_telemetry.pipelines.store_runs import keeps_runs
    from ldp_telemetry.store.sql import open_store
    from ldp_telemetry.transforms.progress import PROGRESS
    read = (f"read {PROGRESS.records:,} report(s) from {PROGRESS.files:,} of "
            f"{len(job.files):,} input file(s)")
    line = (f"ldp run: interrupted: {read}; nothing written to {job.output} (a batch run writes "
            f"its files when it ends)")
    if keeps_runs(job.store) and job.store_run:
        try:
            with open_store(job.store) as store:
                panes = store.run_panes(job.store_run)
                store.finish_run(job.store_run, "interrupted",
                                 lock_wait_s=INTERRUPT_STORE_WAIT_S)
            line += f"; store: run {job.store_run} wrote {panes:,} pane(s), marked interrupted"
        except StoreError as error:
            line += f"; store: run {job.store_run} not marked interrupted ({error})"
    return line


@contextmanager
def interrupt_batch_on_sigint(current_job: Callable[[], EstimateJob], runner_name: str
                              ) -> Iterator[Callable[[], AbstractContextManager[None]]]:
    """While the block runs a batch job on a runner of this process: Ctrl-C prints
    `interrupted_line(current_job())` (the job as it is then: with its store run once it has
    one) to stderr and ends the process with status `INTERRUPTED`, no traceback. Other runners
    (and other threads) keep Python's KeyboardInterrupt.

    Yields `held`: a Ctrl-C that comes inside `with held():` takes effect when that block ends,
    for a step whose effect and the job `current_job` returns change together (the store run's
    row is committed, then the job that names it is assigned: a Ctrl-C between the two would
    leave the row "running" and the line without it). Python runs signal handlers in the main
    thread between statements, so the hold is exact."""
    if runner_name not in LOCAL_RUNNERS \
            or threading.current_thread() is not threading.main_thread():
        yield nullcontext
        return
    holding, pending = [False], [False]

    def end() -> None:
        print(interrupted_line(current_job()), file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(INTERRUPTED)  # Beam's threads cannot be stopped: end here, nothing half-done

    def interrupted(signum, frame):
        if holding[0]:
            pending[0] = True
            return
        end()

    @contextmanager
    def held() -> Iterator[None]:
        holding[0] = True
        try:
            yield
        finally:
            holding[0] = False
            if pending[0]:
                end()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
