"""Preflight: every schema problem and every missing or unreadable video, reported at once.

Used by ``naru-eval validate-data`` and by the lmms-eval tasks when they load, so a run stops
before any inference instead of failing at question 900.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.core.data import VIDEO_EXTENSIONS, DataError, Dataset, load_dataset_from_env, load_local
from naru_eval.media.video import VideoError, VideoInfo, duration_problem, probe_video, stream_note


@dataclass
class ValidationReport:
    """Result of a preflight; ``ok`` is True when ``problems`` is empty. ``notes`` say what the
    run will do with a file that is readable but unusual (several real video streams)."""

    dataset: Dataset | None
    problems: list[str] = field(default_factory=list)
    videos: dict[str, VideoInfo] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        if self.problems:
            raise DataError(self.problems, header="NARU preflight failed; nothing was run")


def check_videos(dataset: Dataset, workers: int = 8) -> tuple[dict[str, VideoInfo], list[str]]:
    """Probe each distinct video once; return infos by video_id and one problem per bad video."""
    by_video: dict[str, Path | None] = {}
    qids: dict[str, list[str]] = {}
    for q in dataset.questions:
        qids.setdefault(q.video_id, []).append(q.question_id)
        if q.video_id not in by_video or by_video[q.video_id] is None:
            by_video[q.video_id] = dataset.video_file(q)

    def probe(item: tuple[str, Path | None]) -> tuple[str, VideoInfo | str]:
        vid, path = item
        if path is None:
            root = dataset.video_root or (dataset.data_dir / "videos" if dataset.data_dir else "<no video dir>")
            exts = ",".join(e.lstrip(".") for e in VIDEO_EXTENSIONS)
            return vid, f"{root}/{vid}.{{{exts}}}: video not found"
        try:
            info = probe_video(path)
        except VideoError as e:
            return vid, str(e)
        problem = duration_problem(info)  # a header claiming hours for a few frames
        return vid, f"{path}: {problem}" if problem else info

    infos: dict[str, VideoInfo] = {}
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for vid, result in pool.map(probe, sorted(by_video.items())):
            if isinstance(result, VideoInfo):
                infos[vid] = result
            else:
                n = len(qids[vid])
                problems.append(f"video {vid!r} ({n} question(s), e.g. {qids[vid][0]!r}): {result}")
    return infos, problems


def validate(data_dir: str | os.PathLike[str] | None = None, videos: bool = True) -> ValidationReport:
    """Load the data (``data_dir`` or the environment) and check schema and videos."""
    try:
        dataset = load_local(data_dir, strict=False) if data_dir is not None else load_dataset_from_env(strict=False)
    except DataError as e:  # no readable annotation file at all
        return ValidationReport(None, list(e.problems))
    report = ValidationReport(dataset, list(dataset.problems))
    if videos:
        report.videos, video_problems = check_videos(dataset)
        report.problems += video_problems
        report.notes = [f"video {vid!r}: {note}" for vid, i in report.videos.items() if (note := stream_note(i))]
    return report
