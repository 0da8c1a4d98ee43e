"""``naru-eval transcribe``'s work: each video's soundtrack to a cached transcript, resumably.

Per video (:func:`transcribe_video`): a finished cache entry is read, nothing else (no audio
decode, no model load). Otherwise the whole soundtrack is taken from the one audio sampler
(:func:`naru_eval.media.audio.sample_track`: the samples an omni model hears of the full track), cut
into voice-activity windows (:mod:`naru_eval.asr.vad`) and transcribed a batch of windows at a
time (:mod:`naru_eval.asr.whisper`). The window plan is the checkpoint's first line, and each
finished batch is appended to it (flushed and fsynced) the moment it is done, so a run killed
halfway loses at most the batch in flight: the next run reads the plan back (no VAD again) and
transcribes only the windows not yet in it. The finished transcript is written atomically, then
the checkpoint removed. Over many videos (:func:`transcribe_all`) the next video's soundtrack and
VAD are done in a thread while Whisper transcribes the current one.

The track is held whole (4 bytes a sample: 922 MB for a 4-hour video), not streamed in windows:
the sampler's every pass starts at the track's first packet (windows taken one call at a time
would decode a 4-hour track once per window), and the VAD scores the whole track as one batch of
rows in lockstep (its speed). Nothing copies it (the VAD gathers each step's frames from it), so
a run holds at most two tracks: the one Whisper works on and the next one being prepared.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from naru_eval.asr.vad import Window, clip, plan_windows
from naru_eval.media.asr_cache import AsrEntry, AsrSettings, entry
from naru_eval.media.audio import SAMPLE_RATE
from naru_eval.media.transcript import Cue, Transcript, TranscriptError

if TYPE_CHECKING:
    import numpy as np

#: a transcriber of clips: :meth:`naru_eval.asr.whisper.WhisperEngine.transcribe`
Transcriber = Callable[[Sequence[Any]], list[list[tuple[float, float, str]]]]


@dataclass(frozen=True)
class VideoResult:
    """What :func:`transcribe_video` did for one video."""

    video: str
    status: Literal["cached", "transcribed", "resumed"]
    path: Path
    windows: int
    windows_run: int
    audio_s: float
    cues: int
    wall_s: float


def _plan_id(windows: Sequence[Window], key: str) -> str:
    blob = json.dumps([key, [w.as_json() for w in windows]]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def read_checkpoint(e: AsrEntry) -> tuple[list[Window] | None, dict[int, list[Cue]]]:
    """(the window plan, the finished windows' cues) of an entry's checkpoint; (None, {}) when
    there is none, or its header is not this entry's (another key, another video, another plan)
    or not of the checkpoint's shape. A row that cannot be read (a kill cut it short, or it is
    of another shape) is skipped: that window is transcribed again."""
    if not e.checkpoint.is_file():
        return None, {}
    plan: list[Window] | None = None
    done: dict[int, list[Cue]] = {}
    try:
        f = e.checkpoint.open(encoding="utf-8", errors="replace")
    except OSError:
        return None, {}
    with f:
        for n, line in enumerate(f):
            try:
                row = json.loads(line)
                if n == 0:
                    if row.get("key") != e.key or row.get("video") != e.video:
                        return None, {}
                    plan = [
                        Window(float(a), float(b), tuple((float(x), float(y)) for x, y in sp))
                        for a, b, sp in row["windows"]
                    ]
                    if row.get("plan") != _plan_id(plan, e.key):
                        return None, {}
                elif plan is not None and isinstance(row.get("w"), int) and 0 <= row["w"] < len(plan):
                    done[row["w"]] = [Cue(float(a), float(b), str(t)) for a, b, t in row["cues"]]
            except (ValueError, TypeError, KeyError, AttributeError):
                if n == 0:
                    return None, {}
                continue  # a torn or foreign row: its window is done again
    return plan, done


def _append(path: Path, rows: Sequence[dict[str, object]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


@dataclass
class PreparedTrack:
    """A video made ready for Whisper: its entry, soundtrack, window plan and finished windows
    (``audio`` None: the entry is already done). Made by :func:`prepare_video`, which needs no
    model, so the next video's can be made while Whisper runs on this one."""

    video: str
    entry: AsrEntry
    audio: np.ndarray | None
    plan: list[Window]
    done: dict[int, list[Cue]]
    resumed: bool
    prepare_s: float


def prepare_video(video: str | os.PathLike[str], asr: AsrSettings, root: Path | None = None) -> PreparedTrack:
    """Decode the soundtrack and plan its windows (or read the plan back from a checkpoint); a
    finished entry is not touched. The entry's folder is made before the audio is decoded, so
    an unwritable cache is found before that work."""
    t0 = time.monotonic()
    e = entry(video, asr, root)
    if e.done:
        return PreparedTrack(str(video), e, None, [], {}, False, time.monotonic() - t0)
    plan, done = read_checkpoint(e)
    e.directory.mkdir(parents=True, exist_ok=True)
    audio = soundtrack_of(video)
    resumed = plan is not None
    if plan is None:
        plan = plan_windows(audio, asr)
        e.checkpoint.unlink(missing_ok=True)
        header: dict[str, object] = {"key": e.key, "video": e.video, "plan": _plan_id(plan, e.key)}
        header["windows"] = [w.as_json() for w in plan]
        _append(e.checkpoint, [header])
    return PreparedTrack(str(video), e, audio, plan, done, resumed, time.monotonic() - t0)


def finish_video(
    p: PreparedTrack, asr: AsrSettings, engine: Callable[[], Transcriber], batch_size: int = 8, progress: bool = True
) -> VideoResult:
    """Transcribe the windows :func:`prepare_video` left, checkpointing each batch, and write the
    transcript. ``engine()`` gives the transcriber; it is called only when a window is left."""
    from tqdm import tqdm

    t0 = time.monotonic()
    e = p.entry
    if p.audio is None:
        t = Transcript.read(e.transcript)
        return VideoResult(p.video, "cached", e.transcript, 0, 0, 0.0, len(t.cues), p.prepare_s)
    plan, done = p.plan, p.done
    todo = [i for i in range(len(plan)) if i not in done]
    bar = tqdm(
        total=len(plan), initial=len(plan) - len(todo), desc=Path(p.video).name, unit="window", disable=not progress
    )
    transcribe: Transcriber | None = None
    step = max(1, batch_size)
    for at in range(0, len(todo), step):
        batch = todo[at : at + step]
        transcribe = transcribe or engine()
        segments = transcribe([clip(p.audio, plan[i]) for i in batch])
        rows: list[dict[str, object]] = []
        for i, segs in zip(batch, segments, strict=True):
            w = plan[i]
            cues = [Cue(w.start + a, w.start + b, text) for a, b, text in segs]
            done[i] = cues
            rows.append({"w": i, "cues": [[round(c.start, 3), round(c.end, 3), c.text] for c in cues]})
        _append(e.checkpoint, rows)
        bar.update(len(batch))
    bar.close()
    transcript = Transcript.of((c for i in range(len(plan)) for c in done.get(i, [])), asr.label)
    e.settings_file.write_text(json.dumps(e.record(asr), indent=1), encoding="utf-8")
    transcript.write(e.transcript)
    e.checkpoint.unlink(missing_ok=True)
    status: Literal["transcribed", "resumed"] = "resumed" if p.resumed else "transcribed"
    audio_s = len(p.audio) / SAMPLE_RATE
    wall = p.prepare_s + time.monotonic() - t0
    return VideoResult(p.video, status, e.transcript, len(plan), len(todo), audio_s, len(transcript.cues), wall)


def transcribe_video(
    video: str | os.PathLike[str],
    asr: AsrSettings,
    engine: Callable[[], Transcriber],
    root: Path | None = None,
    batch_size: int = 8,
    progress: bool = True,
) -> VideoResult:
    """The cached transcript of ``video`` under ``asr``, made (or finished) if needed."""
    return finish_video(prepare_video(video, asr, root), asr, engine, batch_size, progress)


def transcribe_all(
    videos: Sequence[str],
    asr: AsrSettings,
    engine: Callable[[], Transcriber],
    root: Path | None = None,
    batch_size: int = 8,
    progress: bool = True,
) -> Iterator[VideoResult | TranscriptError]:
    """:func:`transcribe_video` for each video, the next one's soundtrack decoded and its VAD run
    in a thread while Whisper works on the current one (the VAD is CPU work, Whisper the GPU's).
    A video that fails, whatever the reason, yields an error naming it; the others go on."""
    from concurrent.futures import Future, ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="naru-asr-prepare") as pool:
        ahead: Future[PreparedTrack] | None = pool.submit(prepare_video, videos[0], asr, root) if videos else None
        for k in range(len(videos)):
            assert ahead is not None
            current = ahead
            ahead = pool.submit(prepare_video, videos[k + 1], asr, root) if k + 1 < len(videos) else None
            try:
                yield finish_video(current.result(), asr, engine, batch_size, progress)
            except TranscriptError as e:
                yield e
            except Exception as e:  # an unwritable entry, a decoder's or a model's failure: this video's
                yield TranscriptError(videos[k], f"{type(e).__name__}: {e}")


def soundtrack_of(video: str | os.PathLike[str]) -> np.ndarray:
    """The video's whole soundtrack, 16-kHz mono float32 on the frames' clock, from the one audio
    sampler; a file without audio, or one that does not decode, is a :class:`TranscriptError`
    naming it (``transcribe`` reports it with the others and goes on)."""
    from naru_eval.media.audio import sample_track
    from naru_eval.media.video import VideoError

    try:
        return sample_track(video).samples
    except VideoError as err:
        raise TranscriptError(err.path, err.reason) from None
