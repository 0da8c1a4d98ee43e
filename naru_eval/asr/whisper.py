"""Whisper through transformers: a batch of windows (each at most 30 s) to timestamped segments.

Each window is one short-form generate call in a batch (the windows come from the VAD,
:mod:`naru_eval.asr.vad`, as in WhisperX and faster-whisper's batched mode), with
``return_timestamps=True`` and ``return_segments=True`` so transformers splits the output at
Whisper's timestamp tokens; decoding is greedy (``do_sample=False``, one beam, no temperature
fallback), in the settings' language, task ``transcribe``. A segment's times are relative to its
window; Whisper's padding beyond the window's end is not audio, so a segment is clipped to the
window and one that starts past its end is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from naru_eval.media.audio import SAMPLE_RATE

if TYPE_CHECKING:
    import numpy as np

    from naru_eval.media.asr_cache import AsrSettings


#: the tokens before a window's text: start of transcript, language, task (timestamps on, so no
#: ``<|notimestamps|>``); with ``max_new_tokens`` they must fit the decoder's positions
PROMPT_TOKENS = 3


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _language_token(language: str, known: dict[str, int]) -> str | None:
    """The ``<|xx|>`` token transformers' Whisper would use for ``language`` (a code, a name or a
    token, as its ``generate`` takes them), or None when it knows no such language."""
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    lang = language.lower()
    if lang in known:
        return lang
    if lang in TO_LANGUAGE_CODE:
        return f"<|{TO_LANGUAGE_CODE[lang]}|>"
    if lang in TO_LANGUAGE_CODE.values():
        return f"<|{lang}|>"
    return None


def preflight(s: AsrSettings, device: str) -> list[str]:
    """Every reason these settings cannot transcribe on ``device``, found before any audio is
    decoded (otherwise each would end a run after the soundtrack and the VAD): a device torch
    cannot use, a checkpoint whose config cannot be read, a language the checkpoint does not
    know, more new tokens than its decoder has positions for. Only configs are read, no weights."""
    import torch
    from transformers import AutoConfig, GenerationConfig

    problems: list[str] = []
    try:
        torch.empty(1, device=device, dtype=getattr(torch, s.dtype))
    except (RuntimeError, AssertionError, ValueError, TypeError) as e:
        problems.append(f"--device {device}: torch cannot use it ({_first_line(e)})")
    revision = s.revision or "main"
    try:
        config = AutoConfig.from_pretrained(s.model, revision=revision)
    except (OSError, ValueError) as e:
        return [*problems, f"--model {s.model}: its config cannot be read ({_first_line(e)})"]
    limit = getattr(config, "max_target_positions", None)
    if isinstance(limit, int) and s.max_new_tokens + PROMPT_TOKENS > limit:
        problems.append(
            f"--max-new-tokens {s.max_new_tokens}: {s.model}'s decoder has {limit} positions, {PROMPT_TOKENS} of "
            f"them the prompt: at most {limit - PROMPT_TOKENS}"
        )
    try:
        known = dict(getattr(GenerationConfig.from_pretrained(s.model, revision=revision), "lang_to_id", None) or {})
    except (OSError, ValueError):
        known = {}
    token = _language_token(s.language, known)
    if token is None or (known and token not in known):
        codes = ", ".join(sorted(t.strip("<|>") for t in known)) if known else "Whisper's language codes"
        problems.append(f"--language {s.language}: not a language {s.model} transcribes ({codes})")
    return problems


def resolve_device(device: str) -> str:
    """``auto``: ``cuda`` when a GPU is visible, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto``: float16 on a GPU (as Whisper's reference runs), float32 on CPU."""
    if dtype != "auto":
        return dtype
    return "float16" if device.startswith("cuda") else "float32"


class WhisperEngine:
    """A loaded Whisper checkpoint (model, feature extractor, tokenizer) on one device."""

    def __init__(self, s: AsrSettings, device: str) -> None:
        import torch
        from transformers import AutoProcessor, WhisperForConditionalGeneration

        self.settings = s
        self.device = device
        self.dtype = getattr(torch, s.dtype)
        kw: dict[str, Any] = {"revision": s.revision} if s.revision else {}
        self.processor = AutoProcessor.from_pretrained(s.model, **kw)
        model: Any = WhisperForConditionalGeneration.from_pretrained(s.model, dtype=self.dtype, **kw)
        self.model = model.to(device).eval()

    def transcribe(self, clips: Sequence[np.ndarray]) -> list[list[tuple[float, float, str]]]:
        """Per clip (16-kHz samples, at most 30 s), its segments ``(start, end, text)`` in seconds
        from the clip's start."""
        import torch

        if not clips:
            return []
        feats = self.processor.feature_extractor(
            list(clips), sampling_rate=SAMPLE_RATE, return_tensors="pt", return_attention_mask=True
        )
        x = feats.input_features.to(self.device, self.dtype)
        with torch.inference_mode():
            out = self.model.generate(
                x,
                attention_mask=feats.attention_mask.to(self.device),
                language=self.settings.language,
                task="transcribe",
                return_timestamps=True,
                return_segments=True,
                do_sample=False,
                num_beams=1,
                max_new_tokens=self.settings.max_new_tokens,
            )
        tok = self.processor.tokenizer
        result: list[list[tuple[float, float, str]]] = []
        for clip, segments in zip(clips, out["segments"], strict=True):
            length = len(clip) / SAMPLE_RATE
            rows: list[tuple[float, float, str]] = []
            for seg in segments:
                start, end = float(seg["start"]), float(seg["end"])
                if start >= length:
                    continue
                text = tok.decode(seg["tokens"], skip_special_tokens=True).strip()
                if text:
                    rows.append((max(0.0, start), min(max(start, end), length), text))
            result.append(rows)
        return result
