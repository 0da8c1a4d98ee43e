"""Where ``naru-eval transcribe`` keeps its Whisper transcripts, and how a run finds them.

One entry per (video content, ASR settings): ``<root>/asr/<content fingerprint>/<key>.json`` is
the finished transcript (:class:`naru_eval.media.transcript.Transcript` JSON),
``<key>.settings.json`` beside it the :class:`AsrSettings` it was made with, and
``<key>.partial.jsonl`` the chunk-level checkpoint of a run in progress (one line per finished
window; a killed run continues from it). ``key`` hashes the settings that change the text
(model, revision, language, dtype, voice-activity and window settings) and how the samples
Whisper hears are made (the one audio sampler's rate and :data:`~naru_eval.media.audio.CONVERSION`),
not the batch size or the device; an entry whose recorded settings no longer hash to its name
(made from other samples, or under an older key) is not found. The video is named by its content (:func:`naru_eval.media.fingerprint.content_fingerprint`),
so a renamed or copied file keeps its transcript. ``root`` is ``NARU_TRANSCRIPT_CACHE``, else
``NARU_CACHE_DIR/transcripts``, else ``~/.cache/naru-eval/transcripts``.

No model is loaded here (this layer never imports transformers): ASR itself is
:mod:`naru_eval.asr`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Literal

from naru_eval.media.audio import CONVERSION, SAMPLE_RATE
from naru_eval.media.fingerprint import content_fingerprint
from naru_eval.media.transcript import TRANSCRIPT_FORMAT, TranscriptError
from naru_eval.settings import settings

#: The default ASR model: kotoba-whisper-v2.0 (a Japanese distillation of whisper-large-v3). The
#: published Japanese CER (%, CommonVoice 8 / JSUT / ReazonSpeech test): kotoba-whisper-v2.0
#: 9.2 / 8.4 / 11.6, whisper-large-v3 8.5 / 7.1 / 14.9 (docs/transcripts.md gives the source).
#: ReazonSpeech is Japanese TV, the nearest of the three to NARU's dramas, anime and variety
#: shows, and there kotoba is 3.3 points better; it also decodes with 2 decoder layers, not 32.
DEFAULT_ASR_MODEL = "kotoba-tech/kotoba-whisper-v2.0"
#: the alternative the docs compare it with
WHISPER_LARGE_V3 = "openai/whisper-large-v3"

VadKind = Literal["silero", "none"]
#: the weights' dtypes Whisper runs in (float16 on a GPU, float32 on CPU by default)
DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")

#: how the samples Whisper hears are made (part of every key): the one audio sampler's
#: (:func:`naru_eval.media.audio.sample_track`) rate and conversion
SAMPLES = {"rate": SAMPLE_RATE, "conversion": CONVERSION}


@dataclass(frozen=True)
class AsrSettings:
    """Every ASR setting that changes the transcript's text (the cache key's parts).

    Decoding is greedy (temperature 0, one beam) without temperature fallback, so a setting
    here and the audio fix the text."""

    model: str = DEFAULT_ASR_MODEL
    revision: str | None = None
    language: str = "ja"
    #: the weights' dtype as run (float16 on a GPU, float32 on CPU, unless given)
    dtype: str = "float32"
    #: voice-activity detection before ASR: Silero VAD (its model ships inside the pip package),
    #: or none (fixed windows: music and silence then reach Whisper)
    vad: VadKind = "silero"
    vad_threshold: float = 0.5
    min_speech_s: float = 0.25
    min_silence_s: float = 0.1
    speech_pad_s: float = 0.03
    #: longest window given to Whisper at once (its receptive field is 30 s)
    window_s: float = 30.0
    max_new_tokens: int = 224

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype={self.dtype}: Whisper runs in {', '.join(DTYPES)}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={self.max_new_tokens}: a window needs at least 1 token")
        if not 0 < self.window_s <= 30.0:
            raise ValueError(f"window_s={self.window_s}: Whisper takes windows of at most 30 s")
        if not 0.0 < self.vad_threshold < 1.0:
            raise ValueError(f"vad_threshold={self.vad_threshold}: must be in (0, 1)")

    def record(self) -> dict[str, object]:
        """What ``<key>.settings.json`` holds: the settings and how the samples were made."""
        return {**asdict(self), "samples": SAMPLES}

    def key(self) -> str:
        """16 hex digits of the settings, how the samples are made and the transcript format."""
        blob = json.dumps({"format": TRANSCRIPT_FORMAT, **self.record()}, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def label(self) -> str:
        """The transcript's ``source``: ``asr:<model>@<key>``."""
        return f"asr:{self.model}@{self.key()}"

    @classmethod
    def from_record(cls, raw: dict[str, object]) -> AsrSettings:
        """The settings of a :meth:`record` (other keys ignored)."""
        return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})  # type: ignore[arg-type]


def cache_root() -> Path:
    """The transcript cache's directory (see the module docstring)."""
    s = settings()
    if s.transcript_cache:
        return Path(s.transcript_cache).expanduser()
    return Path(s.cache_dir or "~/.cache/naru-eval").expanduser() / "transcripts"


@dataclass(frozen=True)
class AsrEntry:
    """The files of one (video, settings) entry. ``video`` is the content fingerprint of the
    video it is for (the folder's name): the entry records it, so an entry copied into another
    video's folder is not that video's."""

    directory: Path
    key: str
    video: str

    @property
    def transcript(self) -> Path:
        return self.directory / f"{self.key}.json"

    @property
    def settings_file(self) -> Path:
        return self.directory / f"{self.key}.settings.json"

    @property
    def checkpoint(self) -> Path:
        return self.directory / f"{self.key}.partial.jsonl"

    def record(self, asr: AsrSettings) -> dict[str, object]:
        """What the settings file holds: the settings, how the samples were made, and the video."""
        return {**asr.record(), "video": self.video}

    def made_here(self, meta: Path) -> AsrSettings | None:
        """The settings a settings file of this folder records when it is this video's and hashes
        to its name; None otherwise (another video's, or another version's). Unreadable is an error."""
        try:
            raw = json.loads(meta.read_text(encoding="utf-8"))
            made = AsrSettings.from_record(raw)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise TranscriptError(meta, f"unreadable ASR settings ({e})") from None
        if raw.get("video") != self.video or made.key() != meta.name.removesuffix(".settings.json"):
            return None
        return made

    @property
    def done(self) -> bool:
        """The transcript is written, and the settings beside it are this video's and this key's."""
        return (
            self.transcript.is_file()
            and self.settings_file.is_file()
            and self.made_here(self.settings_file) is not None
        )


def entry(video: str | os.PathLike[str], asr: AsrSettings, root: Path | None = None) -> AsrEntry:
    """The cache entry of ``video`` under ``asr`` (it may not exist yet)."""
    fingerprint = content_fingerprint(video)
    return AsrEntry((root or cache_root()) / "asr" / fingerprint, asr.key(), fingerprint)


def find(video: str | os.PathLike[str], model: str | None = None, root: Path | None = None) -> Path | None:
    """The finished ASR transcript of ``video`` by ``model`` (default :data:`DEFAULT_ASR_MODEL`),
    whatever its other settings; None when there is none. An entry whose recorded settings do not
    hash to its name was made from other samples (or under an older key), and one that records
    another video (copied into this folder) is not this video's: both are passed over. Two
    finished entries for the same model (other settings) is an error: which one a run used must
    be named (``naru-eval transcribe`` with the same settings, or remove one)."""
    want = model or DEFAULT_ASR_MODEL
    fingerprint = content_fingerprint(video)
    base = (root or cache_root()) / "asr" / fingerprint
    if not base.is_dir():
        return None
    found: list[Path] = []
    for meta in sorted(base.glob("*.settings.json")):
        here = AsrEntry(base, meta.name.removesuffix(".settings.json"), fingerprint)
        made = here.made_here(meta)
        if made is not None and made.model == want and here.transcript.is_file():
            found.append(here.transcript)
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise TranscriptError(base, f"{len(found)} ASR transcripts of {want} for {video} ({names}): keep one")
    return found[0] if found else None


def cache_problem(root: Path) -> str | None:
    """Why ASR entries cannot be written under ``root`` (a file in its place, a read-only or
    full disk), or None; checked before any audio is decoded."""
    if root.exists() and not root.is_dir():
        return f"the transcript cache {root} is a file, not a folder (NARU_TRANSCRIPT_CACHE or --cache)"
    try:
        (root / "asr").mkdir(parents=True, exist_ok=True)
        probe = root / "asr" / f".write-check.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return (
            f"the transcript cache {root} cannot be written ({e.strerror or e}): set NARU_TRANSCRIPT_CACHE or --cache"
        )
    return None
