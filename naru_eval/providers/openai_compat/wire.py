"""The wire form of a question for an OpenAI-compatible server: the video's message parts (JPEG
images, vLLM's pre-extracted ``data:video/jpeg`` video, or a URL the server samples), the
frames' timing as ``media_io_kwargs``, and the cache that encodes each video once.

The parts are typed as the chat-completions protocol spells them (``TypedDict``: they are JSON).
"""

from __future__ import annotations

import base64
import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict
from urllib.parse import quote

from naru_eval.adapters.chat import TextPart

if TYPE_CHECKING:
    import numpy as np

    from naru_eval.media.sampler import SampledFrames

#: vLLM's media type for pre-extracted frames: the payload is comma-separated base64 JPEGs
#: (vllm/multimodal/media/video.py, VideoMediaIO.load_base64)
VIDEO_JPEG_PREFIX = "data:video/jpeg;base64,"


class Url(TypedDict):
    url: str


class ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: Url


class VideoUrlPart(TypedDict):
    type: Literal["video_url"]
    video_url: Url


class AudioUrlPart(TypedDict):
    """vLLM's audio content part (vllm/entrypoints/chat_utils.py ``ChatCompletionContentPartAudioParam``)."""

    type: Literal["audio_url"]
    audio_url: Url


MediaPart = ImagePart | VideoUrlPart | AudioUrlPart
ContentPart = ImagePart | VideoUrlPart | AudioUrlPart | TextPart

#: the longest audio part sent: every Whisper front end keeps 30 s (its default ``n_samples``)
#: whatever the server's processor defaults, so no part is cut server-side
SERVER_CLIP_S = 30.0


def audio_parts(samples: np.ndarray, rate: int) -> list[AudioUrlPart]:
    """One soundtrack window as ``audio_url`` parts of at most :data:`SERVER_CLIP_S` each: each a
    ``data:audio/wav;base64`` URL of the 32-bit float samples themselves (vLLM reads WAV with
    soundfile at its native rate, so 16 kHz mono arrives as sent)."""
    from naru_eval.media.audio import wav_bytes

    step = int(SERVER_CLIP_S * rate)
    out: list[AudioUrlPart] = []
    for at in range(0, len(samples), step):
        data = base64.b64encode(wav_bytes(samples[at : at + step], rate)).decode("ascii")
        out.append({"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64," + data}})
    return out


class UserMessage(TypedDict):
    role: Literal["user"]
    content: list[ContentPart]


class VideoTiming(TypedDict):
    """vLLM's ``media_io_kwargs["video"]`` for pre-extracted frames (see :func:`video_metadata`)."""

    num_frames: int
    fps: float
    frames_indices: list[int]
    total_num_frames: int
    duration: float


class MediaIO(TypedDict):
    """The request's ``media_io_kwargs`` (vLLM's per-request media options)."""

    video: VideoTiming


def jpeg_base64(frame: np.ndarray, quality: int) -> str:
    """The base64 JPEG of one uint8 HxWx3 RGB frame (deterministic at a fixed quality)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="JPEG", quality=quality)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def encode_jpeg(frame: np.ndarray, quality: int) -> str:
    """A ``data:image/jpeg;base64,...`` URL of one uint8 HxWx3 RGB frame."""
    return "data:image/jpeg;base64," + jpeg_base64(frame, quality)


def encode_video(frames: np.ndarray, quality: int) -> str:
    """One ``data:video/jpeg;base64,...`` URL of the frames, in order: vLLM decodes the
    comma-separated JPEGs back into one video without sampling them again."""
    return VIDEO_JPEG_PREFIX + ",".join(jpeg_base64(f, quality) for f in frames)


def video_metadata(sampled: SampledFrames) -> VideoTiming:
    """The timing of the sampled frames as vLLM's ``media_io_kwargs["video"]`` takes it (and
    the model's processor reads: Qwen2.5-VL's temporal position spacing, Qwen3-VL's
    timestamps): the same numbers the HF path hands its processor. ``num_frames=-1`` keeps
    every frame sent, whatever the server's default."""
    # The HF path's twin is naru_eval/adapters/hf/base.py ``video_metadata`` (transformers'
    # VideoMetadata: the same fps, duration, frame numbers and total, plus width and height). The
    # two differ on purpose (vLLM needs total >= frames sent and ``num_frames=-1``), so they are
    # not merged; a change to the timing one side sends belongs on the other too.
    info = sampled.info
    indices = [int(i) for i in sampled.indices]
    return {
        "num_frames": -1,
        "fps": float(info.fps),
        "frames_indices": indices,
        # vLLM requires at least one frame number per frame sent; a budget above the video's
        # frame count repeats frames (the sampler's rule), so the count is at least the frames sent
        "total_num_frames": max(int(info.frame_count), len(indices)),
        "duration": float(info.duration_s),
    }


def video_url(path: str, prefix: str | None, root: Path | None) -> str:
    """The URL a server-sampled video is fetched from: ``file://`` of the path, else ``prefix`` +
    the file's name (or its path under ``root``)."""
    p = Path(path)
    if prefix is None:
        return p.resolve().as_uri()
    rel = p.resolve().relative_to(root.resolve()).as_posix() if root is not None else p.name
    return prefix.rstrip("/") + "/" + quote(rel)


class EncodedVideo:
    """One video's encoded parts (and, in video mode, its timing), built once under its own lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parts: list[MediaPart] | None = None
        self.media_io: MediaIO | None = None


class VideoParts:
    """The encoded parts of the last few videos: each video decoded and encoded once even when
    several of its questions are in flight (a small LRU of videos)."""

    def __init__(self, capacity: int, as_video: bool, quality: int) -> None:
        self.capacity, self.as_video, self.quality = capacity, as_video, quality
        self._entries: OrderedDict[str, EncodedVideo] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, video: str, sample: Callable[[], SampledFrames]) -> EncodedVideo:
        """``video``'s parts, from ``sample()``'s frames the first time it is asked for."""
        with self._lock:
            entry = self._entries.get(video)
            if entry is None:
                entry = self._entries[video] = EncodedVideo()
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(video)
        with entry.lock:  # concurrent questions on one video decode and encode it once
            if entry.parts is None:
                sampled = sample()
                if self.as_video:
                    entry.parts = [
                        {"type": "video_url", "video_url": {"url": encode_video(sampled.frames, self.quality)}}
                    ]
                    entry.media_io = {"video": video_metadata(sampled)}
                else:
                    entry.parts = [
                        {"type": "image_url", "image_url": {"url": encode_jpeg(f, self.quality)}}
                        for f in sampled.frames
                    ]
        return entry
