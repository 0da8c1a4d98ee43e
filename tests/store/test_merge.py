"""Stores on a cluster: per-rank paths, two processes sharing one store, and ``naru-eval store
merge`` (nothing lost, conflicting answers refused with nothing written)."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from naru_eval.cli.main import main
from naru_eval.store.db import StoreError
from naru_eval.store.merge import MergeConflict, merge_stores
from naru_eval.store.responses import ResponseStore, store_path_for_rank


def rows(path) -> dict[tuple[str, str], tuple]:
    with sqlite3.connect(path) as conn:
        got = conn.execute("SELECT run_key, question_id, status, response, error FROM responses").fetchall()
    return {(r[0], r[1]): r[2:] for r in got}


def digest(path) -> str:
    """The store's content: its file and WAL (the -shm index is shared memory readers touch too)."""
    files = [path, path.with_name(path.name + "-wal")]
    return hashlib.sha256(b"".join(p.read_bytes() for p in files if p.exists())).hexdigest()


def test_a_rank_placeholder_gives_each_process_its_own_store(tmp_path, monkeypatch):
    template = tmp_path / "responses.{rank}.sqlite"
    monkeypatch.delenv("RANK", raising=False)
    assert store_path_for_rank(template) == tmp_path / "responses.0.sqlite"
    monkeypatch.setenv("RANK", "3")
    s = ResponseStore(template)
    s.put_ok("run", "q1", "A")
    assert s.path == tmp_path / "responses.3.sqlite" and s.path.is_file()
    assert not (tmp_path / "responses.{rank}.sqlite").exists()


WRITER = textwrap.dedent(
    """
    import sys
    from naru_eval.store.responses import ResponseStore
    path, rank, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = ResponseStore(path)
    for i in range(n):
        s.put_ok("run", f"r{rank}-q{i}", f"answer {rank} {i}")
    """
)


def test_two_processes_sharing_one_store_lose_nothing(tmp_path):
    """Two ranks of one node share the per-budget store: concurrent writers, one commit each."""
    path = tmp_path / "shared.sqlite"
    n = 400
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(rank), str(n)], stderr=subprocess.PIPE)
        for rank in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    got = rows(path)
    assert len(got) == 2 * n
    assert got[("run", "r1-q399")] == ("ok", "answer 1 399", None)


def test_merge_joins_per_rank_stores_and_loses_nothing(tmp_path):
    a, b, into = tmp_path / "r0.sqlite", tmp_path / "r1.sqlite", tmp_path / "merged.sqlite"
    sa, sb = ResponseStore(a), ResponseStore(b)
    sa.register_run("run", {"model": "naru_replay"})
    sb.register_run("run", {"model": "naru_replay"})
    sa.put_ok("run", "q1", "A", {"input_tokens": 5})
    sa.put_failed("run", "q2", "HTTP 503")
    sb.put_ok("run", "q2", "B")  # the other rank's answer beats the failure
    sb.put_ok("run", "q1", "A")  # the same answer twice is one row
    sb.put_failed("run", "q3", "timeout")
    before = digest(a), digest(b)
    report = merge_stores([a, b], into)
    assert rows(into) == {
        ("run", "q1"): ("ok", "A", None),
        ("run", "q2"): ("ok", "B", None),
        ("run", "q3"): ("failed", None, "timeout"),
    }
    assert (report.added, report.total, report.runs_added) == (3, 3, 1)
    assert (digest(a), digest(b)) == before  # sources are only read
    merged = ResponseStore(into)
    assert merged.get("run", "q1").usage == {"input_tokens": 5}
    # merging again (or into a store that already holds them) changes nothing
    again = merge_stores([a, b], into)
    assert (again.added, again.upgraded, again.total) == (0, 0, 3)


def test_merge_refuses_conflicting_answers_and_writes_nothing(tmp_path, capsys):
    a, b, into = tmp_path / "r0.sqlite", tmp_path / "r1.sqlite", tmp_path / "merged.sqlite"
    ResponseStore(into).put_ok("run", "q0", "D")
    ResponseStore(a).put_ok("run", "q1:abc", "The answer is A")
    ResponseStore(b).put_ok("run", "q1:abc", "The answer is C")
    ResponseStore(b).put_ok("run", "q9", "B")
    before = rows(into)
    with pytest.raises(MergeConflict) as e:
        merge_stores([a, b], into)
    msg = str(e.value)
    assert "1 request(s) hold different ok answers" in msg and "q1" in msg
    assert str(a) in msg and str(b) in msg and "'The answer is A'" in msg and "'The answer is C'" in msg
    assert rows(into) == before  # nothing written, not even q9
    # the CLI: the same refusal, exit 1, no traceback
    assert main(["store", "merge", str(a), str(b), "--into", str(into)]) == 1
    assert "different ok answers" in capsys.readouterr().err
    assert main(["store", "merge", str(a), "--into", str(into)]) == 0
    assert "1 row(s) added" in capsys.readouterr().out
    assert rows(into)[("run", "q1:abc")] == ("ok", "The answer is A", None)


def test_merge_refuses_a_corrupt_source(tmp_path):
    good, bad, into = tmp_path / "good.sqlite", tmp_path / "bad.sqlite", tmp_path / "m.sqlite"
    ResponseStore(good).put_ok("run", "q1", "A")
    bad.write_bytes(b"not a database" * 100)
    assert main(["store", "merge", str(good), str(bad), "--into", str(into)]) == 1
    assert not into.exists()


def test_merge_refuses_another_applications_file_that_has_our_table_names(tmp_path, capsys):
    """Issue 33 (16): a file of another application (its own SQLite application id) whose tables
    happen to be ours went through: its rows landed in the target. The sources now go through the
    store's own opener, which refuses it by its id; nothing is written or created."""
    from naru_eval.store.responses import SCHEMA

    good, alien, into = tmp_path / "good.sqlite", tmp_path / "alien.sqlite", tmp_path / "m.sqlite"
    ResponseStore(good).put_ok("run", "q1", "A")
    with sqlite3.connect(alien) as conn:
        conn.executescript(SCHEMA)
        conn.execute("PRAGMA application_id=0x12345678")
        conn.execute("INSERT INTO responses VALUES ('run', 'q2', 'ok', 'B', NULL, NULL, 1, 1.0)")
    assert main(["store", "merge", str(good), str(alien), "--into", str(into)]) == 1
    err = capsys.readouterr().err
    assert f"the response store {alien} is another application's SQLite file (application id 0x12345678" in err
    assert "Traceback" not in err and not into.exists()


def test_bad_rows_are_named_by_source_and_row_all_at_once_and_no_target_is_made(tmp_path, capsys):
    """Issue 33 (16): text in a typed column ended in a traceback (``int('abc')``); a row the target
    refuses (an unknown status) was blamed on the target, which was left created and empty. Every
    row is now checked before anything is written: each bad one is named with its source."""
    good, bad, into = tmp_path / "good.sqlite", tmp_path / "bad.sqlite", tmp_path / "m.sqlite"
    ResponseStore(good).put_ok("run", "q1", "A")
    # a store made by another program: our columns, without our CHECK (legacy id 0: it is ours by its tables)
    with sqlite3.connect(bad) as conn:
        conn.execute(
            "CREATE TABLE responses (run_key TEXT NOT NULL, question_id TEXT NOT NULL, status TEXT NOT NULL, "
            "response TEXT, error TEXT, usage TEXT, attempts INTEGER NOT NULL DEFAULT 1, updated REAL NOT NULL, "
            "PRIMARY KEY (run_key, question_id))"
        )
        conn.execute("CREATE TABLE runs (run_key TEXT PRIMARY KEY, description TEXT NOT NULL, created REAL NOT NULL)")
        conn.executemany(
            "INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("run", "q2", "ok", "B", None, None, "abc", 1.0),  # text where a count belongs
                ("run", "q3", "maybe", "C", None, None, 1, 1.0),  # no status of ours
                ("run", "q4", "ok", "D", None, "{cut", 1, "yesterday"),  # damaged usage, text for a time
                ("run", "q5", "ok", "E", None, None, 1, 1.0),  # a sound row
            ],
        )
    before = digest(bad)
    assert main(["store", "merge", str(good), str(bad), "--into", str(into)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"3 row(s) of {bad}" in err, err
    assert f"{bad}: row 1 (run key 'run', question 'q2'): attempts is 'abc', not a whole number" in err
    assert f"{bad}: row 2 (run key 'run', question 'q3'): status is 'maybe', not 'ok' or 'failed'" in err
    assert "usage is '{cut', not a JSON object" in err and "updated is 'yesterday', not a time" in err
    assert str(good) not in err.split("nothing was written")[0].replace(str(bad), "")  # blamed on the source
    assert f"{into} was not created" in err and not into.exists()
    assert not list(tmp_path.glob(".m.sqlite*"))  # no temporary file left either
    assert digest(bad) == before
    # an existing target is left exactly as it was
    ResponseStore(into).put_ok("run", "q0", "Z")
    kept = rows(into)
    with pytest.raises(StoreError) as e:
        merge_stores([good, bad], into)
    assert e.value.path == bad and rows(into) == kept


def test_a_failed_write_leaves_no_new_target(tmp_path, small_fs):
    """A new target is built under a temporary name and renamed into place: a disk that fills
    during the merge leaves no half-made store where the target should be."""
    src = tmp_path / "big.sqlite"
    s = ResponseStore(src)
    for i in range(400):
        s.put_ok("run", f"q{i}", "x" * 8000)
    s.close()
    target = small_fs / "merged.sqlite"
    with pytest.raises(StoreError):
        merge_stores([src], target)
    assert sorted(p.name for p in small_fs.iterdir()) == []
