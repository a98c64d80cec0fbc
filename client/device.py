"""A device's memoization: its secret and the permanent responses it holds.

    device = DeviceMemo(secret, state_path="memo-state.json")   # secret: 16..1024 bytes
    reports = encode_many(config, values, rng, device=device)

A memoized metric's permanent response (PRR) is a pure function of the device secret, the metric,
the configuration fingerprint and the value (ldp_telemetry.ldp.memoize: HMAC-SHA-256, then
SHAKE-256), so it is the same after a restart and differs between devices without storing it.
Keep the secret on the device only (generate it once with `secrets.token_bytes(32)`, store it
where the device keeps credentials); anyone holding it can recompute every PRR and undo ε∞.

What *is* state is the list of distinct PRR items (values; hash buckets for local hashing) a
device has used per configuration: a metric's `max_values` bounds its length, which is what
bounds the lifetime ε (ldp_telemetry.ldp.budget). With `state_path` it is kept in that JSON file
(written to a temporary name and renamed, on every new item); without it, only for this object's
life. Once the list is full, a new item gets the metric's `on_limit`: "repeat" (the default)
reports the instantaneous response of the last PRR in the list (what is sent does not depend on
the new value, so privacy stays bounded; the estimate counts the device at its old value); "stop"
withholds the report, which reveals that the new value is none of the memoized ones.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ldp_telemetry.ldp.errors import InputError
from ldp_telemetry.ldp.memoize import REPEAT, secret_problem, words_for

#: Version of the state file's format.
STATE_FORMAT = 1


class DeviceMemo:
    """One device's secret and its memoized items (see the module docstring)."""

    def __init__(self, secret: bytes, state_path: str | os.PathLike | None = None):
        problem = secret_problem(secret)
        if problem:
            raise InputError(f"device secret {problem}", "secret")
        self._secret = bytes(secret)
        self.state_path = None if state_path is None else Path(state_path)
        self._items: dict[str, list[int]] = self._load()
        self._responses: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self._item_of: dict[tuple[str, int], int] = {}  # (configuration, value) -> PRR item

    def __repr__(self) -> str:  # never the secret
        return f"DeviceMemo(state_path={self.state_path!r})"

    def items(self, config) -> list[int]:
        """The PRR items this device holds for `config`, in the order first used."""
        return list(self._items.get(_key(config), ()))

    def permanent_response(self, config, point: int) -> dict[str, np.ndarray] | None:
        """The PRR columns (one row) of the domain index `point` under the memoized `config`;
        None when the report is withheld (`max_values` reached and `on_limit` "stop")."""
        protocol, memo = config.protocol, config.memoize
        words = words_for(self._secret, config)
        key = _key(config)
        item = self._item_of.get((key, int(point)))
        if item is None:  # local hashing derives the bucket from the keyed seed: once per value
            item = self._item_of[key, int(point)] = protocol.prr_item(int(point), words)
        held = self._items.setdefault(key, [])
        if item not in held:
            if memo.max_values is not None and len(held) >= memo.max_values:
                if memo.on_limit != REPEAT:
                    return None
                item = held[-1]
            else:
                held.append(item)
                self._save()
        cached = self._responses.get((key, item))
        if cached is None:
            cached = self._responses[key, item] = protocol.permanent_response(item, words)
        return cached

    def _load(self) -> dict[str, list[int]]:
        if self.state_path is None or not self.state_path.exists():
            return {}
        try:
            document = json.loads(self.state_path.read_text(encoding="utf-8"))
            items = document["items"]
            if document.get("format") != STATE_FORMAT or not isinstance(items, dict):
                raise ValueError("unknown format")
            return {str(k): [int(i) for i in v] for k, v in items.items()}
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise InputError(f"memo state {self.state_path} cannot be read ({error}); it bounds "
                             "the device's lifetime privacy, so it is not reset silently",
                             "state_path") from None

    def _save(self) -> None:
        if self.state_path is None:
            return
        temporary = self.state_path.with_name(self.state_path.name + ".tmp")
        temporary.write_text(json.dumps({"format": STATE_FORMAT, "items": self._items},
                                        sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.state_path)


def _key(config) -> str:
    return f"{config.name}/{config.fingerprint.hex()}"


def memoized_columns(config, points: np.ndarray, devices, rng: np.random.Generator
                     ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The reports of a memoized `config`: the PRR of each point by its device (`devices`: one
    DeviceMemo per point), then one instantaneous response per report drawn from `rng` in a
    single call. Returns (payload columns of the kept reports, mask of the kept points)."""
    rows, kept = [], np.zeros(len(points), dtype=bool)
    for position, (point, device) in enumerate(zip(np.asarray(points).tolist(), devices,
                                                   strict=True)):
        response = device.permanent_response(config, point)
        if response is not None:
            rows.append(response)
            kept[position] = True
    protocol = config.protocol
    if not rows:
        empty = protocol.perturb(np.zeros(0, dtype=np.int64), rng)
        return empty, kept
    prr = {name: np.concatenate([row[name] for row in rows]) for name in rows[0]}
    return protocol.instantaneous_response(prr, rng), kept
