"""Every judge test runs in the clean judge environment (tests/helpers/judge.py)."""

import pytest


@pytest.fixture(autouse=True)
def _clean_judge_env(judge_env: None) -> None:
    """No real judge settings leak in; the key is a fake one."""
