import sqlite3

from naru_eval.store.responses import ResponseStore, UsageRow, redact, run_key, runs, usage_by_run


def test_write_through_survives_without_close(tmp_path):
    path = tmp_path / "r.sqlite"
    s = ResponseStore(path)
    s.put_ok("run", "q1", "The answer is B", {"input_tokens": 10})
    # a second process opening the file right away (no close, no flush call) sees the answer
    other = ResponseStore(path)
    hit = other.get("run", "q1")
    assert hit.status == "ok" and hit.response == "The answer is B" and hit.usage == {"input_tokens": 10}
    raw = sqlite3.connect(path).execute("SELECT count(*) FROM responses").fetchone()[0]
    assert raw == 1


def test_failures_are_not_answers_and_are_retried(tmp_path):
    s = ResponseStore(tmp_path / "r.sqlite")
    s.put_failed("run", "q1", "503 after 5 attempts")
    assert s.answered("run") == {}
    assert s.failures("run") == {"q1": "503 after 5 attempts"}
    s.put_ok("run", "q1", "C")  # the retry on the next run succeeds
    hit = s.get("run", "q1")
    assert (hit.status, hit.response, hit.error, hit.attempts) == ("ok", "C", None, 2)
    assert s.failures("run") == {}


def test_run_key_ignores_secrets_and_tracks_settings():
    base = {"model": "m", "args": {"num_frames": 8}}
    assert run_key(base) == run_key({**base, "api_key": "sk-secret"})
    assert run_key(base) != run_key({"model": "m", "args": {"num_frames": 16}})
    assert redact({"api_key": "x", "token": "y", "Authorization": "z", "hf_token": "t", "fps": 1}) == {"fps": 1}
    # settings that merely contain the words are kept: they change answers
    kept = {"max_new_tokens": 8, "max_video_tokens": 100, "keyframe_interval": 5}
    assert redact(kept) == kept
    assert run_key({"args": {"max_new_tokens": 8}}) != run_key({"args": {"max_new_tokens": 16}})


def test_runs_table_holds_no_secret(tmp_path):
    s = ResponseStore(tmp_path / "r.sqlite")
    s.register_run("k", {"model": "model-name-xyz", "api_key": "sk-topsecret-123"})
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the db and its WAL
    assert b"model-name-xyz" in blob  # the description was written
    assert b"sk-topsecret-123" not in blob


def test_typed_queries_read_runs_and_usage_by_run(tmp_path):
    path = tmp_path / "r.sqlite"
    s = ResponseStore(path)
    s.register_run("a", {"model": "naru_gemini", "num_frames": None})
    s.register_run("b", {"model": "naru_openai_compat", "num_frames": 8})
    s.put_ok("a", "q1", "A", {"input_tokens": 10, "cost_usd": 0.5})
    s.put_failed("a", "q2", "HTTP 500", {"attempts": 3})
    s.put_ok("b", "q1", "B")
    assert runs(path) == {
        "a": {"model": "naru_gemini", "num_frames": None},
        "b": {"model": "naru_openai_compat", "num_frames": 8},
    }
    assert usage_by_run(path) == {
        "a": [UsageRow("ok", {"input_tokens": 10, "cost_usd": 0.5}), UsageRow("failed", {"attempts": 3})],
        "b": [UsageRow("ok", None)],
    }
    assert list(usage_by_run(path, ["b"])) == ["b"] and usage_by_run(path, []) == {}
    before = path.stat().st_mtime_ns
    usage_by_run(path)
    assert path.stat().st_mtime_ns == before  # read-only
