"""The Qwen-Omni thinkers' shared input builder (Qwen2.5-Omni and Qwen3-Omni are each a module of
``model_adapters/`` whose builder is a :class:`QwenOmniInputs`, over an adapter with the
soundtrack, :class:`naru_eval.adapters.audio.AudioMixin`): the frames and the soundtrack as one
time-aligned block, TMRoPE positions computed here, text out (no talker, no speech).

Per request:

1. the frames come from the one sampler (also for audio only: their times centre the windows);
2. the processor takes the frames as one video with an explicit ``fps`` (N / duration:
   ``video_metadata`` alone leaves the processors at their 2.0 / 1.0 fps default, 8 frames over an
   hour then 1-2 s apart) and the text, giving the pixels, the grid and the video's tokens;
3. the audio plan (:mod:`naru_eval.adapters.audio`) and its samples give one Whisper clip
   per window, through the checkpoint's own feature extractor with truncation off (Qwen2.5-Omni's
   processor otherwise cuts audio at 300 s without a word); each clip's tokens are checked against
   the plan;
4. the video's token run is replaced by the block :func:`naru_eval.adapters.hf.tmrope.omni_block_tokens`
   writes (audio audio only: the ``<|AUDIO|>`` placeholder by the clips' tokens), and the positions
   are :func:`naru_eval.adapters.hf.tmrope.omni_positions` with the true times: each temporal patch
   at its first frame's time, each audio token at its own time in the soundtrack. The same
   positions in the shared-prefix and the per-question path.

A published checkpoint (``Qwen/Qwen2.5-Omni-7B``, ``Qwen/Qwen3-Omni-30B-A3B-Instruct``: thinker,
talker and vocoder) loads its thinker alone (:mod:`naru_eval.adapters.hf.loading`); a thinker-only
checkpoint written by ``save_pretrained`` loads as it is. Processor and config must agree on
``position_id_per_seconds`` or the run stops with both numbers, before the first answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from naru_eval.adapters.audio import AudioArgs, AudioMixin
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.hf.builder import ChatPart, InputBuilder
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.tmrope import (
    Layout,
    OmniGeometry,
    audio_time_positions,
    check_position_rate,
    generation_position_ids,
    geometry_of,
    grid_time_positions,
    omni_block_tokens,
    omni_positions,
)
from naru_eval.adapters.request import NaruRequest, RequestFailed
from naru_eval.core.json_types import JSONObject

if TYPE_CHECKING:
    import torch

    from naru_eval.media.sampler import SampledFrames

#: the processor outputs kept for :meth:`QwenOmniInputs.position_ids` and never given to the model
GRID_T, AUDIO_T = "naru_grid_t", "naru_audio_t"


class QwenOmniInputs(InputBuilder):
    """A Qwen-Omni thinker's inputs (the module docstring); a family sets ``layout`` and
    :meth:`clip_tokens`."""

    layout: ClassVar[Layout]
    adapter_keys: ClassVar[tuple[str, ...]] = (GRID_T, AUDIO_T)
    model_dtype_keys: ClassVar[tuple[str, ...]] = ("input_features",)  # the audio tower's dtype
    args: AudioArgs

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        assert isinstance(adapter, AudioMixin), f"{type(adapter).__name__}: a Qwen-Omni adapter hears the soundtrack"
        self.omni: AudioMixin = adapter
        self._geometry: OmniGeometry | None = None

    def loaded(self) -> None:
        """Processor and config must agree on the time positions' rate (``position_id_per_seconds``)."""
        check_position_rate(self.processor, self.model.config, source=self.args.pretrained)

    def geometry(self) -> OmniGeometry:
        """The layout's geometry of the loaded thinker."""
        if self._geometry is None:
            self._geometry = geometry_of(self.model.config, self.layout)
        return self._geometry

    # -- what the model is given ----------------------------------------------------------------
    def media(self, request: NaruRequest) -> list[ChatPart]:
        """One video (its audio goes inside it), or, audio only, one audio part."""
        return [{"type": "video"}] if self.omni.gives_frames else [{"type": "audio"}]

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        frames = sampled.frames[: int(n)]
        if len(frames) == 0:
            return 0
        _, h, w = frames.shape[:3]
        kw = {**self.processor_kwargs(), **self.video_kwargs(sampled)}
        got = self.processor._get_num_multimodal_tokens(video_sizes=[(len(frames), h, w)], videos_kwargs=kw)
        return int(got.num_video_tokens[0])

    def video_kwargs(self, sampled: SampledFrames) -> dict[str, Any]:
        """The video's rate as the Qwen-Omni processors read it: only ``videos_kwargs["fps"]`` sets
        their ``second_per_grid`` (``video_metadata`` alone leaves their 2.0 / 1.0 fps default)."""
        return {"fps": len(sampled.frames) / float(sampled.info.duration_s)}

    def processor_inputs(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        import torch

        proc = processor or self.processor
        geo = self.geometry()
        omni = self.omni
        if omni.gives_frames:
            inputs = proc(
                text=[text],
                videos=[self.video_input(sampled)],
                video_metadata=[self.video_metadata(sampled)],
                videos_kwargs=self.video_kwargs(sampled),
                return_tensors="pt",
                **self.processor_kwargs(),
            )
            inputs = dict(inputs)
            t, h, w = (int(x) for x in inputs["video_grid_thw"][0])
            video_tokens = t * h * w // geo.spatial_merge_size**2
            patch = int(proc.video_processor.temporal_patch_size)
            first = [float(sampled.timestamps[min(k * patch, len(sampled.timestamps) - 1)]) for k in range(t)]
            grid_t = grid_time_positions(geo, first)
            inputs[GRID_T] = torch.tensor(grid_t, dtype=torch.float64)
        else:
            inputs = dict(proc.tokenizer([text], return_tensors="pt"))
            video_tokens, grid_t, t, h, w = 0, [], 0, 0, 0
        ids = [int(x) for x in inputs["input_ids"][0]]
        if omni.gives_audio:
            audio, plan = omni.soundtrack(sampled, video_tokens)
            clips = [audio.window(k) for k in range(len(audio.windows))]
            feats = proc.feature_extractor(
                clips,
                sampling_rate=audio.rate,
                padding="longest",
                truncation=False,
                return_attention_mask=True,
                return_tensors="pt",
            )
            per_clip = [omni.encoder.tokens(len(c)) for c in clips]
            model_tokens = self.clip_tokens(feats["attention_mask"].sum(-1))
            if per_clip != model_tokens or sum(per_clip) != plan.tokens:
                raise RequestFailed(
                    f"audio: the plan counts {plan.tokens} tokens ({per_clip[:4]}... per clip), the model's encoder "
                    f"{sum(model_tokens)} ({model_tokens[:4]}...)"
                )
            a_t = audio_time_positions(geo, [(s, n) for (s, _), n in zip(audio.windows, per_clip, strict=True)])
            if omni.gives_frames:
                ids = _splice_run(ids, geo.video_token_id, omni_block_tokens(geo, (t, h, w), grid_t, a_t), video_tokens)
            else:
                ids = _splice_run(ids, geo.audio_token_id, [geo.audio_token_id] * len(a_t), 1)
            inputs["input_features"] = feats["input_features"]
            inputs["feature_attention_mask"] = feats["attention_mask"]
            inputs[AUDIO_T] = torch.tensor(a_t, dtype=torch.float64)
            omni._audio_records[sampled.info.path] = omni.audio_usage(audio, plan)
        inputs["input_ids"] = torch.tensor([ids], dtype=torch.long)
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        return inputs

    def clip_tokens(self, mel_lengths: torch.Tensor) -> list[int]:
        """The tokens the model's audio encoder makes of each clip's mel frames (its own formula)."""
        raise NotImplementedError

    def position_ids(self, input_ids: torch.Tensor, inputs: Mapping[str, Any]) -> torch.Tensor | None:
        """TMRoPE with the true times (``naru_eval.adapters.hf.tmrope``), in both paths."""
        grid, audio = inputs.get(GRID_T), inputs.get(AUDIO_T)
        if grid is None and audio is None:
            return None  # text only: one position per token, as the model's own
        pos, _ = omni_positions(
            input_ids[0],
            self.geometry(),
            inputs.get("video_grid_thw"),
            [grid.tolist()] if grid is not None else None,
            [audio.tolist()] if audio is not None else None,
        )
        return generation_position_ids(input_ids, pos)

    def description(self) -> JSONObject:
        return {"tmrope": self.layout, **self.omni.audio_description()}


def _splice_run(ids: list[int], token: int, block: list[int], expected: int) -> list[int]:
    """``ids`` with its one run of ``token`` (``expected`` long) replaced by ``block``."""
    at = [i for i, x in enumerate(ids) if x == token]
    if len(at) != expected or (at and at[-1] - at[0] + 1 != expected):
        raise RequestFailed(f"the prompt holds {len(at)} placeholder tokens where {expected} in one run were expected")
    return ids[: at[0]] + block + ids[at[-1] + 1 :]
