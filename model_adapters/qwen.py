"""Qwen video families: Qwen2.5-VL, Qwen3-VL and Qwen3.5, over :class:`HFVideoModel`.

All three take the sampled frames as one uint8 array with a ``video_metadata`` entry:

- Qwen2.5-VL turns ``sampled_fps`` (= N / duration) into ``second_per_grid_ts``, the spacing of
  its temporal (MRoPE) position ids;
- Qwen3-VL and Qwen3.5 write a ``<t seconds>`` timestamp before each temporal patch, from the
  real frame numbers and fps. Their video processor samples frames itself by default
  (``do_sample_frames=True``, 2 fps); the base passes ``do_sample_frames=False``, so it keeps
  exactly the frames given.
"""

from __future__ import annotations

from typing import Any

from model_adapters.budgets import default_frames
from model_adapters.hf_base import HFVideoModel, _as_bool


class Qwen2_5_VL(HFVideoModel):
    model_id = "naru_qwen2_5_vl"
    family = "qwen2_5_vl"
    default_num_frames = default_frames("qwen2_5_vl")
    model_classes = {"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}


class Qwen3_VL(HFVideoModel):
    model_id = "naru_qwen3_vl"
    family = "qwen3_vl"
    default_num_frames = default_frames("qwen3_vl")
    model_classes = {
        "qwen3_vl": "Qwen3VLForConditionalGeneration",
        "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
    }


class Qwen3_5(HFVideoModel):
    """Qwen3.5 (native in transformers 5.24: ``Qwen3_5ForConditionalGeneration``, Gated DeltaNet
    + attention hybrid with the Qwen3-VL vision tower and ``Qwen3VLProcessor``).

    Qwen3.5 thinks before answering unless its chat template gets ``enable_thinking=False``; a
    multiple-choice answer within the task's token budget needs it off, so that is the default
    (``enable_thinking=true`` turns it on; lmms-eval strips ``<think>`` blocks before scoring).
    """

    model_id = "naru_qwen3_5"
    family = "qwen3_5"
    default_num_frames = default_frames("qwen3_5")
    model_classes = {
        "qwen3_5": "Qwen3_5ForConditionalGeneration",
        "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
    }

    def __init__(self, enable_thinking: bool | str = False, **kwargs: Any) -> None:
        self.template_kwargs = {"enable_thinking": _as_bool(enable_thinking)}
        super().__init__(**kwargs)
