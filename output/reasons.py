"""Moved to `ldp_telemetry.ldp.engine.reasons` in 0.3; kept importable here for one release.

Beam pickles `Reason` inside dead letters under this module's name in a running streaming job,
so the names resolve from here until 0.4. New code imports the engine module.
"""
from ldp_telemetry.ldp.engine.reasons import UNATTRIBUTED_REASONS, Reason  # noqa: F401
