"""Transcripts through the served adapters: ``naru_openai_compat`` (the real ``openai`` SDK against
the loopback stub) interleaves the lines between the frames' image parts or puts a block after
the video; ``naru_gemini`` (its stub) puts the block after the uploaded video. Every question of a
video carries the same transcript bytes before its question (the prefix and context caches hit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_adapters.openai_compat import OpenAICompat
from naru_eval.core import provenance
from naru_eval.core.transcripts import BLOCK_HEADER, cue_line
from naru_eval.media.subtitles import read_subtitle_file
from naru_eval.settings import UserError
from tests.helpers.data import lmms_instances
from tests.helpers.gemini import FAKE_KEY, make_model, responder
from tests.helpers.stubs import OpenAIStub
from tests.helpers.stubs.gemini_server import GeminiStub

pytestmark = pytest.mark.api
TASK, SPLIT = "naru_mcq", "test"


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-naru-transcript-test")
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)
    for name in ("OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "NARU_GEMINI_UPLOAD_REGISTRY"):
        monkeypatch.delenv(name, raising=False)
    provenance.clear()
    yield
    provenance.clear()


@pytest.fixture(scope="module")
def subs(docs, tmp_path_factory) -> Path:
    """A subtitle file per video of the module's data: a cue at 0.1 s, in the middle, at the end."""
    from naru_eval.media.video import probe_video

    d = tmp_path_factory.mktemp("subs")
    for doc in docs:
        dur = probe_video(doc["video"], check_end=False).duration_s
        t = [0.1, dur / 2, max(dur - 0.2, dur / 2 + 0.1)]
        body = "\n".join(
            f"{i + 1}\n00:00:{a:06.3f} --> 00:00:{a + 0.1:06.3f}\n{doc['video_id']} の せりふ {i}\n".replace(".", ",")
            for i, a in enumerate(t)
        )
        (d / f"{doc['video_id']}.srt").write_text(body, encoding="utf-8")
    return d


def one_video(docs, n=3):
    return [d for d in docs if d["video_id"] == docs[0]["video_id"]][:n]


def openai_model(stub, tmp_path, docs, **args):
    m = OpenAICompat(model="stub", base_url=stub.base_url, response_store=str(tmp_path / "s.sqlite"), **args)
    m.task_dict = {TASK: {SPLIT: docs}}
    m.sleep = lambda s: None
    return m


def test_openai_frames_interleaved_between_the_image_parts(tmp_path, docs, subs):
    asked = one_video(docs)
    with OpenAIStub(models=("stub",)) as stub:
        m = openai_model(stub, tmp_path, asked, num_frames=4, video_mode="frames", transcript=str(subs))
        out = m.generate_until(lmms_instances(asked, TASK, SPLIT))
        reqs = stub.chat_requests()
    assert len(reqs) == 3 and not any(o.startswith("[NARU") for o in out)
    sampled = m.frames(m.to_naru_requests(lmms_instances(asked, TASK, SPLIT))[0])
    cues = read_subtitle_file(subs / f"{asked[0]['video_id']}.srt").cues
    for r in reqs:
        types = r.part_types
        assert types.count("image_url") == 4
        # each cue right after the last frame at or before its start
        frames_before = []
        for c in cues:
            at = next(i for i, p in enumerate(r.content) if p.get("type") == "text" and cue_line(c) in p["text"])
            frames_before.append(types[:at].count("image_url"))
            k = frames_before[-1]
            assert k == 0 or sampled.timestamps[k - 1] <= c.start + 0.05
            assert k == 4 or c.start < sampled.timestamps[k] + 0.05
        assert frames_before[0] == 0 and frames_before[-1] == 4
    prefixes = [r.content[:-1] for r in reqs]
    assert prefixes[0] == prefixes[1] == prefixes[2]  # byte-identical before the question
    assert m.inputs.mode == "images+transcript"
    # the stub's tokenizer is not at hand: the documented estimate, nothing cut without a context
    assert "3/3 cues" in provenance.current(asked[0]["video_id"])["transcript"]


def test_answers_reused_from_the_store_still_say_what_transcript_they_were_given(tmp_path, docs, subs):
    asked = one_video(docs, 2)
    vid = asked[0]["video_id"]
    with OpenAIStub(models=("stub",)) as stub:
        first = openai_model(stub, tmp_path, asked, num_frames=4, video_mode="frames", transcript=str(subs))
        first.generate_until(lmms_instances(asked, TASK, SPLIT))
        given = provenance.current(vid)["transcript"]
        provenance.clear()  # a new process resuming the run
        again = openai_model(stub, tmp_path, asked, num_frames=4, video_mode="frames", transcript=str(subs))
        again.generate_until(lmms_instances(asked, TASK, SPLIT))
        assert len(stub.chat_requests()) == 2  # nothing asked again
    assert again.reused == 2
    assert provenance.current(vid)["transcript"] == given


def test_openai_video_mode_refuses_interleaved_and_takes_block(tmp_path, docs, subs):
    with pytest.raises(UserError, match="transcript_layout=interleaved is not available"):
        OpenAICompat(model="Qwen/Qwen2.5-VL-7B-Instruct", base_url="http://127.0.0.1:1/v1", transcript=str(subs))
    asked = one_video(docs, 2)
    with OpenAIStub(models=("stub",)) as stub:
        m = openai_model(
            stub, tmp_path, asked, num_frames=4, video_mode="video", transcript=str(subs), transcript_layout="block"
        )
        m.generate_until(lmms_instances(asked, TASK, SPLIT))
        reqs = stub.chat_requests()
    for r in reqs:
        assert r.part_types == ["video_url", "text", "text"]
        assert r.content[1]["text"].startswith(BLOCK_HEADER)
    assert reqs[0].content[:2] == reqs[1].content[:2]


def test_gemini_block_after_the_video_and_interleaved_refused(tmp_path, docs, subs):
    with GeminiStub(api_key=FAKE_KEY, responder=responder) as stub:
        with pytest.raises(UserError, match="Gemini samples the uploaded file itself"):
            make_model(stub, tmp_path, docs, transcript=str(subs))
        asked = one_video(docs, 2)
        model, _ = make_model(stub, tmp_path, asked, transcript=str(subs), transcript_layout="block")
        model.generate_until(lmms_instances(asked, TASK, SPLIT))
        reqs = stub.generate_requests()
    assert len(reqs) == 2
    for r in reqs:
        assert [next(iter(p)) for p in r.parts] == ["fileData", "text"]
        assert r.text.startswith(BLOCK_HEADER) and f"{asked[0]['video_id']} の せりふ 2" in r.text
    texts = [r.text for r in reqs]
    head = texts[0][: texts[0].index("\n[N.") if "\n[N." in texts[0] else 0]
    assert head and texts[1].startswith(head)
    assert model.inputs.mode == "video+audio+transcript"
