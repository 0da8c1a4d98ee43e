"""Local pre-processing of a video before it is uploaded to Gemini (PyAV), and MIME types.

Gemini bills a video by its duration, the sampling rate asked (``videoMetadata.fps``), the media
resolution and whether the file has an audio track the request asks for (see
naru_eval.providers.gemini.tokens), never by the file's own frame rate, resolution or bit rate. So the bytes
of a 4 h 1080p file are wasted upload time, not tokens. The adapter drops the audio by asking
for the frames only (``videoMetadata.contentLayers``, SDK 3.6.1); stripping it here is the
fallback (``strip_audio=true``). Hence three optional transforms, cached on disk by the source's
content hash and the settings:

* ``audio=False``: the file is sent without its audio track (stream copy when nothing else
  changes: fast and lossless for the video);
* ``fps=F``: the video is re-encoded at F frames per second (at least the sampling rate; the
  adapter uses ``downsample_factor`` x the sampling fps, 4 x 0.25 = 1 fps by default), each output
  frame ``i`` being the source frame on screen at ``i / F`` seconds;
* ``max_height=H``: frames are scaled to at most H pixels high (360 by default when
  downsampling), keeping the aspect ratio.

Does Gemini honour ``fps`` on such a file? It samples by the file's timeline (timestamps), not
by frame index: the re-encoded file keeps the source's duration and puts frame ``i`` at
``i / F`` s, so sampling it at 0.25 fps asks for the same instants (within ``1/F`` s) as sampling
the original, and the token count (duration x fps x tokens per frame) is unchanged. What is lost
is only detail the model would not see at low media resolution anyway, or motion between the
kept frames (which a 0.25 fps sampler discards regardless). A test can only check what is sent
(duration, frame rate, size, audio presence) and, against the stub, that the reported token
usage is unchanged; whether the real service samples the same frames cannot be checked offline.

A container Gemini does not take (``.mkv``) is remuxed to MP4 (stream copy).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core.json_types import JSONObject

if TYPE_CHECKING:
    import av
    from av.audio.stream import AudioStream
    from av.container import OutputContainer

#: MIME types Gemini accepts for video, by extension (ai.google.dev video understanding docs)
MIME_TYPES: dict[str, str] = {
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mpeg": "video/mpeg",
    ".mpg": "video/mpg",
    ".mov": "video/mov",
    ".avi": "video/avi",
    ".flv": "video/x-flv",
    ".webm": "video/webm",
    ".wmv": "video/wmv",
    ".3gp": "video/3gpp",
}


def mime_type(path: str | os.PathLike[str]) -> str | None:
    return MIME_TYPES.get(Path(path).suffix.lower())


@dataclass(frozen=True)
class PrepSpec:
    """What to do to a video before upload (the identity by default)."""

    audio: bool = True
    fps: float | None = None
    max_height: int | None = None
    crf: int = 28

    def needed(self, path: str | os.PathLike[str]) -> bool:
        return not self.audio or self.fps is not None or self.max_height is not None or mime_type(path) is None

    def tag(self) -> str:
        fps = "src" if self.fps is None else f"{self.fps:g}"
        height = "src" if self.max_height is None else str(self.max_height)
        return f"a{int(self.audio)}_f{fps}_h{height}_c{self.crf}"

    def describe(self) -> JSONObject:
        """In the adapter's description (the run key): what the upload is made of."""
        return {"audio": self.audio, "fps": self.fps, "max_height": self.max_height, "crf": self.crf}


@dataclass(frozen=True)
class PreparedUpload:
    """The file to upload, and what pre-processing saved."""

    path: Path
    mime_type: str
    source_bytes: int
    sent_bytes: int
    transformed: bool
    seconds: float = 0.0
    cached: bool = False

    @property
    def bytes_saved(self) -> int:
        return self.source_bytes - self.sent_bytes


def prepare_video(
    src: str | os.PathLike[str], spec: PrepSpec, out_dir: str | os.PathLike[str], source_sha256: str | None = None
) -> PreparedUpload:
    """The file to send for ``src`` under ``spec``: ``src`` itself, or a cached transformed copy."""
    src = Path(src)
    size = src.stat().st_size
    if not spec.needed(src):
        return PreparedUpload(src, mime_type(src) or "video/mp4", size, size, False)
    digest = source_sha256 or hashlib.sha256(f"{src.resolve()}:{size}:{src.stat().st_mtime_ns}".encode()).hexdigest()
    out = Path(out_dir) / f"{digest[:32]}_{spec.tag()}.mp4"
    if out.exists() and out.stat().st_size > 0:
        return PreparedUpload(out, "video/mp4", size, out.stat().st_size, True, cached=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp.mp4")
    t0 = time.perf_counter()
    try:
        if spec.fps is None and spec.max_height is None:
            _remux(src, tmp, audio=spec.audio)
        else:
            _reencode(src, tmp, spec)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return PreparedUpload(out, "video/mp4", size, out.stat().st_size, True, seconds=time.perf_counter() - t0)


def _remux(src: Path, dst: Path, audio: bool) -> None:
    """Copy the video stream a player shows (naru_eval.media.video.video_stream: never cover art)
    and the first audio stream if ``audio`` into an MP4."""
    import av

    from naru_eval.media.video import video_stream

    with av.open(str(src)) as inp, av.open(str(dst), mode="w", format="mp4") as out:
        streams: list[av.VideoStream | av.AudioStream] = [video_stream(src, inp)]
        if audio and inp.streams.audio:
            streams.append(inp.streams.audio[0])
        mapping = {s.index: out.add_stream_from_template(s) for s in streams}
        for packet in inp.demux(streams):
            if packet.dts is None:
                continue
            packet.stream = mapping[packet.stream.index]
            out.mux(packet)


def _even(x: float) -> int:
    return max(2, int(round(x / 2)) * 2)


def _reencode(src: Path, dst: Path, spec: PrepSpec) -> None:
    """Re-encode the video at ``spec.fps`` / ``spec.max_height`` (H.264), audio as mono AAC."""
    import av

    from naru_eval.media.video import video_stream

    with av.open(str(src)) as inp:
        vin = video_stream(src, inp)
        vin.thread_type = "AUTO"
        rate = vin.average_rate or vin.guessed_rate or vin.base_rate or 25
        out_fps = Fraction(spec.fps).limit_denominator(1000) if spec.fps else Fraction(rate)
        width, height = vin.codec_context.width, vin.codec_context.height
        if spec.max_height and height > spec.max_height:
            width, height = _even(width * spec.max_height / height), _even(spec.max_height)
        else:
            width, height = _even(width), _even(height)
        if vin.duration is not None and vin.time_base is not None:
            duration = float(vin.duration * vin.time_base)
        else:
            duration = (inp.duration or 0) / 1_000_000
        start = vin.start_time or 0
        has_audio = spec.audio and bool(inp.streams.audio)
        with av.open(str(dst), mode="w", format="mp4") as out:
            vout = out.add_stream("libx264", rate=out_fps)
            vout.width, vout.height, vout.pix_fmt = width, height, "yuv420p"
            vout.options = {"crf": str(spec.crf), "preset": "veryfast", "g": str(max(1, round(float(out_fps) * 10)))}
            aout = _audio_stream(out) if has_audio else None  # every stream before the first packet
            slot, period = 0, 1.0 / float(out_fps)
            n_slots = max(1, int(round(duration * float(out_fps)))) if duration > 0 else None
            previous = None

            def emit(frame: av.VideoFrame) -> None:
                nonlocal slot
                img = frame.reformat(width=width, height=height, format="yuv420p")
                img.pts = slot
                img.time_base = Fraction(1) / out_fps
                for packet in vout.encode(img):
                    out.mux(packet)
                slot += 1

            for frame in inp.decode(vin):
                tb = vin.time_base
                t = float((frame.pts - start) * tb) if frame.pts is not None and tb is not None else slot * period
                # every slot before this frame's time shows the previous frame
                while slot * period < t - 1e-9 and (n_slots is None or slot < n_slots):
                    emit(previous if previous is not None else frame)
                previous = frame
            while previous is not None and (n_slots is None and slot == 0 or n_slots is not None and slot < n_slots):
                emit(previous)
            for packet in vout.encode():
                out.mux(packet)
            if aout is not None:
                _encode_audio(src, out, aout)


def _audio_stream(out: OutputContainer) -> AudioStream:
    aout = out.add_stream("aac", rate=16000)
    aout.layout = "mono"
    aout.bit_rate = 32000
    return aout


def _encode_audio(src: Path, out: OutputContainer, aout: AudioStream) -> None:
    """Write the source's first audio stream as 16 kHz mono AAC (Gemini keeps ~1 kbps of it)."""
    import av
    from av.audio.resampler import AudioResampler

    resampler = AudioResampler(format="fltp", layout="mono", rate=16000)
    with av.open(str(src)) as inp:
        for frame in inp.decode(inp.streams.audio[0]):
            frame.pts = None
            for rframe in resampler.resample(frame):
                for packet in aout.encode(rframe):
                    out.mux(packet)
        for rframe in resampler.resample(None):
            for packet in aout.encode(rframe):
                out.mux(packet)
    for packet in aout.encode():
        out.mux(packet)
