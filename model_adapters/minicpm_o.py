"""MiniCPM-o-2.6 through its trust_remote_code ``chat`` interface (no transformers-native class).

Loading follows the model card: ``AutoModel.from_pretrained(..., trust_remote_code=True,
init_vision=True, init_audio=False, init_tts=False)`` (vision only: the audio encoder and TTS
are not needed and cost memory) and ``AutoTokenizer.from_pretrained(..., trust_remote_code=True)``.
Per question the sampled frames go in as PIL images, then the prompt, in one user turn:

    model.chat(msgs=[{"role": "user", "content": [*frames, prompt]}], tokenizer=tokenizer,
               sampling=False, use_image_id=False, max_slice_nums=2, ...)

(``use_image_id=False`` and ``max_slice_nums=2`` are the model card's video settings.)

With the soundtrack (``audio=true``; off by default, as the official row ran) the model loads its
audio encoder (``init_audio=True``) and the chat takes the card's omni mode: one ``<unit>`` per
sampled frame, the frame and its window of audio (16 kHz samples), then the prompt, with
``omni_input=True``; audio only (``video=false``) gives the windows as audio items before the
prompt. The windows are the audio plan's (27 tokens a second of audio, a 32,768-token context).
With
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

from naru_eval.adapters.args import ANSWERS, Flag
from naru_eval.adapters.audio import AudioMixin, AudioOffArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import CAP, Family, Official
from naru_eval.adapters.hf.base import HFVideoModel
from naru_eval.adapters.hf.builder import InputBuilder, cut_at_stops
from naru_eval.adapters.hf.generator import Generator
from naru_eval.adapters.hf.loading import Checkpoint
from naru_eval.adapters.hf.positions import SEQUENTIAL
from naru_eval.adapters.request import Answer, NaruRequest
from naru_eval.core.budgets import FrameBudget, Sampling
from naru_eval.core.json_types import JSONObject
from naru_eval.media.audio_plan import MINICPM_O

#: tokens one frame costs the remote chat (64 resampler queries and its image delimiters)
FRAME_TOKENS = 66
#: the omni mode's unit marker (model card)
UNIT = "<unit>"


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
    omni_input: bool


class MiniCPMArgs(AudioOffArgs):
    """Args of MiniCPM-o-2.6: the model card's video settings of its remote ``chat`` and the
    soundtrack (off: the official row ran frames only)."""

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


class MiniCPMInputs(InputBuilder):
    """The frames as PIL images (with audio: the card's omni units), and the remote chat()'s settings."""

    #: the remote chat() builds the prompt and runs generate itself: no cache to share
    supports_shared_prefix = False
    args: MiniCPMArgs

    def __init__(self, adapter: NaruModel, checkpoint: Checkpoint) -> None:
        super().__init__(adapter, checkpoint)
        assert isinstance(adapter, AudioMixin), f"{type(adapter).__name__}: MiniCPM-o's adapter hears audio"
        self.omni: AudioMixin = adapter

    def description(self) -> JSONObject:
        a = self.args
        return {
            "max_slice_nums": a.max_slice_nums,
            "use_image_id": a.use_image_id,
            "native_decoding": a.native_decoding,
            **self.omni.audio_description(),
        }

    def load_kwargs(self) -> dict[str, Any]:
        """Vision only unless the run hears the soundtrack: the audio encoder and TTS cost memory."""
        return {"init_vision": True, "init_audio": self.omni.gives_audio, "init_tts": False}

    def video_input(self, sampled: Any) -> list[Any]:
        """The frames as PIL images (what the remote chat() takes)."""
        from PIL import Image

        return [Image.fromarray(f) for f in sampled.frames]

    def frame_tokens(self, sampled: Any, n: int) -> int:
        return FRAME_TOKENS * int(n)

    def chat_content(self, sampled: Any) -> tuple[list[Any], bool]:
        """The chat's content before the prompt, and whether it is the omni mode's units."""
        omni = self.omni
        if sampled is None:  # blind tasks
            return [], False
        frames = self.video_input(sampled) if omni.gives_frames else []
        if not omni.gives_audio:
            return frames, False
        audio, plan = omni.soundtrack(sampled, self.frame_tokens(sampled, len(sampled.frames)) if frames else 0)
        omni._audio_records[sampled.info.path] = omni.audio_usage(audio, plan)
        if not frames:
            return [audio.window(k) for k in range(len(audio.windows))], False
        # one unit per frame: the frame and its part of the window it lies in (a window that holds
        # several frames, merged or the whole track, is cut halfway between them)
        times = [float(t) for t in sampled.timestamps]
        where = [next((k for k, (a, b) in enumerate(audio.windows) if a <= t < b), None) for t in times]
        out: list[Any] = []
        for i, (frame, t, w) in enumerate(zip(frames, times, where, strict=True)):
            out += [UNIT, frame]
            if w is None:
                continue
            a, b = audio.windows[w]
            lo = (times[i - 1] + t) / 2 if i > 0 and where[i - 1] == w else a
            hi = (t + times[i + 1]) / 2 if i + 1 < len(times) and where[i + 1] == w else b
            start = audio.offsets[w] + round((lo - a) * audio.rate)
            out.append(audio.samples[start : audio.offsets[w] + round((hi - a) * audio.rate)])
        return out, True


class RemoteChat(Generator):
    """The answer from the checkpoint's own ``chat()`` (its remote code builds the inputs and
    generates): the frames (or omni units), then the prompt, in one user turn."""

    builder: MiniCPMInputs

    @property
    def omni_frames(self) -> bool:
        return self.adapter.inputs.frames is not None

    def chat_kwargs(self, request: NaruRequest) -> ChatKwargs:
        gen = self.generation_kwargs(request)
        a = self.builder.args
        kw: ChatKwargs = {
            "sampling": gen["do_sample"],
            "max_new_tokens": gen["max_new_tokens"],
            "use_image_id": a.use_image_id,
        }
        kw["max_slice_nums"] = a.max_slice_nums
        if gen["do_sample"]:
            if "temperature" in gen:
                kw["temperature"] = gen["temperature"]
            if "top_p" in gen:
                kw["top_p"] = gen["top_p"]
            if "top_k" in gen:
                kw["top_k"] = gen["top_k"]
        elif not a.native_decoding:
            kw["num_beams"] = gen.get("num_beams", 1)
            kw["repetition_penalty"] = 1.0
        return kw

    def answer(self, request: NaruRequest, sampled: Any) -> Answer:
        builder = self.builder
        media, omni = builder.chat_content(sampled)
        frames = [m for m in media if not isinstance(m, str) and hasattr(m, "size") and hasattr(m, "mode")]
        content: list[Any] = [*media, request.prompt]
        msgs = [{"role": "user", "content": content}]
        system = builder.args.system_prompt
        if system:
            msgs.insert(0, {"role": "system", "content": [system]})
        kw = self.chat_kwargs(request)
        if omni:
            kw["omni_input"] = True
        out = self.checkpoint.model.chat(msgs=msgs, tokenizer=self.checkpoint.processor, **kw)
        if isinstance(out, tuple):
            out = out[0]
        text = getattr(out, "text", out)
        if not isinstance(text, str):
            text = str(text)
        text = cut_at_stops(text.strip(), request.gen_kwargs.get("until"))
        return Answer(text, {"frames": len(frames) if self.omni_frames else 0})


class MiniCPM_O(AudioMixin, HFVideoModel):
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
        inputs=("frames", "audio"),
        frames=CAP,
        times="order",
    )
    Inputs = MiniCPMInputs
    Generate = RemoteChat
    encoder = MINICPM_O
