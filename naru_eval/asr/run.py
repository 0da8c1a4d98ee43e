"""``naru-eval transcribe``'s work: each video's soundtrack to a cached transcript, resumably.

Per video (:func:`transcribe_video`): a finished cache entry is read, nothing else (no audio
decode, no model load). Otherwise the soundtrack is decoded (:mod:`naru_eval.asr.audio`), cut
into voice-activity windows (:mod:`naru_eval.asr.vad`) and transcribed a batch of windows at a
time (:mod:`naru_eval.asr.whisper`). The window plan is the checkpoint's first line, and each
finished batch is appended to it (flushed and fsynced) the moment it is done, so a run killed
halfway loses at most the batch in flight: the next run reads the plan back (no VAD again) and
transcribes only the windows not yet in it. The finished transcript is written atomically, then
the checkpoint removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from naru_eval.asr.audio import SAMPLE_RATE, decode_audio
from naru_eval.asr.vad import Window, clip, plan_windows
from naru_eval.media.asr_cache import AsrEntry, AsrSettings, entry
from naru_eval.media.transcript import Cue, Transcript

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
    there is none or its header is not this entry's. A torn last line (a kill mid-write) is skipped."""
    if not e.checkpoint.is_file():
        return None, {}
    plan: list[Window] | None = None
    done: dict[int, list[Cue]] = {}
    with e.checkpoint.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line a kill cut short
            if n == 0:
                if row.get("key") != e.key:
                    return None, {}
                plan = [Window(a, b, tuple((x, y) for x, y in sp)) for a, b, sp in row["windows"]]
                if row.get("plan") != _plan_id(plan, e.key):
                    return None, {}
            elif plan is not None and isinstance(row.get("w"), int):
                done[row["w"]] = [Cue(float(a), float(b), str(t)) for a, b, t in row["cues"]]
    return plan, done


def _append(path: Path, rows: Sequence[dict[str, object]]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def transcribe_video(
    video: str | os.PathLike[str],
    asr: AsrSettings,
    engine: Callable[[], Transcriber],
    root: Path | None = None,
    batch_size: int = 8,
    progress: bool = True,
) -> VideoResult:
    """The cached transcript of ``video`` under ``asr``, made (or finished) if needed. ``engine()``
    gives the transcriber; it is called only when a window is left to transcribe."""
    from tqdm import tqdm

    t0 = time.monotonic()
    e = entry(video, asr, root)
    if e.done:
        t = Transcript.read(e.transcript)
        return VideoResult(str(video), "cached", e.transcript, 0, 0, 0.0, len(t.cues), time.monotonic() - t0)
    audio = decode_audio(video)
    audio_s = len(audio) / SAMPLE_RATE
    plan, done = read_checkpoint(e)
    resumed = plan is not None
    if plan is None:
        plan = plan_windows(audio, asr)
        e.directory.mkdir(parents=True, exist_ok=True)
        e.checkpoint.unlink(missing_ok=True)
        _append(e.checkpoint, [{"key": e.key, "plan": _plan_id(plan, e.key), "windows": [w.as_json() for w in plan]}])
    todo = [i for i in range(len(plan)) if i not in done]
    bar = tqdm(
        total=len(plan), initial=len(plan) - len(todo), desc=Path(video).name, unit="window", disable=not progress
    )
    transcribe: Transcriber | None = None
    for at in range(0, len(todo), max(1, batch_size)):
        batch = todo[at : at + max(1, batch_size)]
        transcribe = transcribe or engine()
        segments = transcribe([clip(audio, plan[i]) for i in batch])
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
    e.settings_file.write_text(json.dumps(_settings_json(asr), indent=1), encoding="utf-8")
    transcript.write(e.transcript)
    e.checkpoint.unlink(missing_ok=True)
    status: Literal["transcribed", "resumed"] = "resumed" if resumed else "transcribed"
    return VideoResult(
        str(video), status, e.transcript, len(plan), len(todo), audio_s, len(transcript.cues), time.monotonic() - t0
    )


def _settings_json(asr: AsrSettings) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(asr)
