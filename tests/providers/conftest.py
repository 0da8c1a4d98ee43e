"""The providers' tests read the packaged tables, never a price override of the environment."""

import pytest


@pytest.fixture(autouse=True)
def _no_price_override(monkeypatch):
    monkeypatch.delenv("NARU_GEMINI_PRICES", raising=False)
