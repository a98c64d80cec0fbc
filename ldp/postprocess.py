"""Consistency post-processing (consistency-norm-hyb.txt §3): interim Norm-Sub / Norm-Hyb."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm as _normal

from ldp.estimation import SupportNoise


def _project(f: np.ndarray, mass: float) -> np.ndarray:
    """Norm-Sub: max(f + δ, 0) with δ chosen so the sum is `mass`."""
    if f.size == 0 or mass <= 0:
        return np.zeros_like(f)
    ordered = np.sort(f)[::-1]
    k = np.arange(1, f.size + 1)
    deltas = (mass - np.cumsum(ordered)) / k
    last = np.nonzero(ordered + deltas > 0)[0][-1]
    return np.maximum(f + deltas[last], 0.0)


def norm_sub(f: np.ndarray, noise: SupportNoise) -> np.ndarray:
    return _project(np.asarray(f, float), 1.0)


def norm_hyb(f: np.ndarray, noise: SupportNoise, alpha: float = 2.0) -> np.ndarray:
    f = np.asarray(f, float)
    d = f.size
    if alpha >= d:
        return norm_sub(f, noise)
    threshold = _normal.ppf(1 - alpha / d) * noise.sigma
    keep = f > threshold
    if f[keep].sum() > 1:
        # §3.3: keep only the k highest estimates, k the largest with a sum below 1.
        order = np.flatnonzero(keep)[np.argsort(f[keep], kind="stable")[::-1]]
        k = int(np.argmax(np.cumsum(f[order]) >= 1))
        keep = np.zeros(d, dtype=bool)
        keep[order[:k]] = True
    out = f.copy()
    if keep.sum() == d:
        return norm_sub(f, noise)
    out[~keep] = _project(f[~keep], 1.0 - f[keep].sum())
    return out


METHODS = {"base": lambda f, noise: np.asarray(f, float).copy(), "norm-sub": norm_sub,
           "norm-hyb": norm_hyb}


@dataclass(frozen=True)
class PostprocessSpec:
    method: str = "norm-hyb"
    params: tuple = ()

    @classmethod
    def parse(cls, value) -> "PostprocessSpec":
        if isinstance(value, dict):
            value = dict(value)
            method = value.pop("method", None)
            params = tuple(sorted(value.items()))
        else:
            method, params = value, ()
        method = "base" if method == "none" else method
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; expected one of {sorted(METHODS)}")
        return cls(method, params)

    def apply(self, f, noise):
        if noise.n == 0:
            return np.asarray(f, float).copy()
        return METHODS[self.method](f, noise, **dict(self.params))

    def as_dict(self) -> dict:
        return {"method": self.method, **dict(self.params)}
