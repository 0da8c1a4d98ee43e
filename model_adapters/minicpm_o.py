"""MiniCPM-o-2.6 through its trust_remote_code ``chat`` interface (no transformers-native class).

Loading follows the model card: ``AutoModel.from_pretrained(..., trust_remote_code=True,
init_vision=True, init_audio=False, init_tts=False)`` (vision only: the audio encoder and TTS
are not needed and cost memory) and ``AutoTokenizer.from_pretrained(..., trust_remote_code=True)``.
Per question the sampled frames go in as PIL images, then the prompt, in one user turn:

    model.chat(msgs=[{"role": "user", "content": [*frames, prompt]}], tokenizer=tokenizer,
               sampling=False, use_image_id=False, max_slice_nums=2, ...)

(``use_image_id=False`` and ``max_slice_nums=2`` are the model card's video settings.) With
``sampling=False`` the remote code runs beam search (3 beams, repetition_penalty 1.2); to decode
greedily like the other families the adapter passes ``num_beams=1`` and
``repetition_penalty=1.0``; ``native_decoding=true`` keeps the model's own defaults.

The remote code on the hub pins transformers 4.44.2 and imports names transformers 5.x removed
(``transformers.LogitsWarper``, ``WHISPER_ATTENTION_CLASSES``), so the real checkpoint needs an
environment of its own; see docs/adapters.md. The adapter code itself is exercised with a tiny
stand-in remote-code checkpoint (tests/helpers/tiny_models.py).
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, Flag, HFArgs
from naru_eval.adapters.base import Answer, NaruRequest
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.core.budgets import FrameBudget, Sampling


class ChatKwargs(TypedDict, total=False):
    """The remote ``chat()``'s generation settings (the model card's video settings, greedy)."""

    sampling: bool
    max_new_tokens: int
    use_image_id: bool
    max_slice_nums: int
    temperature: float
    top_p: float
    top_k: int
    num_beams: int
    repetition_penalty: float


class MiniCPMArgs(HFArgs):
    """Args of MiniCPM-o-2.6: the model card's video settings of its remote ``chat``."""

    max_slice_nums: int = Field(
        2, ge=1, description="slices per frame of the remote chat() (the card's video: 2)", json_schema_extra=ANSWERS
    )
    use_image_id: Flag = Field(
        False, description="number the frames in the prompt (the card's video: false)", json_schema_extra=ANSWERS
    )
    native_decoding: Flag = Field(
        False,
        description="keep chat()'s own beam search (3 beams, repetition penalty 1.2) instead of greedy",
        json_schema_extra=ANSWERS,
    )
    trust_remote_code: Flag = Field(True, description="run the checkpoint's own code (MiniCPM-o needs it)")


class MiniCPM_O(HFVideoModel):
    """MiniCPM-o-2.6 (``openbmb/MiniCPM-o-2_6``, remote code)."""

    family = Family(
        id="naru_minicpm_o",
        args=MiniCPMArgs,
        default=Official(Sampling(frames=128), rows=("MiniCPM-o-2.6",)),
        budget=FrameBudget(
            frames=64,
            checkpoint="openbmb/MiniCPM-o-2_6",
            context_tokens=32_768,
            tokens_per_frame=64,
            source=(
                "config.json max_position_embeddings=32768; 64 resampler queries per 448x448 slice "
                "(preprocessor_config.json image_feature_size=64). The model card's video example sets "
                "MAX_NUM_FRAMES=64, as does lmms-eval 0.7.3 (lmms_eval/models/simple/minicpm_o.py): the "
                "model's documented video limit, below what the context would hold."
            ),
        ),
        checkpoints={"minicpmo": "AutoModel"},
        positions=SEQUENTIAL,
    )
    #: the remote chat() builds the prompt and runs generate itself: no cache to share
    supports_shared_prefix = False
    args: MiniCPMArgs

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        self.max_slice_nums = self.args.max_slice_nums
        self.use_image_id = self.args.use_image_id
        self.native_decoding = self.args.native_decoding
        self.tokenizer: Any = None

    def family_description(self) -> dict[str, Any]:
        return {
            "max_slice_nums": self.max_slice_nums,
            "use_image_id": self.use_image_id,
            "native_decoding": self.native_decoding,
        }

    def load(self) -> None:
        from loguru import logger
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        remote = self._pretrained_kwargs()
        config = AutoConfig.from_pretrained(self.pretrained, **remote)
        if config.model_type not in self.model_classes:
            raise ValueError(
                f"{self.model_id}: {self.pretrained} is a {config.model_type!r} checkpoint; this adapter loads "
                f"MiniCPM-o-2.6 ({sorted(self.model_classes)}, trust_remote_code)"
            )
        kw: dict[str, Any] = {
            "dtype": self._torch_dtype(),
            "device_map": self.device_map,
            "init_vision": True,
            "init_audio": False,
            "init_tts": False,
        }
        if self.attn_implementation:
            kw["attn_implementation"] = self.attn_implementation
        logger.info(f"{self.model_id}: loading AutoModel (remote code) from {self.pretrained} ({kw})")
        self.tokenizer = AutoTokenizer.from_pretrained(self.pretrained, **remote)
        self.model = AutoModel.from_pretrained(self.pretrained, **kw, **remote).eval()
        self.processor = None  # the remote chat() builds its own processor

    def video_input(self, sampled: Any) -> list[Any]:
        """The frames as PIL images (what the remote chat() takes)."""
        from PIL import Image

        return [Image.fromarray(f) for f in sampled.frames]

    def chat_kwargs(self, request: NaruRequest) -> ChatKwargs:
        gen = self.generation_kwargs(request)
        kw: ChatKwargs = {
            "sampling": gen["do_sample"],
            "max_new_tokens": gen["max_new_tokens"],
            "use_image_id": self.use_image_id,
        }
        kw["max_slice_nums"] = self.max_slice_nums
        if gen["do_sample"]:
            if "temperature" in gen:
                kw["temperature"] = gen["temperature"]
            if "top_p" in gen:
                kw["top_p"] = gen["top_p"]
            if "top_k" in gen:
                kw["top_k"] = gen["top_k"]
        elif not self.native_decoding:
            kw["num_beams"] = gen.get("num_beams", 1)
            kw["repetition_penalty"] = 1.0
        return kw

    def generate(self, request: NaruRequest, sampled: Any) -> Answer:
        frames = self.video_input(sampled) if sampled is not None else []  # none for blind tasks
        content: list[Any] = [*frames, request.prompt]
        msgs = [{"role": "user", "content": content}]
        if self.system_prompt:
            msgs.insert(0, {"role": "system", "content": [self.system_prompt]})
        out = self.model.chat(msgs=msgs, tokenizer=self.tokenizer, **self.chat_kwargs(request))
        if isinstance(out, tuple):
            out = out[0]
        text = getattr(out, "text", out)
        if not isinstance(text, str):
            text = str(text)
        text = self.cut_at_stops(text.strip(), request.gen_kwargs.get("until"))
        return Answer(text, {"frames": len(frames)})
