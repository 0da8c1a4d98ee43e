"""No run on nothing: every adapter's sampling arguments go through its typed args, finite and
positive, refused before anything is loaded or asked (one error naming the adapter and the
argument); and a request whose frames were asked but none came is a failure, never a prompt sent
without its video."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.adapters.registry import adapter_class, registered
from naru_eval.adapters.request import FAILED_MARKER, NaruRequest, RequestFailed
from naru_eval.core.synthetic import SyntheticSpec, make_dataset, write_indexed_video
from tests.helpers.data import docs_of, lmms_instances
from tests.helpers.families import processors_without_checkpoint
from tests.helpers.stubs import OpenAIStub

ADAPTERS = list(registered())


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key-not-real-0123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)


def required(model_id: str, tmp_path: Path) -> dict[str, str]:
    """The args an adapter cannot be made without (a checkpoint, a served model, predictions)."""
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"question_id": "q1", "response": "A"}\n', encoding="utf-8")
    fields = adapter_class(model_id).Args.model_fields
    out = {"store": "false"}
    for name, value in (("pretrained", "/no/such/checkpoint"), ("predictions", str(preds)), ("model", "m")):
        if name in fields and (fields[name].is_required() or fields[name].default is None):
            out[name] = value
    return out


BAD = [
    ("num_frames", "0"),
    ("num_frames", "-4"),
    ("max_frames", "-1"),
    ("fps", "0"),
    ("fps", "-1"),
    ("fps", "nan"),
    ("fps", "inf"),
    ("max_pixels", "0"),
    ("batch_size", "0"),
]


@pytest.mark.parametrize("model_id", ADAPTERS)
@pytest.mark.parametrize(("arg", "value"), BAD)
def test_a_non_positive_or_non_finite_sampling_arg_is_refused_by_every_adapter(model_id, arg, value, tmp_path):
    """``fps=inf`` used to reach the sampler (int(inf) there), ``num_frames=0`` an API request with
    no image, ``batch_size=0`` lmms-eval; Gemini takes no frame count at all."""
    cls = adapter_class(model_id)
    with pytest.raises(ValueError) as e:
        cls(**required(model_id, tmp_path), **{arg: value})
    msg = str(e.value)
    assert msg.startswith(f"{model_id}: ") and arg in msg, msg
    if arg in cls.Args.model_fields:
        assert f"{arg}={value!r}" in msg  # the argument and the value given


@pytest.mark.parametrize("model_id", ADAPTERS)
def test_a_word_for_a_number_names_the_adapter_and_the_argument(model_id, tmp_path):
    arg = "num_frames" if model_id != "naru_gemini" else "fps"
    with pytest.raises(ValueError, match=rf"^{model_id}: .*{arg}='abc'"):
        adapter_class(model_id)(**required(model_id, tmp_path), **{arg: "abc"})


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5"])
def test_gemini_refuses_a_temperature_that_is_not_a_finite_non_negative_number(value):
    with pytest.raises(ValueError, match=rf"naru_gemini: temperature='{value}'"):
        adapter_class("naru_gemini")(temperature=value, store="false")
    assert adapter_class("naru_gemini")(temperature="0.5", store="false").temperature == 0.5


@pytest.mark.parametrize("model_id", [m for m, e in registered().items() if e.checkpoints])
def test_an_hf_dtype_it_cannot_load_is_refused_before_the_checkpoint_loads(model_id):
    """``dtype=float8`` used to pass the args and fail only in from_pretrained (after the wait)."""
    with pytest.raises(ValueError, match=rf"{model_id}: dtype='float8'"):
        adapter_class(model_id)(pretrained="/no/such/checkpoint", dtype="float8")
    assert (
        adapter_class(model_id)(pretrained="/no/such/checkpoint", dtype="bfloat16").checkpoint.dtype_name == "bfloat16"
    )


def _no_frames(monkeypatch) -> None:
    """The frame cache hands the adapter an empty sampling (a video that yields no frame)."""
    from naru_eval.media import frame_cache

    real = frame_cache.default_cache()

    class Empty:
        def get(self, path, **params):
            s = real.get(path, **params)
            return s._replace(frames=s.frames[:0], indices=s.indices[:0], timestamps=s.timestamps[:0])

    monkeypatch.setattr(frame_cache, "default_cache", lambda: Empty())


def test_an_api_request_without_frames_fails_and_sends_nothing(tmp_path, monkeypatch):
    """The OpenAI-compatible adapter used to send such a question with zero images; now the
    request fails (stored as a failure, scored invalid) and nothing reaches the server."""
    docs = docs_of(make_dataset(tmp_path / "data", SyntheticSpec(counts={"N.1": 2}, n_videos=1, seed=3)))
    with OpenAIStub(models=("gpt-4o",)) as stub:
        model = adapter_class("naru_openai_compat")(
            model="gpt-4o", base_url=stub.base_url, num_frames="4", store="false", check_model="false"
        )
        model.task_dict = {"naru_mcq": {"test": docs}}
        _no_frames(monkeypatch)
        out = model.generate_until(lmms_instances(docs, "naru_mcq", "test"))
        assert stub.chat_requests() == []
    assert all(o.startswith(FAILED_MARKER) and "no frames sampled" in o for o in out)


@pytest.mark.parametrize("model_id", ["naru_qwen2_5_vl", "naru_internvl3_5"])
def test_an_hf_request_without_frames_fails_before_the_model_loads(model_id, tmp_path, monkeypatch):
    video = write_indexed_video(tmp_path / "v.mp4", n_frames=20, fps=10, gop=10)
    processors_without_checkpoint(monkeypatch)
    a = adapter_class(model_id)(pretrained="/no/such/checkpoint", num_frames="4", store="false", device="cpu")
    _no_frames(monkeypatch)
    req = NaruRequest({"question_id": "q"}, "Which?", [str(video)], {}, "naru_mcq", 0)
    with pytest.raises(RequestFailed, match="no frames sampled"):
        a.respond(req)
    assert a.model is None
