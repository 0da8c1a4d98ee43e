"""Qwen2.5-Omni's thinker (``Qwen2_5OmniThinkerForConditionalGeneration`` + ``Qwen2_5OmniProcessor``):
frames and soundtrack in one TMRoPE block, text out.

The audio goes through 128-mel Whisper features and an encoder that makes 25 tokens a second (2-s
blocks); frames and audio are interleaved in 2-s chunks of time positions (25 a second). Its
32,768-token context holds no NARU soundtrack whole (30 minutes are 45,000 tokens), so the audio
plan gives 4-s windows around each of 128 frames (16,384 video tokens, 12,800 audio tokens). The
shared machinery: :mod:`naru_eval.adapters.hf.qwen_omni`.
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
from naru_eval.media.audio_plan import QWEN2_5_OMNI


class Qwen2_5_OmniInputs(QwenOmniInputs):
    """Its TMRoPE layout and its audio encoder's tokens per clip."""

    layout = "qwen2_5_omni"

    def clip_tokens(self, mel_lengths: torch.Tensor) -> list[int]:
        from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths

        return [int(n) for n in _get_feat_extract_output_lengths(mel_lengths)]


class Qwen2_5_Omni(AudioMixin, HFVideoModel):
    """Qwen2.5-Omni's thinker (e.g. ``Qwen/Qwen2.5-Omni-7B``), with the video's soundtrack by default."""

    family = Family(
        id="naru_qwen2_5_omni",
        args=AudioArgs,
        default=Official(
            Sampling(frames=128),
            note=(
                "no official NARU row: Qwen2.5-VL-7B's 128 frames (the same 14-px vision tower and 2x2 merge), "
                "which leave the 32,768-token context room for 4-s audio windows around each frame"
            ),
        ),
        budget=FrameBudget(
            frames=128,
            checkpoint="Qwen/Qwen2.5-Omni-7B",
            context_tokens=32_768,
            tokens_per_frame=128,
            source=(
                "thinker_config.text_config.max_position_embeddings=32768; Qwen2.5-VL's vision tower (14 px "
                "patches, 2x2 merge, 2-frame temporal patches): a 448x448 frame costs 128 tokens, 128 frames "
                "16,384, the other half of the context for the audio (25 tokens a second) and the prompt."
            ),
        ),
        checkpoints={
            "qwen2_5_omni_thinker": "Qwen2_5OmniThinkerForConditionalGeneration",
            "qwen2_5_omni": "Qwen2_5OmniThinkerForConditionalGeneration",
        },
        positions=TMROPE_TRUE_TIME,
        inputs=("frames", "audio"),
        frames=CAP,
        times="tmrope",
    )
    Inputs = Qwen2_5_OmniInputs
    encoder = QWEN2_5_OMNI
