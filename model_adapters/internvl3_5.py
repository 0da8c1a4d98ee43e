"""InternVL3.5 through the transformers-native classes (the ``-HF`` checkpoints, e.g.
``OpenGVLab/InternVL3_5-8B-HF``): ``InternVLForConditionalGeneration`` + ``InternVLProcessor``.

The chat template writes ``<video>`` for the video item; the processor expands it to one
``FrameN: <img>…</img>`` line per frame, each frame resized to a single 448x448 tile (256
tokens). The frames given are kept as they are (``do_sample_frames=False``). InternVL has no
temporal position ids (1-D RoPE over the whole sequence, video tokens included, as InternVL's
own code: the model's default, the same in both paths), so the metadata only documents the
sampling. The original trust_remote_code checkpoints (``OpenGVLab/InternVL3_5-8B`` without
``-HF``) are not loaded by this adapter: their ``model_type`` is ``internvl_chat`` and the adapter
says so.
"""

from __future__ import annotations

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.core.budgets import FrameBudget, Sampling


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
