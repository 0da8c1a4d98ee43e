"""``naru_openai_compat`` with the soundtrack, at the wire (the real ``openai`` SDK against the
loopback stub, which decodes what was sent): our frames as one video part, then the audio plan's
windows as ``audio_url`` WAV parts of our exact samples, in time order, the input mode in the
provenance and the store key, a silent video refused before anything is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_adapters.openai_compat import OpenAICompat
from naru_eval.core import provenance
from naru_eval.media.audio import sample_audio
from tests.helpers.data import lmms_instances
from tests.helpers.soundtrack import Soundtrack, onsets, silent, write
from tests.helpers.stubs import OpenAIStub

pytestmark = pytest.mark.api

OMNI = "Qwen/Qwen2.5-Omni-7B"
TASK, SPLIT = "naru_mcq", "test"
SPEC = Soundtrack(seconds=60.0, audio_start_s=0.48, beeps=(7.0, 31.0, 52.0), colour_changes=(20.0, 40.0))


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-naru-audio-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    provenance.clear()
    yield
    provenance.clear()


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("oa_audio")
    return {"late": write(root / "late.mp4", SPEC), "silent": silent(root / "silent.mp4", SPEC)}


def docs_for(video: Path, n: int = 2) -> list[dict[str, Any]]:
    return [
        {"question_id": f"q{i}", "video_id": video.stem, "video": str(video), "category": "C.1", "duration_s": 60.0,
         "question": f"Which sound? {i}", "options": ["a", "b", "c", "d"], "answer": "A"}
        for i in range(n)
    ]  # fmt: skip


def make_model(stub: OpenAIStub, tmp_path: Path, docs, **args: Any) -> OpenAICompat:
    args = {"model": OMNI, **args}
    m = OpenAICompat(
        base_url=stub.base_url,
        response_store=str(tmp_path / "store.sqlite"),
        retry_base_delay=0.01,
        num_frames=8,
        audio="true",
        **args,
    )
    m.task_dict = {TASK: {SPLIT: docs}}
    m.sleep = lambda s: None
    return m


def run(m, docs):
    return m.generate_until(lmms_instances(docs, TASK, SPLIT, gen_kwargs={"max_new_tokens": 8}))


def test_frames_then_our_audio_windows(tmp_path, videos):
    docs = docs_for(videos["late"])
    with OpenAIStub(models=[OMNI], owner="vllm", max_model_len=16_000, responder=lambda r: "A") as stub:
        m = make_model(stub, tmp_path, docs, audio_reserve_tokens=15_000)
        assert run(m, docs) == ["A", "A"]
        reqs = stub.chat_requests()
    assert provenance.current()["input_mode"] == "video+audio"
    first = reqs[0]
    types = first.part_types
    assert types[0] == "video_url" and types[-1] == "text" and set(types[1:-1]) == {"audio_url"}
    (plan,) = m._audio_plans.values()  # the one video's frames
    assert not plan.full  # 16,000 - 15,000 - the frames' tokens: windows around the 8 frames
    clips = first.audio_clips()
    assert len(clips) == len(plan.windows) and all(rate == 16_000 and x.dtype == np.float32 for rate, x in clips)
    want = sample_audio(videos["late"], plan.windows)
    for k, (_, got) in enumerate(clips):
        assert np.array_equal(got, want.window(k))  # our samples, bit for bit, window by window
    # the beeps inside the windows are where the soundtrack has them
    heard = [a + t for (a, _), (_, x) in zip(plan.windows, clips, strict=True) for t in onsets(x, 16_000)]
    inside = [b for b in SPEC.beeps if any(a <= b < e for a, e in plan.windows)]
    assert heard == pytest.approx(inside, abs=0.003)
    assert reqs[1].media_urls == first.media_urls  # the video's second question: the same prefix


def test_long_windows_are_split_into_30_s_parts(tmp_path, videos):
    docs = docs_for(videos["late"], n=1)
    with OpenAIStub(models=[OMNI], owner="vllm", max_model_len=32_768, responder=lambda r: "A") as stub:
        m = make_model(stub, tmp_path, docs)
        run(m, docs)
        clips = stub.chat_requests()[0].audio_clips()
    assert all(p.full for p in m._audio_plans.values())
    assert [len(x) for _, x in clips] == [480_000, 480_000]  # 60 s: two 30-s parts
    assert np.array_equal(np.concatenate([x for _, x in clips]), sample_audio(videos["late"], [(0.0, 60.0)]).samples)


def test_audio_only_and_the_store_key(tmp_path, videos):
    docs = docs_for(videos["late"], n=1)
    with OpenAIStub(models=[OMNI], owner="vllm", max_model_len=32_768, responder=lambda r: "B") as stub:
        both = make_model(stub, tmp_path, docs)
        alone = make_model(stub, tmp_path, docs, video="false")
        run(alone, docs)
        assert provenance.current()["input_mode"] == "audio"
        assert stub.chat_requests()[0].part_types == ["audio_url", "audio_url", "text"]
        r = alone.to_naru_requests(lmms_instances(docs, TASK, SPLIT))[0]
        assert both.request_key(r)[0] != alone.request_key(r)[0]  # never served each other's answers


def test_a_silent_video_is_refused_before_any_request(tmp_path, videos):
    docs = docs_for(videos["late"], 1) + [
        dict(d, question_id="q9", video=str(videos["silent"])) for d in docs_for(videos["silent"], 1)
    ]
    with OpenAIStub(models=[OMNI], owner="vllm", max_model_len=32_768, responder=lambda r: "A") as stub:
        m = make_model(stub, tmp_path, docs)
        with pytest.raises(ValueError, match="no usable audio track") as e:
            run(m, docs)
        assert str(videos["silent"]) in str(e.value) and stub.chat_requests() == []


def test_audio_needs_a_known_front_end_and_our_frames():
    with pytest.raises(ValueError, match="audio_encoder="):
        OpenAICompat(model="some/model", base_url="http://127.0.0.1:1/v1", audio="true")
    with pytest.raises(ValueError, match="video_mode=video_url"):
        OpenAICompat(model=OMNI, base_url="http://127.0.0.1:1/v1", audio="true", video_mode="video_url")
    m = OpenAICompat(model="Qwen/Qwen3-Omni-30B-A3B-Instruct", base_url="http://127.0.0.1:1/v1", audio="true")
    assert m.audio_encoder().tokens_per_second == 13.0
    assert m.describe()["audio"]["encoder"].startswith("Qwen3-Omni")


def test_the_audio_recipe_holds_what_the_adapter_sends():
    """docs/openai_compat.md's audio recipe: its audio limit holds the parts of a 240-minute video's
    plan at 128 frames (one per window; the windows' count at most 128), its max-model-len the
    frames, the audio and the reserve, and its model args make an adapter with the soundtrack on."""
    import json
    import re
    import shlex

    from naru_eval.media.audio_plan import QWEN2_5_OMNI, plan_audio
    from naru_eval.providers.openai_compat.served import media_tokens

    doc = (Path(__file__).resolve().parents[2] / "docs" / "openai_compat.md").read_text()
    section = doc.split("## Audio (omni models)", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    serve, evaluate = (shlex.split(c) for c in re.sub(r"\\\n", " ", block).strip().splitlines())
    limits = json.loads(serve[serve.index("--limit-mm-per-prompt") + 1])
    max_len = int(serve[serve.index("--max-model-len") + 1])
    args = dict(kv.split("=", 1) for kv in evaluate[evaluate.index("--model_args") + 1].split(","))
    m = OpenAICompat(**args)
    assert m.gives_audio and m.inputs.mode == "video+audio" and m.audio_encoder() is QWEN2_5_OMNI
    seconds = 240 * 60.0
    frames = media_tokens(args["model"], "video", 128, 336, 596)
    times = (np.arange(128) + 0.5) * seconds / 128
    plan = plan_audio(QWEN2_5_OMNI, seconds, times.tolist(), max_len - frames - m.audio_reserve())
    assert not plan.full and plan.window_s == 4.0
    parts = sum(int(np.ceil((e - s) / 30.0)) for s, e in plan.windows)
    assert parts <= limits["audio"] and limits["video"] == 1
    assert frames + plan.tokens + m.audio_reserve() <= max_len
    assert "--enable-prefix-caching" in serve and '"num_frames": -1' in block


def test_what_fails_at_answer_time_is_refused_before_any_request(tmp_path, videos, capsys):
    """Issue 33, finding 4: a Qwen-Omni served under its own name (vLLM --served-model-name) with
    audio=true passed the preflight, then failed every question at answer time (its frames'
    tokens are read from a family's name), and the run went on to its results. Now it is
    refused before anything is asked, with the fix, as is a server that does not say its
    context; each question's failure at answer time said the same, once per question."""
    docs = docs_for(videos["late"])
    with OpenAIStub(models=["my-omni"], owner="vllm", max_model_len=16_000, responder=lambda r: "A") as stub:
        m = make_model(stub, tmp_path, docs, model="my-omni", audio_encoder="qwen2_5_omni")
        with pytest.raises(SystemExit) as stop:
            run(m, docs)
        assert stop.value.code == 2 and stub.chat_requests() == []
    said = capsys.readouterr().err
    assert "naru_openai_compat: audio=true, and nothing was asked" in said and "--served-model-name" in said
    with OpenAIStub(models=[OMNI], owner="vllm", responder=lambda r: "A") as stub:  # no max_model_len listed
        m = make_model(stub, tmp_path, docs)
        with pytest.raises(SystemExit):
            run(m, docs)
        assert stub.chat_requests() == []
    assert "did not report its max_model_len" in capsys.readouterr().err
