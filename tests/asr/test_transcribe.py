"""naru_eval.asr.run and ``naru-eval transcribe``: a tiny random Whisper transcribes a synthetic
clip; the cache is written, read back without recomputing, and a run killed halfway resumes to
the very transcript an uninterrupted run writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from naru_eval.asr.run import read_checkpoint, transcribe_video
from naru_eval.asr.whisper import WhisperEngine
from naru_eval.media.asr_cache import AsrSettings, entry, find
from naru_eval.media.transcript import Transcript
from tests.helpers.speech import soundtrack, write_av

ROOT = Path(__file__).resolve().parents[2]


def _never() -> object:
    raise AssertionError("the model was loaded although every window was done")


@pytest.fixture(scope="module")
def clip_video(tmp_path_factory):
    audio = soundtrack(75.0, [(2.0, 5.0), (8.0, 10.0), (50.0, 55.0)], music_at=[(15.0, 30.0)])
    return write_av(tmp_path_factory.mktemp("av") / "clip.mp4", 75.0, audio)


def test_transcribe_writes_the_cache_and_a_second_run_reads_it(tmp_path, clip_video, tiny_whisper):
    asr = AsrSettings(model=str(tiny_whisper), max_new_tokens=24)
    calls: list[int] = []

    def engine():
        e = WhisperEngine(asr, "cpu")

        def run(clips):
            calls.append(len(clips))
            return e.transcribe(clips)

        return run

    first = transcribe_video(clip_video, asr, engine, tmp_path, batch_size=2, progress=False)
    assert first.status == "transcribed" and first.windows == first.windows_run >= 2
    assert sum(calls) == first.windows  # every window once, in batches of at most 2
    assert max(calls) <= 2
    t = Transcript.read(first.path)
    assert t.source == asr.label and first.cues == len(t.cues)
    plan, _ = read_checkpoint(entry(clip_video, asr, tmp_path))
    assert plan is None  # the checkpoint is gone once the transcript is written
    for c in t.cues:  # timestamps: inside the spoken stretches (the windows), never in the music
        assert any(a - 0.5 <= c.start and c.end <= b + 0.5 for a, b in [(2.0, 10.0), (50.0, 55.0)]), c
    assert find(clip_video, str(tiny_whisper), tmp_path) == first.path
    again = transcribe_video(clip_video, asr, _never, tmp_path, progress=False)
    assert again.status == "cached" and again.path == first.path
    # another setting is another entry; the content, not the name, finds the video
    copy = tmp_path / "renamed.mp4"
    copy.write_bytes(clip_video.read_bytes())
    assert find(copy, str(tiny_whisper), tmp_path) == first.path
    assert not entry(clip_video, AsrSettings(model=str(tiny_whisper), max_new_tokens=25), tmp_path).done


def _cli(*args: str, cache: Path) -> list[str]:
    return [sys.executable, "-m", "naru_eval.cli", "transcribe", *args, "--cache", str(cache), "--device", "cpu"]


@pytest.mark.slow
def test_a_run_killed_halfway_resumes_to_the_same_transcript(tmp_path, tiny_whisper):
    # 12 separate spoken stretches, 4 s apart: with 2-s windows, 12 windows, one per generate call
    speech = [(1.0 + 4 * i, 2.5 + 4 * i) for i in range(12)]
    video = write_av(tmp_path / "long.mp4", 50.0, soundtrack(50.0, speech))
    args = ["--video", str(video), "--model", str(tiny_whisper), "--window-s", "2", "--batch-size", "1"]
    args += ["--max-new-tokens", "48", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    asr = AsrSettings(model=str(tiny_whisper), window_s=2.0, max_new_tokens=48)
    killed_cache = tmp_path / "killed"
    e = entry(video, asr, killed_cache)

    proc = subprocess.Popen(_cli(*args, cache=killed_cache), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        _, finished = read_checkpoint(e)
        done = len(finished)
        if done >= 3:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"not killed halfway (done={done}): {proc.stderr.read().decode()[-2000:]}"
    )
    plan, finished = read_checkpoint(e)
    assert plan is not None and 3 <= len(finished) < len(plan) and not e.done

    resumed = subprocess.run(_cli(*args, cache=killed_cache), env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "1 resumed" in resumed.stdout
    line = next(x for x in resumed.stdout.splitlines() if x.startswith("resumed:"))
    assert f"{len(plan) - len(finished)} of {len(plan)} window(s) run" in line

    fresh_cache = tmp_path / "fresh"
    fresh = subprocess.run(_cli(*args, cache=fresh_cache), env=env, capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    a = Transcript.read(e.transcript)
    b = Transcript.read(entry(video, asr, fresh_cache).transcript)
    assert a == b and a.fingerprint == b.fingerprint  # resuming changed nothing
    assert json.loads(e.settings_file.read_text())["window_s"] == 2.0


def test_cli_reports_a_video_without_audio_and_goes_on(tmp_path, clip_video, tiny_whisper):
    silent = write_av(tmp_path / "silent.mp4", 2.0, None)
    from naru_eval.cli.main import main

    code = main(
        ["transcribe", "--video", str(silent), "--video", str(clip_video), "--model", str(tiny_whisper)]
        + ["--cache", str(tmp_path / "c"), "--device", "cpu", "--max-new-tokens", "8", "--quiet"]
    )
    assert code == 1
    assert find(clip_video, str(tiny_whisper), tmp_path / "c") is not None  # the good one was still transcribed
