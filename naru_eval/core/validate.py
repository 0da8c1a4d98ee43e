"""Preflight: every schema problem and every missing or unreadable video, reported at once.

Used by ``naru-eval validate-data`` and by the lmms-eval tasks when they load, so a run stops
before any inference instead of failing at question 900.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.core.data import (
    VIDEO_EXTENSIONS,
    DataError,
    Dataset,
    NaruQuestion,
    load_local,
)
from naru_eval.core.hub import load_dataset_from_env
from naru_eval.core.transcripts import TranscriptSource, transcript_or_problem
from naru_eval.media.audio import AudioInfo, audio_note, probe_audio
from naru_eval.media.video import VideoError, VideoInfo, duration_problem, probe_video, stream_note


@dataclass
class ValidationReport:
    """Result of a preflight; ``ok`` is True when ``problems`` is empty. ``notes`` say what the
    run will do with a file that is readable but unusual (several real video streams)."""

    dataset: Dataset | None
    problems: list[str] = field(default_factory=list)
    #: video_id -> the probe of its (first readable) file
    videos: dict[str, VideoInfo] = field(default_factory=dict)
    #: video_id -> its audio track (checked only when audio is asked for)
    audio: dict[str, AudioInfo] = field(default_factory=dict)
    #: every readable path probed -> its probe (``Dataset.video_file`` as a string)
    paths: dict[str, VideoInfo] = field(default_factory=dict)
    #: what is worth knowing but not wrong (a file with several real video streams)
    notes: list[str] = field(default_factory=list)
    #: video id -> its transcript's cue count, for the videos that have one (``transcript=``)
    transcripts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        if self.problems:
            raise DataError(self.problems, header="NARU preflight failed; nothing was run")


def check_videos(dataset: Dataset, workers: int = 8) -> tuple[dict[str, VideoInfo], list[str]]:
    """Probe every distinct video path of every question once (a ``video_path`` override is a
    path of its own, even on a ``video_id`` other questions share); return infos by video_id (its
    first readable path) and one problem per bad path. :func:`validate` keeps them by path too."""
    infos, _, problems = _probe_paths(dataset, workers)
    return infos, problems


def _path_problem(who: list[tuple[str, str]], problem: str) -> str:
    """One problem of one video file, naming its video id(s) and a question that uses it
    (``who``: each (video_id, question_id) on that path)."""
    vids = sorted({v for v, _ in who})
    others = f" (and {len(vids) - 1} other id(s))" if len(vids) > 1 else ""
    return f"video {vids[0]!r}{others} ({len(who)} question(s), e.g. {who[0][1]!r}): {problem}"


def _probe_paths(dataset: Dataset, workers: int) -> tuple[dict[str, VideoInfo], dict[str, VideoInfo], list[str]]:
    paths: dict[str, Path | None] = {}
    users: dict[str, list[tuple[str, str]]] = {}  # path key -> (video_id, question_id)
    unlocated: dict[str, NaruQuestion] = {}  # path key -> the first question whose video is not found
    for q in dataset.questions:
        path = dataset.video_file(q)
        key = str(path) if path is not None else f"\0missing:{q.video_path or q.video_id}"
        paths.setdefault(key, path)
        users.setdefault(key, []).append((q.video_id, q.question_id))
        if path is None:
            unlocated.setdefault(key, q)

    def probe(item: tuple[str, Path | None]) -> tuple[str, VideoInfo | str]:
        key, path = item
        if path is None:
            q = unlocated[key]
            vid = q.video_id
            if q.video_path:
                return key, f"video_path {q.video_path!r}: no folder to resolve it against; set NARU_VIDEO_DIR"
            root = dataset.videos_dir
            if root is None:
                return key, f"no video folder to look for {vid!r} in; set NARU_VIDEO_DIR"
            exts = ",".join(e.lstrip(".") for e in VIDEO_EXTENSIONS)
            return key, f"{root}/{vid}.{{{exts}}}: video not found"
        try:
            info = probe_video(path)
        except VideoError as e:
            return key, str(e)
        problem = duration_problem(info)  # a header claiming hours for a few frames
        return key, f"{path}: {problem}" if problem else info

    by_video: dict[str, VideoInfo] = {}
    by_path: dict[str, VideoInfo] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for key, result in pool.map(probe, sorted(paths.items())):
            who = users[key]
            if isinstance(result, VideoInfo):
                by_path[key] = result
                for vid, _ in who:
                    by_video.setdefault(vid, result)
            else:
                problems.append(_path_problem(who, result))
    return by_video, by_path, problems


def check_audio(
    dataset: Dataset, paths: dict[str, VideoInfo], workers: int = 8
) -> tuple[dict[str, AudioInfo], list[str]]:
    """The audio track of every readable path (``paths``, the probes by path), decoded whole as a
    run decodes it: a silent file or an undecodable track is one problem naming the video and its
    questions, found before any model runs; the tracks by video id (its first path)."""
    users: dict[str, list[tuple[str, str]]] = {}  # path -> (video_id, question_id)
    for q in dataset.questions:
        path = dataset.video_file(q)
        if path is not None and str(path) in paths:
            users.setdefault(str(path), []).append((q.video_id, q.question_id))

    def probe(where: str) -> tuple[str, AudioInfo | str]:
        try:
            return where, probe_audio(where, whole=True)  # what the run decodes, every packet
        except VideoError as e:
            return where, str(e)

    tracks: dict[str, AudioInfo] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for where, result in pool.map(probe, sorted(users)):
            who = users[where]
            if isinstance(result, AudioInfo):
                for vid, _ in who:
                    tracks.setdefault(vid, result)
            else:
                problems.append(_path_problem(who, result))
    return tracks, problems


def check_transcripts(
    dataset: Dataset, source: TranscriptSource, asr_model: str | None = None, workers: int = 4
) -> tuple[dict[str, int], list[str]]:
    """Each distinct video's transcript from ``source``: (video id -> cue count, one problem per
    video that lacks one or whose transcript does not parse). Subtitle files are read one at a
    time (parsing is Python under the GIL: threads would only hold several files at once)."""
    videos: dict[str, tuple[Path | None, list[str]]] = {}
    for q in dataset.questions:
        path, qids = videos.setdefault(q.video_id, (dataset.video_file(q), []))
        qids.append(q.question_id)

    def one(item: tuple[str, tuple[Path | None, list[str]]]) -> tuple[str, int | str]:
        vid, (path, _) = item
        t = transcript_or_problem(source, vid, path, asr_model)
        return vid, t if isinstance(t, str) else len(t.cues)

    counts: dict[str, int] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=1 if source.kind == "dir" else max(1, workers)) as pool:
        for vid, result in pool.map(one, sorted(videos.items())):
            if isinstance(result, int):
                counts[vid] = result
            else:
                qids = videos[vid][1]
                problems.append(f"video {vid!r} ({len(qids)} question(s), e.g. {qids[0]!r}): {result}")
    return counts, problems


def validate(
    data_dir: str | os.PathLike[str] | None = None,
    videos: bool = True,
    audio: bool = False,
    transcript: TranscriptSource | None = None,
    asr_model: str | None = None,
) -> ValidationReport:
    """Load the data (``data_dir`` or the environment) and check schema and videos; with ``audio``
    (``naru-eval validate-data --audio``, for a run with ``audio=true``) also that every video has a
    decodable audio track, and with ``transcript`` that every video has a transcript from that
    source."""
    try:
        dataset = load_local(data_dir, strict=False) if data_dir is not None else load_dataset_from_env(strict=False)
    except DataError as e:  # no readable annotation file at all
        return ValidationReport(None, list(e.problems))
    report = ValidationReport(dataset, list(dataset.problems))
    if videos:
        report.videos, report.paths, video_problems = _probe_paths(dataset, 8)
        report.problems += video_problems
        if audio:
            report.audio, audio_problems = check_audio(dataset, report.paths)
            report.problems += audio_problems
        report.notes = [f"video {vid!r}: {note}" for vid, i in report.videos.items() if (note := stream_note(i))]
        report.notes += [f"video {vid!r}: {note}" for vid, a in report.audio.items() if (note := audio_note(a))]
    if transcript is not None and transcript.enabled:
        report.transcripts, transcript_problems = check_transcripts(dataset, transcript, asr_model)
        report.problems += transcript_problems
    return report
