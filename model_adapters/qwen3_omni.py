"""Qwen3-Omni's thinker (``Qwen3OmniMoeThinkerForConditionalGeneration`` + ``Qwen3OmniMoeProcessor``):
frames and soundtrack in one TMRoPE block, text out.

The audio goes through 128-mel Whisper features and an encoder that makes 13 tokens per 1-s chunk;
frames and audio tokens are merged by time position (13 a second, video first on a tie), and the
positions are floats. The published config says ``position_id_per_seconds`` 13, as the processor
does; the config class's default is 25, so a config without it would place the two modalities on
different clocks: the adapter stops such a run with both numbers. The shared machinery:
:mod:`naru_eval.adapters.hf.qwen_omni`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

from naru_eval.adapters.audio import AudioArgs, AudioMixin
from naru_eval.adapters.family import CAP, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.qwen_omni import QwenOmniInputs
from naru_eval.adapters.hf.tmrope import TMROPE_TRUE_TIME
from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.media.audio_plan import QWEN3_OMNI


class Qwen3_OmniInputs(QwenOmniInputs):
    """Its TMRoPE layout and its audio encoder's tokens per clip."""

    layout = "qwen3_omni"

    def clip_tokens(self, mel_lengths: torch.Tensor) -> list[int]:
        from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import _get_feat_extract_output_lengths

        n_window = int(getattr(self.model.config.audio_config, "n_window", 50))
        return [int(n) for n in _get_feat_extract_output_lengths(mel_lengths, n_window)]


class Qwen3_Omni(AudioMixin, HFVideoModel):
    """Qwen3-Omni's thinker (e.g. ``Qwen/Qwen3-Omni-30B-A3B-Instruct``), with the video's soundtrack by default."""

    family = Family(
        id="naru_qwen3_omni",
        args=AudioArgs,
        default=Official(
            Sampling(frames=128),
            note=(
                "no official NARU row: 128 frames, Qwen2.5-VL-7B's and Qwen3.5's count (Qwen3-VL-8B's 0.25 fps "
                "would reach 768 frames, 75k tokens, beyond this context)"
            ),
        ),
        budget=FrameBudget(
            frames=128,
            checkpoint="Qwen/Qwen3-Omni-30B-A3B-Instruct",
            context_tokens=65_536,
            tokens_per_frame=98,
            source=(
                "thinker_config.text_config.max_position_embeddings=65536 (as third-party copies of the config "
                "give it; not checked against a downloaded config here); 16 px patches, 2x2 merge, 2-frame "
                "temporal patches: (448/32)^2/2 = 98 tokens per frame, 128 frames 12,544 tokens."
            ),
        ),
        checkpoints={
            "qwen3_omni_moe_thinker": "Qwen3OmniMoeThinkerForConditionalGeneration",
            "qwen3_omni_moe": "Qwen3OmniMoeThinkerForConditionalGeneration",
        },
        positions=TMROPE_TRUE_TIME,
        inputs=("frames", "audio"),
        frames=CAP,
        times="tmrope",
    )
    Inputs = Qwen3_OmniInputs
    encoder = QWEN3_OMNI
