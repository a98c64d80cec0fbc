"""A store that cannot be used is refused before any report is read: malformed URLs, NUL
characters, in-memory databases, read-only, locked or damaged files, metric names longer than
the store keys. Each is a StoreError naming the store (`ldp run`: exit 2 naming --store)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess

import pytest

from ldp_telemetry.ldp.base.errors import StoreError
from ldp_telemetry.pipelines.cli import main
from ldp_telemetry.store import open_store
from ldp_telemetry.store.records import MAX_NAME_CHARS
from ldp_telemetry.store.sql import SQLITE_FORMS

REGISTRY = {"metrics": [{"name": "c.grr", "protocol": "grr", "epsilon": 2.0,
                         "domain": {"labels": ["a", "b"]}}]}


def run_args(tmp_path, url, registry=REGISTRY):
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    (tmp_path / "in.avro").write_bytes(b"")  # never read: every case fails before reading
    return ["run", "--registry", str(tmp_path / "registry.json"), "--input",
            str(tmp_path / "in.avro"), "--output", str(tmp_path / "out"), "--window", "3600",
            "--store", url, "--create-store"]


@pytest.mark.parametrize("url", ["sqlite:/mystore.db", "sqlite:mystore.db",
                                 "sqlite://host/mystore.db", "sqlite://mystore.db"])
def test_a_malformed_sqlite_url_names_the_expected_form_and_creates_nothing(tmp_path, url,
                                                                           capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="is not an SQLite URL of the form") as caught:
        open_store(url)
    assert caught.value.field == "store" and SQLITE_FORMS in str(caught.value)
    assert main(run_args(tmp_path, url)) == 2
    err = capsys.readouterr().err
    assert f"ldp run: error: --store {url!r} is not an SQLite URL of the form {SQLITE_FORMS}" \
        in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["in.avro", "registry.json"]  # no ystore.db


@pytest.mark.parametrize("url", ["sqlite:///my%00store.db", "sqlite:///a\x00b.db",
                                 "postgresql://user@localhost/db%00x"])
def test_a_nul_character_in_a_store_url_is_a_message_not_a_traceback(tmp_path, url, capsys):
    assert main(run_args(tmp_path, url)) == 2
    err = capsys.readouterr().err
    assert "--store" in err and "cannot hold a NUL character (%00)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:///file:x.db?mode=memory",
                                 "sqlite:///", "sqlite:////"])
def test_a_store_that_writes_nowhere_is_refused(tmp_path, url, capsys):
    with pytest.raises(StoreError, match=r"sqlite:///relative/path\.db"):
        open_store(url)
    assert main(run_args(tmp_path, url)) == 2
    assert "ldp run: error: --store" in capsys.readouterr().err


def make_store(tmp_path) -> str:
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").close()
    return str(path)


def read_only(path: str):
    """Make `path` read-only for this process (root ignores permission bits: chattr +i);
    returns the undo, or skips when the file system cannot."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
        os.chmod(os.path.dirname(path), 0o555)
        return lambda: (os.chmod(os.path.dirname(path), 0o755), os.chmod(path, 0o644))
    if shutil.which("chattr") is None or subprocess.run(
            ["chattr", "+i", path], capture_output=True).returncode != 0:
        pytest.skip("cannot make a file read-only for root here (no chattr +i)")
    return lambda: subprocess.run(["chattr", "-i", path], check=True)


def test_a_read_only_store_is_found_at_start(tmp_path, capsys):
    path = make_store(tmp_path)
    undo = read_only(path)
    try:
        with open_store(f"sqlite:///{path}") as store, \
                pytest.raises(StoreError, match="readonly") as caught:
            store.check_writable()
        assert repr(f"sqlite:///{path}") in str(caught.value)
        assert main(run_args(tmp_path, f"sqlite:///{path}")) == 2
    finally:
        undo()
    err = capsys.readouterr().err
    assert f"ldp run: error: --store 'sqlite:///{path}': attempt to write a readonly " \
           "database" in err
    assert not (tmp_path / "out" / "estimates").exists()


def test_a_locked_store_is_found_at_start(tmp_path, capsys):
    path = make_store(tmp_path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the store
    try:
        with open_store(f"sqlite:///{path}", create=False) as store, \
                pytest.raises(StoreError, match="database is locked"):
            store.check_writable(lock_wait_s=0.1)
        assert main(run_args(tmp_path, f"sqlite:///{path}")) == 2
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert f"--store 'sqlite:///{path}': database is locked" in capsys.readouterr().err
    with open_store(f"sqlite:///{path}") as store:
        store.check_writable()  # released: usable again


def test_a_damaged_store_is_found_at_start(tmp_path, capsys):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 200)
    assert main(run_args(tmp_path, f"sqlite:///{garbage}")) == 2
    assert "file is not a database" in capsys.readouterr().err
    # a real store with a page overwritten: the header is fine, the quick check is not
    path = tmp_path / "torn.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE filler (x TEXT)")
    connection.execute("CREATE INDEX filler_x ON filler (x)")
    connection.executemany("INSERT INTO filler VALUES (?)", [(str(i) * 20,) for i in range(5000)])
    connection.commit()
    connection.close()
    open_store(f"sqlite:///{path}").close()
    size = path.stat().st_size
    with open(path, "r+b") as torn:
        torn.seek(size // 2)
        torn.write(b"\xff" * 4096)
    assert main(run_args(tmp_path, f"sqlite:///{path}")) == 2
    err = capsys.readouterr().err
    assert f"--store 'sqlite:///{path}' is damaged: SQLite's quick check says" in err
    assert "Traceback" not in err


def test_metric_names_longer_than_the_store_keys_are_refused_at_start(tmp_path, capsys):
    stem = "m" * MAX_NAME_CHARS
    registry = {"metrics": [{"name": stem + suffix, "protocol": "grr", "epsilon": 2.0,
                             "domain": {"labels": ["a", "b"]}} for suffix in ("-a", "-b")]}
    url = f"sqlite:///{tmp_path}/store.db"
    longer = ["--max-metric-name-chars", "1024"]  # the reader's limit lets them through
    assert main(run_args(tmp_path, url, registry) + longer) == 2
    err = capsys.readouterr().err
    assert f"--store: metric name {stem[:40]!r}… has {MAX_NAME_CHARS + 2:,} characters; the " \
           f"store keys names of at most {MAX_NAME_CHARS}" in err
    assert not (tmp_path / "store.db").exists()
    record = {"metric": stem + "-a", "window_start": "2024-03-01T00:00:00Z",
              "window_end": "2024-03-01T01:00:00Z", "n": 1, "protocol": "grr", "epsilon": 2.0,
              "estimate": [1.0], "pane": {"timing": "ON_TIME", "index": 0, "is_last": True},
              "labels": ["a"], "std_error": [0.0], "postprocess": {"method": "none", "params": {}}}
    with open_store(url) as store, pytest.raises(StoreError, match="at most 512"):
        store.write_panes([record])  # the API refuses it too, rather than cutting it
    fits = {"metrics": [dict(registry["metrics"][0], name="m" * MAX_NAME_CHARS)]}
    assert main(run_args(tmp_path, url, fits) + longer) == 0
