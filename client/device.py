"""A device's memoization: its secret and the permanent responses it holds.

    device = DeviceMemo.create("device.json")         # once: a new secret and an empty state
    device = DeviceMemo.open("device.json")           # every later start
    reports = encode_many(config, values, rng, device=device)

A memoized metric's permanent response (PRR) is a pure function of the device secret, the metric,
the configuration fingerprint and the value (ldp_telemetry.ldp.config.memoize: HMAC-SHA-256, then
SHAKE-256), so it is the same after a restart and differs between devices without storing it.
Anyone holding the secret can recompute every PRR and undo ε∞: keep it on the device only.

What *is* state is the list of distinct PRR items (values; hash buckets for local hashing) a
device has used per configuration: a metric's `max_values` bounds its length, which is what
bounds the lifetime ε (ldp_telemetry.ldp.config.budget). Once the list is full, a new item gets the
metric's `on_limit`: "repeat" (the default) reports the instantaneous response of the last PRR in
the list (what is sent does not depend on the new value); "stop" withholds the report, which
reveals that the new value is none of the memoized ones.

The state file (`state_path`; docs/client.md "What the device must keep"):

- **Persist before use.** A new item is written durably (unique temporary name, file fsynced,
  renamed, folder fsynced: client.durable) before its PRR is returned; when the save fails,
  `MemoStateError` is raised, nothing is reported and the item is not held in memory either.
  A state read from the file that this object did not save itself (another process's, or its
  own save whose folder sync failed after the rename) is fsynced, file and folder, before any
  of its items is used. A save killed before its rename leaves its temporary file; the next memo to
  open the state removes it, under the lock.
- **One writer at a time.** Every new item is decided under an exclusive lock (`NAME.lock`,
  fcntl): the state is re-read, verified, extended and written while it is held, so two
  processes of one device cannot both add an item against the same old list.
- **Bound to the secret.** The file carries an HMAC-SHA-256 under a key derived from the secret
  (ldp_telemetry.ldp.config.memoize.state_mac) and a counter raised on every save. A file of another
  secret, an edited file, a file without a MAC (format 1, e.g. ``{"format": 1, "items": {}}``)
  and a file whose counter is below one this object (or `min_counter`) has seen are refused.
- **Missing is an error.** A missing state file is refused unless the caller declares a new
  device identity (`new_identity=True`, or `DeviceMemo.create`, which draws a fresh secret):
  a secret that already reported with a lost state would start its budget again.
  `DeviceMemo.create`/`open` keep the secret *in* the state file, so one cannot be lost without
  the other.

What a MAC and a counter cannot detect: a whole older copy of a valid file (a restored backup)
restored between two runs, unless the caller keeps `counter` somewhere that survives and passes
it back as `min_counter`; and a device that loses its secret and starts a new identity (fresh
secret, fresh PRRs: the bound holds per secret, not per person). Without any state, each value's
PRR is still fixed by the secret, so a device never reveals more than `prr_items` distinct PRRs
(d; g for local hashing): `needs_state(config)` says whether `max_values` is below that.
"""
from __future__ import annotations

import binascii
import contextlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

import numpy as np

from ldp_telemetry.client.durable import locked, remove_temporaries, settle, write_durably
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.memoize import (REPEAT, Memoization, secret_problem, state_mac,
                                              words_for)
from ldp_telemetry.ldp.engine.batches import clip
from ldp_telemetry.ldp.protocols.memoized import TwoStage

if TYPE_CHECKING:
    from ldp_telemetry.ldp.config.registry import MetricConfig

#: Version of the state file's format (1: no MAC and no counter, refused).
STATE_FORMAT = 2
#: Bytes of the secret `DeviceMemo.create` draws.
NEW_SECRET_BYTES = 32
#: Largest state file read, in bytes: MAX_MEMO_VALUES items of one configuration take at most
#: about 150 MB of JSON. A larger file is refused (never reset).
MAX_STATE_BYTES = 256 << 20
_FIELDS = {"format", "counter", "items", "mac", "secret"}


class MemoStateError(InputError):
    """The memo state is missing, cannot be trusted, or cannot be saved (field ``state_path``):
    the lifetime bound depends on it, so it is never reset or skipped silently."""

    def __init__(self, message: str, field: str | None = "state_path"):
        super().__init__(message, field)


class DeviceMemo:
    """One device's secret and its memoized items (see the module docstring).

    `state_path`: where the items are kept (None: only for this object's life, as a simulation
    does). `new_identity`: the secret has never reported, so a missing state file is created
    (an existing one is then an error). `min_counter`: the lowest save counter the caller knows
    the state reached (from storage that survives the state file), to detect a restored copy.
    """

    def __init__(self, secret: bytes, state_path: str | os.PathLike | None = None, *,
                 new_identity: bool = False, min_counter: int = 0):
        problem = secret_problem(secret)
        if problem:
            raise InputError(f"device secret {problem}", "secret")
        if not _is_count(min_counter):
            raise InputError(f"min_counter must be a non-negative integer, got {min_counter!r}",
                             "min_counter")
        self._secret = bytes(secret)
        self.state_path = None if state_path is None else _real(state_path)
        self._embedded = False  # the state file also holds the secret (create / open)
        self._counter = min_counter
        self._settled: int | None = None  # the counter of the state known durable on disk
        self._items: dict[str, list[int]] = {}
        self._mutex = threading.Lock()
        self._responses: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self._item_of: dict[tuple[str, int], int] = {}  # (configuration, value) -> PRR item
        if self.state_path is not None:
            self._start(new_identity)

    @classmethod
    def create(cls, path: str | os.PathLike) -> DeviceMemo:
        """A new device identity: a fresh secret (`secrets.token_bytes(32)`) written with an
        empty state to `path`, which must not exist. Keep the file with the device's credentials:
        it holds the secret."""
        memo = cls(secrets.token_bytes(NEW_SECRET_BYTES))
        memo.state_path, memo._embedded = _real(path), True
        memo._start(new_identity=True)
        return memo

    @classmethod
    def open(cls, path: str | os.PathLike, *, min_counter: int = 0) -> DeviceMemo:
        """The device whose secret and state `DeviceMemo.create` wrote to `path`."""
        document = _read(Path(path))
        if document is None:
            raise MemoStateError(
                f"device file {path} is missing: its secret and its memo state are gone "
                "together. DeviceMemo.create starts a new device identity (a fresh secret)")
        try:
            secret = binascii.unhexlify(document["secret"])
        except (KeyError, TypeError, ValueError):
            raise MemoStateError(f"{path} holds no device secret: open it with "
                                 "DeviceMemo(secret, state_path)") from None
        return cls(secret, path, min_counter=min_counter)

    def __repr__(self) -> str:  # never the secret
        return f"DeviceMemo(state_path={self.state_path!r})"

    @property
    def counter(self) -> int:
        """How many saves the state has had (keep it where it survives to pass as
        `min_counter`)."""
        return self._counter

    @staticmethod
    def needs_state(config: MetricConfig) -> bool:
        """Whether `config`'s lifetime bound needs the state: `max_values` below the distinct
        PRRs the protocol can produce (d; g for local hashing), which bound it without state."""
        memo, protocol = config.memoize, config.protocol
        assert memo is not None and isinstance(protocol, TwoStage), "a memoized metric"
        return memo.max_values is not None and memo.max_values < protocol.prr_items

    def items(self, config: MetricConfig) -> list[int]:
        """The PRR items this device holds for `config`, in the order first used."""
        return list(self._items.get(_key(config), ()))

    def permanent_response(self, config: MetricConfig, point: int) -> dict[str, np.ndarray] | None:
        """The PRR columns (one row) of the domain index `point` under the memoized `config`;
        None when the report is withheld (`max_values` reached and `on_limit` "stop").
        Raises MemoStateError when a new item cannot be saved (nothing is then held)."""
        protocol = config.protocol
        assert isinstance(protocol, TwoStage), "a memoized metric"
        words = words_for(self._secret, config)
        key = _key(config)
        item = self._item_of.get((key, int(point)))
        if item is None:  # local hashing derives the bucket from the keyed seed: once per value
            item = self._item_of[key, int(point)] = protocol.prr_item(int(point), words)
        if item not in self._items.get(key, ()):
            item = self._admit(key, item, config.memoize)
            if item is None:
                return None
        cached = self._responses.get((key, item))
        if cached is None:
            cached = self._responses[key, item] = protocol.permanent_response(item, words)
        return cached

    def _admit(self, key: str, item: int, memo: Memoization | None) -> int | None:
        """The item to report for a new `item`: itself once durably saved, the last held item
        ("repeat") or None ("stop") when the list is full. With a state file it is decided on
        the state as saved, under the lock."""
        if self.state_path is None:  # in memory only: nothing to read or save
            with self._mutex:
                return self._choose(key, item, memo)
        with self._lock():
            self._adopt(_read(self.state_path))
            return self._choose(key, item, memo)

    def _choose(self, key: str, item: int, memo: Memoization | None) -> int | None:
        held = self._items.get(key, [])
        if item in held:  # another process (or thread) of this device added it meanwhile
            return item
        assert memo is not None, "a memoized metric"
        if memo.max_values is not None and len(held) >= memo.max_values:
            return held[-1] if memo.on_limit == REPEAT else None
        if self.state_path is None:
            self._items.setdefault(key, []).append(item)
            return item
        items = {**self._items, key: [*held, item]}
        self._save(items, self._counter + 1)  # raises MemoStateError: nothing is then held
        self._items, self._counter = items, self._counter + 1
        self._settled = self._counter
        return item

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """This object's mutex, then the state file's exclusive lock `NAME.lock`."""
        assert self.state_path is not None, "only a memo with a state file locks it"
        with self._mutex, contextlib.ExitStack() as held:
            try:
                held.enter_context(locked(self.state_path.with_name(self.state_path.name
                                                                    + ".lock")))
            except OSError as error:
                raise MemoStateError(f"memo state {self.state_path} cannot be locked ({error})"
                                     ) from None
            yield

    def _start(self, new_identity: bool) -> None:
        assert self.state_path is not None, "only a memo with a state file starts from it"
        with self._lock():
            try:  # a writer killed mid-save left them; every writer holds this lock
                remove_temporaries(self.state_path)
            except OSError as error:
                raise MemoStateError(f"memo state {self.state_path}: its folder cannot be "
                                     f"cleaned of a killed save's temporary files ({error})"
                                     ) from None
            document = _read(self.state_path)
            if new_identity:
                if document is not None:
                    raise MemoStateError(
                        f"memo state {self.state_path} already exists: a new device identity "
                        "must not replace the state of one that has reported")
                self._save({}, self._counter, exclusive=True)
                self._settled = self._counter
                return
            if document is None:
                raise MemoStateError(
                    f"memo state {self.state_path} is missing. It bounds the lifetime privacy "
                    "of this secret's reports, so it is not reset silently: pass "
                    "new_identity=True only for a secret that has never reported")
            self._adopt(document)

    def _adopt(self, document: dict | None) -> None:
        """Take a verified state read from the file (None: the file is gone)."""
        if document is None:
            raise MemoStateError(f"memo state {self.state_path} disappeared while in use; it "
                                 "is not reset silently")
        mac = document.pop("mac", None)
        if document.get("format") != STATE_FORMAT or not isinstance(mac, str) or \
                not mac.isascii():
            raise MemoStateError(
                f"memo state {self.state_path} is not format {STATE_FORMAT} with a MAC (format "
                f"{clip(repr(document.get('format')), 40)}): an unauthenticated state cannot "
                "bound the lifetime privacy, so it is refused")
        if set(document) - _FIELDS or not hmac.compare_digest(
                mac, state_mac(self._secret, _canonical(document)).hex()):
            raise MemoStateError(f"memo state {self.state_path} was not written with this "
                                 "device's secret, or was altered: it is refused")
        counter, items = document.get("counter"), document.get("items")
        if not _is_count(counter) or not isinstance(items, dict) or not all(
                isinstance(v, list) and all(_is_count(i) for i in v) for v in items.values()):
            raise MemoStateError(f"memo state {self.state_path} has a malformed counter or "
                                 "items")
        if counter < self._counter:
            raise MemoStateError(
                f"memo state {self.state_path} was rolled back: its save counter is {counter}, "
                f"below {self._counter} already seen; an older state would allow values "
                "already counted against the lifetime bound again")
        lost = [key for key, held in self._items.items() if items.get(key, [])[:len(held)] != held]
        if lost:  # items only grow: a state without ones this memo held was restarted or replaced
            raise MemoStateError(
                f"memo state {self.state_path} no longer holds items this memo held (of "
                f"{clip(lost[0], 80)!r}): it was replaced by another state of this secret "
                "(a new identity over a secret that had reported?), so it is refused")
        if counter != self._settled:  # written by another object, or a save that failed late
            assert self.state_path is not None, "a document was read from the state file"
            try:  # persist before use: what is read may not be durable yet (module docstring)
                settle(self.state_path)
            except OSError as error:
                raise MemoStateError(f"memo state {self.state_path} cannot be made durable "
                                     f"({error}); its items are not used until it is") from None
        self._embedded = "secret" in document
        self._items, self._counter = {str(k): list(v) for k, v in items.items()}, counter
        self._settled = counter

    def _save(self, items: dict, counter: int, exclusive: bool = False) -> None:
        if self.state_path is None:
            return
        document = {"format": STATE_FORMAT, "counter": counter, "items": items}
        if self._embedded:
            document["secret"] = self._secret.hex()
        document["mac"] = state_mac(self._secret, _canonical(document)).hex()
        try:
            write_durably(self.state_path, _canonical(document) + b"\n", exclusive=exclusive)
        except FileExistsError:
            raise MemoStateError(f"memo state {self.state_path} already exists: a new device "
                                 "identity must not replace one that has reported") from None
        except OSError as error:
            raise MemoStateError(f"memo state {self.state_path} cannot be saved ({error}); no "
                                 "report is made with a permanent response that is not "
                                 "saved") from None


def _canonical(document: dict) -> bytes:
    """The bytes the MAC covers (and the file holds): sorted keys, no spaces, ASCII."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode("ascii")


def _real(path: str | os.PathLike) -> Path:
    """`path` with its symlinks resolved: a save renames over the file itself, never a link to it
    (which would fork the state into two files, each with its own lock and its own budget)."""
    return Path(os.path.realpath(path))


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read(path: Path) -> dict | None:
    """The state document at `path` (None when there is no file), not yet verified."""
    try:
        with open(path, "rb") as handle:  # read(n) reserves n bytes: ask for the file's size
            size = min(os.fstat(handle.fileno()).st_size, MAX_STATE_BYTES)
            data = handle.read(size + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise MemoStateError(f"memo state {path} cannot be read ({error})") from None
    if len(data) > MAX_STATE_BYTES:
        raise MemoStateError(f"memo state {path} exceeds {MAX_STATE_BYTES} bytes "
                             "(MAX_STATE_BYTES)")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:  # Recursion: deep nesting
        raise MemoStateError(f"memo state {path} cannot be read ({error}); it bounds the "
                             "device's lifetime privacy, so it is not reset silently") from None
    if not isinstance(document, dict):
        raise MemoStateError(f"memo state {path} is not a JSON object; it is refused")
    return document


def _key(config: MetricConfig) -> str:
    return f"{config.name}/{config.fingerprint.hex()}"


def memoized_columns(config: MetricConfig, points: np.ndarray, devices: Iterable[DeviceMemo],
                     rng: np.random.Generator
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
    assert isinstance(protocol, TwoStage), "a memoized metric"
    if not rows:
        empty = protocol.perturb(np.zeros(0, dtype=np.int64), rng)
        return empty, kept
    prr = {name: np.concatenate([row[name] for row in rows]) for name in rows[0]}
    return protocol.instantaneous_response(prr, rng), kept
