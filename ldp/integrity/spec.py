"""The integrity settings of a metric: the registry field `integrity`, its defaults and limits.

    "integrity": {"top_k": 10, "sample": 65536, "sample_bytes": 2097152, "alpha": 0.01,
                  "history": 4}
    "integrity": false        (no accumulator, no section in the records)

Settings never enter the configuration fingerprint: they change what the server computes
about reports, not the reports.
"""
from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.base.validation import is_int, is_number

#: Largest top-K of the co-support and jump tests (K(K-1)/2 pairs are tested).
MAX_TOP_K = 64
#: Largest report sample per (window, version).
MAX_SAMPLE = 1 << 20
#: Largest sample size in bytes (rows x bytes per sampled row) a metric may ask for.
MAX_SAMPLE_BYTES = 256 << 20
#: Largest number of earlier windows the jump test averages.
MAX_HISTORY = 64
#: The tests a window's flag is the union of (each is run at alpha / TESTS, Bonferroni).
TESTS = ("sum", "support_size", "co_support", "jump")


@dataclass(frozen=True)
class IntegritySpec:
    """`top_k` values of the co-support and jump tests; `sample` reports kept per window and
    version (at most `sample_bytes` of them); `alpha` the window's false-alarm level (each of
    the TESTS at alpha / len(TESTS)); `history` earlier windows of the jump test's baseline;
    `key` the secret of the report sample's priorities (ldp.integrity.sample): drawn at random
    for every spec, never read from or written to a registry file, and not compared."""

    top_k: int = 10
    sample: int = 65536
    sample_bytes: int = 2 << 20
    alpha: float = 0.01
    history: int = 4
    key: int = field(default_factory=lambda: secrets.randbits(64), compare=False, repr=False)

    @property
    def level(self) -> float:
        """The level each statistic is flagged at: alpha / len(TESTS)."""
        return self.alpha / len(TESTS)

    def sample_rows(self, row_bytes: int) -> int:
        """Rows kept for a protocol whose sampled row takes `row_bytes` (8 of them the
        priority): `sample`, or fewer so that they fit in `sample_bytes`; at least 1."""
        return max(1, min(self.sample, self.sample_bytes // max(1, row_bytes)))

    def as_dict(self) -> dict:
        return {"top_k": self.top_k, "sample": self.sample, "sample_bytes": self.sample_bytes,
                "alpha": self.alpha, "history": self.history}


DEFAULT = IntegritySpec()

_LIMITS = {"top_k": (2, MAX_TOP_K), "sample": (16, MAX_SAMPLE),
           "sample_bytes": (1 << 10, MAX_SAMPLE_BYTES), "history": (1, MAX_HISTORY)}


def parse_integrity(value: object, where: str, label: str) -> IntegritySpec | None:
    """The registry field `integrity` (absent: DEFAULT; false: None) -> IntegritySpec.

    RegistryError naming the field (``metrics[0].integrity.top_k``) for anything else."""
    if value is None or value is True:
        return DEFAULT
    if value is False:
        return None
    if not isinstance(value, Mapping):
        raise RegistryError(f"{label}: field 'integrity' must be an object or false, got "
                            f"{value!r}", f"{where}.integrity")
    known = set(DEFAULT.as_dict())
    unknown = sorted(set(value) - known)
    if unknown:
        raise RegistryError(f"{label}: field 'integrity.{unknown[0]}' is not an integrity "
                            f"setting (expected {sorted(known)})",
                            f"{where}.integrity.{unknown[0]}")
    for name, (low, high) in _LIMITS.items():
        if name in value and not (is_int(value[name]) and low <= value[name] <= high):
            raise RegistryError(f"{label}: field 'integrity.{name}' must be an integer in "
                                f"[{low}, {high}], got {value[name]!r}",
                                f"{where}.integrity.{name}")
    alpha = value.get("alpha", DEFAULT.alpha)
    if not (is_number(alpha) and 0 < alpha < 1):
        raise RegistryError(f"{label}: field 'integrity.alpha' must be a number in (0, 1), got "
                            f"{alpha!r}", f"{where}.integrity.alpha")
    return IntegritySpec(**{**DEFAULT.as_dict(), **dict(value), "alpha": float(alpha)})
