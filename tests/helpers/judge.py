"""The judge fixtures (a pytest plugin of tests/conftest.py): the OpenAI stub serving the fake judge,
judges on a private cache, and the clean judge environment (autouse in tests/judge; elsewhere
``pytest.mark.usefixtures("judge_env")``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.judge.config import JudgeConfig, load_prices
from naru_eval.judge.items import JudgeItem
from naru_eval.judge.pipeline import Judge
from naru_eval.store.judge_cache import JudgeStore
from tests.helpers.fake_judge import FakeJudge
from tests.helpers.stubs import OpenAIStub

FAKE_KEY = "sk-naru-judge-test-0123456789SECRET"
#: the tests' own price for the stub's gpt-5.5 (the built-in table has no dated price for it)
STUB_PRICE = '{"gpt-5.5": {"input": 1.0, "cached_input": 0.1, "output": 8.0}}'


@pytest.fixture
def judge_env(monkeypatch, tmp_path):
    """No real judge settings leak in; the key is a fake one."""
    import os

    for k in list(os.environ):
        if k.startswith("NARU_JUDGE_") or k in ("OPENAI_BASE_URL", "NARU_MCQ_LLM_FALLBACK"):
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("NARU_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def fake() -> FakeJudge:
    return FakeJudge()


@pytest.fixture
def stub(fake) -> Iterator[OpenAIStub]:
    with OpenAIStub(responder=fake, models=("gpt-5.5",)) as s:
        yield s


@pytest.fixture
def make_judge(stub, tmp_path):
    """Judge(**config) against the stub; sleeps are recorded, not slept."""
    made: list[Judge] = []

    def _make(cache: Path | None = None, **kw) -> Judge:
        kw.setdefault("base_url", stub.base_url)
        kw.setdefault("retry_base_delay", 0.5)
        kw.setdefault("prices", load_prices(STUB_PRICE))
        cfg = JudgeConfig(cache_path=str(cache or tmp_path / "judge.sqlite"), **kw)
        sleeps: list[float] = []
        j = Judge(cfg, JudgeStore(cfg.cache_path), sleep=sleeps.append)
        j.sleeps = sleeps  # type: ignore[attr-defined]
        made.append(j)
        return j

    yield _make
    for j in made:
        j.store.close()


def item(
    qid: str = "q1", category: str = "N.1", reference: str | None = None, question: str = "What happens?"
) -> JudgeItem:
    ref = reference or "The man enters the room. He sits down by the window. The cat sleeps on the sofa."
    return JudgeItem(qid, "vid000", category, question, ref)


def chat_schemas(stub: OpenAIStub) -> list[str]:
    return [r.body["response_format"]["json_schema"]["name"] for r in stub.chat_requests()]


REF = "The bride wears a white kimono. The ceremony is held at a shrine. Guests bow twice."


def write_open_log(
    path: Path, responses: list[str | None], categories: list[str] | None = None, data_fingerprint: str | None = None
) -> Path:
    """A naru_open sample log as lmms-eval writes it (the parts the judge reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, resp in enumerate(responses):
        cat = categories[i] if categories else CATEGORIES[i % 9]
        payload = {
            "question_id": f"q{i:03d}",
            "video_id": f"v{i % 3}",
            "category": cat,
            "level": "narrative" if cat.startswith("N") else "cultural",
            "question": f"What happens at the wedding {i}?",
            "reference": REF,
            "response": resp,
            "status": "unscored",
        }
        if data_fingerprint:
            payload["data_fingerprint"] = data_fingerprint
        lines.append(json.dumps({"doc_id": i, "overall": payload, "filtered_resps": [resp or ""]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
