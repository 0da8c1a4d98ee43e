"""Qwen3.5 (native in transformers 5.24: ``Qwen3_5ForConditionalGeneration``, a Gated DeltaNet +
attention hybrid with the Qwen3-VL vision tower and ``Qwen3VLProcessor``).

Qwen3.5 thinks before answering unless its chat template gets ``enable_thinking=False``; a
multiple-choice answer within the task's token budget needs it off, so that is the default
(``enable_thinking=true`` turns it on; lmms-eval strips ``<think>`` blocks before scoring). The
shared Qwen machinery: :mod:`naru_eval.adapters.hf.qwen`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, Flag
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.positions import QWEN_REFERENCE
from naru_eval.adapters.hf.qwen import QwenArgs, QwenVideoModel
from naru_eval.core.budgets import FrameBudget, Sampling


class Qwen3_5Args(QwenArgs):
    """Args of Qwen3.5: the Qwen ones and its thinking switch."""

    enable_thinking: Flag = Field(
        False,
        description="let Qwen3.5 reason in `<think>` before answering (off: a letter within the task's budget)",
        json_schema_extra=ANSWERS,
    )


class Qwen3_5(QwenVideoModel):
    """Qwen3.5 (e.g. ``Qwen/Qwen3.5-9B``)."""

    family = Family(
        id="naru_qwen3_5",
        args=Qwen3_5Args,
        default=Official(Sampling(frames=128), rows=("Qwen3.5-9B",)),
        budget=FrameBudget(
            frames=128,
            checkpoint="Qwen/Qwen3.5-9B",
            context_tokens=262_144,
            tokens_per_frame=98,
            source=(
                "Qwen3.5 reuses the Qwen3-VL vision tower and video processor (transformers 5.24 maps "
                "qwen3_5 to Qwen3VLProcessor/Qwen3VLVideoProcessor): 98 tokens per frame; model card: "
                "262,144-token native context. Not checked against a downloaded config here."
            ),
        ),
        checkpoints={
            "qwen3_5": "Qwen3_5ForConditionalGeneration",
            "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
        },
        positions=QWEN_REFERENCE,
    )
    patch_size = 16
    args: Qwen3_5Args

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        self.template_kwargs = {"enable_thinking": self.args.enable_thinking}
