"""Only regular files are opened: FIFOs, sockets, devices and broken links are dead letters."""
from __future__ import annotations

import os
import socket
import threading

import pytest

from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.engine.reasons import Reason
from ldp_telemetry.schemas import files
from ldp_telemetry.schemas.files import RefusedInput, open_report_file
from ldp_telemetry.transforms.read import expand_file_patterns
from tests.schemas.avro_blocks import write_blocks
from tests.schemas.test_codec import decode, good, grr_values


def decode_without_hanging(path):
    """decode(path) in a thread; a FIFO opened by mistake is released and the test fails."""
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=decode(path)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # blocked opening a FIFO: give it a writer so that the thread ends
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=30)
        pytest.fail(f"decoding {path} blocked")
    return result["out"]


def special_files(root):
    """{name: (path, reason, words in the detail)} of every kind of non-regular entry."""
    os.mkfifo(root / "pipe.avro")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "socket.avro"))
    listener.close()  # the socket file stays
    os.symlink("/dev/null", root / "device.avro")  # a character device, through a link
    os.symlink(root / "missing", root / "dangling.avro")
    os.symlink(root / "loop-b.avro", root / "loop-a.avro")
    os.symlink(root / "loop-a.avro", root / "loop-b.avro")
    os.symlink(root / "pipe.avro", root / "link-to-pipe.avro")
    (root / "folder.avro").mkdir()
    return {
        "pipe.avro": (Reason.NOT_A_REGULAR_FILE, "FIFO"),
        "link-to-pipe.avro": (Reason.NOT_A_REGULAR_FILE, "FIFO"),
        "socket.avro": (Reason.NOT_A_REGULAR_FILE, "socket"),
        "device.avro": (Reason.NOT_A_REGULAR_FILE, "character device"),
        "dangling.avro": (Reason.BROKEN_LINK, "dangling"),
        "loop-a.avro": (Reason.BROKEN_LINK, "loop"),
        "loop-b.avro": (Reason.BROKEN_LINK, "loop"),
        "folder.avro": (Reason.NOT_A_REGULAR_FILE, "directory"),
    }


def test_each_non_regular_entry_is_one_dead_letter_and_never_opened(tmp_path):
    for name, (reason, words) in special_files(tmp_path).items():
        decoder, batches, letters = decode_without_hanging(tmp_path / name)
        [letter] = letters
        assert (letter.reason, letter.records, batches) == (reason, 1, []), name
        assert words in letter.detail, (name, letter.detail)
        assert decoder.records_read == 1


def test_a_link_to_a_regular_file_is_read(tmp_path):
    write_blocks(tmp_path / "r.avro", [[good(i, "g") for i in range(5)]])
    os.symlink(tmp_path / "r.avro", tmp_path / "link.avro")
    decoder, batches, letters = decode(tmp_path / "link.avro")
    assert letters == [] and grr_values(batches) == [0, 1, 2, 3, 4]


def test_a_path_swapped_for_a_fifo_after_the_check_is_not_waited_on(tmp_path, monkeypatch):
    """The check is repeated on the descriptor, opened without blocking."""
    path = tmp_path / "r.avro"
    os.mkfifo(path)
    checks = []
    real_check = files._check

    def first_check_sees_a_regular_file(mode):  # the check on the path, before the swap
        checks.append(mode)
        if len(checks) > 1:
            real_check(mode)
    monkeypatch.setattr(files, "_check", first_check_sees_a_regular_file)
    with pytest.raises(RefusedInput, match="FIFO"):
        open_report_file(str(path))
    assert len(checks) == 2


def test_a_pattern_without_a_folder_matches_in_the_current_folder(tmp_path, monkeypatch):
    write_blocks(tmp_path / "r.avro", [[good(1, "g")]])
    write_blocks(tmp_path / "s.avro", [[good(2, "g")]])
    monkeypatch.chdir(tmp_path)
    assert expand_file_patterns(["*.avro"]) == ["./r.avro", "./s.avro"]
    assert expand_file_patterns(["r.avro"]) == ["./r.avro"]
    with pytest.raises(InputError, match="'x.avro' matches no file"):
        expand_file_patterns(["x.avro"])


def test_the_input_glob_lists_broken_links_that_beam_skips(tmp_path):
    special_files(tmp_path)
    write_blocks(tmp_path / "r.avro", [[good(1, "g")]])
    names = {os.path.basename(f) for f in expand_file_patterns([str(tmp_path / "*.avro")])}
    # Beam lists no folders; the FIFO and the link to it are one file, listed once.
    assert names == {"r.avro", "link-to-pipe.avro", "socket.avro", "device.avro",
                     "dangling.avro", "loop-a.avro", "loop-b.avro"}
    assert expand_file_patterns([str(tmp_path / "dangling.avro")]) == [
        str(tmp_path / "dangling.avro")]
