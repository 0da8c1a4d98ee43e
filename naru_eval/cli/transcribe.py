"""``naru-eval transcribe``: Whisper transcripts of the data's videos (or of given files), cached.

Each video's transcript is cached by its content, the model and the settings
(:mod:`naru_eval.media.asr_cache`); a second run reads the cache, a killed run resumes from its
chunk-level checkpoint (:mod:`naru_eval.asr.run`). The model loads once, on the GPU when there
is one, and only when some window is left to transcribe. Options that cannot work (a device torch
cannot use, a language or token count the checkpoint does not take, an unwritable cache) are
refused before any audio is decoded. A video that fails (no audio stream, an undecodable file,
an entry that cannot be written) is reported with the others at the end; the rest are still
transcribed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from naru_eval.media.asr_cache import AsrSettings


def _videos(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(video files, problems): ``--video`` files, else every distinct video of the data."""
    if args.video:
        return [str(Path(v)) for v in args.video], []
    from naru_eval.core.data import load_local
    from naru_eval.core.hub import load_dataset_from_env
    from naru_eval.settings import settings

    data_dir = args.data_dir or settings().data_dir
    ds = load_local(data_dir, strict=False) if data_dir else load_dataset_from_env(strict=False)
    seen: dict[str, str | None] = {}
    for q in ds.questions:
        if q.video_id not in seen or seen[q.video_id] is None:
            f = ds.video_file(q)
            seen[q.video_id] = str(f) if f is not None else None
    problems = [f"video {vid!r}: file not found" for vid, f in sorted(seen.items()) if f is None]
    return [f for _, f in sorted(seen.items()) if f is not None], problems


def _pending(videos: list[str], asr: AsrSettings, root: Path) -> list[str]:
    """The videos whose entry is not finished (one that cannot even be looked at counts: its
    problem is reported when it is transcribed)."""
    from naru_eval.media.asr_cache import entry
    from naru_eval.media.transcript import TranscriptError

    out = []
    for v in videos:
        try:
            if entry(v, asr, root).done:
                continue
        except (OSError, TranscriptError):
            pass
        out.append(v)
    return out


def cmd_transcribe(args: argparse.Namespace) -> int:
    from naru_eval.asr.run import Transcriber, transcribe_all
    from naru_eval.asr.whisper import WhisperEngine, preflight, resolve_device, resolve_dtype
    from naru_eval.media.asr_cache import AsrSettings, cache_problem, cache_root
    from naru_eval.media.transcript import TranscriptError

    if not args.video and not args.data_dir:
        from naru_eval.settings import settings

        if settings().data_dir is None and not settings().hf_dataset:
            print("naru-eval transcribe: give DIR, --video FILE or set NARU_DATA_DIR", file=sys.stderr)
            return 2
    device = resolve_device(args.device)
    try:
        asr = AsrSettings(
            model=args.model,
            revision=args.revision,
            language=args.language,
            dtype=resolve_dtype(args.dtype, device),
            vad=args.vad,
            window_s=args.window_s,
            max_new_tokens=args.max_new_tokens,
        )
    except ValueError as e:
        print(f"naru-eval transcribe: {e}", file=sys.stderr)
        return 2
    root = Path(args.cache).expanduser() if args.cache else cache_root()
    videos, problems = _videos(args)
    if _pending(videos, asr, root):  # what would fail later, refused before any audio is decoded
        refused = preflight(asr, device) + [p for p in [cache_problem(root)] if p]
        if refused:
            for p in refused:
                print(f"naru-eval transcribe: {p}", file=sys.stderr)
            return 2
    loaded: list[Transcriber] = []

    def engine() -> Transcriber:
        if not loaded:
            print(f"loading {asr.model} on {device} ({asr.dtype})", file=sys.stderr)
            loaded.append(WhisperEngine(asr, device).transcribe)
        return loaded[0]

    t0 = time.monotonic()
    counts = {"cached": 0, "transcribed": 0, "resumed": 0}
    audio_s = 0.0
    for r in transcribe_all(videos, asr, engine, root, batch_size=args.batch_size, progress=not args.quiet):
        if isinstance(r, TranscriptError):
            problems.append(str(r))
            continue
        counts[r.status] += 1
        audio_s += r.audio_s
        done = f"{r.windows_run} of {r.windows} window(s) run" if r.status != "cached" else "from the cache"
        print(f"{r.status}: {r.video} -> {r.path} ({r.cues} cue(s); {done}; {r.wall_s:.1f} s)")
    wall = time.monotonic() - t0
    rate = f", {audio_s / wall:.1f}x real time" if audio_s and wall else ""
    print(
        f"{len(videos)} video(s): {counts['transcribed']} transcribed, {counts['resumed']} resumed, "
        f"{counts['cached']} cached; {audio_s / 3600:.2f} h of audio in {wall:.1f} s{rate}; settings key {asr.key()}"
    )
    if problems:
        print(f"{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from naru_eval.media.asr_cache import DEFAULT_ASR_MODEL, DTYPES, AsrSettings

    d = AsrSettings()
    p = subparsers.add_parser(
        "transcribe",
        help="Whisper transcripts of the videos (VAD windows, timestamps, greedy), cached and resumable",
    )
    p.add_argument("data_dir", nargs="?", help="NARU data directory (default: $NARU_DATA_DIR)")
    p.add_argument("--video", action="append", help="transcribe this file instead of the data's videos (repeatable)")
    p.add_argument("--model", default=DEFAULT_ASR_MODEL, help=f"a Whisper checkpoint (default {DEFAULT_ASR_MODEL})")
    p.add_argument("--revision", help="the checkpoint's revision (part of the cache key)")
    p.add_argument("--language", default=d.language, help=f"spoken language (default {d.language})")
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu, cuda, cuda:1, …")
    p.add_argument("--dtype", default="auto", help=f"auto (float16 on a GPU, float32 on CPU), {', '.join(DTYPES)}")
    p.add_argument("--batch-size", type=int, default=8, help="windows per generate call (default 8)")
    p.add_argument("--vad", choices=["silero", "none"], default=d.vad, help="voice-activity detection (default silero)")
    p.add_argument("--window-s", type=float, default=d.window_s, help="longest window, seconds (default 30)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=d.max_new_tokens,
        help=f"tokens per window at most (default {d.max_new_tokens})",
    )
    p.add_argument("--cache", help="the transcript cache (default $NARU_TRANSCRIPT_CACHE)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_transcribe)
