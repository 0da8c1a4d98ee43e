"""A configuration error stops ``naru_gemini`` (the shared breaker in the base, see
naru_eval.api.retry.ConfigErrorBreaker), through the real ``google-genai`` SDK against the Gemini stub.

The OpenAI side (``naru_openai_compat``, the judge) is tested with its own adapter's tests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from lmms_eval.api.instance import Instance

from model_adapters.gemini import Gemini
from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.api.retry import ConfigurationError
from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.tasks import doc_to_text
from tests.helpers.data import lmms_instances
from tests.helpers.stubs.gemini_server import GeminiStub, GReply

pytestmark = pytest.mark.api

FAKE_KEY = "fake-gemini-key-naru-test-0123456789abcdef-SECRET"
TASK, SPLIT = "naru_mcq", "test"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """9 questions over 2 short videos (the ``docs`` fixture of conftest.py reads them)."""
    return make_dataset(
        tmp_path_factory.mktemp("cfg9"), SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=2, seed=7)
    )


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)
    for name in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "NARU_GEMINI_UPLOAD_REGISTRY", "NARU_CONFIG_ERROR_AFTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NARU_CACHE_DIR", str(tmp_path / "cache"))


def instances(docs: list[dict[str, Any]]) -> list[Instance]:
    return lmms_instances(docs, TASK, SPLIT)


def make_model(stub: GeminiStub, tmp_path: Path, docs, **args: Any) -> Gemini:
    model = Gemini(
        model="gemini-2.5-flash",
        base_url=stub.base_url,
        response_store=str(tmp_path / "store.sqlite"),
        upload_registry=str(tmp_path / "uploads.sqlite"),
        retry_base_delay=0.01,
        poll_interval=0.01,
        **args,
    )
    model.task_dict = {TASK: {SPLIT: docs}}
    model.sleep = lambda s: None
    return model


def store_rows(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT question_id, status FROM responses").fetchall()


@pytest.mark.parametrize("status", [400, 403])
def test_gemini_stops_on_a_configuration_error_and_stores_no_failure(tmp_path, docs, status):
    with GeminiStub(api_key=FAKE_KEY, responder=lambda r: "B", statuses=[status] * 100) as stub:
        model = make_model(stub, tmp_path, docs, max_concurrency=1)
        with pytest.raises(ConfigurationError, match=f"HTTP {status}: stub error {status}"):
            model.generate_until(instances(docs))
        model.write_usage_summary()  # the aborted run's usage, now rather than at exit
        assert len(stub.generate_requests()) == 3
        assert store_rows(tmp_path / "store.sqlite") == []
        stub.statuses.clear()  # the configuration fixed: the rerun asks every question
        again = make_model(stub, tmp_path, docs, max_concurrency=1)
        assert again.generate_until(instances(docs)) == ["B"] * len(docs)
        assert len(stub.generate_requests()) == 3 + len(docs)


def test_gemini_per_question_client_errors_stay_failures(tmp_path, docs):
    first = min(range(len(docs)), key=lambda i: (docs[i]["video"], i))
    bad = {doc_to_text(d) for i, d in enumerate(docs) if i != first and i % 2 == 0}

    def responder(req):
        return GReply(status=400) if any(b in req.text for b in bad) else "B"

    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        model = make_model(stub, tmp_path, docs, max_concurrency=1)
        out = model.generate_until(instances(docs))
    assert sum(o.startswith(FAILED_MARKER) for o in out) == len(bad) > 0
    assert [st for _, st in store_rows(tmp_path / "store.sqlite")].count("failed") == len(bad)
