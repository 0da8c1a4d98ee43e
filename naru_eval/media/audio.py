"""``sample_audio``: the one audio sampler, the soundtrack beside the frames.

The audio stream a player plays (:func:`audio_stream`) is decoded with PyAV from its start, in
one sequential pass, downmixed to mono (the mean of its channels, as ``librosa.load`` does for
qwen-omni-utils) and resampled once to 16 kHz by FFmpeg's resampler, in one filter graph. Every
output sample is placed by its timestamp on the frames' time axis: time 0 is the first frame of
the video stream's frame index (:mod:`naru_eval.media.index`), the origin of every frame
timestamp the frame sampler returns. So an audio stream that starts late (an MP4 whose audio
track begins 0.46 s in, a broadcast recording) keeps its true place, with silence before it;
samples before the first frame are not part of any window; a gap in the audio's timestamps stays
a gap.

What is kept are the requested *windows* (seconds on that axis, rounded to the 10-ms hop of every
audio front end here), concatenated: the whole video is one window from 0 to its duration; a plan
that does not fit the context takes windows around the sampled frames
(:mod:`naru_eval.media.audio_plan`). Only the windows' samples are held (a 4-hour track at 16 kHz
float32 is 922 MB; a decoded 48 kHz stereo one would be 5.5 GB), and a window's samples are the
same whatever other windows are asked: the pass always starts at the track's first packet.
Where the track does not reach (before a late start, after an early end, a gap), a window holds
zeros, and :attr:`SampledAudio.covered_s` says how much of it the track covered.

A file without an audio stream is a :class:`~naru_eval.media.video.VideoError` naming it
(:func:`probe_audio` finds it before any model runs: ``naru-eval validate-data --audio``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from naru_eval.media.audio_decode import DecodeReport, Placer, decode_into
from naru_eval.media.video import VideoError, check_file, video_stream

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: what every audio path here feeds its model: 16 kHz mono (Whisper, Parakeet)
SAMPLE_RATE = 16_000
#: window bounds are whole multiples of this (the 10-ms hop of the Whisper and Parakeet front
#: ends at 16 kHz), so a window's feature frames and tokens follow from its length exactly
HOP_S = 0.01
#: how the samples are made (part of every cache key): mean downmix, FFmpeg swr resampling
CONVERSION = "mono-mean/swr/f32"


class AudioInfo(NamedTuple):
    """What :func:`probe_audio` reads of a file's audio: the stream a player plays, where it starts
    on the frames' time axis (container timestamps: the video stream's start is the origin),
    and how long the container says it is. Decoded whole (``whole=True``), also what the run's
    decode meets: ``decoded_s`` seconds of samples, the packets the decoder refused (skipped:
    their time is silence) and each run's format (several: it changes mid-stream)."""

    path: str
    stream_index: int
    codec: str
    sample_rate: int
    channels: int
    start_s: float
    duration_s: float
    audio_streams: int
    decoded_s: float | None = None
    skipped_packets: int = 0
    formats: tuple[str, ...] = ()


class SampledAudio(NamedTuple):
    """The soundtrack of one video, as the windows asked for.

        ``samples`` are float32 mono at ``rate``: window ``w`` is ``samples[offsets[w]:offsets[w+1]]``
        and starts at ``windows[w][0]`` seconds on the frames' time axis. ``covered_s[w]``: seconds of
        window ``w`` the track has samples for (the rest is zeros). ``track_start_s`` /
        ``track_end_s``: where the decoded track begins and where it ends (or where decoding stopped,
    a second past the last window) on that axis.
    """

    samples: np.ndarray  # float32, all windows concatenated
    rate: int
    windows: tuple[tuple[float, float], ...]
    offsets: tuple[int, ...]
    covered_s: tuple[float, ...]
    stream_index: int
    track_start_s: float
    track_end_s: float
    path: str

    @property
    def seconds(self) -> float:
        """Seconds of audio given (zeros where the track does not reach included)."""
        return len(self.samples) / self.rate

    def window(self, w: int) -> np.ndarray:
        return self.samples[self.offsets[w] : self.offsets[w + 1]]


def snap(t: float) -> float:
    """``t`` seconds on the 10-ms grid every window bound lies on."""
    return round(round(t / HOP_S) * HOP_S, 6)


def normalise_windows(windows: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Windows on the 10-ms grid, sorted, overlapping or touching ones merged, empty ones dropped;
    a negative start or an end before its start is an error."""
    out: list[tuple[float, float]] = []
    for s, e in sorted((snap(float(a)), snap(float(b))) for a, b in windows):
        if s < 0 or e < s:
            raise ValueError(f"audio window ({s}, {e}): windows lie within [0, duration) and end after they start")
        if e == s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


def _ranked(stream: Any) -> tuple[int, int, int]:
    """FFmpeg's ``av_find_best_stream`` order for audio: not for the hearing or visually impaired
    (nor a commentary), then the default disposition, then the highest bit rate; the first on a tie."""
    from av.stream import Disposition

    disp = stream.disposition
    other = Disposition.hearing_impaired | Disposition.visual_impaired | Disposition.comment
    score = (0 if disp & other else 1) + (1 if disp & Disposition.default else 0)
    ctx = stream.codec_context
    return score, int(getattr(ctx, "bit_rate", 0) or 0), -int(stream.index)


def audio_stream(p: Path, container: Any, index: int | None = None) -> Any:
    """The audio stream a player plays (``index``: that container stream instead); a file without
    one is a :class:`VideoError` naming it."""
    streams = list(container.streams.audio)
    if index is not None:
        chosen = [s for s in streams if s.index == index]
        if not chosen:
            have = [s.index for s in streams] or "none"
            raise VideoError(p, f"no audio stream #{index} (audio streams: {have})")
        return chosen[0]
    if not streams:
        raise VideoError(p, "no audio stream: audio was requested, and this file is silent (video only)")
    best = max(streams, key=_ranked)
    if best.codec_context is None or not best.rate:
        raise VideoError(p, f"audio stream #{best.index} cannot be decoded: its codec parameters are unreadable")
    return best


def _seconds(value: Any, time_base: Any) -> float | None:
    return float(value * time_base) if value is not None and time_base is not None else None


def probe_audio(path: str | os.PathLike[str], stream: int | None = None, whole: bool = False) -> AudioInfo:
    """Open ``path``, choose its audio stream and decode its first audio frame (a silent file or an
    undecodable track is a :class:`VideoError` naming the file). ``whole``: then decode the whole
    track as the sampler does (``naru-eval validate-data --audio``), so what a run would meet is
    found, and said (:func:`audio_note`), before it."""
    import av

    p = Path(path)
    check_file(p)
    try:
        with av.open(str(p)) as container:
            a = audio_stream(p, container, stream)
            v = video_stream(p, container)
            v_start = _seconds(v.start_time, v.time_base) or 0.0
            a_start = _seconds(a.start_time, a.time_base)
            duration = _seconds(a.duration, a.time_base)
            if duration is None and container.duration is not None:
                duration = container.duration / 1_000_000 - ((a_start or 0.0) - (container.start_time or 0) / 1_000_000)
            first: Any = None  # the first decoded audio frame
            for packet in container.demux(a):
                try:
                    first = next(iter(packet.decode()), None)
                except av.error.FFmpegError:
                    continue  # a packet the decoder refuses is skipped, as the sampler skips it
                if first is not None:
                    break
            if first is None:
                raise VideoError(p, f"audio stream #{a.index}: no decodable audio frame")
            start = first.time if first.time is not None else (a_start or 0.0)
            info = AudioInfo(
                str(p),
                int(a.index),
                str(a.codec_context.name),
                int(a.rate),
                int(a.channels),
                float(start - v_start),
                float(duration or 0.0),
                len(container.streams.audio),
            )
        if whole:
            with av.open(str(p)) as container:
                placer = Placer((), SAMPLE_RATE, 0.0)
                report = _decode(p, container, audio_stream(p, container, stream), placer, SAMPLE_RATE)
            info = info._replace(
                decoded_s=placer.placed / SAMPLE_RATE, skipped_packets=report.skipped_packets, formats=report.formats
            )
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"audio cannot be opened or decoded ({type(e).__name__}: {e})") from None
    return info


def audio_note(info: AudioInfo) -> str | None:
    """``validate-data --audio``'s note on a track the run decodes past a problem of: packets the
    decoder refused, a format that changes mid-stream; else None."""
    said = []
    if info.skipped_packets:
        said.append(
            f"{info.skipped_packets} packet(s) the decoder refused are skipped, their time silence "
            f"({info.decoded_s or 0.0:.1f} s of audio decoded)"
        )
    if len(info.formats) > 1:
        said.append(
            f"the format changes mid-stream ({' -> '.join(info.formats)}); each run is downmixed and resampled "
            "with its own layout and rate"
        )
    return f"{info.path}: audio stream #{info.stream_index}: {'; '.join(said)}" if said else None


def _decode(p: Path, container: Any, stream: Any, placer: Placer, rate: int) -> DecodeReport:
    """The one decode pass (:func:`~naru_eval.media.audio_decode.decode_into`); a stream with no
    decodable frame is a :class:`VideoError`."""
    report = decode_into(container, stream, placer, rate)
    if not report.formats:
        refused = f" (the decoder refused all {report.skipped_packets} packets)" if report.skipped_packets else ""
        raise VideoError(p, f"audio stream #{stream.index}: no decodable audio frame{refused}")
    return report


def _warn_skipped(p: Path, stream: int, report: DecodeReport) -> None:
    if report.skipped_packets:
        log.warning(
            "%s: audio stream #%d: %d packet(s) the decoder refused were skipped; their time is silence, "
            "not counted as covered",
            p,
            stream,
            report.skipped_packets,
        )


def sample_audio(
    path: str | os.PathLike[str],
    windows: Sequence[tuple[float, float]],
    rate: int = SAMPLE_RATE,
    stream: int | None = None,
    index_dir: str | os.PathLike[str] | None = None,
) -> SampledAudio:
    """The samples of ``windows`` (seconds on the frames' time axis) of ``path``'s soundtrack.

    ``stream``: a container stream index instead of the one a player plays. ``index_dir``: where
    the frame index is kept (as for the frame sampler; it gives the time origin).
    """
    import av

    from naru_eval.media.index import frame_index

    p = Path(path)
    check_file(p)
    wins = normalise_windows(windows)
    try:
        # the frames' time origin; built (or read) before this pass, which starts at the first packet
        index = frame_index(p, cache_dir=index_dir)
        origin_s = float(int(index.pts[0]) * index.time_base)
        with av.open(str(p)) as container:
            a = audio_stream(p, container, stream)
            chosen = int(a.index)  # read while the container is open
            placer = Placer(wins, rate, origin_s)
            _warn_skipped(p, chosen, _decode(p, container, a, placer, rate))
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"audio decoding failed ({type(e).__name__}: {e})") from None
    return SampledAudio(
        samples=placer.out,
        rate=rate,
        windows=wins,
        offsets=tuple(int(o) for o in placer.offsets),
        covered_s=tuple(c / rate for c in placer.covered),
        stream_index=chosen,
        track_start_s=(placer.first or 0) / rate,
        track_end_s=(placer.next_at or 0) / rate,
        path=str(p),
    )


def sample_track(
    path: str | os.PathLike[str],
    rate: int = SAMPLE_RATE,
    stream: int | None = None,
    index_dir: str | os.PathLike[str] | None = None,
) -> SampledAudio:
    """The whole soundtrack: one window from 0 to the video's duration as the frame sampler reports
    it (:func:`~naru_eval.media.index.index_duration`), the full-track plan's window, so a full
    track is the same samples for every reader of it (the omni families, ``naru-eval transcribe``).
    It holds the track and nothing else: 4 bytes a sample, 922 MB for 4 hours at 16 kHz."""
    from naru_eval.media.index import frame_index, index_duration

    p = Path(path)
    check_file(p)
    try:
        duration = index_duration(p, frame_index(p, cache_dir=index_dir))
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"cannot be indexed ({type(e).__name__}: {e})") from None
    return sample_audio(p, [(0.0, duration)], rate=rate, stream=stream, index_dir=index_dir)


def wav_bytes(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """``samples`` (float32 mono) as a WAV file of 32-bit IEEE floats: the samples themselves, bit
    for bit, for a server that reads WAV (vLLM's ``AudioMediaIO`` reads it with soundfile at its
    native rate, so 16 kHz is not resampled again)."""
    import struct

    import numpy as np

    data = np.ascontiguousarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHHH", 3, 1, rate, rate * 4, 4, 32, 0)  # WAVE_FORMAT_IEEE_FLOAT, mono
    fact = struct.pack("<I", len(data) // 4)
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"fact"
        + struct.pack("<I", len(fact))
        + fact
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body
