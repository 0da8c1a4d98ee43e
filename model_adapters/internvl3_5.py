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
sampling. The original trust_remote_code checkpoints (``OpenGVLab/InternVL3_5-8B`` without
``-HF``) are not loaded by this adapter: their ``model_type`` is ``internvl_chat`` and the adapter
says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.core.budgets import FrameBudget, Sampling

if TYPE_CHECKING:
    from naru_eval.media.frame_cache import SamplingParams


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
    )

    def frame_params(self, video: str) -> SamplingParams:
        """The frames at the video processor's own size (one tile per frame: 448x448 for the
        published checkpoints), resized with its arithmetic, so it leaves them as they are."""
        from naru_eval.media.frame_cache import sampling_params

        size = self.ensure_processor().video_processor.size
        s = self.sampling
        return sampling_params(
            num_frames=s.frames,
            fps=s.fps,
            max_frames=s.max_frames,
            size=(int(size["height"]), int(size["width"])),
            resize="uint8",
        )
