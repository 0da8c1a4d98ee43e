"""A store that is corrupt, a directory, read-only or on a full disk: the error names the file,
what is wrong and what to do; a corrupt store is never overwritten and is moved aside only by
``naru-eval store move-aside``; once a write fails, nothing more is asked."""

from __future__ import annotations

import sqlite3

import pytest

from naru_eval.cli import main
from naru_eval.store.db import StoreError, StoreWriteError, check
from naru_eval.store.responses import ResponseStore
from tests.helpers.disk import fill_disk, make_read_only


def _filled_store(path, n: int = 200) -> ResponseStore:
    s = ResponseStore(path)
    for i in range(n):
        s.put_ok("run", f"q{i}", f"The answer is {'ABCD'[i % 4]}. " + "x" * 200)
    s.close()
    return s


def test_a_garbage_store_is_named_left_untouched_and_moved_aside_only_on_command(tmp_path, capsys):
    path = tmp_path / "responses.sqlite"
    garbage = b"this is no SQLite file at all " * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as err:
        ResponseStore(path)
    msg = str(err.value)
    assert err.value.kind == "corrupt" and err.value.path == path
    assert f"the response store {path} is corrupt" in msg and "left untouched" in msg
    assert f"naru-eval store move-aside {path}" in msg and "NARU_RESPONSE_STORE" in msg
    assert path.read_bytes() == garbage  # never overwritten
    assert main(["store", "check", str(path)]) == 1
    assert "is corrupt" in capsys.readouterr().err
    assert path.read_bytes() == garbage
    assert main(["store", "move-aside", str(path)]) == 0
    (moved,) = tmp_path.glob("responses.sqlite.corrupt-*")
    assert moved.read_bytes() == garbage and not path.exists()
    assert f"moved {path} to {moved}" in capsys.readouterr().out
    fresh = ResponseStore(path)  # the next run starts a new store
    fresh.put_ok("run", "q1", "A")
    assert fresh.get("run", "q1").response == "A"


def test_a_store_corrupted_inside_is_named_when_read_and_never_rewritten(tmp_path):
    path = tmp_path / "responses.sqlite"
    _filled_store(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096
    data[2 * 4096 : 6 * 4096] = b"\xa5" * (4 * 4096)  # b-tree pages overwritten
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as err:
        s = ResponseStore(path)
        s.answered("run")
    assert err.value.kind == "corrupt" and str(path) in str(err.value) and "move-aside" in str(err.value)
    assert path.read_bytes() == bytes(data)
    assert check(path) is not None


def test_move_aside_refuses_a_sound_store(tmp_path, capsys):
    path = tmp_path / "responses.sqlite"
    _filled_store(path, 3)
    assert main(["store", "check", str(path)]) == 0
    assert main(["store", "move-aside", str(path)]) == 1
    assert "passes SQLite's integrity check; nothing was moved" in capsys.readouterr().err
    assert ResponseStore(path).get("run", "q1") is not None


def test_a_directory_where_the_store_should_be(tmp_path):
    path = tmp_path / "responses.sqlite"
    path.mkdir()
    with pytest.raises(StoreError) as err:
        ResponseStore(path)
    assert err.value.kind == "not-a-file"
    assert f"the response store {path} is a directory, not a SQLite file" in str(err.value)
    assert "Remove or rename that directory, or point NARU_RESPONSE_STORE at another file" in str(err.value)


def test_a_read_only_store(small_fs):
    path = small_fs / "responses.sqlite"
    _filled_store(path, 3)
    for side in ("-wal", "-shm"):
        (small_fs / f"responses.sqlite{side}").unlink(missing_ok=True)
    make_read_only(small_fs)
    with pytest.raises(StoreError) as err:
        ResponseStore(path)
    assert err.value.kind == "read-only", err.value
    assert f"the response store {path} cannot be written" in str(err.value)
    assert "read-only" in str(err.value) and "NARU_RESPONSE_STORE" in str(err.value)


def test_a_full_disk_keeps_what_was_stored_and_stops_further_writes(small_fs):
    path = small_fs / "responses.sqlite"
    s = ResponseStore(path)
    s.put_ok("run", "q0", "A")
    filler = fill_disk(small_fs)
    with pytest.raises(StoreWriteError) as err:
        for i in range(1, 100):
            s.put_ok("run", f"q{i}", "The answer is B. " + "y" * 3000)
    assert err.value.kind == "full", err.value
    assert f"the disk holding the response store {path} is full" in str(err.value)
    assert "Free some space and rerun" in str(err.value)
    with pytest.raises(StoreWriteError, match="stopped asking new questions"):
        s.check_writable()
    filler.unlink()
    kept = ResponseStore(path).answered("run")
    assert kept["q0"] == "A" and len(kept) == s.stored


@pytest.mark.api
def test_once_a_store_write_fails_no_new_question_is_asked_and_the_rerun_asks_only_the_rest(
    small_fs, small_data, monkeypatch
):
    """Two workers; after 4 answers the disk fills while 2 requests are in flight. Both answers
    fail to be stored, and no further question is sent (each would be paid for and lost); the
    error names the store and why. With space again, the rerun asks only what was not stored."""
    import threading

    from model_adapters.openai_compat import OpenAICompat
    from tests.helpers.data import docs_of, lmms_instances
    from tests.helpers.stubs import OpenAIStub

    monkeypatch.setenv("OPENAI_API_KEY", "sk-naru-test-store")
    docs = docs_of(small_data)
    store = small_fs / "responses.sqlite"

    def model(stub: OpenAIStub) -> OpenAICompat:
        m = OpenAICompat(
            model="stub", base_url=stub.base_url, response_store=str(store), num_frames=2, max_concurrency=2
        )
        m.task_dict = {"naru_mcq": {"test": docs}}
        return m

    requests = lmms_instances(docs, "naru_mcq", "test")
    raised: list[BaseException] = []
    with OpenAIStub(responder=lambda req: "The answer is B.", hold_after=4) as stub:
        first = model(stub)

        def run() -> None:
            try:
                first.generate_until(requests)
            except BaseException as e:  # noqa: BLE001 - the test inspects it
                raised.append(e)

        worker = threading.Thread(target=run)
        worker.start()
        for _ in range(600):
            if len(stub.held()) == 2:
                break
            threading.Event().wait(0.05)
        assert len(stub.held()) == 2, "the two workers never reached the held requests"
        filler = fill_disk(small_fs)
        stub.release()
        worker.join(60)
        asked_first = len(stub.chat_requests())
    assert not worker.is_alive()
    (err,) = raised
    assert isinstance(err, StoreWriteError) and err.kind == "full", err
    assert f"the disk holding the response store {store} is full" in str(err)
    assert "was received but not stored, so no further question is asked" in str(err)
    assert asked_first == 4 + 2  # the 2 in flight when the disk filled; nothing after the failed write
    filler.unlink()
    assert len(ResponseStore(store).answered(first.request_key(first.to_naru_requests(requests)[0])[0])) == 4
    with OpenAIStub(responder=lambda req: "The answer is B.") as stub:
        answers = model(stub).generate_until(requests)
        assert len(stub.chat_requests()) == len(docs) - 4  # the 4 stored answers are not asked again
    assert answers == ["The answer is B."] * len(docs)


def test_a_naru_eval_command_on_a_corrupt_judge_cache_names_it_without_a_traceback(
    tmp_path, small_data, monkeypatch, capsys
):
    cache = tmp_path / "judge.sqlite"
    garbage = b"garbage" * 300
    cache.write_bytes(garbage)
    monkeypatch.setenv("NARU_JUDGE_CACHE", str(cache))
    monkeypatch.setenv("NARU_JUDGE_BACKEND", "offline-lexical")
    assert main(["judge", "facts", "--data-dir", str(small_data), "--out", str(tmp_path / "facts.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"naru-eval judge: the judge cache {cache} is corrupt")
    assert "NARU_JUDGE_CACHE" in err and "move-aside" in err and "Traceback" not in err
    assert cache.read_bytes() == garbage


def test_another_applications_sqlite_file_is_refused_before_any_write(tmp_path):
    """It used to be refused only after it had gained the store's tables and WAL mode."""
    import hashlib

    from naru_eval.store.judge_cache import JudgeStore

    path = tmp_path / "places.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for opener in (ResponseStore, JudgeStore):
        with pytest.raises(StoreError) as err:
            opener(path)
        assert err.value.kind == "foreign" and "another application's SQLite file (tables: moz_places)" in str(
            err.value
        )
        assert "left untouched" in str(err.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not path.with_name("places.sqlite-wal").exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["moz_places"]
    # a table of ours with other columns, or another application id: refused too
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE responses (a TEXT)")
    with pytest.raises(StoreError, match="has a table 'responses' without the columns"):
        ResponseStore(other)
    tagged = tmp_path / "tagged.sqlite"
    with sqlite3.connect(tagged) as conn:
        conn.execute("PRAGMA application_id=1234")
    with pytest.raises(StoreError, match="application id 0x4d2"):
        ResponseStore(tagged)
    # a store of ours made before the application id (its tables only) still opens, and is tagged
    legacy = tmp_path / "legacy.sqlite"
    with sqlite3.connect(legacy) as conn:
        conn.executescript(
            "CREATE TABLE runs (run_key TEXT PRIMARY KEY, description TEXT NOT NULL, created REAL NOT NULL);"
        )
    ResponseStore(legacy).close()
    with sqlite3.connect(legacy) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x4E415255


def test_a_damaged_row_is_named_and_asked_again(tmp_path, caplog):
    """One row whose JSON is cut short (SQLite's integrity check passes) stopped the run with
    "Unterminated string…", naming neither store nor row."""
    import logging

    from naru_eval.store.responses import usage_by_run

    path = tmp_path / "responses.sqlite"
    s = ResponseStore(path)
    s.put_ok("run", "q0007:abcd", "The answer is B.", {"prompt_tokens": 10, "model": "x"})
    s.put_ok("run", "q0008:abcd", "The answer is C.", {"prompt_tokens": 11})
    s.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE responses SET usage='{\"prompt_tokens\": 10, \"mod' WHERE question_id='q0007:abcd'")
    assert check(path) is None  # sound as a SQLite file
    s = ResponseStore(path)
    with caplog.at_level(logging.WARNING):
        assert s.get("run", "q0007:abcd") is None  # not used: the question is asked again
    assert f"the response store {path}: the row of question q0007 (run run) is damaged" in caplog.text
    assert s.get("run", "q0008:abcd").response == "The answer is C."
    s.put_ok("run", "q0007:abcd", "The answer is D.", {"prompt_tokens": 12})  # the new answer replaces it
    assert s.get("run", "q0007:abcd").response == "The answer is D."
    s.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE responses SET usage='{\"cut' WHERE question_id='q0008:abcd'")
    with pytest.raises(StoreError, match=r"the row of question q0008 \(run run\) is damaged"):
        usage_by_run(path)


def test_a_damaged_judge_cache_row_is_asked_again(tmp_path, caplog):
    import logging

    from naru_eval.store.judge_cache import JudgeStore

    path = tmp_path / "judge.sqlite"
    j = JudgeStore(path)
    j.put_call("k1", "verify", "m", {"content": "{}", "usage": {"prompt_tokens": 3}})
    j.freeze_facts("q1", "h", "m", "v1", ["a", "b"])
    j.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE calls SET usage='{\"prom' WHERE key='k1'")
        conn.execute("UPDATE facts SET facts='[\"a\", \"b' WHERE question_id='q1'")
    j = JudgeStore(path)
    with caplog.at_level(logging.WARNING):
        assert j.get_call("k1") is None and j.get_facts("q1", "h", "m", "v1") is None
    assert f"the judge cache {path}: the row of judge call k1 is damaged" in caplog.text
    assert "the row of the facts of q1 (m) is damaged" in caplog.text
    assert j.freeze_facts("q1", "h", "m", "v1", ["c"]) == ["c"] and j.get_facts("q1", "h", "m", "v1") == ["c"]
