"""The 95% error band every reader shows: estimate ± Z95 · standard error."""
from __future__ import annotations

from ldp_telemetry.ldp.estimation.uncertainty import Z95

__all__ = ["Z95", "band95", "half_width95"]


def band95(value: float, std_error: float | None) -> tuple[float | None, float | None]:
    """(lower, upper) of the 95% band; (None, None) when there is no standard error."""
    if std_error is None:
        return None, None
    return value - Z95 * std_error, value + Z95 * std_error


def half_width95(std_error: float | None) -> float | None:
    """Z95 · std_error: the ± of a 95% band (None when there is no standard error)."""
    return None if std_error is None else Z95 * std_error
