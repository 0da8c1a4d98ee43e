"""The Gemini adapter's test kit (its fixtures are in tests/model_adapters/conftest.py): a model
against the stub with recorded sleeps and a fake clock, the stub's deterministic answers, and a
tiny H.264 + AAC video."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from lmms_eval.api.instance import Instance

from model_adapters.gemini import Gemini
from naru_eval.core.data import LETTERS
from tests.helpers.data import lmms_instances
from tests.helpers.stubs.gemini_server import GeminiStub, StubRequest

ROOT = Path(__file__).resolve().parents[2]
FAKE_KEY = "fake-gemini-key-naru-test-0123456789abcdef-SECRET"
TASK, SPLIT = "naru_mcq", "test"
MODEL = "gemini-2.5-flash"
INVALID_TEXT = "I cannot tell from the video."
GEMINI_POST = "Answer with only the letter (A, B, C or D) of the correct option."


def instances(docs: list[dict[str, Any]]) -> list[Instance]:
    return lmms_instances(docs, TASK, SPLIT)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.polls: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.polls.append(s)
        self.t += s


def make_model(stub: GeminiStub, tmp_path: Path, docs, *, store: str = "store.sqlite", **args: Any):
    args.setdefault("model", MODEL)
    args.setdefault("retry_base_delay", 0.5)
    args.setdefault("poll_interval", 0.25)
    model = Gemini(
        base_url=stub.base_url,
        response_store=str(tmp_path / store),
        upload_registry=str(tmp_path / "uploads.sqlite"),
        **args,
    )
    model.task_dict = {TASK: {SPLIT: docs}}
    sleeps: list[float] = []
    model.sleep = sleeps.append
    clock = FakeClock()
    model.clock, model.poll_sleep = clock, clock.sleep
    return model, sleeps


def answer_for(text: str) -> str:
    """The stub's deterministic answer to a prompt: a letter, or (1 in 5) no letter."""
    h = hashlib.sha256(text.encode()).digest()
    return INVALID_TEXT if h[0] % 5 == 0 else f"The answer is {LETTERS[h[1] % 4]}."


def responder(req: StubRequest) -> str:
    return answer_for(req.text)


def write_av(path: Path, seconds: float = 12.0, fps: int = 10, size: tuple[int, int] = (640, 480)) -> Path:
    """An H.264 + AAC MP4 with a sine tone."""
    import av
    import numpy as np

    with av.open(str(path), "w") as c:
        v = c.add_stream("libx264", rate=fps)
        v.width, v.height, v.pix_fmt = size[0], size[1], "yuv420p"
        v.options = {"preset": "ultrafast"}
        a = c.add_stream("aac", rate=22050)
        a.layout = "mono"
        for i in range(int(seconds * fps)):
            img = np.full((size[1], size[0], 3), (i * 7) % 255, np.uint8)
            for p in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        t = 0
        while t < seconds * 22050:
            s = (0.2 * np.sin(2 * np.pi * 440 * np.arange(t, t + 1024) / 22050)).astype(np.float32)[None, :]
            f = av.AudioFrame.from_ndarray(s, format="fltp", layout="mono")
            f.sample_rate, f.pts = 22050, t
            for p in a.encode(f):
                c.mux(p)
            t += 1024
        for p in v.encode():
            c.mux(p)
        for p in a.encode():
            c.mux(p)
    return path
