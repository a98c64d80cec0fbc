"""A store that fails during a batch run: the run's files are still written whole, a line says
what was and was not stored, the exit status is 3, and no traceback is printed."""
from __future__ import annotations

import re
import sqlite3

from ldp_telemetry.output.reader import read_estimates
from ldp_telemetry.pipelines.cli import STORE_INCOMPLETE, main
from ldp_telemetry.store import open_store
from tests.pipelines.test_store_sink import write_input


def test_a_store_failing_mid_run_leaves_the_files_and_says_what_was_stored(tmp_path, capsys,
                                                                              caplog):
    write_input(tmp_path)
    path = tmp_path / "store.db"
    open_store(f"sqlite:///{path}").close()
    connection = sqlite3.connect(path)
    # a real failure of the database after its second pane: what a full disk does mid-run
    connection.execute("CREATE TRIGGER full BEFORE INSERT ON ldp_panes "
                       "WHEN (SELECT COUNT(*) FROM ldp_panes) >= 2 "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    connection.commit()
    connection.close()
    url = f"sqlite:///{path}"
    status = main(["run", "--registry", str(tmp_path / "registry.json"), "--input",
                   str(tmp_path / "*.avro"), "--output", str(tmp_path / "out"), "--window",
                   "3600", "--store", url])
    out, err = capsys.readouterr()
    assert status == STORE_INCOMPLETE == 3
    assert "Traceback" not in err + caplog.text
    assert f"store {url!r}: database or disk is full; the store gets nothing more" in caplog.text
    assert len(read_estimates(str(tmp_path / "out"))) == 6  # 2 metrics x 3 hours, all written
    found = re.search(r"store FAILED: run (\d+) wrote (\d+) of 6 pane\(s\) and (\d+) of (\d+) "
                      r"reject count\(s\) to '(.*?)' \(the error is above\); the files in "
                      r"(.*) are complete: once the store is fixed, run again", out)
    assert found, out
    run, stored = int(found.group(1)), int(found.group(2))
    assert found.group(5) == url and found.group(6) == str(tmp_path / "out")
    assert "records read: " in out and "estimates: " in out
    with open_store(url) as store:
        assert store.run_panes(run) == stored < 6
        assert [r["status"] for r in store.runs()] == ["incomplete"]
        assert sum(len(store.windows(m)) for m in store.metrics()) == stored
