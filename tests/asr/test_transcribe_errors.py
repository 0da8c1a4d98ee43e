"""``naru-eval transcribe`` on bad options, bad caches and bad entries (issue 33, findings 12 and
17): options that cannot work and caches that cannot be written are refused before any audio is
decoded; a checkpoint row of another shape is done again; an entry copied into another video's
folder is not served; one bad video does not end a run of several."""

from __future__ import annotations

import json
import shutil

import pytest

from naru_eval.asr.run import prepare_video, read_checkpoint, transcribe_video
from naru_eval.asr.whisper import WhisperEngine
from naru_eval.cli.main import main
from naru_eval.media.asr_cache import AsrSettings, entry, find
from naru_eval.media.transcript import Transcript
from tests.helpers.disk import make_read_only, small_disk
from tests.helpers.speech import soundtrack, write_av


@pytest.fixture(scope="module")
def speech_video(tmp_path_factory):
    return write_av(tmp_path_factory.mktemp("av") / "speech.mp4", 12.0, soundtrack(12.0, [(1.0, 3.0), (6.0, 9.0)]))


@pytest.fixture(scope="module")
def other_video(tmp_path_factory):
    return write_av(tmp_path_factory.mktemp("av") / "other.mp4", 8.0, soundtrack(8.0, [(2.0, 5.0)]))


def _transcribe(*args: str) -> int:
    return main(["transcribe", *args, "--quiet"])


def _no_entry(cache) -> bool:
    """No entry folder was made: the audio was never decoded (an entry's folder is made first)."""
    return not (cache / "asr").exists() or not any((cache / "asr").iterdir())


def _engine(asr):
    return lambda: WhisperEngine(asr, "cpu").transcribe


@pytest.mark.parametrize(
    "option,said",
    [
        (["--max-new-tokens", "0"], "max_new_tokens=0: a window needs at least 1 token"),
        (["--max-new-tokens", "446"], "--max-new-tokens 446: "),
        (["--language", "xx"], "--language xx: not a language"),
        (["--dtype", "float8"], "dtype=float8: Whisper runs in float16, bfloat16, float32"),
        (["--device", "cuda:97"], "--device cuda:97: torch cannot use it"),
    ],
)
def test_options_that_cannot_work_are_refused_before_any_audio(
    tmp_path, speech_video, tiny_whisper, capsys, option, said
):
    cache = tmp_path / "cache"
    code = _transcribe("--video", str(speech_video), "--model", str(tiny_whisper), "--cache", str(cache), *option)
    assert code == 2
    assert said in capsys.readouterr().err
    assert _no_entry(cache)


def test_cuda_without_a_gpu_is_refused_before_any_audio(tmp_path, speech_video, tiny_whisper, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = _transcribe(
        "--video", str(speech_video), "--model", str(tiny_whisper), "--cache", str(tmp_path), "--device", "cuda"
    )
    assert code == 2 and "--device cuda: torch cannot use it" in capsys.readouterr().err
    assert _no_entry(tmp_path)


def test_a_cache_that_is_a_file_is_refused_before_any_audio(tmp_path, speech_video, tiny_whisper, capsys, monkeypatch):
    cache = tmp_path / "not-a-folder"
    cache.write_text("x")
    monkeypatch.setenv("NARU_TRANSCRIPT_CACHE", str(cache))
    assert _transcribe("--video", str(speech_video), "--model", str(tiny_whisper), "--device", "cpu") == 2
    assert f"the transcript cache {cache} is a file, not a folder" in capsys.readouterr().err


def test_a_read_only_cache_is_refused_before_any_audio(tmp_path, speech_video, tiny_whisper, capsys):
    with small_disk(tmp_path / "ro", "1m") as disk:
        make_read_only(disk)
        code = _transcribe(
            "--video", str(speech_video), "--model", str(tiny_whisper), "--cache", str(disk), "--device", "cpu"
        )
        assert code == 2
        assert f"the transcript cache {disk} cannot be written" in capsys.readouterr().err


def test_a_checkpoint_row_of_another_shape_is_done_again(tmp_path, speech_video, tiny_whisper):
    asr = AsrSettings(model=str(tiny_whisper), max_new_tokens=16, window_s=2.0)
    fresh = transcribe_video(speech_video, asr, _engine(asr), tmp_path / "fresh", progress=False)
    p = prepare_video(speech_video, asr, tmp_path / "bad")  # the plan header, as a killed run leaves it
    assert len(p.plan) >= 2
    rows = [{"w": 0, "cues": [[1.0]]}, [1, 2, 3], {"w": "1", "cues": []}, {"w": 99, "cues": []}, {"w": 1, "cues": 5}]
    with p.entry.checkpoint.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    assert read_checkpoint(p.entry) == (p.plan, {})  # every foreign row skipped
    again = transcribe_video(speech_video, asr, _engine(asr), tmp_path / "bad", progress=False)
    assert again.status == "resumed" and again.windows_run == again.windows
    assert Transcript.read(again.path) == Transcript.read(fresh.path)
    assert not p.entry.checkpoint.exists()  # finished: the checkpoint is gone
    p.entry.checkpoint.write_text(json.dumps({"key": p.entry.key, "video": p.entry.video, "windows": 5}) + "\n")
    assert read_checkpoint(p.entry) == (None, {})  # a header of another shape: start over


def test_an_entry_copied_into_another_videos_folder_is_not_served(tmp_path, speech_video, other_video, tiny_whisper):
    asr = AsrSettings(model=str(tiny_whisper), max_new_tokens=8)
    made = transcribe_video(speech_video, asr, _engine(asr), tmp_path, progress=False)
    mine, theirs = entry(speech_video, asr, tmp_path), entry(other_video, asr, tmp_path)
    shutil.copytree(mine.directory, theirs.directory)
    assert find(speech_video, str(tiny_whisper), tmp_path) == made.path
    assert find(other_video, str(tiny_whisper), tmp_path) is None
    assert not theirs.done
    redone = transcribe_video(other_video, asr, _engine(asr), tmp_path, progress=False)
    assert redone.status == "transcribed"  # made for this video, over the copy
    assert find(other_video, str(tiny_whisper), tmp_path) == theirs.transcript


def test_one_bad_video_does_not_end_a_run_of_several(tmp_path, speech_video, other_video, tiny_whisper, capsys):
    asr = AsrSettings(model=str(tiny_whisper), max_new_tokens=8)
    blocked = entry(speech_video, asr, tmp_path)
    blocked.directory.parent.mkdir(parents=True)
    blocked.directory.write_text("a file where the entry's folder goes")
    code = _transcribe(
        "--video", str(speech_video), "--video", str(other_video), "--model", str(tiny_whisper),
        "--cache", str(tmp_path), "--device", "cpu", "--max-new-tokens", "8",
    )  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "1 problem(s)" in err and str(speech_video) in err
    assert find(other_video, str(tiny_whisper), tmp_path) is not None  # the good one was still transcribed
