"""Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration`` + ``Qwen2_5_VLProcessor``).

Its processor turns the sampled frames' real rate into ``second_per_grid_ts``, the spacing of its
temporal M-RoPE positions (``tokens_per_second`` positions a second); the video is one block, with
no timestamps in the text. The shared Qwen machinery: :mod:`naru_eval.adapters.hf.qwen`.
"""

from __future__ import annotations

from naru_eval.adapters.family import CAP, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import QWEN_REFERENCE
from naru_eval.adapters.hf.qwen import QwenArgs, QwenInputs
from naru_eval.core.budgets import FrameBudget, Sampling


class Qwen2_5_VLInputs(QwenInputs):
    """14-px patches; one block for the whole video (the time axis counts seconds)."""

    patch_size = 14
    split_video_frames = False


class Qwen2_5_VL(HFVideoModel):
    """Qwen2.5-VL (e.g. ``Qwen/Qwen2.5-VL-7B-Instruct``)."""

    family = Family(
        id="naru_qwen2_5_vl",
        args=QwenArgs,
        default=Official(Sampling(frames=128), rows=("Qwen2.5-VL-7B",)),
        budget=FrameBudget(
            frames=128,
            checkpoint="Qwen/Qwen2.5-VL-7B-Instruct",
            context_tokens=128_000,
            tokens_per_frame=128,
            source=(
                "config.json max_position_embeddings=128000; 14 px patches, 2x2 spatial merge and 2-frame "
                "temporal patches: a 448x448 frame costs (448/28)^2/2 = 128 tokens, so 128 frames = 16,384 "
                "tokens. qwen-vl-utils 0.0.14 (vision_process.py) allows FPS_MAX_FRAMES=768 and "
                "VIDEO_MAX_TOKEN_NUM=768 per frame with MODEL_SEQ_LEN=128000, so 128 is the sweep's top value."
            ),
        ),
        checkpoints={"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"},
        positions=QWEN_REFERENCE,
        frames=CAP,  # a frame count: at most 448x448; by rate: qwen-vl-utils' size (QwenInputs.frame_params)
        times="m-rope-spacing",
    )
    Inputs = Qwen2_5_VLInputs
