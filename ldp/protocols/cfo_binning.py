"""CFO with binning ([Li20] §4.1): a frequency oracle over the B buckets of [0, 1].

The client puts its value in one of B equal buckets and reports the bucket with GRR (`cfo-grr`)
or OLH (`cfo-olh`) at the full ε; the payload, its validity rule and the server's statistic are
the frequency oracle's own. The estimator (`norm-sub`) takes the unbiased support-set estimate
and projects it onto the probability simplex with Norm-Sub ([Wang20] journal §3), as [Li20]
§4.1 does; within a bucket the mass is spread uniformly. [Li20] §4.1 chooses GRR or OLH by the lower
variance at ε and d; here the registry names it (`ldp plan` compares them).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from ldp_telemetry.ldp.base.errors import RegistryError
from ldp_telemetry.ldp.protocols.base import Columns, FrequencyOracle
from ldp_telemetry.ldp.protocols.grr import GRR
from ldp_telemetry.ldp.protocols.noise import SupportNoise
from ldp_telemetry.ldp.protocols.numeric import NumericProtocol, unit_buckets
from ldp_telemetry.ldp.protocols.olh import OLH


class CfoBinning(NumericProtocol):
    """Bucketise, then report the bucket with the frequency oracle `oracle`."""

    oracle: ClassVar[type[FrequencyOracle]]
    estimators: ClassVar[tuple[str, ...]] = ("norm-sub",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.output_buckets not in (None, self.d):
            raise RegistryError(f"output_buckets of {self.name} is the number of buckets, "
                                f"{self.d}, got {self.output_buckets}", "domain.output_buckets")
        object.__setattr__(self, "output_buckets", self.d)

    @property
    def inner(self) -> FrequencyOracle:
        return self.oracle(epsilon=self.epsilon, d=self.d)

    def noise(self, n: int) -> SupportNoise:
        return self.inner.noise(n)

    def support_counts(self, statistic: np.ndarray) -> np.ndarray:
        return self.inner.support_counts(statistic)

    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return self.inner.perturb(unit_buckets(values, self.d), rng)

    def payload_bytes(self) -> int:
        return self.inner.payload_bytes()

    def payloads_to_avro(self, columns: Columns) -> Iterator[dict]:
        return self.inner.payloads_to_avro(columns)

    def payloads_from_avro(self, payloads: list[dict]
                               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.inner.payloads_from_avro(payloads)

    def check_payloads(self, columns: Columns) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return self.inner.check_payloads(columns)

    def new_statistic(self) -> np.ndarray:
        return self.inner.new_statistic()

    def accumulate(self, statistic: np.ndarray, columns: Columns) -> None:
        self.inner.accumulate(statistic, columns)

    def resample(self, estimate: np.ndarray, n: int, rng: np.random.Generator, size: int
                 ) -> np.ndarray:
        """`size` statistics drawn as if n users held the distribution `estimate`.

        GRR: the report histogram is Multinomial(n, f p* + (1 − f) q*). OLH: each support
        count is Binomial(n, f_v p* + (1 − f_v) q*), drawn independently (the local hash makes
        the support indicators of distinct values pairwise independent, README "Protocols").
        """
        p, q = self.inner.p_star, self.inner.q_star
        support = np.clip(estimate * p + (1.0 - estimate) * q, 0.0, 1.0)
        if self.oracle is GRR:
            return rng.multinomial(int(n), support / support.sum(), size=size)
        return rng.binomial(int(n), support, size=(size, len(support)))


class CfoGrr(CfoBinning):
    name: ClassVar[str] = "cfo-grr"
    oracle: ClassVar[type[FrequencyOracle]] = GRR
    payload_record: ClassVar[str] = GRR.payload_record
    payload_rule: ClassVar[str] = GRR.payload_rule
    server_cost: ClassVar[str] = GRR.server_cost


class CfoOlh(CfoBinning):
    name: ClassVar[str] = "cfo-olh"
    oracle: ClassVar[type[FrequencyOracle]] = OLH
    payload_record: ClassVar[str] = OLH.payload_record
    payload_rule: ClassVar[str] = OLH.payload_rule
    server_cost: ClassVar[str] = OLH.server_cost
