"""A device's memo state under hostile conditions: every way issue 29 found to exceed the lifetime
bound (deleted state, failed save then retry, two processes, no fsync, rolled-back file) is
replayed and refused, with the setup it names: `max_values` 2 and ε∞ 4 (lifetime ε 8)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from ldp_telemetry.client import encode_many
from ldp_telemetry.client.device import STATE_FORMAT, DeviceMemo, MemoStateError
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.memoize import hkdf_sha256
from ldp_telemetry.ldp.config.registry import parse_registry

SECRET = bytes(range(32))
OTHER = bytes(range(1, 33))


def config(protocol="grr", d=6, max_values=2, on_limit="repeat"):
    memo = {"lifetime_epsilon": 4.0, "on_limit": on_limit}
    if max_values is not None:
        memo["max_values"] = max_values
    entry = {"name": f"m.{protocol}", "protocol": protocol, "epsilon": 1.0,
             "domain": {"size": d}, "memoize": memo}
    return parse_registry({"metrics": [entry]})[entry["name"]]


def reported_items(metric, device, values) -> set:
    """The distinct PRR items `device` reports for `values`, through the client."""
    out = set()
    for value in values:
        reports = encode_many(metric, [value], np.random.default_rng(value), device=device)
        if len(reports):
            out.update(device.items(metric))
    return out


def test_hkdf_is_rfc_5869():
    """RFC 5869 test cases 1 and 3 (SHA-256)."""
    ikm = bytes([0x0B]) * 22
    assert hkdf_sha256(ikm, bytes(range(0xF0, 0xFA)), 42, salt=bytes(range(13))).hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    assert hkdf_sha256(ikm, b"", 42).hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")


def test_a_deleted_state_file_is_refused_not_reset(tmp_path):
    metric, state = config(), tmp_path / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    assert reported_items(metric, device, [0, 1, 2]) == {0, 1}  # 2 is reported as 1
    state.unlink()
    with pytest.raises(MemoStateError, match="missing.*not reset silently"):
        DeviceMemo(SECRET, state)
    with pytest.raises(MemoStateError, match="disappeared"):  # and in the running process
        device.permanent_response(metric, 3)
    assert device.items(metric) == [0, 1]
    # only an explicit new identity starts again; it refuses a state that exists
    DeviceMemo(SECRET, state, new_identity=True)
    with pytest.raises(MemoStateError, match="already exists"):
        DeviceMemo(SECRET, state, new_identity=True)


@contextlib.contextmanager
def read_only(folder: Path):
    """`folder` made read-only for this process: mode 0555, or (as root, whom modes do not stop)
    the immutable attribute; skips when neither stops a write here."""
    folder.chmod(0o555)
    immutable = False
    try:
        probe = folder / "probe"
        try:
            probe.write_bytes(b"")
        except PermissionError:
            pass
        else:
            probe.unlink()
            if shutil.which("chattr") is None or subprocess.run(
                    ["chattr", "+i", str(folder)], capture_output=True).returncode:
                pytest.skip("cannot make a folder read-only for this user here")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def test_a_failed_save_yields_no_report_now_on_retry_or_after_a_restart(tmp_path):
    metric, folder = config(), tmp_path / "device"
    folder.mkdir()
    state = folder / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    assert len(encode_many(metric, [0], np.random.default_rng(0), device=device)) == 1
    with read_only(folder):
        for _attempt in range(2):  # the first try, then a retry in the same process
            with pytest.raises(MemoStateError, match="cannot be saved.*no report"):
                encode_many(metric, [1], np.random.default_rng(1), device=device)
            assert device.items(metric) == [0]
        assert sorted(p.name for p in folder.iterdir()) == ["state.json", "state.json.lock"]
    restarted = DeviceMemo(SECRET, state)
    assert restarted.items(metric) == [0]
    assert reported_items(metric, restarted, [1, 2, 3]) == {0, 1}  # never a third PRR


TWO_WRITERS = textwrap.dedent("""
    import json, os, sys, time
    from ldp_telemetry.client.device import DeviceMemo
    from ldp_telemetry.ldp.config.registry import parse_registry
    state, go, first, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    metric = parse_registry({"metrics": [{"name": "m.grr", "protocol": "grr", "epsilon": 1.0,
        "domain": {"size": 200}, "memoize": {"lifetime_epsilon": 4.0, "max_values": limit,
        "on_limit": "stop"}}]})["m.grr"]
    device = DeviceMemo(bytes(range(32)), state)
    while not os.path.exists(go):  # both processes start adding together
        time.sleep(0.001)
    reported = [v for v in range(first, first + 50)
                if device.permanent_response(metric, v) is not None]
    print(json.dumps(reported))
""")


def run_two_writers(tmp_path: Path, limit: int) -> tuple[list, list]:
    state, go = tmp_path / f"state-{limit}.json", tmp_path / f"go-{limit}"
    DeviceMemo(SECRET, state, new_identity=True)
    processes = [subprocess.Popen([sys.executable, "-c", TWO_WRITERS, str(state), str(go),
                                   str(first), str(limit)], stdout=subprocess.PIPE, text=True)
                 for first in (0, 100)]
    go.touch()
    outputs = [json.loads(p.communicate(timeout=120)[0]) for p in processes]
    assert all(p.returncode == 0 for p in processes)
    return outputs, DeviceMemo(SECRET, state).items(config(d=200, max_values=limit,
                                                            on_limit="stop"))


def test_two_processes_of_one_device_lose_no_update_and_share_the_bound(tmp_path):
    """Two real processes on one state file, each adding 50 new values at once."""
    (a, b), held = run_two_writers(tmp_path, limit=1000)
    assert a == list(range(50)) and b == list(range(100, 150))
    assert sorted(held) == a + b  # every update survives: none overwrote the other's
    (a, b), held = run_two_writers(tmp_path, limit=30)
    assert len(a) + len(b) == 30 and sorted(held) == sorted(a + b)  # the bound is shared
    assert not list(tmp_path.glob("*.tmp"))


def test_a_new_item_is_fsynced_file_and_folder_before_its_response(tmp_path, monkeypatch):
    metric, state = config(), tmp_path / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    synced = []
    real_fsync = os.fsync

    def spy(descriptor):  # what is synced, and what the state file holds at that moment
        target = os.readlink(f"/proc/self/fd/{descriptor}")
        synced.append((target, json.loads(state.read_text())["items"]))
        real_fsync(descriptor)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name the synced descriptors")
    monkeypatch.setattr(os, "fsync", spy)
    device.permanent_response(metric, 4)
    key = f"{metric.name}/{metric.fingerprint.hex()}"
    temporary, folder = synced
    assert Path(temporary[0]).parent == tmp_path and Path(temporary[0]).name.startswith(
        "state.json.") and temporary[0].endswith(".tmp")
    assert temporary[1] == {}  # the data is synced under its temporary name, then renamed,
    assert folder == (str(tmp_path), {key: [4]})  # then the folder, holding the new state
    synced.clear()
    device.permanent_response(metric, 4)
    assert synced == []  # a held item is not saved again


def test_a_state_another_writer_renamed_into_place_is_fsynced_before_its_items_are_used(
        tmp_path, monkeypatch):
    """Persist before use also for an item this object reads rather than saves: a save whose
    folder sync failed after its rename (MemoStateError, no report) leaves the item in the file,
    and the retry finds it there; before it is reported, the file and the folder are fsynced."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to name the synced descriptors")
    metric, state = config(), tmp_path / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    real_fsync, synced = os.fsync, []

    def folder_sync_fails(descriptor):
        if os.path.isdir(f"/proc/self/fd/{descriptor}"):
            raise OSError(5, "Input/output error")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", folder_sync_fails)
    with pytest.raises(MemoStateError, match="cannot be saved"):
        device.permanent_response(metric, 4)
    assert device.items(metric) == []  # not held, although the rename took place
    monkeypatch.setattr(os, "fsync", lambda d: (synced.append(os.readlink(f"/proc/self/fd/{d}")),
                                                real_fsync(d)))
    assert device.permanent_response(metric, 4) is not None  # the retry finds it in the file
    assert synced == [str(state), str(tmp_path)]  # made durable before it was reported
    synced.clear()
    other = DeviceMemo(SECRET, state)  # another object (as another process) adds an item
    assert synced == [str(state), str(tmp_path)]  # what it reads at start is settled too
    other.permanent_response(metric, 5)
    synced.clear()
    device.permanent_response(metric, 5)
    assert synced == [str(state), str(tmp_path)] and device.items(metric) == [4, 5]


def test_a_hostile_state_file_is_a_message_not_a_traceback(tmp_path):
    state = tmp_path / "state.json"
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000,
                 '{"counter": ' + "9" * 5000 + "}"):
        state.write_text(text)
        with pytest.raises(MemoStateError, match="cannot be read"):
            DeviceMemo(SECRET, state)
    state.write_text(json.dumps({"format": "x" * 1_000_000, "mac": "00"}))
    with pytest.raises(MemoStateError, match="not format 2 with a MAC") as refused:
        DeviceMemo(SECRET, state)
    assert len(str(refused.value)) < 300  # the file's value is cut, not printed whole
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(InputError, match="min_counter must be a non-negative integer"):
            DeviceMemo(SECRET, state, min_counter=bad)


def test_a_lock_that_cannot_be_taken_is_a_message(tmp_path):
    state = tmp_path / "state.json"
    DeviceMemo(SECRET, state, new_identity=True)
    (tmp_path / "state.json.lock").unlink()
    (tmp_path / "state.json.lock").mkdir()  # what no process can open for writing
    with pytest.raises(MemoStateError, match="cannot be locked"):
        DeviceMemo(SECRET, state)


def test_a_state_above_max_state_bytes_is_refused(tmp_path, monkeypatch):
    import ldp_telemetry.client.device as device_module
    state = tmp_path / "state.json"
    DeviceMemo(SECRET, state, new_identity=True).permanent_response(config(), 0)
    monkeypatch.setattr(device_module, "MAX_STATE_BYTES", state.stat().st_size - 1)
    with pytest.raises(MemoStateError, match="exceeds .* bytes"):
        DeviceMemo(SECRET, state)
    monkeypatch.setattr(device_module, "MAX_STATE_BYTES", state.stat().st_size)
    assert DeviceMemo(SECRET, state).items(config()) == [0]


def test_reading_a_small_state_reserves_no_memory_for_the_largest(tmp_path):
    """`handle.read(MAX_STATE_BYTES + 1)` reserved 256 MiB on every read of a state of a few
    hundred bytes (a MemoryError on a device with little memory or no overcommit)."""
    state = tmp_path / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    device.permanent_response(config(), 0)
    tracemalloc.start()
    try:
        DeviceMemo(SECRET, state).permanent_response(config(), 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # a few KB of state and parsing; nothing near MAX_STATE_BYTES


KILLED_MID_SAVE = textwrap.dedent("""
    import os, signal, sys
    from ldp_telemetry.client.device import DeviceMemo
    from ldp_telemetry.ldp.config.registry import parse_registry
    metric = parse_registry({"metrics": [{"name": "m.grr", "protocol": "grr", "epsilon": 1.0,
        "domain": {"size": 6}, "memoize": {"lifetime_epsilon": 4.0, "max_values": 2}}]})["m.grr"]
    device = DeviceMemo.open(sys.argv[1])
    os.replace = lambda *_: os.kill(os.getpid(), signal.SIGKILL)  # dies between write and rename
    device.permanent_response(metric, 1)
""")


def test_a_save_killed_before_its_rename_leaves_no_temporary_file_behind(tmp_path):
    """A process killed mid-save leaves its temporary file (a copy of the state and the secret);
    the next memo to open the state removes it, under the lock, and nothing else."""
    path = tmp_path / "device.json"
    DeviceMemo.create(path).permanent_response(config(), 0)
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(path)], timeout=120)
    assert killed.returncode == -9
    left = [p.name for p in tmp_path.glob("device.json.*.tmp")]
    assert len(left) == 1 and json.loads((tmp_path / left[0]).read_text())["secret"]
    unrelated = tmp_path / "device.json.backup.tmp"
    unrelated.write_text("kept")
    assert DeviceMemo.open(path).items(config()) == [0]  # the killed save never happened
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "device.json", "device.json.backup.tmp", "device.json.lock"]


def test_a_state_reached_through_a_symlink_is_one_state_with_one_lock(tmp_path):
    """A memo opened through a symlink to the state file and one opened by its real name share
    the file, the lock and the bound; a save renamed over the link instead forked the state into
    two valid files of one secret, and the device showed 3 PRRs under `max_values` 2."""
    metric = config(on_limit="stop")
    real, link = tmp_path / "state.json", tmp_path / "link.json"
    DeviceMemo(SECRET, real, new_identity=True)
    link.symlink_to(real.name)
    through_link, by_name = DeviceMemo(SECRET, link), DeviceMemo(SECRET, real)
    assert through_link.permanent_response(metric, 0) is not None
    assert by_name.permanent_response(metric, 1) is not None
    assert through_link.permanent_response(metric, 2) is None  # the bound is shared
    assert link.is_symlink() and DeviceMemo(SECRET, real).items(metric) == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "state.json",
                                                          "state.json.lock"]


def test_a_state_restarted_under_a_running_memo_is_refused_even_at_its_counter(tmp_path):
    """A state deleted and started again for the same secret (`new_identity=True` misused) that
    reaches the running memo's counter was taken as current: the device then showed 4 PRRs
    under `max_values` 2. A memo's items only grow, so a state without them is refused."""
    metric, state = config(), tmp_path / "state.json"
    running = DeviceMemo(SECRET, state, new_identity=True)
    assert reported_items(metric, running, [0, 1]) == {0, 1}
    state.unlink()
    again = DeviceMemo(SECRET, state, new_identity=True)
    assert reported_items(metric, again, [2, 3]) == {2, 3} and again.counter == running.counter
    with pytest.raises(MemoStateError, match="no longer holds items this memo held"):
        running.permanent_response(metric, 4)
    assert running.items(metric) == [0, 1]


def test_a_rolled_back_or_foreign_state_is_refused(tmp_path):
    metric, state = config(), tmp_path / "state.json"
    device = DeviceMemo(SECRET, state, new_identity=True)
    device.permanent_response(metric, 0)
    older = state.read_bytes()
    device.permanent_response(metric, 1)
    assert device.counter == 2
    state.write_text(json.dumps({"format": 1, "items": {}}))  # the rolled-back file
    with pytest.raises(MemoStateError, match="not format 2 with a MAC"):
        DeviceMemo(SECRET, state)
    with pytest.raises(MemoStateError, match="not format 2 with a MAC"):
        device.permanent_response(metric, 2)
    state.write_bytes(older)  # a valid older copy, restored while the device runs
    with pytest.raises(MemoStateError, match="rolled back.*counter is 1, below 2"):
        device.permanent_response(metric, 2)
    with pytest.raises(MemoStateError, match="rolled back"):  # after a restart, given the counter
        DeviceMemo(SECRET, state, min_counter=2)
    # what the device alone cannot see: a valid older copy restored between two runs
    assert DeviceMemo(SECRET, state).items(metric) == [0]
    document = json.loads(older)
    document["items"] = {k: [] for k in document["items"]}  # edited
    state.write_text(json.dumps(document))
    with pytest.raises(MemoStateError, match="not written with this device's secret, or "
                                             "was altered"):
        DeviceMemo(SECRET, state)
    other = tmp_path / "other.json"
    DeviceMemo(OTHER, other, new_identity=True).permanent_response(metric, 5)
    shutil.copy(other, state)  # another device's state
    with pytest.raises(MemoStateError, match="not written with this device's secret"):
        DeviceMemo(SECRET, state)
    for bad in (b"not json", b"[]", b'{"format": 2, "counter": -1, "items": {}, "mac": "00"}',
                '{"format": 2, "counter": 1, "items": {}, "mac": "\u00e9"}'.encode()):
        state.write_bytes(bad)
        with pytest.raises(MemoStateError):
            DeviceMemo(SECRET, state)
    assert json.loads(other.read_text())["format"] == STATE_FORMAT


def test_a_device_file_keeps_the_secret_and_the_state_together(tmp_path):
    metric, path = config(), tmp_path / "device.json"
    created = DeviceMemo.create(path)
    prr = created.permanent_response(metric, 3)
    opened = DeviceMemo.open(path)
    assert opened.items(metric) == [3] and "secret" not in repr(opened)
    np.testing.assert_array_equal(opened.permanent_response(metric, 3)["value"], prr["value"])
    opened.permanent_response(metric, 4)
    assert DeviceMemo.open(path).items(metric) == [3, 4]  # the secret stays in the file
    with pytest.raises(MemoStateError, match="already exists"):
        DeviceMemo.create(path)
    path.unlink()
    with pytest.raises(MemoStateError, match="secret and its memo state are gone together"):
        DeviceMemo.open(path)
    plain = tmp_path / "plain.json"
    DeviceMemo(SECRET, plain, new_identity=True)
    with pytest.raises(MemoStateError, match="holds no device secret"):
        DeviceMemo.open(plain)


@pytest.mark.parametrize("protocol, bound", [("grr", 40), ("oue", 40), ("olh", None),
                                             ("blh", None), ("rlh", None)])
def test_without_any_state_a_device_holds_at_most_prr_items_permanent_responses(protocol, bound):
    """The stateless bound: every value's PRR is fixed by the secret, so a device whose state is
    lost before every report still shows at most d distinct PRRs (g for local hashing)."""
    metric = config(protocol, d=40, max_values=None)
    g = metric.protocol.prr_items
    assert g == (bound or metric.protocol.g)
    seen = set()
    for value in range(40):
        for _restart in range(2):
            columns = DeviceMemo(SECRET).permanent_response(metric, value)
            seen.add(tuple(tuple(np.asarray(c).ravel().tolist()) for c in columns.values()))
    assert len(seen) <= g
    if bound is None:  # local hashing: g < d, so the bound holds whatever the values
        assert g < 40
        assert not DeviceMemo.needs_state(metric)
        assert not DeviceMemo.needs_state(config(protocol, d=40, max_values=g))
        assert DeviceMemo.needs_state(config(protocol, d=40, max_values=g - 1))
    assert DeviceMemo.needs_state(config(protocol, d=40, max_values=1)) == (g > 1)
