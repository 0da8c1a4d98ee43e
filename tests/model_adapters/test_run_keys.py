"""Run keys, provenance and the frames asked for are what they were before the adapters became
one module per family: ``data/describe_main.json`` holds ``describe()`` (the JSON the response
store's run key hashes), the run key, the provenance and the sampling parameters handed to the
frame cache for 92 argument sets over every adapter, captured from the code before the
restructure. Stored answers keep matching only while these stay byte for byte the same.

Two changes since the capture are deliberate, and checked as such: every adapter that sends
naru-eval's frames names how their pixels are made (``describe()["pixels"]``: frames converted
with BT.601 whatever their tags are never reused), and the families whose reference resizes the
native frames (Qwen by rate, InternVL3.5, Nemotron-Omni) ask the sampler for that exact size
(``size``/``resize``, docs/video.md) instead of a pixel cap; the frame count and rate are the
capture's. And Nemotron-Omni's frame labels are the frames' true times (docs/adapters.md): its
captured run keys carry ``frame_labels``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from naru_eval.adapters.registry import adapter_class
from naru_eval.core.synthetic import write_indexed_video
from naru_eval.media.pixels import CONVERSION
from naru_eval.store.responses import run_key
from tests.helpers.families import processors_without_checkpoint

CASES = json.loads((Path(__file__).parent / "data" / "describe_main.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> str:
    """The capture's video: 300 frames at 10 fps (30 s), 64x64."""
    return str(write_indexed_video(tmp_path_factory.mktemp("rk") / "v30.mp4", n_frames=300, fps=10, gop=10))


@pytest.fixture(autouse=True)
def _processors(monkeypatch):
    processors_without_checkpoint(monkeypatch)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key-not-real-0123456789")
    for name in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "OPENAI_BASE_URL", "NARU_GEMINI_PRICES", "MODEL_SEQ_LEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['adapter']}-{i}" for i, c in enumerate(CASES)])
def test_describe_run_key_provenance_and_frames_are_unchanged(case, tmp_path, video):
    args = dict(case["args"])
    if "predictions" in args:  # the capture's predictions file (not part of describe())
        preds = tmp_path / "preds.jsonl"
        preds.write_text('{"question_id": "q1", "response": "A"}\n', encoding="utf-8")
        args["predictions"] = str(preds)
    a = adapter_class(case["adapter"])(**args)
    desc = a.describe()
    pixels = desc.pop("pixels", None)
    assert (pixels == CONVERSION) if "frame_params" in case else pixels is None
    assert json.dumps(desc, ensure_ascii=False, default=str) == case["describe"]
    assert run_key(desc) == case["run_key"]
    prov = a.provenance()
    assert {k: prov[k] for k in case["provenance"]} == case["provenance"]  # sampling, variant: new fields
    if "frame_params" in case:
        params = dict(a.frame_params(video))
        size, resize = params.pop("size"), params.pop("resize")
        assert params.pop("indices") is None  # no frames chosen per question (select=uniform)
        want = dict(case["frame_params"])
        if size is not None:  # the family's reference size, instead of the capture's pixel cap
            assert resize in ("float", "uint8") and params.pop("max_pixels") is None
            want.pop("max_pixels")
        assert params == want
    else:
        assert not a.needs_frames
