"""Moved to `ldp_telemetry.ldp.engine.batches` in 0.3; kept importable here for one release.

Beam pickles `ReportBatch` and `DeadLetter` under this module's name in a running streaming
job's state, so the names resolve from here until 0.4. New code imports the engine module.
"""
from ldp_telemetry.ldp.engine.batches import (CUT_MARK, MAX_DETAIL_CHARS, REPORT_ID,  # noqa: F401
                                              DeadLetter, ReportBatch, clip)
