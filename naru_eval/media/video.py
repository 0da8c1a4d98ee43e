"""What a video file is: its identity, the facts its container states, and the probe.

The data preflight (``probe_video``, ``duration_problem``) and the container facts the frame
index (:mod:`naru_eval.media.index`) and the decoder (:mod:`naru_eval.media.decode`) share: the
claimed duration, the displayed size, how to seek, where a cut file's last frame is. Sampling
frames is :mod:`naru_eval.media.sampler`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple, TypedDict


class VideoError(RuntimeError):
    """A video that is missing, unreadable or undecodable; the message names the file."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class VideoInfo(NamedTuple):
    """What the container says about a video (frame_count may be estimated: see ``exact``).

    ``width`` x ``height`` is the displayed size (sample aspect ratio and rotation applied) in the
    probe's, the size of the frames returned in the sampler's. ``duration_s`` is :func:`claimed_duration` (one definition for the probe, ``validate-data``
    and the sampler). ``stream_index`` is the container's index of the video stream used (the one
    a player shows, :func:`video_stream`), ``video_streams`` how many real video streams the
    file has (attached pictures and thumbnails not counted). ``colour`` names the colour matrix
    and range the pixels are converted with (``pixels.colour_name``).
    """

    path: str
    duration_s: float
    fps: float
    frame_count: int
    width: int
    height: int
    frame_count_exact: bool
    stream_index: int = 0
    video_streams: int = 1
    colour: str = ""


class FileIdentity(TypedDict):
    """Resolved path, size and mtime: what the frame cache and the frame index are keyed by."""

    path: str
    size: int
    mtime_ns: int


def file_identity(path: str | os.PathLike[str]) -> FileIdentity:
    """The file's :class:`FileIdentity` (a changed file is another file)."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


# --------------------------------------------------------------------------- container facts


def check_file(p: Path) -> None:
    """A missing or empty file is named as such, before PyAV's less clear error."""
    if not p.exists():
        raise VideoError(p, "file does not exist")
    if p.stat().st_size == 0:
        raise VideoError(p, "file is empty")


def real_video_streams(container: Any) -> list[Any]:
    """The video streams that are pictures in motion: attached pictures (cover art), timed
    thumbnails and still images left out."""
    from av.stream import Disposition

    skip = Disposition.attached_pic | Disposition.timed_thumbnails | Disposition.still_image
    return [s for s in container.streams.video if not s.disposition & skip]


def _rank(stream: Any) -> tuple[int, int, int, int]:
    """``av_find_best_stream``'s order: not for the hearing or visually impaired, then the default
    disposition, then the largest picture, then the highest bit rate (the first stream on a tie)."""
    from av.stream import Disposition

    disp = stream.disposition
    impaired = Disposition.hearing_impaired | Disposition.visual_impaired
    score = (0 if disp & impaired else 1) + (1 if disp & Disposition.default else 0)
    ctx = stream.codec_context  # None: unreadable parameters (video_stream refuses it if chosen)
    if ctx is None:
        return score, 0, 0, -int(stream.index)
    return score, int(ctx.width or 0) * int(ctx.height or 0), int(ctx.bit_rate or 0), -int(stream.index)


def video_stream(p: Path, container: Any) -> Any:
    """The video stream a player shows (the one every frame number refers to), as FFmpeg chooses
    it: no attached picture or thumbnail, the default disposition, then the largest.

    Checked before anything decodes it: a stream whose codec parameters could not be read (a
    damaged sample description leaves PyAV without a codec context, and decoding it crashes the
    process) is a :class:`VideoError`, never handed to the decoder.
    """
    streams = real_video_streams(container)
    if not streams:
        raise VideoError(p, "no video stream" + (" (only cover art)" if container.streams.video else ""))
    best = max(streams, key=_rank)
    if best.codec_context is None:
        raise VideoError(p, f"video stream #{best.index} cannot be decoded: its codec parameters are unreadable")
    return best


def _end_times(container: Any) -> bool:
    """Whether the container's durations are end times: FFmpeg's Matroska muxer (``Lavf``, which
    writes yt-dlp's merges and every ``ffmpeg -c copy`` remux) writes a track's ``DURATION`` tag
    and the segment's duration as the end timestamp of the last frame, so a file whose streams
    start at 10 s claims 20 s for 10 s of video; the specification and mkvmerge mean a length."""
    if "matroska" not in (container.format.name or ""):
        return False
    writer = {str(k).lower(): str(v) for k, v in (container.metadata or {}).items()}.get("encoder", "")
    return writer.startswith("Lavf")


def claimed_duration(container: Any, stream: Any) -> float:
    """Seconds of video the container claims: the stream's own duration, else its Matroska
    ``DURATION`` tag, else the file's; an end time (:func:`_end_times`) less the stream's start."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    start = float(stream.start_time * stream.time_base) if stream.start_time is not None and stream.time_base else 0.0
    end_times = _end_times(container)
    tag = (stream.metadata or {}).get("DURATION")  # Matroska writes the track's duration as a tag
    if tag:
        try:
            h, m, sec = tag.split(":")
            value = int(h) * 3600 + int(m) * 60 + float(sec)
            return max(0.0, value - start) if end_times else value
        except ValueError:
            pass
    if container.duration is not None:
        if end_times:
            return max(0.0, container.duration / 1_000_000 - start)
        return max(0.0, container.duration / 1_000_000 - (start - (container.start_time or 0) / 1_000_000))
    return 0.0


def frame_rate(stream: Any) -> float:
    """The stream's frame rate as the container states it (0.0: none)."""
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return float(rate) if rate else 0.0


def displayed_size(frame: Any, sar: Any) -> tuple[int, int, int]:
    """(width, height, quarter turns counter-clockwise) as a player shows ``frame``."""
    width, height = frame.width, frame.height
    if sar and sar.numerator > 0 and sar.denominator > 0 and sar != 1:
        width = max(2, int(round(width * sar.numerator / sar.denominator)))
    turns = int(round((frame.rotation or 0) / 90)) % 4
    return (height, width, turns) if turns % 2 else (width, height, turns)


def seeks_by_bytes(container: Any) -> bool:
    """Containers without an index (MPEG-TS/M2TS, program streams): seek by byte offset."""
    name = container.format.name or ""
    return any(n in ("mpegts", "mpeg", "mpegvideo") for n in name.split(","))


#: Allowed shortfall between the container's claimed duration and the last decodable frame.
TRUNCATION_SLACK_S = 2.0


def check_truncation(p: Path, claimed_s: float, end_s: float, frames: int | None, frame_s: float) -> None:
    """The one truncation check and message, for the preflight and the sampler alike."""
    if claimed_s > 0 and end_s < claimed_s - TRUNCATION_SLACK_S - frame_s:
        count = f" (frame {frames - 1})" if frames else ""
        raise VideoError(
            p,
            f"truncated: the container claims {claimed_s:.1f} s of video, "
            f"but the last decodable frame is at {max(0.0, end_s):.1f} s{count}",
        )


def tail_end_pts(container: Any, stream: Any, seek_pts: int | None, seek_pos: int | None) -> int | None:
    """The largest timestamp of a frame that decodes, seeking to ``seek_pts``/``seek_pos`` first."""
    import av

    if seek_pos is not None:
        container.seek(seek_pos, unsupported_byte_offset=True)
    elif seek_pts is not None:
        container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
    last = None
    try:
        for frame in container.decode(stream):
            if frame.pts is not None and (last is None or frame.pts > last):
                last = frame.pts
    except av.error.FFmpegError:
        pass  # a truncated stream ends in an error: what decoded before it counts
    return last


def seek_start(container: Any, stream: Any) -> None:
    """To the very first packet, keyframe or not (decoding from there is what a player does)."""
    if seeks_by_bytes(container):
        container.seek(0, unsupported_byte_offset=True)
    else:
        container.seek(-(1 << 62), stream=stream, backward=True, any_frame=True)


def probe_video(path: str | os.PathLike[str], check_end: bool = True) -> VideoInfo:
    """Open ``path`` and read its metadata; decode its first frame and its tail, to prove it is readable.

    The tail check is the sampler's: the last frame that decodes against the container's claimed
    duration (``check_truncation``), so a file the preflight passes, the sampler accepts.
    """
    import av  # lazy: only tools that touch videos pay for it

    from naru_eval.media.pixels import colour_name

    p = Path(path)
    check_file(p)
    try:
        with av.open(str(p)) as container:
            stream = video_stream(p, container)
            chosen, n_streams = int(stream.index), len(real_video_streams(container))
            fps = frame_rate(stream)
            duration = claimed_duration(container, stream)
            frames = int(stream.frames or 0)
            exact = frames > 0
            if not exact:
                frames = int(round(duration * fps))
            first = next(container.decode(stream), None)
            if first is None:
                raise VideoError(p, "no decodable frame")
            width, height, _turns = displayed_size(first, stream.codec_context.sample_aspect_ratio)
            colour = colour_name(first)
            if check_end and duration > 0:
                tb = float(stream.time_base)
                start = first.pts if first.pts is not None else (stream.start_time or 0)
                from_s = max(0.0, duration - 1.0 - TRUNCATION_SLACK_S)
                if seeks_by_bytes(container):
                    size = p.stat().st_size
                    pos = int(size * from_s / duration) if duration else 0
                    last = tail_end_pts(container, stream, None, max(0, pos - 2 * 1024 * 1024))
                else:
                    last = tail_end_pts(container, stream, start + int(from_s / tb), None)
                end_s = (last - start) * tb if last is not None else 0.0
                check_truncation(p, duration, end_s, None, 1.0 / max(fps, 1e-9))
    except VideoError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise VideoError(p, f"cannot be opened or decoded ({type(e).__name__}: {e})") from None
    if fps <= 0 or duration <= 0:
        raise VideoError(p, f"container reports no usable duration/fps (duration={duration}, fps={fps})")
    return VideoInfo(str(p), duration, fps, frames, width, height, exact, chosen, n_streams, colour)


def stream_note(info: VideoInfo) -> str | None:
    """``validate-data``'s note on a file with several real video streams: which one is used."""
    if info.video_streams <= 1:
        return None
    return (
        f"{info.path}: {info.video_streams} video streams; stream #{info.stream_index} is used "
        "(the one a player shows: the default disposition, then the largest)"
    )


#: validate-data: a container claiming more than this many seconds per frame on average (e.g.
#: 2 frames over 10 hours) is out of all proportion to its frame count: a broken or forged header.
MAX_SECONDS_PER_FRAME = 60.0


def duration_problem(info: VideoInfo) -> str | None:
    """Why the claimed duration cannot be believed, given the frame count the container states (MP4)
    or, without one (Matroska), the frame rate FFmpeg measured from the first frames; else None."""
    if info.frame_count_exact and info.frame_count > 0:
        per_frame = info.duration_s / info.frame_count
        frames = f"for {info.frame_count} frame(s) (one frame per {per_frame:.0f} s on average"
    elif not info.frame_count_exact and info.fps > 0:
        per_frame = 1.0 / info.fps
        frames = f"at {info.fps:.3g} frames per second (one frame per {per_frame:.0f} s"
    else:
        return None
    if per_frame <= MAX_SECONDS_PER_FRAME:
        return None
    return (
        f"the container claims {info.duration_s / 3600:.2f} h of video {frames}, more than "
        f"{MAX_SECONDS_PER_FRAME:.0f} s): the header is out of proportion to the frames; re-encode or remux the file"
    )
