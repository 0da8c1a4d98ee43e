"""generate_until's named parts (naru_eval/adapters/base.py): which requests are asked
(RequestPlan), the one place answers are written (AnswerLog), and the failures held back while
the configuration-error breaker is undecided (HeldFailures)."""

from __future__ import annotations

import pytest

from naru_eval.adapters.answers import AnswerLog, HeldFailures, RequestPlan
from naru_eval.adapters.request import FAILED_MARKER, Answer, RequestFailed
from naru_eval.api.retry import ConfigErrorBreaker, ConfigurationError
from naru_eval.store.responses import ResponseStore


class HTTPError(Exception):
    """An API error as the SDKs raise it: a status and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status
        self.message = message


def refused(status: int = 401, message: str = "bad key") -> RequestFailed:
    try:
        raise HTTPError(status, message)
    except HTTPError as e:
        try:
            raise RequestFailed(f"refused: {message}") from e
        except RequestFailed as failed:
            return failed


def test_the_plan_asks_each_distinct_request_once_and_reuses_stored_answers():
    keys = [("rk", "q1"), ("rk", "q2"), ("rk", "q1"), ("rk", "q3"), ("rk", "q2")]
    stored = {("rk", "q3"): "C"}
    plan = RequestPlan.of(keys, stored.get)
    assert plan.pending == [0, 1] and plan.reused == 1 and plan.n_shared == 2
    assert plan.fan_out({0: "A", 1: "B"}) == ["A", "B", "A", "C", "B"]
    assert plan.fan_out({0: "A"})[1] is None  # not answered: the caller marks it failed


def test_the_answer_log_writes_each_answer_and_failure_to_the_store(tmp_path):
    store = ResponseStore(tmp_path / "r.sqlite")
    log = AnswerLog(store)
    log.answered(0, ("rk", "q1"), Answer("A", {"input_tokens": 5}))
    log.answered(1, ("rk", "q2"), "B")
    log.failed(2, ("rk", "q3"), RequestFailed("timeout", {"attempts": 3}))
    assert log.replies[0] == "A" and log.replies[1] == "B" and log.replies[2].startswith(FAILED_MARKER)
    assert log.stored(("rk", "q1")) == "A" and log.stored(("rk", "q3")) is None  # a failure is asked again
    assert store.get("rk", "q3").status == "failed"
    assert AnswerLog(None).stored(("rk", "q1")) is None


def test_failures_are_held_while_the_breaker_is_undecided_and_recorded_once_it_disarms():
    recorded: list[int] = []
    held = HeldFailures(ConfigErrorBreaker("t", after=2), lambda i, e: recorded.append(i))
    held.failed(0, refused())
    assert recorded == []  # one config-looking failure: undecided, held back
    held.breaker.succeeded()  # an answer: not a configuration error
    held.flush()
    assert recorded == [0]
    held.failed(1, refused())
    assert recorded == [0, 1]  # disarmed: recorded at once


def test_a_tripped_breaker_records_none_of_the_held_failures():
    recorded: list[int] = []
    held = HeldFailures(ConfigErrorBreaker("t", after=2), lambda i, e: recorded.append(i))
    held.failed(0, refused())
    with pytest.raises(ConfigurationError, match="bad key"):
        held.failed(1, refused())
    held.flush()
    assert recorded == []


def test_held_failures_are_ordinary_failures_at_the_end():
    recorded: list[int] = []
    held = HeldFailures(ConfigErrorBreaker("t", after=3), lambda i, e: recorded.append(i))
    held.failed(0, refused())
    held.release()
    assert recorded == [0]


def test_every_adapter_has_the_device_lmms_eval_gathers_on(tmp_path):
    """lmms-eval's evaluator builds its cross-rank counts on ``lm.device`` under accelerate launch;
    an adapter without weights answers the CPU, or the device of the Accelerator it was given."""
    import types

    import torch

    from model_adapters.replay import NaruReplay

    preds = tmp_path / "p.jsonl"
    preds.write_text('{"question_id": "q1", "response": "A"}\n')
    model = NaruReplay(predictions=str(preds))
    assert model.device == torch.device("cpu")
    model.accelerator = types.SimpleNamespace(device=torch.device("meta"))  # what the evaluator sets
    assert model.device == torch.device("meta")
