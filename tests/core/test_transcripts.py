"""naru_eval.core.transcripts: the source arg, the two layouts (checked line by line against the
frames the sampler really takes), the token budget's cuts and the control's derangement."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.core.transcripts import (
    BLOCK_HEADER,
    TranscriptSource,
    block_text,
    cue_line,
    derangement,
    interleaved_texts,
    load_transcript,
    place,
    plan_transcript,
)
from naru_eval.media.sampler import sample_frames
from naru_eval.media.transcript import Cue
from tests.helpers.speech import write_av


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """8 frames the one sampler takes from a 120-s video (segment centres: 7.5 s, 22.5 s, ...)."""
    video = write_av(tmp_path_factory.mktemp("v") / "v.mp4", 120.0, None, fps=2)
    return sample_frames(video, num_frames=8)


def _cues(times: list[float]) -> list[Cue]:
    return [Cue(t, t + 1.5, f"台詞{i}") for i, t in enumerate(times)]


def test_interleaved_places_every_cue_after_the_last_frame_at_or_before_its_start(sampled):
    ts = [float(t) for t in sampled.timestamps]
    assert len(ts) == 8 and ts[0] > 0
    # before the first frame, on a frame's own time, between frames, overlapping, after the last
    times = [0.0, ts[0] - 0.01, ts[0], ts[0] + 0.5, ts[0] + 0.6, (ts[3] + ts[4]) / 2, ts[7] - 0.01, ts[7], 119.9]
    cues = _cues(times)
    texts = interleaved_texts(cues, ts)
    assert len(texts) == len(ts) + 1
    # read the rendered slots back line by line and check each cue's place against the frames
    seen = []
    for slot, text in enumerate(texts):
        for line in filter(None, text.split("\n")):
            cue = next(c for c in cues if cue_line(c) == line)
            seen.append(cue)
            if slot == 0:
                assert cue.start < ts[0]
            else:
                assert ts[slot - 1] <= cue.start
                assert slot == len(ts) or cue.start < ts[slot]
    assert sorted(seen) == sorted(cues)  # every cue exactly once: nothing before or after the frames dropped
    assert texts[0].split("\n") == [cue_line(cues[0]), cue_line(cues[1])]
    assert texts[-1].split("\n") == [cue_line(cues[-2]), cue_line(cues[-1])]


def test_cue_line_format():
    assert cue_line(Cue(3723.46, 3725.0, "はい")) == "[3723.5–3725.0] はい"


def test_place_needs_ascending_anchors():
    with pytest.raises(ValueError, match="ascending"):
        place(_cues([1.0]), [2.0, 1.0])


def test_block_holds_every_cue_in_time_order():
    cues = _cues([5.0, 1.0, 3.0])
    text = block_text(cues)
    assert text.split("\n") == [BLOCK_HEADER] + [cue_line(c) for c in sorted(cues)]
    assert block_text([]) == ""


def test_layouts_depend_only_on_the_transcript_and_the_frames(sampled):
    ts = [float(t) for t in sampled.timestamps]
    a = _cues([1.0, 30.0, 90.0])
    b = [a[2], a[0], a[1]]
    assert interleaved_texts(a, ts) == interleaved_texts(b, ts)
    assert block_text(a) == block_text(b)


def _one_per_char(text: str) -> int:
    return len(text)


def test_budget_nothing_cut_when_both_fit():
    cues = _cues([float(i) for i in range(10)])
    need = sum(len(cue_line(c)) + 1 for c in cues)
    plan = plan_transcript(cues, _one_per_char, 8, lambda n: 100 * n, budget_tokens=800 + need)
    assert plan.cut is None and plan.cues == tuple(cues) and plan.frames == 8
    assert plan.transcript_tokens == need == plan.total_transcript_tokens


def test_budget_cuts_cues_evenly_and_says_so():
    cues = _cues([float(i * 10) for i in range(100)])
    lengths = [len(cue_line(c)) + 1 for c in cues]
    room = 25 * max(lengths)
    plan = plan_transcript(cues, _one_per_char, 8, lambda n: 100 * n, budget_tokens=800 + room)
    assert room // max(lengths) <= len(plan.cues) <= room // min(lengths) and plan.frames == 8
    assert plan.transcript_tokens <= room
    assert plan.cut is not None and f"transcript {len(plan.cues)} of 100 cues" in plan.cut
    # evenly over the video: the kept cues span it, not its first minutes
    assert plan.cues[0].start < 100 and plan.cues[-1].start > 900


def test_budget_frames_policy_lowers_frames_first():
    cues = _cues([float(i) for i in range(10)])
    need = sum(len(cue_line(c)) + 1 for c in cues)
    plan = plan_transcript(cues, _one_per_char, 8, lambda n: 100 * n, budget_tokens=600 + need, policy="frames")
    assert plan.frames == 6 and plan.cues == tuple(cues)
    assert plan.cut == f"cut to fit {600 + need} tokens: frames 6 of 8"


def test_budget_frames_alone_over_is_an_error():
    with pytest.raises(ValueError, match="8 frames take 800 tokens"):
        plan_transcript(_cues([1.0]), _one_per_char, 8, lambda n: 100 * n, budget_tokens=500)


def test_derangement_is_fixed_and_has_no_fixed_point():
    ids = [f"v{i:03d}" for i in range(155)]
    d = derangement(ids)
    assert sorted(d) == ids and sorted(d.values()) == ids  # a permutation
    assert all(d[v] != v for v in ids)
    assert d == derangement(list(reversed(ids)))
    with pytest.raises(ValueError):
        derangement(["only"])


def test_source_parse(tmp_path):
    assert TranscriptSource.parse(None) == TranscriptSource("none")
    assert TranscriptSource.parse("asr").label == "asr"
    src = TranscriptSource.parse(str(tmp_path))
    assert src.kind == "dir" and src.directory == str(tmp_path.resolve()) and src.enabled
    assert TranscriptSource.parse("embedded:1") == TranscriptSource("embedded", stream=1)
    assert TranscriptSource.parse("embedded:1").label == "embedded:1"
    with pytest.raises(ValueError, match="stream number"):
        TranscriptSource.parse("embedded:x")
    with pytest.raises(ValueError, match="not none, asr, embedded"):
        TranscriptSource.parse(str(tmp_path / "missing"))


def test_load_transcript_from_a_directory(tmp_path):
    (tmp_path / "v1.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nはい\n", encoding="utf-8")
    src = TranscriptSource.parse(str(tmp_path))
    t = load_transcript(src, "v1", None)
    assert t is not None and list(t.cues) == [Cue(1.0, 2.0, "はい")]
    assert load_transcript(src, "v2", None) is None
    assert load_transcript(TranscriptSource("none"), "v1", Path("x")) is None


def test_interleave_plan_keeps_groups_whole_and_merges_runs_without_text(sampled):
    from naru_eval.core.transcripts import interleave_plan

    ts = [float(t) for t in sampled.timestamps]  # 8 frames
    assert interleave_plan([], ts, group=2) == [range(0, 8)]
    inside_first_patch = Cue((ts[0] + ts[1]) / 2, ts[1] + 1, "a")  # between frames 0 and 1: after patch 0
    before = Cue(0.0, 1.0, "b")
    after = Cue(ts[7] + 0.1, ts[7] + 1, "c")
    plan = interleave_plan([inside_first_patch, before, after], ts, group=2)
    assert plan == [cue_line(before), range(0, 2), cue_line(inside_first_patch), range(2, 8), cue_line(after)]
    assert interleave_plan([inside_first_patch], ts, group=1) == [
        range(0, 1),
        cue_line(inside_first_patch),
        range(1, 8),
    ]
    # every frame once, in order
    flat = [i for p in plan if isinstance(p, range) for i in p]
    assert flat == list(range(8))


def test_transcript_book_control_gives_another_videos_transcript(tmp_path):
    from naru_eval.core.transcripts import TranscriptBook, TranscriptInput

    for v in ("a", "b", "c"):
        (tmp_path / f"{v}.srt").write_text(f"1\n00:00:01,000 --> 00:00:02,000\n{v}の台詞\n", encoding="utf-8")
    src = TranscriptSource.parse(str(tmp_path))
    videos = {"a": None, "b": None, "c": None, "d": None}
    own = TranscriptBook(TranscriptInput(src), videos)
    assert own.get("a").cues[0].text == "aの台詞" and own.missing() == ["d"]
    control = TranscriptBook(TranscriptInput(src, control=True), videos)
    mapping = derangement(list(videos))
    for v in "abc":
        t = control.get(v)
        donor = mapping[v]
        if donor == "d":
            assert t is None
        else:
            assert t.cues[0].text == f"{donor}の台詞" and t.source.startswith(f"control:{donor}:")
