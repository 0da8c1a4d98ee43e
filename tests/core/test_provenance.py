"""The adapter's input provenance reaches every sample payload (naru_eval.core.provenance)."""

from __future__ import annotations

import pytest

from naru_eval.core import provenance
from naru_eval.core.data import NaruQuestion
from naru_eval.core.scoring import metric_payloads, score_response


@pytest.fixture(autouse=True)
def _clean() -> None:
    provenance.clear()
    yield
    provenance.clear()


def _question() -> NaruQuestion:
    return NaruQuestion(
        question_id="q1", video_id="v1", category="N.1", question="?", options=("a", "b", "c", "d"), answer="A"
    )


def test_recorded_fields_reach_every_payload() -> None:
    provenance.record(adapter="naru_qwen2_5_vl", input_mode="video", positions="qwen-reference")
    payloads = metric_payloads(score_response(_question(), "A", provenance=provenance.current()))
    for payload in payloads.values():
        assert (payload["adapter"], payload["input_mode"], payload["positions"]) == (
            "naru_qwen2_5_vl",
            "video",
            "qwen-reference",
        )


def test_unknown_mode_and_field_are_refused() -> None:
    with pytest.raises(ValueError, match="input_mode"):
        provenance.record(input_mode="album")
    with pytest.raises(ValueError, match="unknown provenance"):
        provenance.record(fps="1")
    assert provenance.current() == {}


def test_none_leaves_a_field_unset_and_current_is_a_copy() -> None:
    provenance.record(adapter="a", input_mode=None)
    snap = provenance.current()
    snap["adapter"] = "changed"
    assert provenance.current() == {"adapter": "a"}


def test_a_videos_audio_reaches_only_its_payloads():
    from naru_eval.core import provenance

    provenance.clear()
    provenance.record(adapter="naru_qwen2_5_omni", input_mode="video+audio")
    record = {
        "mode": "windows",
        "window_s": 4.0,
        "seconds": 512.0,
        "tokens": 12800,
        "coverage": 0.142,
        "from_video": "v2.mp4",
    }
    provenance.record_video("v1", audio=provenance.audio_summary(record))
    assert provenance.current("v1")["audio"] == "windows of 4 s: 512 s, 12800 tokens, 14.2% of the video, from v2.mp4"
    assert "audio" not in provenance.current("v3") and "audio" not in provenance.current()
    assert provenance.current("v1")["input_mode"] == "video+audio"
    with pytest.raises(ValueError, match="unknown provenance"):
        provenance.record_video("v1", heard="x")
    provenance.clear()
    assert provenance.current("v1") == {}
