"""A request's input plan (naru_eval/core/inputs.py) and the input mode derived from it: today's
modes are what they were, Gemini's native video with its audio track is ``video+audio``, and
the provenance accepts exactly the modes a plan can give."""

from __future__ import annotations

import pytest

from naru_eval.core import provenance
from naru_eval.core.budgets import Sampling
from naru_eval.core.inputs import TEXT, AudioInput, FramesInput, InputPlan, input_modes, is_input_mode

S = Sampling(frames=8)


@pytest.mark.parametrize(
    ("plan", "mode"),
    [
        (TEXT, "text"),
        (InputPlan(frames=FramesInput(S)), "video"),
        (InputPlan(frames=FramesInput(S, "images")), "images"),
        (InputPlan(frames=FramesInput(S, "server-sampled", decoded=False)), "server-sampled"),
        (InputPlan(frames=FramesInput(Sampling(fps=0.25), decoded=False), audio=AudioInput()), "video+audio"),
        (InputPlan(audio=AudioInput()), "audio"),
    ],
)
def test_the_mode_is_derived_from_the_plan(plan, mode):
    assert plan.mode == mode and is_input_mode(mode) and mode in input_modes()


def test_only_the_modes_a_plan_gives_are_valid():
    assert not is_input_mode("audio+video") and not is_input_mode("video+video") and not is_input_mode("album")
    assert input_modes()[0] == "text" and {"video", "images", "server-sampled", "video+audio"} <= set(input_modes())
    with pytest.raises(ValueError, match="input_mode 'audio\\+video'"):
        provenance.record(input_mode="audio+video")
    provenance.record(input_mode="video+audio")
    assert provenance.current()["input_mode"] == "video+audio"
    provenance.clear()


def test_a_plan_is_frozen_and_names_its_inputs():
    plan = InputPlan(frames=FramesInput(S), audio=AudioInput())
    assert plan.kinds == ("frames", "audio")
    with pytest.raises(AttributeError):
        plan.frames = None  # type: ignore[misc]
    with pytest.raises(ValueError, match="not both"):
        Sampling(frames=8, fps=1.0)
