"""InternVL3.5 through the transformers-native classes (the ``-HF`` checkpoints, e.g.
``OpenGVLab/InternVL3_5-8B-HF``): ``InternVLForConditionalGeneration`` + ``InternVLProcessor``.

The chat template writes ``<video>`` for the video item; the processor expands it to one
``FrameN: <img>…</img>`` line per frame, each frame resized to a single 448x448 tile (256
tokens). The frames given are kept as they are (``do_sample_frames=False``). InternVL has no
temporal position ids (one position per token, ``positions: sequential``), so the metadata only
documents the sampling. The original
trust_remote_code checkpoints (``OpenGVLab/InternVL3_5-8B`` without ``-HF``) are not loaded by
this adapter: their ``model_type`` is ``internvl_chat`` and the adapter says so.
"""

from __future__ import annotations

from model_adapters.hf_base import HFVideoModel
from model_adapters.positions import SEQUENTIAL


class InternVL3_5(HFVideoModel):
    model_id = "naru_internvl3_5"
    family = "internvl3_5"
    model_classes = {"internvl": "InternVLForConditionalGeneration"}
    #: 1-D RoPE over the whole sequence (video tokens included), as InternVL's own code: the
    #: model's default, the same in both paths
    positions_layout = SEQUENTIAL
