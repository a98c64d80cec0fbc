"""Files are written whole or not at all, and a failed write leaves no temporary file."""
from __future__ import annotations

import os

import pytest

from ldp_telemetry.ldp.base.errors import ConfigError
from ldp_telemetry.output.atomic import check_writable_folder, is_remote, write_atomically


def test_a_file_is_replaced_whole_and_no_temporary_file_stays(tmp_path):
    path = tmp_path / "deep" / "status.json"
    write_atomically(str(path), "first")
    write_atomically(str(path), b"second", fsync=False)
    assert path.read_bytes() == b"second"
    assert os.listdir(path.parent) == ["status.json"]


def test_a_failed_rename_removes_the_temporary_file(tmp_path):
    (tmp_path / "taken").mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(OSError):
        write_atomically(str(tmp_path / "taken"), "x")
    assert os.listdir(tmp_path) == ["taken"]


def test_an_unwritable_folder_is_a_user_error_naming_the_setting(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="^out '.*a-file/x' cannot be written") as caught:
        check_writable_folder(str(tmp_path / "a-file" / "x"), "out")
    assert caught.value.field == "out"
    check_writable_folder(str(tmp_path / "new"), "out")
    assert (tmp_path / "new").is_dir()


def test_remote_paths_are_urls():
    assert is_remote("gs://bucket/out") and is_remote("s3://b/x")
    assert not is_remote("/tmp/x") and not is_remote("out/gs:/x")
