"""Qwen3-VL (``Qwen3VLForConditionalGeneration``, ``Qwen3VLMoeForConditionalGeneration`` for
``qwen3_vl_moe``, + ``Qwen3VLProcessor``).

Its processor writes a ``<t seconds>`` timestamp before each temporal patch from the real frame
numbers and fps; the official row ran it at 0.25 fps, whose frame count and size are
qwen-vl-utils' (:mod:`naru_eval.adapters.qwen_sampling`). The shared Qwen machinery:
:mod:`naru_eval.adapters.hf.qwen`.
"""

from __future__ import annotations

from naru_eval.adapters.family import CAP, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import QWEN_REFERENCE
from naru_eval.adapters.hf.qwen import QwenArgs, QwenInputs
from naru_eval.core.budgets import FrameBudget, Sampling


class Qwen3_VLInputs(QwenInputs):
    """16-px patches; a ``<t seconds>`` timestamp before each temporal patch."""

    patch_size = 16


class Qwen3_VL(HFVideoModel):
    """Qwen3-VL (e.g. ``Qwen/Qwen3-VL-8B-Instruct``)."""

    family = Family(
        id="naru_qwen3_vl",
        args=QwenArgs,
        default=Official(Sampling(fps=0.25), rows=("Qwen3-VL-8B",)),
        budget=FrameBudget(
            frames=128,
            checkpoint="Qwen/Qwen3-VL-8B-Instruct",
            context_tokens=262_144,
            tokens_per_frame=98,
            source=(
                "config.json text_config.max_position_embeddings=262144 (256K native context, model card); "
                "16 px patches, 2x2 merge, 2-frame temporal patches: (448/32)^2/2 = 98 tokens per frame plus a "
                "'<t seconds>' timestamp per temporal patch; 128 frames ~ 13K tokens. transformers "
                "Qwen3VLVideoProcessor max_frames=768."
            ),
        ),
        checkpoints={
            "qwen3_vl": "Qwen3VLForConditionalGeneration",
            "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
        },
        positions=QWEN_REFERENCE,
        frames=CAP,  # a frame count: at most 448x448; by rate: qwen-vl-utils' size (QwenInputs.frame_params)
        times="qwen3-timestamps",
    )
    Inputs = Qwen3_VLInputs
