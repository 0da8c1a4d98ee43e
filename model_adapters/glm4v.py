"""GLM-4.1V and GLM-4.5V (``Glm4vForConditionalGeneration``, ``Glm4vMoeForConditionalGeneration`` +
``Glm4vProcessor``), the Thinking checkpoints read as their reference reads them.

Its input is its processor's own video path: the sampled frames with their ``video_metadata``, so
its processor writes each 2-frame temporal patch as ``<|begin_of_image|>…<|end_of_image|>t`` with
``t`` the patch's first frame's whole seconds (``metadata.timestamps[::2]``), true times from the
frame numbers; the frames arrive at exactly the size its video processor makes of the native
ones (``smart_resize`` over the whole video's pixel budget: 448x784 at 720p for 128 frames, where
the 448x448 cap would give 44 % fewer visual tokens), resized with its arithmetic, so it leaves
them as they are. The model computes its own M-RoPE positions from the processor's token types
(``mm_token_type_ids``), in both paths.

The Thinking checkpoints write ``<think>reasoning</think><answer>answer</answer>``: the answer is
the text inside ``<answer>`` (the reference reads it there), the reasoning is never read, and a
reasoning the token budget cut (no ``</think>``) is invalid (``unfinished_reasoning``; its share is
in ``naru-eval diagnose``'s invalid breakdown). The budget with reasoning is 8,192 new tokens (the
model card's transformers example), ``max_new_tokens=`` overrides it; GLM-4.5V's template turns
reasoning off with ``enable_thinking=false``, GLM-4.1V-9B-Thinking's always reasons. A response
that does not open ``<think>`` (a Base checkpoint) is read as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, Flag, HFArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import PROCESSOR, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.builder import InputBuilder, cut_at_stops
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import MODEL_OWN
from naru_eval.adapters.hf.reasoning import THINK_OPEN, answer_of, think_split, token_id
from naru_eval.adapters.request import NaruRequest
from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.core.json_types import JSONObject

if TYPE_CHECKING:
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.media.video import VideoInfo

#: max_new_tokens with reasoning on: the GLM-4.1V-9B-Thinking model card's transformers example
REASONING_MAX_NEW_TOKENS = 8192


class GLMArgs(HFArgs):
    """Args of GLM-4.1V / GLM-4.5V: the reasoning switch of GLM-4.5V's template."""

    enable_thinking: Flag = Field(
        True,
        description="reason in `<think>` before the answer (GLM-4.5V's template switch; GLM-4.1V-Thinking always reasons)",
        json_schema_extra=ANSWERS,
    )


class GLMInputs(InputBuilder):
    """Frames at its video processor's own size; the answer inside ``<answer>``."""

    resize = "uint8"  # its video processor's arithmetic: torchvision on uint8
    args: GLMArgs

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        self.template_kwargs = {"enable_thinking": self.args.enable_thinking}
        self.reasoning_max_new_tokens = REASONING_MAX_NEW_TOKENS if self.args.enable_thinking else None

    def processor_size(self, info: VideoInfo) -> tuple[int, int] | None:
        """Its ``smart_resize`` of the native frame for the run's frame count (the pixel budget is
        the whole video's); None (the native frames) where it would resize its own result again."""
        from transformers.models.glm4v.video_processing_glm4v import smart_resize

        from naru_eval.media.plan import frames_for_fps

        s = self.adapter.sampling
        n = s.frames or frames_for_fps(info.duration_s, float(s.fps or 1.0), s.max_frames, info.frame_count)
        vp = self.checkpoint.ensure_processor().video_processor
        temporal, factor = int(vp.temporal_patch_size), int(vp.patch_size) * int(vp.merge_size)
        if n < temporal:
            return None

        def size(h: int, w: int) -> tuple[int, int]:
            got = smart_resize(n, h, w, temporal, factor, vp.size["shortest_edge"], vp.size["longest_edge"])
            return int(got[0]), int(got[1])

        out = size(int(info.height), int(info.width))
        return out if size(*out) == out else None

    def frame_tokens(self, sampled: SampledFrames, n: int) -> int:
        """What ``n`` frames cost as its processor writes them: per temporal patch its image tokens
        between their delimiters and the timestamp, counted with its tokenizer."""
        n = int(n)
        if n == 0:
            return 0
        proc = self.processor
        vp = proc.video_processor
        h, w = (int(x) for x in sampled.frames.shape[1:3])
        patches = int(vp.get_num_of_video_patches(n, h, w))
        temporal = int(vp.temporal_patch_size)
        t = -(-n // temporal)
        per_patch = patches // t // int(vp.merge_size) ** 2
        stamps = [float(x) for x in sampled.timestamps[:n:temporal]]
        text = "".join(proc.replace_frame_token_id(s, num_image_tokens=per_patch) for s in stamps)
        return len(proc.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, request: NaruRequest, new_ids: list[int]) -> str:
        """A response that opens ``<think>``: the reasoning kept apart and the answer inside
        ``<answer>`` (an unclosed reasoning stays open: invalid); otherwise the text, its answer tag read."""
        tok = self.processor.tokenizer
        until = request.gen_kwargs.get("until")
        opened = token_id(tok, THINK_OPEN)
        if opened is not None and opened in new_ids:
            return think_split(tok, new_ids, until, answer_tags=True)
        text = str(tok.decode(new_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))
        if THINK_OPEN in text:
            return think_split(tok, new_ids, until, answer_tags=True)
        return cut_at_stops(answer_of(tok, new_ids), until)

    def description(self) -> JSONObject:
        return {"reasoning_budget": self.reasoning_max_new_tokens, "answer": "answer-tag"}


class GLM4V(HFVideoModel):
    """GLM-4.1V / GLM-4.5V (e.g. ``zai-org/GLM-4.1V-9B-Thinking``, ``zai-org/GLM-4.5V``)."""

    family = Family(
        id="naru_glm4v",
        args=GLMArgs,
        default=Official(
            Sampling(frames=128),
            note=(
                "no official NARU row: 128 frames, the Qwen2.5-VL-7B and Qwen3.5 rows' count; its processor sizes "
                "them from one pixel budget over the video (448x784 at 720p), about 28,700 video tokens, leaving the "
                "65,536-token context room for an 8,192-token reasoning"
            ),
        ),
        budget=FrameBudget(
            frames=128,
            checkpoint="zai-org/GLM-4.1V-9B-Thinking",
            context_tokens=65_536,
            tokens_per_frame=224,
            source=(
                "config.json text_config.max_position_embeddings=65536; 14 px patches, 2x2 merge, 2-frame temporal "
                "patches; Glm4vVideoProcessor's smart_resize keeps t x h x w under 28*28*2*30000 pixels, so 128 "
                "frames of 720p become 448x784: 16 x 28 = 448 tokens per temporal patch, 224 per frame, 28,672 "
                "for 128 frames (the budget bounds the video's tokens at about 30,000 whatever the frame count)."
            ),
        ),
        checkpoints={
            "glm4v": "Glm4vForConditionalGeneration",
            "glm4v_moe": "Glm4vMoeForConditionalGeneration",
        },
        positions=MODEL_OWN,
        frames=PROCESSOR,
        times="glm-timestamps",
    )
    Inputs = GLMInputs
