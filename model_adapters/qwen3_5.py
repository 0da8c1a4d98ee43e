"""Qwen3.5 (native in transformers 5.24: ``Qwen3_5ForConditionalGeneration``, a Gated DeltaNet +
attention hybrid with the Qwen3-VL vision tower and ``Qwen3VLProcessor``).

Qwen3.5 thinks before answering unless its chat template gets ``enable_thinking=False``; a
multiple-choice answer within the task's token budget needs it off, so that is the default
(``enable_thinking=true`` turns it on; lmms-eval strips ``<think>`` blocks before scoring). The
shared Qwen machinery: :mod:`naru_eval.adapters.hf.qwen`.
"""

from __future__ import annotations

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, Flag
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import CAP, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import QWEN_REFERENCE
from naru_eval.adapters.hf.qwen import QwenArgs, QwenInputs
from naru_eval.core.budgets import FrameBudget, Sampling


class Qwen3_5Args(QwenArgs):
    """Args of Qwen3.5: the Qwen ones and its thinking switch."""

    enable_thinking: Flag = Field(
        False,
        description="let Qwen3.5 reason in `<think>` before answering (off: a letter within the task's budget)",
        json_schema_extra=ANSWERS,
    )


class Qwen3_5Inputs(QwenInputs):
    """Qwen3-VL's 16-px patches and timestamps; the chat template's thinking switch."""

    patch_size = 16
    args: Qwen3_5Args

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        self.template_kwargs = {"enable_thinking": self.args.enable_thinking}


class Qwen3_5(HFVideoModel):
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
        frames=CAP,  # a frame count: at most 448x448; by rate: qwen-vl-utils' size (QwenInputs.frame_params)
        times="qwen3-timestamps",
    )
    Inputs = Qwen3_5Inputs
