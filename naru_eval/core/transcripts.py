"""Transcripts as a model input: where a video's transcript comes from, how it is laid out beside
the frames, and how it shares the context with them.

- **Source** (:class:`TranscriptSource`, the ``transcript=`` model arg): ``none`` (the default:
  every official row keeps its official input), ``asr`` (the cache ``naru-eval transcribe``
  wrote, :mod:`naru_eval.media.asr_cache`), ``embedded`` (the video's own text subtitle stream)
  or a directory of ``<video_id>.srt|.vtt|.ass`` files (:mod:`naru_eval.media.subtitles`).
  :func:`load_transcript` gives the one form, :class:`naru_eval.media.transcript.Transcript`.
- **Layout** (``transcript_layout=``): ``interleaved`` puts each cue after the last visual piece
  (frame, or a family's group of frames) whose time is at or before the cue's start
  (:func:`place`): cues before the first frame open the sequence, cues after the last frame
  close it, none is dropped. ``block`` puts the whole transcript, in time order, before the
  question. Each cue is one line, ``[t0–t1] text`` (:func:`cue_line`, seconds from the video's
  first frame, one decimal). Both depend only on the video's transcript and its frames' times,
  never on the question, so every question of a video gets the same bytes and a shared prefix,
  a server's prefix cache or a Gemini context cache still hits.
- **Budget** (:func:`plan_transcript`): the transcript's tokens (counted by the model's own
  tokenizer, handed in) are planned with the frames'. When both do not fit, the plan cuts,
  by its policy, cues (a uniform selection over the whole video, ``cues``) or frames first
  (``frames``), and says so in :attr:`TranscriptPlan.cut`: never silently.
- **Control** (:func:`derangement`): each video is given another video's transcript (a fixed,
  seeded derangement: no video keeps its own), to tell gains from the dialogue from gains from
  any text at all.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, get_args

from naru_eval.media.plan import uniform_indices
from naru_eval.media.transcript import Cue, Transcript, TranscriptError

TranscriptKind = Literal["none", "asr", "embedded", "dir"]
TranscriptLayout = Literal["interleaved", "block"]
LAYOUTS: tuple[str, ...] = get_args(TranscriptLayout)
#: what a plan cuts first when frames and transcript do not both fit
FitPolicy = Literal["cues", "frames"]
FIT_POLICIES: tuple[str, ...] = get_args(FitPolicy)


@dataclass(frozen=True)
class TranscriptSource:
    """Where a run's transcripts come from (``transcript=none|asr|embedded|DIR``)."""

    kind: TranscriptKind = "none"
    directory: str | None = None
    #: ``embedded:N``: the N-th subtitle stream (else the first Japanese text stream)
    stream: int | None = None

    @classmethod
    def parse(cls, value: str | None) -> TranscriptSource:
        """``none`` / ``asr`` / ``embedded`` / ``embedded:N`` / a directory (which must exist)."""
        v = (value or "none").strip()
        if v in ("none", "asr", "embedded"):
            return cls(v)  # type: ignore[arg-type]
        if v.startswith("embedded:"):
            n = v.removeprefix("embedded:")
            if not n.isdigit():
                raise ValueError(f"transcript={v!r}: embedded:N takes a subtitle stream number (0, 1, ...)")
            return cls("embedded", stream=int(n))
        p = Path(v).expanduser()
        if not p.is_dir():
            raise ValueError(f"transcript={v!r}: not none, asr, embedded or an existing directory of subtitle files")
        return cls("dir", str(p.resolve()))

    @property
    def enabled(self) -> bool:
        return self.kind != "none"

    @property
    def label(self) -> str:
        """The source as the run key and the provenance record it."""
        if self.kind == "dir":
            return f"dir:{self.directory}"
        return f"embedded:{self.stream}" if self.stream is not None else self.kind


def outside_folder_problem(path: Path, folder: Path) -> str | None:
    """Why the subtitle file ``path`` may not be read: it (or a link it is) resolves outside the
    transcript folder, as a video may not lie outside the data and video folders (the same opt-in,
    ``NARU_ALLOW_EXTERNAL_VIDEOS``, lifts both); None when it may."""
    from naru_eval.core.data import ALLOW_HINT, resolved
    from naru_eval.settings import settings

    if settings().allow_external_videos:
        return None
    real, why = resolved(path)
    root, root_why = resolved(folder)
    if real is None or root is None:
        return why or root_why
    if real == root or real.is_relative_to(root):
        return None
    return (
        f"leads outside the transcript folder {root} (to {real}); refused, so that a subtitle folder cannot make "
        f"the harness read a file elsewhere and send it to a model. {ALLOW_HINT}"
    )


def load_transcript(
    source: TranscriptSource,
    video_id: str,
    video_path: str | os.PathLike[str] | None,
    asr_path: Callable[[str], Path | None] | None = None,
) -> Transcript | None:
    """The transcript of one video from ``source``; None when it has none (no file in the
    directory, no ASR cache entry; a video without a subtitle stream is an error, as is a bad
    file, or one that resolves outside the directory: :func:`outside_folder_problem`). ``asr_path(video_path)`` finds the cached ASR transcript (``naru_eval.media.asr_cache``)."""
    from naru_eval.media.subtitles import find_subtitle_file, read_embedded, read_subtitle_file

    if source.kind == "none":
        return None
    if source.kind == "dir":
        assert source.directory is not None
        found = find_subtitle_file(source.directory, video_id)
        if found is None:
            return None
        outside = outside_folder_problem(found, Path(source.directory))
        if outside:
            raise TranscriptError(found, outside)
        return read_subtitle_file(found)
    if video_path is None:
        raise TranscriptError(video_id, f"transcript={source.kind} needs the video file, and it has none")
    if source.kind == "embedded":
        return read_embedded(video_path, source.stream)
    if asr_path is None:
        raise ValueError("transcript=asr needs the ASR cache's lookup (asr_path)")
    found = asr_path(str(video_path))
    return Transcript.read(found) if found is not None else None


def transcript_or_problem(
    source: TranscriptSource, video_id: str, video_path: str | os.PathLike[str] | None, asr_model: str | None = None
) -> Transcript | str:
    """The transcript of one video, or why it has none (no file, no ASR entry, a parse error):
    the one check of ``naru-eval validate-data --transcript`` and of a run's preflight."""
    from naru_eval.media import asr_cache

    try:
        t = load_transcript(source, video_id, video_path, lambda v: asr_cache.find(v, asr_model))
    except (TranscriptError, ValueError) as e:
        return str(e)
    if t is not None:
        return t
    where = {
        "dir": f"no {video_id}.{{srt,vtt,ass,ssa}} in {source.directory}",
        "asr": f"no ASR transcript of {asr_model or asr_cache.DEFAULT_ASR_MODEL} in {asr_cache.cache_root()} "
        "(run `naru-eval transcribe`)",
    }.get(source.kind, "no transcript")
    return f"lacks a transcript: {where}"


@dataclass(frozen=True)
class TranscriptInput:
    """The transcript part of a request's inputs: where the transcripts come from, how they are
    laid out, what the budget cuts first, and whether this is the control run (each video given
    another video's transcript, :func:`derangement`). Its ``mode`` part is ``transcript``."""

    source: TranscriptSource
    layout: TranscriptLayout = "interleaved"
    fit: FitPolicy = "cues"
    control: bool = False
    #: with ``source`` asr: whose transcripts (``naru_eval.media.asr_cache.find``; None: the default model)
    asr_model: str | None = None
    MODES: ClassVar[tuple[str, ...]] = ("transcript",)

    @property
    def mode(self) -> str:
        return "transcript"

    def describe(self) -> dict[str, str | bool | None]:
        """The run key's and the variant's record of it (each video's fingerprint is the request's)."""
        return {
            "source": self.source.label,
            "layout": self.layout,
            "fit": self.fit,
            "control": self.control,
            "asr_model": self.asr_model,
        }


@dataclass
class TranscriptBook:
    """The transcripts of a run's videos, each loaded once (``videos``: video id -> file).

    In the control run, video ``v`` is given the transcript of ``derangement(videos)[v]``: the
    map is over every video the run asks about, so it does not depend on which answers are
    already stored. A video without a transcript gets None; :meth:`missing` lists them."""

    spec: TranscriptInput
    videos: Mapping[str, str | None]
    _loaded: dict[str, Transcript | None] = field(default_factory=dict)

    def donor(self, video_id: str) -> str:
        """Whose transcript ``video_id`` is given (itself, except in the control run)."""
        if not self.spec.control:
            return video_id
        return derangement(list(self.videos))[video_id]

    def get(self, video_id: str) -> Transcript | None:
        """The transcript given with ``video_id``'s questions (a bad file raises TranscriptError)."""
        vid = self.donor(video_id)
        if vid not in self._loaded:
            from naru_eval.media import asr_cache

            model = self.spec.asr_model
            t = load_transcript(self.spec.source, vid, self.videos.get(vid), lambda v: asr_cache.find(v, model))
            if t is not None and vid != video_id:
                t = Transcript(t.cues, f"control:{vid}:{t.source}")
            self._loaded[vid] = t
        return self._loaded[vid]

    def missing(self) -> list[str]:
        """The videos with no transcript (each loaded now)."""
        return [v for v in sorted(self.videos) if self.get(v) is None]


# --------------------------------------------------------------------------- layout


def fmt_time(seconds: float) -> str:
    """A cue time as the prompt writes it: seconds, one decimal (``3723.5``)."""
    return f"{seconds:.1f}"


def cue_line(cue: Cue) -> str:
    """One cue as the model reads it: ``[t0–t1] text`` (an en dash between the times)."""
    return f"[{fmt_time(cue.start)}–{fmt_time(cue.end)}] {cue.text}"


def place(cues: Sequence[Cue], anchors: Sequence[float]) -> list[tuple[Cue, ...]]:
    """The cues of each slot around ``anchors`` (the times of the visual pieces, ascending):
    slot 0 comes before the first piece, slot ``i + 1`` right after piece ``i``. A cue goes to the
    slot after the last piece at or before its start; none is dropped. ``len(anchors) + 1`` slots."""
    times = list(anchors)
    if any(b < a for a, b in zip(times, times[1:], strict=False)):
        raise ValueError("anchors must be ascending")
    slots: list[list[Cue]] = [[] for _ in range(len(times) + 1)]
    for c in sorted(cues):
        slots[bisect.bisect_right(times, c.start)].append(c)
    return [tuple(s) for s in slots]


def interleave_plan(cues: Sequence[Cue], frame_times: Sequence[float], group: int = 1) -> list[str | range]:
    """The interleaved sequence of one video: texts and ranges of frame positions, in order.

    The frames are taken ``group`` at a time (a family whose video tokens cover ``group``
    frames together, e.g. a temporal patch of 2, cannot take text inside a group); each group's
    time is its first frame's. Cues go between groups by :func:`place`, and consecutive groups
    with no text between them stay one range (one video piece): a transcript with one cue in the
    middle gives ``[range(0, k), text, range(k, n)]``, none gives ``[range(0, n)]``."""
    n = len(frame_times)
    g = max(1, int(group))
    starts = list(range(0, n, g))
    texts = interleaved_texts(cues, [float(frame_times[i]) for i in starts])
    out: list[str | range] = []
    if texts[0]:
        out.append(texts[0])
    for k, a in enumerate(starts):
        b = min(n, a + g)
        if out and isinstance(out[-1], range):
            out[-1] = range(out[-1].start, b)
        else:
            out.append(range(a, b))
        if texts[k + 1]:
            out.append(texts[k + 1])
    return out


def slot_text(cues: Sequence[Cue]) -> str:
    """A slot's cues as text: one :func:`cue_line` per line (empty for an empty slot)."""
    return "\n".join(cue_line(c) for c in cues)


def interleaved_texts(cues: Sequence[Cue], anchors: Sequence[float]) -> list[str]:
    """The text of each slot of :func:`place` (``len(anchors) + 1`` strings, some empty)."""
    return [slot_text(s) for s in place(cues, anchors)]


#: the line that opens a block transcript (and names what follows for the model)
BLOCK_HEADER = "Transcript of the video's speech ([start–end] in seconds):"


def block_text(cues: Sequence[Cue]) -> str:
    """The ``block`` layout: a header line, then every cue in time order."""
    return BLOCK_HEADER + "\n" + slot_text(sorted(cues)) if cues else ""


# --------------------------------------------------------------------------- budget


@dataclass(frozen=True)
class TranscriptPlan:
    """What a request gets of its transcript and frames once both are fitted into the context.

    ``cut`` is None when nothing was cut, else one sentence saying what was cut and why (it goes
    into the payload and the run key: a cut is never silent)."""

    cues: tuple[Cue, ...]
    frames: int
    transcript_tokens: int
    frame_tokens: int
    total_cues: int
    total_transcript_tokens: int
    asked_frames: int
    budget_tokens: int
    cut: str | None = None


def _tokens(lines: Sequence[int], picked: Sequence[int]) -> int:
    return sum(lines[i] for i in picked)


def _fit_cues(line_tokens: Sequence[int], room: int) -> list[int]:
    """The largest uniform selection (segment centres, ``uniform_indices``) of cues whose tokens
    fit in ``room``."""
    n = len(line_tokens)
    if _tokens(line_tokens, range(n)) <= room:
        return list(range(n))
    lo, hi = 0, n  # the answer lies in [lo, hi); the sum grows with k almost monotonically
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _tokens(line_tokens, uniform_indices(n, mid)) <= room:
            lo = mid
        else:
            hi = mid
    k = lo
    while k > 0 and _tokens(line_tokens, uniform_indices(n, k)) > room:
        k -= 1
    return uniform_indices(n, k)


def plan_transcript(
    cues: Sequence[Cue],
    count_tokens: Callable[[str], int],
    frames: int,
    frame_tokens: Callable[[int], int],
    budget_tokens: int,
    policy: FitPolicy = "cues",
    min_frames: int = 1,
) -> TranscriptPlan:
    """Fit ``frames`` frames and the transcript's ``cues`` into ``budget_tokens`` (the context
    less the prompt and the answer's reserve).

    Each cue costs ``count_tokens(cue_line(cue) + "\\n")`` (the model's tokenizer), ``n`` frames
    ``frame_tokens(n)`` (the family's count). When both fit, nothing is cut. Otherwise
    ``policy="cues"`` keeps the frames and keeps the largest uniform selection of cues that fits
    (cues over the whole video, not its first minutes); ``policy="frames"`` first lowers the
    frames (down to ``min_frames``) until the whole transcript fits, then cuts cues if it must.
    Frames alone over the budget is an error: that is the frame budget's problem, not this plan's.
    """
    ordered = sorted(cues)
    line_tokens = [int(count_tokens(cue_line(c) + "\n")) for c in ordered]
    total = sum(line_tokens)
    n = int(frames)
    if frame_tokens(n) > budget_tokens and policy == "cues":
        raise ValueError(f"{n} frames take {frame_tokens(n)} tokens, more than the {budget_tokens} available")
    if policy == "frames":
        floor = max(0, min(int(min_frames), n))
        while n > floor and frame_tokens(n) + total > budget_tokens:
            n -= 1
        if frame_tokens(n) > budget_tokens:
            raise ValueError(f"{n} frames take {frame_tokens(n)} tokens, more than the {budget_tokens} available")
    room = budget_tokens - frame_tokens(n)
    picked = _fit_cues(line_tokens, room)
    kept = tuple(ordered[i] for i in picked)
    used = _tokens(line_tokens, picked)
    parts: list[str] = []
    if n < frames:
        parts.append(f"frames {n} of {frames}")
    if len(kept) < len(ordered):
        parts.append(f"transcript {len(kept)} of {len(ordered)} cues ({used} of {total} tokens, evenly over the video)")
    cut = None
    if parts:
        cut = "cut to fit " + f"{budget_tokens} tokens: " + "; ".join(parts)
    return TranscriptPlan(kept, n, used, frame_tokens(n), len(ordered), total, int(frames), int(budget_tokens), cut)


# --------------------------------------------------------------------------- control


def derangement(video_ids: Sequence[str], seed: str = "naru-transcript-control") -> dict[str, str]:
    """video id -> the id whose transcript it is given in the control run: the ids in a seeded
    order (SHA-256 of seed and id), each mapped to the next, the last to the first. A cycle has
    no fixed point, so no video keeps its own transcript; the same ids give the same map."""
    ids = sorted(set(video_ids))
    if len(ids) < 2:
        raise ValueError("the transcript control needs at least two videos")
    order = sorted(ids, key=lambda v: hashlib.sha256(f"{seed}:{v}".encode()).hexdigest())
    return {v: order[(i + 1) % len(order)] for i, v in enumerate(order)}
