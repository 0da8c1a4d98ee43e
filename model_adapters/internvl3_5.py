"""InternVL3.5 through the transformers-native classes (the ``-HF`` checkpoints, e.g.
``OpenGVLab/InternVL3_5-8B-HF``): ``InternVLForConditionalGeneration`` + ``InternVLProcessor``.

The chat template writes ``<video>`` for the video item; the processor expands it to one
``FrameN: <img>…</img>`` line per frame, each frame resized to a single 448x448 tile (256
tokens). The sampler delivers the frames at exactly the processor's size, resized from the native frames
with the processor's own arithmetic (torchvision v2 on uint8: ``resize="uint8"``), so the
processor leaves them as they are and the model gets the reference pixels (docs/video.md);
``max_pixels`` plays no part. The frames given are kept (``do_sample_frames=False``). InternVL has no
temporal position ids (1-D RoPE over the whole sequence, video tokens included, as InternVL's
own code: the model's default, the same in both paths), so the metadata only documents the
sampling. An interleaved transcript (``transcript_layout=interleaved``) goes between the frames'
lines: the video stays one item, processed as in the frames-only run (the processor takes no
videos of unequal length), and each cue line sits between the processor's own ``FrameN:`` lines
by time (:func:`with_cues`), so the pixels, the frames' tokens and their labels are the
frames-only run's. The original trust_remote_code checkpoints (``OpenGVLab/InternVL3_5-8B`` without
``-HF``) are not loaded by this adapter: their ``model_type`` is ``internvl_chat`` and the adapter
says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.family import PROCESSOR, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.builder import ChatPart, InputBuilder
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.adapters.request import NaruRequest
from naru_eval.core.budgets import FrameBudget, Sampling

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.media.video import VideoInfo


def with_cues(processor: Any, pieces: tuple[str | range, ...]) -> Any:
    """A copy of ``processor`` whose video expansion is its own (``FrameN: <img>…</img>`` lines,
    one per frame, numbered over the whole video) with the interleaved transcript's texts between
    the frames' lines (``pieces``: texts and ranges of frame positions, in order)."""
    import copy

    own = processor.replace_video_token
    frames = sum(len(p) for p in pieces if isinstance(p, range))

    def replace_video_token(video_inputs: dict[str, Any], video_idx: int, **kwargs: Any) -> str:
        lines = str(own(video_inputs, video_idx, **kwargs)).split("\n")
        if len(lines) != frames:
            raise RuntimeError(
                f"the processor wrote {len(lines)} lines for a video of {frames} frames: cannot put the "
                "transcript between them (give transcript_layout=block)"
            )
        return "\n".join(p if isinstance(p, str) else "\n".join(lines[p.start : p.stop]) for p in pieces)

    out = copy.copy(processor)
    out.replace_video_token = replace_video_token
    return out


class InternVLInputs(InputBuilder):
    """The frames at the processor's tile; an interleaved transcript between its ``FrameN:`` lines."""

    resize = "uint8"  # the video processor's arithmetic: torchvision v2 on uint8
    #: the transcript goes between the frames' lines (one frame each), inside the one video item
    interleaves_transcript = True

    def media_and_transcript(self, request: NaruRequest) -> list[ChatPart]:
        """The one video item; an interleaved transcript goes inside its expansion
        (:meth:`processor_inputs`), a block after it."""
        plan = self.adapter.plan_of(request)
        view = self.transcript_view(request) if plan.transcript is not None else None
        if view is not None and view.interleaved:
            return [*self.media(request)]
        return super().media_and_transcript(request)

    def chunks(self, sampled: SampledFrames) -> list[range] | None:
        """Always one video: the processor takes no videos of unequal length."""
        return None

    def processor_inputs(self, text: str, sampled: SampledFrames, processor: Any = None) -> Any:
        """The frames-only run's processor call; with an interleaved transcript its expansion of
        the video has the cue lines between the frames' lines (:func:`with_cues`)."""
        view = self.interleaved_view(sampled)
        if view is not None:
            processor = with_cues(processor or self.processor, view.pieces)
        return super().processor_inputs(text, sampled, processor)

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        """What ``n`` frames cost as the processor writes them: its own ``FrameN: <img>…</img>``
        lines (the image tokens, the labels, the newlines), counted with its tokenizer."""
        proc = self.processor
        lines = proc.replace_video_token({"pixel_values_videos": [sampled.frames[:n]]}, 0)
        return len(proc.tokenizer(lines, add_special_tokens=False)["input_ids"])

    def processor_size(self, info: VideoInfo) -> tuple[int, int]:
        """The video processor's own size (one tile per frame: 448x448 for the published
        checkpoints), resized with its arithmetic (``resize="uint8"``), so it leaves them as they are."""
        size = self.checkpoint.ensure_processor().video_processor.size
        return int(size["height"]), int(size["width"])


class InternVL3_5(HFVideoModel):
    """InternVL3.5 (the ``-HF`` checkpoints, e.g. ``OpenGVLab/InternVL3_5-8B-HF``)."""

    family = Family(
        id="naru_internvl3_5",
        args=HFArgs,
        default=Official(Sampling(frames=64), rows=("InternVL3.5",)),
        budget=FrameBudget(
            frames=128,
            checkpoint="OpenGVLab/InternVL3_5-8B-HF",
            context_tokens=40_960,
            tokens_per_frame=256,
            source=(
                "InternVL3_5-8B config.json llm_config (Qwen3-8B) max_position_embeddings=40960; one 448x448 "
                "tile per video frame, image_seq_length=256 tokens (+ 'FrameN: <img></img>' ~ 6 tokens): "
                "128 frames ~ 33.5K tokens fit 40,960; 256 frames would not."
            ),
        ),
        checkpoints={"internvl": "InternVLForConditionalGeneration"},
        positions=SEQUENTIAL,
        frames=PROCESSOR,
        times="order",
    )
    Inputs = InternVLInputs
