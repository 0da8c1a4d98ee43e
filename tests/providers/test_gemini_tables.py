"""naru_eval.providers.gemini: the model tables (families), token estimates (tokens) and prices
(pricing, over the one override format of naru_eval.api.prices)."""

from __future__ import annotations

import json

import pytest

from naru_eval.providers.gemini.families import THINKING, canonical_model, check_thinking, context_window
from naru_eval.providers.gemini.pricing import load_prices, request_cost
from naru_eval.providers.gemini.tokens import estimate_request

# ------------------------------------------------------------------ token and cost arithmetic


def test_token_arithmetic_for_the_longest_naru_video():
    four_h = 4 * 3600.0
    est = estimate_request(four_h, model="gemini-2.5-flash", fps=0.25, media_resolution="default", audio=True)
    assert (est.frames, est.frame_tokens, est.audio_tokens) == (3600, 258, 460_800)
    assert est.video_tokens == 3600 * (258 + 10) and est.total > context_window("gemini-2.5-flash")[0]
    low = estimate_request(four_h, model="gemini-2.5-flash", fps=0.25, media_resolution="low", audio=True)
    assert low.video_tokens == 3600 * 76 and low.total < 1_048_576
    g3 = estimate_request(four_h, model="gemini-3-pro-preview", fps=0.25, audio=False)
    assert g3.frame_tokens == 70 and g3.audio_tokens == 0
    assert canonical_model("models/gemini-3-flash-preview") == "gemini-3-flash"
    assert canonical_model("gemini-2.5-flash-lite-preview-09-2025") == "gemini-2.5-flash-lite"
    assert context_window("gemini-9-ultra") == (1_048_576, False)
    pro = load_prices().for_model("gemini-2.5-pro")
    assert request_cost(pro, prompt_tokens=100_000) == pytest.approx(0.125)
    assert request_cost(pro, prompt_tokens=400_000) == pytest.approx(1.0)  # long-context tier
    flash = load_prices().for_model("gemini-2.5-flash")
    assert request_cost(flash, prompt_tokens=1_000_000, audio_tokens=500_000, output_tokens=1000) == pytest.approx(
        0.15 + 0.5 + 0.0025
    )


@pytest.mark.parametrize(
    "model,entry",
    [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("models/gemini-3-flash-preview", "gemini-3-flash"),  # an alias in the price file
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("gemini-2.5-flash-lite-preview-09-2025", "gemini-2.5-flash-lite"),
        ("gemini-2.5-pro-2025-06-17", "gemini-2.5-pro"),  # a dated snapshot
        ("gemini-2.5-flash-image", None),  # another model: never gemini-2.5-flash's price
        ("gemini-2.5-flash-lite-image", None),
        ("gemini-3-flash-live", None),
        ("gemini-3.1-pro-preview", None),  # no entry: unknown, not gemini-3-pro's
    ],
)
def test_gemini_prices_match_exactly(model, entry):
    table = load_prices()
    want = None if entry is None else table.models[entry]
    assert table.for_model(model) == want


def test_gemini_price_override_file_takes_aliases(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"Gemini-X": {"input": 1, "output": 2, "aliases": ["gemini-x-preview"], "as_of": "2030-01-01"}})
    )
    monkeypatch.setenv("NARU_GEMINI_PRICES", str(path))
    table = load_prices()
    assert table.for_model("gemini-x-preview") == {"input": 1.0, "output": 2.0} == table.for_model("models/gemini-x")
    assert table.for_model("gemini-x-pro") is None


def test_an_override_replaces_its_entries_and_keeps_the_others(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"gemini-2.5-pro": {"input": 9, "output": 9, "as_of": "2031-02-03"}}))
    table = load_prices(path)
    assert table.for_model("gemini-2.5-pro") == {"input": 9.0, "output": 9.0}
    assert table.for_model("gemini-2.5-flash") == load_prices().for_model("gemini-2.5-flash") is not None
    assert table.as_of == "2031-02-03" and str(path) in table.source
    # inline JSON is the same format
    assert load_prices('{"gemini-x": {"input": 1, "output": 2}}').for_model("gemini-x") == {"input": 1.0, "output": 2.0}


@pytest.mark.parametrize(
    "text,match",
    [
        ('{"as_of": "2030-01-01", "models": {"gemini-x": {"input": 1, "output": 2}}}', "envelope is no longer read"),
        ('{"gemini-x": {"input": 1}}', "needs 'input' and 'output'"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_a_bad_override_is_refused_naming_the_format(tmp_path, text, match):
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_prices(path)


def test_every_thinking_rule_takes_levels_or_a_budget():
    assert all((rule.levels is None) != (rule.budget is None) for rule in THINKING.values())
    assert check_thinking("gemini-2.5-flash", 0, None) is None  # off allowed
    with pytest.raises(ValueError, match="cannot turn thinking off"):
        check_thinking("gemini-2.5-pro", 0, None)
    with pytest.raises(ValueError, match="takes thinking_level"):
        check_thinking("gemini-3-pro-preview", 1024, None)
