"""What the per-family adapter tests share: the family lists (derived from the registry), a tiny
adapter maker, one request, a call-recording spy and the frames a request should reach the
processor with."""

from __future__ import annotations

from typing import Any

import numpy as np

from naru_eval.adapters.registry import adapter_class, registered
from naru_eval.adapters.request import NaruRequest
from naru_eval.media.plan import uniform_indices
from naru_eval.media.sampler import sample_frames

__all__ = [
    "ALL_FAMILIES", "HF_FAMILIES", "N", "Spy", "adapter_class", "expected", "make", "model_type", "reasoning_off", "request",
]  # fmt: skip


def _transformers_families() -> tuple[list[str], list[str]]:
    """(every transformers family (each has a tiny checkpoint: tests/helpers/tiny_models.py), those
    whose processor the base calls: not a remote-code checkpoint, whose own ``chat()`` builds the
    inputs), in registry order."""
    every = [m for m, entry in registered().items() if entry.checkpoints]
    native = [m for m in every if not adapter_class(m).Args.model_fields["trust_remote_code"].default]
    return every, native


#: every registered transformers family, and those over a transformers-native class
ALL_FAMILIES, HF_FAMILIES = _transformers_families()


def model_type(model_id: str) -> str:
    """The checkpoint ``model_type`` a family's tests are keyed by (its first declared one): a new
    family over a known ``model_type`` runs through the same per-family checks with no edit."""
    return next(iter(registered()[model_id].checkpoints))


def reasoning_off(model_id: str) -> dict[str, str]:
    """The args that turn a reasoning family's thinking off (its answer then fits the task's budget,
    not a 20k-token reasoning one): ``enable_thinking=false`` where the family reasons by default."""
    field = adapter_class(model_id).Args.model_fields.get("enable_thinking")
    return {"enable_thinking": "false"} if field is not None and field.default is True else {}


N = 5  # odd on purpose: Qwen pads to whole 2-frame temporal patches, the frames given stay 5


def make(model_id: str, path, **args: Any) -> Any:
    """A family's adapter on ``path`` (cpu, N frames, no store). An omni family whose default is
    audio on gets ``audio=false`` unless ``args`` say otherwise: the per-family tests run on
    silent index-coded videos and check the frames' path; the audio path has its own tests
    (tests/model_adapters/test_omni.py)."""
    cls = adapter_class(model_id)
    field = cls.Args.model_fields.get("audio")
    defaults: dict[str, Any] = {"num_frames": N, "device": "cpu", "store": "false"}
    if field is not None and field.default is True:
        defaults["audio"] = "false"
    args = {**defaults, **args}
    return cls(pretrained=str(path), **{k: str(v) for k, v in args.items()})


def request(video, gen_kwargs: dict | None = None, qid: str = "q1") -> NaruRequest:
    prompt = "[N.1] What colour fills segment 1?\nA. red\nB. blue\nC. green\nD. white\nAnswer with the option's letter."
    gk = {"max_new_tokens": 6, "temperature": 0, "do_sample": False, "until": ["\n\n"], **(gen_kwargs or {})}
    return NaruRequest({"question_id": qid}, prompt, [str(video)], gk, "naru_mcq", 0)


class Spy:
    """Records every call of a callable and forwards attribute access to it."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.calls: list[tuple[tuple, dict, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self._target(*args, **kwargs)
        self.calls.append((args, kwargs, out))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class FirstStep:
    """Wraps a loaded adapter's ``model.generate``: records each call's first-step logits (float32)
    and the position ids the language model received in each forward; generate still returns
    the sequences. The shared-prefix and per-question paths are compared with it
    (tests/model_adapters/test_shared_prefix.py, scripts/gpu_check.py)."""

    def __init__(self, adapter: Any) -> None:
        self.logits: list[Any] = []
        self.positions: list[Any] = []
        model = adapter.model
        generate = model.generate
        inner = getattr(getattr(model, "model", model), "language_model", None) or model.language_model
        forward = inner.forward

        def record_forward(*args, **kw):
            self.positions.append(kw.get("position_ids"))
            return forward(*args, **kw)

        def record_generate(*args, **kw):
            out = generate(*args, **kw, output_logits=True, return_dict_in_generate=True)
            self.logits.append(out.logits[0][0].float())
            return out.sequences

        model.generate, inner.forward = record_generate, record_forward
        self._undo = (model, inner)

    def restore(self) -> None:
        """Unwrap (the model is shared by another adapter next)."""
        model, inner = self._undo
        del model.generate, inner.forward  # the instance attributes: the class's methods again

    def max_abs_diff(self, other: FirstStep) -> float:
        """max |Δ| over the first-step logits of the same questions in two runs."""
        if len(self.logits) != len(other.logits) or not self.logits:
            raise ValueError(f"not the same questions: {len(self.logits)} vs {len(other.logits)} first steps")
        return max(float((a - b).abs().max()) for a, b in zip(self.logits, other.logits, strict=True))


def processors_without_checkpoint(monkeypatch: Any) -> None:
    """The families that read their frame size off their video processor (InternVL3.5,
    Nemotron-Omni) get the real processor classes at their published geometry, for adapters made
    over a checkpoint path that does not exist (the run-key and argument tests)."""
    from types import SimpleNamespace

    from transformers import InternVLVideoProcessor, NemotronH_Omni_Reasoning_V3VideoProcessor

    from naru_eval.adapters.hf.loading import Checkpoint

    published = {
        "naru_internvl3_5": InternVLVideoProcessor(size={"height": 448, "width": 448}),
        "naru_nemotron_omni": NemotronH_Omni_Reasoning_V3VideoProcessor(video_target_num_patches=1024),
    }
    own = Checkpoint.ensure_processor

    def ensure_processor(self: Checkpoint) -> Any:
        vp = published.get(self.model_id)
        return own(self) if vp is None else SimpleNamespace(video_processor=vp)

    monkeypatch.setattr(Checkpoint, "ensure_processor", ensure_processor)


def expected(video, adapter: Any = None) -> tuple[np.ndarray, list[int]]:
    """The frames a request on ``video`` should reach the model with, and their numbers: the
    sampler's, at the sampling ``adapter`` asks for (its family's exact frame size, where its
    reference defines one), else at the sampler's default pixel cap."""
    want = uniform_indices(60, N)
    params = dict(adapter.frame_params(str(video))) if adapter is not None else {"num_frames": N}
    return sample_frames(video, **params).frames, want
