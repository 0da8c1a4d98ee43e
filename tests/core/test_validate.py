import subprocess
import sys

import pytest

from naru_eval.cli import main
from naru_eval.core.validate import validate
from naru_eval.media.video import VideoError, probe_video
from tests.helpers.data import read_jsonl, write_jsonl


def _break(d):
    """Missing, corrupt, truncated and empty videos plus one schema error, all in one data dir."""
    (d / "videos" / "vid000.mp4").unlink()
    (d / "videos" / "vid001.mp4").write_bytes(b"\x00\x01garbage" * 100)
    data = (d / "videos" / "vid002.mp4").read_bytes()
    (d / "videos" / "vid002.mp4").write_bytes(data[: len(data) // 5])
    (d / "videos" / "vid003.mp4").write_bytes(b"")
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["answer"] = "Z"
    write_jsonl(d / "annotations.jsonl", rows)


def test_probe_reads_container_metadata(small_data):
    info = probe_video(small_data / "videos" / "vid000.mp4")
    assert info.fps == 4.0 and info.duration_s == 3.0 and info.frame_count == 12
    assert (info.width, info.height) == (48, 32)


def test_validate_ok(small_data):
    report = validate(small_data)
    assert report.ok and len(report.videos) == 6


def test_all_problems_at_once(copy_data):
    d = copy_data()
    _break(d)
    report = validate(d)
    assert not report.ok
    text = "\n".join(report.problems)
    assert "'Z'" in text
    for vid in ("vid000", "vid001", "vid002", "vid003"):
        assert f"video {vid!r}" in text, text
    assert "video not found" in text and "file is empty" in text
    assert len(report.problems) == 5  # one schema problem and one per bad video, not per question


def test_probe_errors_name_the_file(tmp_path):
    bad = tmp_path / "x.mp4"
    bad.write_bytes(b"nope" * 10)
    try:
        probe_video(bad)
    except VideoError as e:
        assert str(bad) in str(e)
    else:
        raise AssertionError("corrupt file accepted")


def test_cli_validate_exit_codes(small_data, copy_data, capsys):
    assert main(["validate-data", str(small_data)]) == 0
    assert "OK" in capsys.readouterr().out
    d = copy_data()
    _break(d)
    assert main(["validate-data", str(d)]) == 1
    err = capsys.readouterr().err
    assert "5 problem(s)" in err and "vid002" in err


def test_console_script_runs(small_data):
    exe = [sys.executable, "-m", "naru_eval.cli", "validate-data", str(small_data), "--no-videos"]
    proc = subprocess.run(exe, capture_output=True, text=True)
    assert proc.returncode == 0 and "36 questions" in proc.stdout


def test_an_unreadable_json_line_and_every_other_check(copy_data, capsys):
    """validate-data reports a bad JSONL line and goes on: schema and video problems too."""
    d = copy_data()
    _break(d)
    with open(d / "annotations.jsonl", "a", encoding="utf-8") as f:
        f.write('{"question_id": "broken",\n')
    report = validate(d)
    text = "\n".join(report.problems)
    assert "annotations.jsonl:37: not valid JSON" in text
    assert "'Z'" in text and all(f"video {v!r}" in text for v in ("vid000", "vid001", "vid002", "vid003"))
    assert len(report.problems) == 6
    assert main(["validate-data", str(d)]) == 1
    assert "6 problem(s)" in capsys.readouterr().err


def test_preflight_accepts_broadcast_ts_and_names_truncation_like_the_sampler(copy_data):
    from naru_eval.media.sampler import sample_frames
    from tests.helpers import video_corpus as vc

    d = copy_data()
    (d / "videos" / "vid000.mp4").unlink()
    vc.encode(
        d / "videos" / "vid000.m2ts", *vc.cfr(75, 25), options=vc.x264(25), container_options={"mpegts_m2ts_mode": "1"}
    )
    (d / "videos" / "vid001.mp4").unlink()
    full = vc.encode(d / "full.mkv", *vc.cfr(240, 10), options=vc.x264(20))
    truncated = vc.truncate(full, d / "videos" / "vid001.mkv", 0.5)
    report = validate(d)
    assert "vid000" in report.videos and abs(report.videos["vid000"].duration_s - 3.0) < 0.05
    assert len(report.problems) == 1 and "video 'vid001'" in report.problems[0]
    message = "truncated: the container claims 24.0 s of video, but the last decodable frame is at"
    assert message in report.problems[0]
    with pytest.raises(VideoError, match=message):
        sample_frames(truncated, num_frames=8)


def test_hostile_annotations_all_reported_by_validate_data_and_the_task_preflight(copy_data, monkeypatch, capsys):
    """Invalid UTF-8, a NaN, an id climbing out of the data folder and a broken video: one
    report naming each (file, line, byte offset), from validate-data and the lmms-eval task."""
    from naru_eval.core.data import DataError
    from naru_eval.lmms.tasks import process_docs_all

    d = copy_data()
    path = d / "annotations.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"question": "', b'"question": "\x80', 1)
    offset = len(lines[0]) + 1 + lines[1].index(b"\x80")
    lines[2] = lines[2].replace(b'"category"', b'"duration_s": NaN, "category"', 1)
    lines[3] = lines[3].replace(b'"video_id": "vid', b'"video_id": "../../../vid', 1)
    path.write_bytes(b"\n".join(lines))
    (d / "videos" / "vid004.mp4").write_bytes(b"")
    expected = [
        f"{path}:2: not valid UTF-8 at byte offset {offset} of the file",
        f"{path}:3: not valid JSON: non-finite number NaN",
        "'video_id' must be a plain file name",
        "video 'vid004'",
    ]
    assert main(["validate-data", str(d)]) == 1
    err = capsys.readouterr().err
    assert "4 problem(s)" in err and "Traceback" not in err
    for needle in expected:
        assert needle in err, (needle, err)
    monkeypatch.setenv("NARU_DATA_DIR", str(d))
    with pytest.raises(SystemExit) as preflight:  # lmms-eval stops on it, with the message alone
        process_docs_all(None)
    assert preflight.value.code == 2
    err = capsys.readouterr().err
    assert "naru preflight: NARU preflight failed; nothing was run (4 problem(s))" in err
    for needle in expected:
        assert needle in err, needle
    from naru_eval.lmms.tasks import _preflight

    with pytest.raises(DataError):  # the report itself still raises the DataError
        _preflight((str(d), None, "test", None, "False")).raise_for_problems()


def test_a_command_given_hostile_data_names_it_without_a_traceback(copy_data, monkeypatch, capsys):
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["video_path"] = "/etc/hostname"
    write_jsonl(d / "annotations.jsonl", rows)
    monkeypatch.setenv("NARU_JUDGE_BACKEND", "offline-lexical")
    monkeypatch.setenv("NARU_JUDGE_CACHE", str(d / "judge.sqlite"))
    assert main(["judge", "facts", "--data-dir", str(d), "--out", str(d / "facts.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("naru-eval judge: NARU data is invalid (1 problem(s))")
    assert "'video_path' must be relative to the data folder" in err and "Traceback" not in err


def test_validate_audio_names_every_silent_video(small_data, tmp_path, capsys):
    """With ``--audio`` every video must have a decodable audio track: the synthetic data is silent,
    so each of its six videos is one problem naming it; data with a soundtrack passes."""
    from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset

    report = validate(small_data, audio=True)
    assert len(report.problems) == 6 and not report.audio
    assert all("no audio stream" in p for p in report.problems)
    assert validate(small_data).ok  # without --audio, silence is fine
    assert main(["validate-data", str(small_data), "--audio"]) == 1
    assert "vid005" in capsys.readouterr().err
    loud = make_dataset(tmp_path / "loud", SyntheticSpec(counts={c: 1 for c in PAPER_COUNTS}, n_videos=2, audio=True))
    report = validate(loud, audio=True)
    assert report.ok and sorted(report.audio) == ["vid000", "vid001"]
    assert report.audio["vid000"].codec == "aac" and report.audio["vid000"].channels == 2


def test_every_path_of_every_question_is_probed(copy_data, capsys):
    """A ``video_path`` override to a missing file, on a video id other questions share, passed
    validate-data (one path was probed per video id) and stopped the run at its question."""
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    shared = [r for r in rows if r["video_id"] == "vid002"]
    assert len(shared) > 1
    shared[-1]["video_path"] = "videos/vid002_cut.mp4"  # the others use videos/vid002.mp4
    write_jsonl(d / "annotations.jsonl", rows)
    report = validate(d)
    (problem,) = report.problems
    assert "vid002_cut.mp4" in problem and f"e.g. {shared[-1]['question_id']!r}" in problem
    assert "vid002" in report.videos  # the default path of vid002 is readable
    assert main(["validate-data", str(d)]) == 1
    assert "vid002_cut.mp4" in capsys.readouterr().err


def test_validate_audio_decodes_what_the_run_decodes(tmp_path, capsys):
    """``--audio`` decoded one frame, so it said OK of a track the run then met a damaged packet
    in (issue 33, finding 2): it now decodes each track whole, as the run does, and says what the
    run will decode past (the packet skipped, its time silence)."""
    from naru_eval.core.synthetic import SyntheticSpec, make_dataset
    from tests.helpers.soundtrack import audio_packet_at, remux

    data = make_dataset(tmp_path / "d", SyntheticSpec(counts={"N.1": 2}, n_videos=2, audio=True))
    video = data / "videos" / "vid001.mp4"
    damaged = remux(video, tmp_path / "damaged.mp4", damage=audio_packet_at(video, 1.0))
    damaged.replace(video)
    report = validate(data, audio=True)
    assert report.ok and report.audio["vid001"].skipped_packets == 1
    (note,) = [n for n in report.notes if "vid001" in n]
    assert "1 packet(s) the decoder refused are skipped" in note and str(video) in note
    assert main(["validate-data", str(data), "--audio"]) == 0
    assert "note: video 'vid001'" in capsys.readouterr().out
