"""``naru_openai_compat`` video mode at the wire: our sampled frames as one vLLM ``video/jpeg``
part with their timing, the input mode in the provenance and the store key, and the prefix cache
hit once per video (through the real ``openai`` SDK against the loopback stub, which reads the
video part as vLLM does and models a prefix cache in tokens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from model_adapters.openai_compat import OpenAICompat
from naru_eval.core import provenance
from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset, read_frame_index
from naru_eval.lmms.tasks import doc_to_text
from naru_eval.media.plan import uniform_indices
from naru_eval.providers.openai_compat.args import resolve_video_mode
from tests.helpers.data import lmms_instances
from tests.helpers.stubs import OpenAIStub, Reply, StubRequest

pytestmark = pytest.mark.api

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"
TASK, SPLIT = "naru_mcq", "test"
QUESTION_PART = b'{"type":"text","text":'  # the SDK's serialization (separators without spaces)


@pytest.fixture(autouse=True)
def env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-naru-video-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    provenance.clear()
    yield
    provenance.clear()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """36 questions (4 per category) over 4 short videos: about 9 questions per video (the
    ``docs`` fixture of conftest.py reads them)."""
    return make_dataset(
        tmp_path_factory.mktemp("naru36"), SyntheticSpec(counts={c: 4 for c in CATEGORIES}, n_videos=4, seed=11)
    )


def on_video(docs: list[dict[str, Any]], video: Path, n: int = 3) -> list[dict[str, Any]]:
    """``n`` questions of one video, moved onto ``video``."""
    first = docs[0]["video_id"]
    return [{**d, "video": str(video)} for d in docs if d["video_id"] == first][:n]


def make_model(stub: OpenAIStub, tmp_path: Path, docs, model: str = QWEN, **args: Any) -> OpenAICompat:
    m = OpenAICompat(
        model=model,
        base_url=stub.base_url,
        response_store=str(tmp_path / "store.sqlite"),
        retry_base_delay=0.01,
        **args,
    )
    m.task_dict = {TASK: {SPLIT: docs}}
    m.sleep = lambda s: None
    return m


def instances(docs):
    return lmms_instances(docs, TASK, SPLIT, gen_kwargs={"max_new_tokens": 32})


# ------------------------------------------------------------------------------- which mode


@pytest.mark.parametrize(
    "served,mode",
    [
        ("Qwen/Qwen2.5-VL-7B-Instruct", "video"),
        ("Qwen/Qwen2-VL-7B-Instruct", "video"),
        ("Qwen/Qwen3-VL-8B-Instruct", "video"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "video"),
        ("Qwen/Qwen3.5-9B", "video"),
        ("qwen2.5-omni-7b", "video"),
        ("OpenGVLab/InternVL3_5-8B-HF", "frames"),
        ("Qwen/Qwen2.5-7B-Instruct", "frames"),  # a text model: no video processor
        ("stub", "frames"),
    ],
)
def test_video_is_the_default_for_qwen_family_models(served, mode):
    assert resolve_video_mode("auto", served) == mode
    assert resolve_video_mode("frames", "Qwen/Qwen2.5-VL-7B-Instruct") == "frames"  # explicit wins
    assert OpenAICompat(model=served, base_url="http://127.0.0.1:1/v1").video_mode == mode


# -------------------------------------------------------------------- the video part itself


@pytest.fixture(scope="module")
def long_indexed_video(tmp_path_factory) -> Path:
    """600 frames at 10 fps (60 s), 64x64, frame i showing i in binary."""
    from naru_eval.core.synthetic import write_indexed_video

    return write_indexed_video(tmp_path_factory.mktemp("idx600") / "v600.mp4", n_frames=600, fps=10, gop=50)


@pytest.mark.parametrize("n,total", [(8, 60), (128, 600)])
def test_one_video_part_holds_exactly_the_sampled_frames_in_order_with_their_timing(
    tmp_path, docs, indexed_video, long_indexed_video, n, total
):
    """Qwen default at ``n`` frames of a 10 fps video whose frames show their own number (128:
    the official budget): one video part and no image part per question; the stub decodes it
    back to pixels and every frame is the one the sampler picked, in order; the timing is the
    sampler's."""
    asked = on_video(docs, indexed_video if total == 60 else long_indexed_video)
    with OpenAIStub(models=(QWEN,), owner="vllm") as stub:
        model = make_model(stub, tmp_path, asked, num_frames=n)
        out = model.generate_until(instances(asked))
        reqs = stub.chat_requests()
    assert [r.status for r in reqs] == [200] * 3 and not any(o.startswith("[NARU") for o in out)
    picked = uniform_indices(total, n)
    sampled = model.frames(model.to_naru_requests(instances(asked))[0])
    assert list(sampled.indices) == picked
    for r in reqs:
        assert r.part_types == ["video_url", "text"]  # one video, then the question; no image part
        (video,) = r.video_frames()
        assert [read_frame_index(f) for f in video] == picked  # the sampled frames, in order
        assert all(f.shape == sampled.frames[0].shape for f in video)
        assert r.media_io_kwargs == {
            "video": {
                "num_frames": -1,  # keep every frame sent, whatever the server's default
                "fps": pytest.approx(10.0),
                "frames_indices": picked,
                "total_num_frames": total,
                "duration": pytest.approx(total / 10, abs=0.11),
            }
        }
    # the timestamps the model's processor derives (frame / fps) are the sampler's
    meta = reqs[0].media_io_kwargs["video"]
    assert [i / meta["fps"] for i in meta["frames_indices"]] == pytest.approx(list(sampled.timestamps), abs=1e-6)
    assert provenance.current()["input_mode"] == "video"


def test_video_requests_are_byte_identical_up_to_the_question(tmp_path, docs):
    same = [d for d in docs if d["video_id"] == docs[0]["video_id"]][:3]
    bodies: list[bytes] = []
    for run in ("a", "b"):  # a second adapter encodes the video afresh (a rerun)
        with OpenAIStub(models=(QWEN,)) as stub:
            model = make_model(stub, tmp_path / run, same, num_frames=4, max_concurrency=1)
            model.generate_until(instances(same))
            bodies += [r.raw for r in sorted(stub.chat_requests(), key=lambda r: r.received)]
    assert len(bodies) == 6
    split = [(b[: b.rfind(QUESTION_PART)], b[b.rfind(QUESTION_PART) :]) for b in bodies]
    assert len({p for p, _ in split}) == 1, "the bytes before the question differ within one video"
    prefix = split[0][0]
    assert prefix.count(b"data:video/jpeg;base64,") == 1 and b"image_url" not in prefix
    # the timing follows the question, the same bytes for each of the video's questions
    assert len({q.split(b'"media_io_kwargs":', 1)[1] for _, q in split}) == 1
    assert len({q for _, q in split[:3]}) == 3


def test_the_stub_refuses_a_video_part_the_server_would_refuse(tmp_path, docs, indexed_video):
    """The wire checks are real: timing that does not match the frames sent is a 400."""
    asked = on_video(docs, indexed_video, n=1)
    with OpenAIStub(models=(QWEN,)) as stub:
        model = make_model(stub, tmp_path, asked, num_frames=4, max_retries=0)
        real = model.extra_body

        def short_indices(request):
            body = json.loads(json.dumps(real(request)))
            body["media_io_kwargs"]["video"]["frames_indices"] = body["media_io_kwargs"]["video"]["frames_indices"][:3]
            return body

        model.extra_body = short_indices  # type: ignore[method-assign]
        out = model.generate_until(instances(asked))
        assert stub.chat_requests()[0].status == 400
    assert "frames_indices must be one int per frame (4)" in out[0]


def test_sglang_is_refused_in_video_mode_before_any_question(tmp_path, docs):
    with OpenAIStub(models=(QWEN,), owner="sglang") as stub:
        model = make_model(stub, tmp_path, docs, num_frames=4)
        with pytest.raises(ValueError, match="SGLang server, which takes no pre-extracted frames"):
            model.generate_until(instances(docs))
        assert stub.chat_requests() == []
        model = make_model(stub, tmp_path / "b", docs[:1], num_frames=4, video_mode="frames")
        model.generate_until(instances(docs[:1]))  # frames mode is fine on SGLang
        assert stub.chat_requests()[0].part_types == ["image_url"] * 4 + ["text"]


# ----------------------------------------------------------- the mode in payloads and the key


@pytest.mark.parametrize(
    "mode,input_mode,parts",
    [("video", "video", ["video_url", "text"]), ("frames", "images", ["image_url"] * 4 + ["text"]),
     ("video_url", "server-sampled", ["video_url", "text"])],
)  # fmt: skip
def test_the_input_mode_is_recorded_for_every_sample(tmp_path, docs, mode, input_mode, parts):
    # the sampling the payloads record: ours, unless the server samples the video itself
    recorded = {
        "adapter": "naru_openai_compat",
        "input_mode": input_mode,
        "sampling": "default" if mode == "video_url" else "4 Frames",
        "variant": f"video_mode={mode}",
    }
    with OpenAIStub(models=(QWEN,)) as stub:
        model = make_model(stub, tmp_path, docs[:2], num_frames=4, video_mode=mode)
        assert model.provenance() == recorded
        model.generate_until(instances(docs[:2]))
        assert {tuple(r.part_types) for r in stub.chat_requests()} == {tuple(parts)}
    assert provenance.current() == recorded
    assert model.describe()["input_mode"] == input_mode


def test_answers_from_one_mode_are_never_reused_for_another(tmp_path, docs):
    asked = docs[:4]
    keys, sent, reused = [], [], []
    with OpenAIStub(models=(QWEN,)) as stub:
        for mode in ("video", "frames", "video_url", "video"):  # one store throughout
            stub.reset()
            model = make_model(stub, tmp_path, asked, num_frames=4, video_mode=mode)
            model.generate_until(instances(asked))
            keys.append(model.request_key(model.to_naru_requests(instances(asked))[0]))
            sent.append(len(stub.chat_requests()))
            reused.append(model.reused)
    assert sent == [4, 4, 4, 0] and reused == [0, 0, 0, 4]  # each mode asks afresh; video again reuses
    assert len({k[0] for k in keys}) == 3 and keys[0] == keys[3]  # three modes, three run keys


# ---------------------------------------------------------------------- the prefix cache


def prefills_per_video(stub: OpenAIStub, docs) -> dict[str, int]:
    """Video prefills the stub's prefix cache counted, per video (by the requests' prefix key)."""
    video_of = {doc_to_text(d): d["video_id"] for d in docs}
    key_video = {r.prefix_key: video_of[r.text] for r in stub.chat_requests()}
    return {key_video[k]: n for k, n in stub.prefills.items()}


@pytest.mark.parametrize("mode", ["video", "frames"])
def test_one_video_prefill_per_video_with_concurrency_across_videos(tmp_path, docs, mode):
    """8 requests in flight at most, ~9 questions per video: a video's first question goes alone,
    the others after it is answered, so the server computes each video's prefix once; asked all
    at once (prefix_first=false), several of a video's questions compute it side by side."""
    videos = {d["video_id"] for d in docs}
    with OpenAIStub(models=(QWEN,), prefix_cache=True, prefill_s_per_token=1e-4) as stub:
        model = make_model(stub, tmp_path, docs, num_frames=4, max_concurrency=8, video_mode=mode)
        model.generate_until(instances(docs))
        assert prefills_per_video(stub, docs) == {v: 1 for v in videos}
        assert stub.max_in_flight > 1  # the other questions of a video still go concurrently
        usage = [model.store.get(*model.request_key(r)).usage for r in model.to_naru_requests(instances(docs))]
        assert sum(u["cached_tokens"] > 0 for u in usage) == len(docs) - len(videos)

    with OpenAIStub(models=(QWEN,), prefix_cache=True, prefill_s_per_token=1e-4) as stub:
        eager = make_model(stub, tmp_path / "eager", docs, num_frames=4, max_concurrency=8, video_mode=mode,
                           prefix_first=False)  # fmt: skip
        eager.generate_until(instances(docs))
        assert sum(prefills_per_video(stub, docs).values()) > len(videos)


def test_a_failed_first_question_releases_the_others(tmp_path, docs):
    first = min(range(len(docs)), key=lambda i: (docs[i]["video"], i))  # the first one asked

    def responder(req: StubRequest) -> str | Reply:
        return Reply(status=500) if req.text == doc_to_text(docs[first]) else "B"

    with OpenAIStub(models=(QWEN,), responder=responder) as stub:
        model = make_model(stub, tmp_path, docs, num_frames=2, max_concurrency=4, max_retries=0)
        out = model.generate_until(instances(docs))
    assert sum(o == "B" for o in out) == len(docs) - 1 and list(model.failures) == [docs[first]["question_id"]]


@pytest.mark.parametrize("served,hf_model", [(QWEN, "naru_qwen2_5_vl"), ("Qwen/Qwen3-VL-8B-Instruct", "naru_qwen3_vl")])
def test_rate_sampling_sends_the_frames_the_hf_path_gives_the_model(tmp_path, docs, served, hf_model):
    """fps= on a Qwen family: qwen-vl-utils' frame count and size, the very frames (same pixels,
    same frame numbers) the HF adapter of that family hands its processor."""
    from naru_eval.adapters.registry import adapter_class

    hf = adapter_class(hf_model)(pretrained="unused", fps="2", device="cpu", store="false")
    asked = docs[:1]
    with OpenAIStub(models=(served,)) as stub:
        model = make_model(stub, tmp_path, asked, model=served, fps=2)
        model.generate_until(instances(asked))
        (req,) = stub.chat_requests()
    request = model.to_naru_requests(instances(asked))[0]
    ours, theirs = model.frames(request), hf.frames(request)
    plan = hf.builder.video_plan(request.video)
    assert len(ours.frames) == plan.nframes and ours.frames.shape[1:3] == (plan.height, plan.width)
    assert list(ours.indices) == list(theirs.indices) and (ours.frames == theirs.frames).all()
    (video,) = req.video_frames()
    assert len(video) == plan.nframes and video[0].shape[:2] == (plan.height, plan.width)
    assert req.media_io_kwargs["video"]["frames_indices"] == [int(i) for i in theirs.indices]
    assert model.describe()["qwen_vl_utils_sizing"]["patch_size"] == hf.builder.patch_size


def test_a_budget_above_the_videos_frames_is_still_a_valid_video(tmp_path, docs, indexed_video):
    """96 frames of a 60-frame video: the sampler repeats frames; the part still holds one frame
    number per frame and a frame count that covers them (else vLLM refuses it)."""
    asked = on_video(docs, indexed_video, n=1)
    with OpenAIStub(models=(QWEN,)) as stub:
        model = make_model(stub, tmp_path, asked, num_frames=96)
        model.generate_until(instances(asked))
        (req,) = stub.chat_requests()
    assert req.status == 200
    meta = req.media_io_kwargs["video"]
    (video,) = req.video_frames()
    assert [read_frame_index(f) for f in video] == meta["frames_indices"] == uniform_indices(60, 96)
    assert meta["total_num_frames"] == 96 and meta["fps"] == pytest.approx(10.0)


def test_decode_ahead_sends_the_same_bytes(tmp_path, docs, monkeypatch):
    """decode_workers: the next videos decode in worker processes (the base's decode-ahead, a
    fresh frame cache each run); what is sent does not change."""
    from naru_eval.media import frame_cache

    monkeypatch.delenv("NARU_FRAME_CACHE", raising=False)
    asked = docs[:9]
    videos = {d["video"] for d in asked}
    bodies = []
    for workers in (0, 2):
        monkeypatch.setattr(frame_cache, "_DEFAULT", None)
        with OpenAIStub(models=(QWEN,), latency=0.2) as stub:
            model = make_model(
                stub, tmp_path / str(workers), asked, num_frames=4, decode_workers=workers, max_concurrency=2
            )
            model.generate_until(instances(asked))
            bodies.append(sorted(r.raw for r in stub.chat_requests()))
        stats = frame_cache.default_cache().stats
        assert stats.decodes + stats.prefetched == len(videos)  # each video decoded once
        assert (stats.prefetched > 0) == (workers > 0)  # with workers, some of them ahead
    assert bodies[0] == bodies[1] and len(bodies[0]) == 9


def test_a_server_too_short_for_the_longest_video_is_refused_before_any_question(tmp_path, docs):
    """vLLM and SGLang list ``max_model_len``: the media tokens of the costliest video (the Qwen
    processor's rule) plus the question must fit it, else one error and nothing asked."""
    from naru_eval.media.plan import target_size
    from naru_eval.media.video import probe_video
    from naru_eval.providers.openai_compat.preflight import TEXT_MARGIN_TOKENS
    from naru_eval.providers.openai_compat.served import media_tokens

    assert media_tokens(QWEN, "video", 4, 64, 64) == 2 * (12 * 12) + 2  # 64 px grows to the 336 px floor
    info = probe_video(docs[0]["video"], check_end=False)
    w, h = target_size(info.width, info.height, 448 * 448)
    tokens = media_tokens(QWEN, "video", 4, h, w)
    assert tokens is not None  # the synthetic videos all have one size
    with OpenAIStub(models=(QWEN,), max_model_len=tokens + TEXT_MARGIN_TOKENS - 1) as stub:
        model = make_model(stub, tmp_path, docs, num_frames=4)
        with pytest.raises(
            ValueError, match=rf"costs Qwen/Qwen2.5-VL-7B-Instruct {tokens:,} prompt tokens as one video"
        ):
            model.generate_until(instances(docs))
        assert stub.chat_requests() == []
    with OpenAIStub(models=(QWEN,), max_model_len=tokens + TEXT_MARGIN_TOKENS) as stub:
        model = make_model(stub, tmp_path / "b", docs[:2], num_frames=4)
        model.generate_until(instances(docs[:2]))
        assert len(stub.chat_requests()) == 2
    assert media_tokens(QWEN, "frames", 128, 336, 596) == 128 * (12 * 21 + 2)  # images: no temporal merge
    assert media_tokens(QWEN, "video", 128, 336, 596) == 64 * 252 + 2
    assert media_tokens("Qwen/Qwen3-VL-8B-Instruct", "video", 128, 336, 596) == 64 * (10 * 19 + 8) + 2
    assert media_tokens("OpenGVLab/InternVL3_5-8B", "frames", 128, 336, 596) is None
