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
