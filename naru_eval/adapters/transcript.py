"""The transcript as every adapter gives it: the one place a video's transcript becomes prompt text.

An adapter whose args take a transcript (:class:`naru_eval.adapters.args.TranscriptFields`: the
HF families, the OpenAI-compatible server, Gemini) holds a :class:`TranscriptFeed` when
``transcript=`` is not ``none``. The base (``naru_eval.adapters.base.NaruModel``) then:

- adds the transcript part to the run's input plan (``naru_eval.core.inputs.InputPlan``), so the
  input mode is ``video+transcript``, ``transcript`` (``video=false``) or ``video+audio+transcript``;
- checks every video of the run before anything is computed (:meth:`TranscriptFeed.check`: all
  the videos that lack a transcript, or whose transcript does not parse, in one error; the one
  check of ``naru-eval validate-data --transcript``);
- puts each request's transcript fingerprint into its question key and the feed's settings into
  the run key (nothing of it when ``transcript=none``: the run keys of frames-only runs stay).

An adapter asks :meth:`TranscriptFeed.render` for a video's :class:`Rendered` text: the cues the
budget keeps (``naru_eval.core.transcripts.plan_transcript``, counted with the model's own
tokenizer or a declared estimate, the cut recorded), laid out ``interleaved`` (texts and ranges
of frame positions, ``naru_eval.core.transcripts.interleave_plan``) or ``block`` (one text before
the question). It depends only on the video's transcript and frames' times, never on the
question: every question of a video gets the same bytes, so a shared prefix, a server's prefix
cache and Gemini's context cache still hit. Each video's record (source, fingerprint, layout,
cues kept, cut) goes into its sample payloads' provenance ``transcript`` and each answer's usage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from naru_eval.adapters.request import NaruRequest
from naru_eval.core import provenance
from naru_eval.core.json_types import JSONMapping, JSONObject
from naru_eval.core.transcripts import (
    TranscriptBook,
    TranscriptInput,
    TranscriptSource,
    block_text,
    derangement,
    interleave_plan,
    plan_transcript,
    transcript_or_problem,
)
from naru_eval.settings import UserError
from naru_eval.store.responses import StoredResponse

if TYPE_CHECKING:
    from naru_eval.adapters.args import TranscriptFields
    from naru_eval.media.transcript import Transcript


class TranscriptMissing(UserError):
    """Videos of the run without a usable transcript (every one named), before any compute."""


def chars_estimate(text: str) -> int:
    """The token estimate where the model's tokenizer is not at hand (a served model without a
    local tokenizer, Gemini): one token per character. Qwen-style tokenizers split digits one
    by one and give Japanese about a token per character, so this errs on the long side."""
    return len(text)


def transcript_input(args: TranscriptFields) -> TranscriptInput | None:
    """The input plan's transcript part from the args (None for ``transcript=none``)."""
    source = TranscriptSource.parse(args.transcript)
    if not source.enabled:
        return None
    return TranscriptInput(
        source,
        layout=args.transcript_layout,
        control=args.transcript_source == "other",
        asr_model=args.asr_model,
    )


@dataclass(frozen=True)
class Rendered:
    """One video's transcript as the model is given it.

    ``pieces``: the interleaved sequence, texts and ranges of frame positions in order (frames
    given, ``interleaved``); empty otherwise. ``block``: the text that goes before the question
    (``block``, or no frames given); empty when interleaved. ``record``: what was given."""

    pieces: tuple[str | range, ...]
    block: str
    record: JSONMapping

    @property
    def interleaved(self) -> bool:
        return bool(self.pieces)


def summary(record: JSONMapping) -> str:
    """The provenance ``transcript`` field of a video: ``<source> <fingerprint> <layout>: k/n cues,
    t tokens[; cut ...]``."""
    text = (
        f"{record['source']} {record['fingerprint']} {record['layout']}: "
        f"{record['cues']}/{record['total_cues']} cues, {record['tokens']} tokens"
    )
    return text + (f"; {record['cut']}" if record.get("cut") else "")


@dataclass
class TranscriptFeed:
    """The transcripts of one adapter's run (the module docstring)."""

    spec: TranscriptInput
    who: str
    book: TranscriptBook | None = None
    _rendered: dict[tuple[str, tuple[float, ...], int], Rendered] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def describe(self) -> JSONObject:
        """The run key's transcript part."""
        return dict(self.spec.describe())

    def check(self, requests: Sequence[NaruRequest]) -> None:
        """Load the transcript of every video of ``requests`` (all of the run's, answered before
        or not: the control's derangement is over all of them); every video without one, or
        whose transcript does not parse, is named in one :class:`TranscriptMissing`."""
        videos: dict[str, str | None] = {}
        questions: dict[str, list[str]] = {}
        for r in requests:
            vid = str(r.doc.get("video_id") or "")
            if r.video and vid:
                videos.setdefault(vid, r.video)
                questions.setdefault(vid, []).append(r.question_id)
        book = TranscriptBook(self.spec, videos)
        problems: list[str] = []
        for vid in sorted(videos):
            got = transcript_or_problem(self.spec.source, vid, videos[vid], self.spec.asr_model)
            if isinstance(got, str):
                qids = questions[vid]
                problems.append(f"video {vid!r} ({len(qids)} question(s), e.g. {qids[0]!r}): {got}")
            else:
                book._loaded[vid] = got
        if problems:
            listed = "\n  - ".join(problems)
            raise TranscriptMissing(
                f"transcript={self.spec.source.label}: {len(problems)} of the run's {len(videos)} videos have no "
                f"usable transcript (nothing was run; `naru-eval validate-data --transcript` checks the same):"
                f"\n  - {listed}"
            )
        if self.spec.control:
            try:
                derangement(list(videos))
            except ValueError as e:
                raise UserError(f"transcript_source=other: {e} (this run has {len(videos)})") from None
        for vid in list(videos):  # the control's transcripts, relabelled, once per video
            book.get(vid)
        self.book = book

    def given(self, request: NaruRequest) -> Transcript | None:
        """The transcript given with ``request``'s questions (its video's, or the control's)."""
        vid = str(request.doc.get("video_id") or "")
        if self.book is None or not vid or request.video is None:
            return None
        return self.book.get(vid)

    def fingerprint(self, request: NaruRequest) -> str | None:
        """The question key's record of the transcript given (None: none)."""
        t = self.given(request)
        return f"{t.source}:{t.fingerprint}" if t is not None else None

    def render(
        self,
        request: NaruRequest,
        frame_times: Sequence[float] | None,
        count_tokens: Callable[[str], int],
        frame_tokens: Callable[[int], int],
        budget_tokens: int | None,
        group: int = 1,
    ) -> Rendered | None:
        """The video's transcript laid out beside ``frame_times`` (None: no frames given), fitted
        into ``budget_tokens`` (None: no known limit, nothing cut) with the frames' tokens; the
        same :class:`Rendered` for every question of the video."""
        t = self.given(request)
        if t is None:
            return None
        times = tuple(float(x) for x in frame_times) if frame_times is not None else ()
        key = (str(request.video), times, int(group))
        with self._lock:
            hit = self._rendered.get(key)
        if hit is not None:
            return hit
        n = len(times)
        if budget_tokens is None:
            kept, tokens, cut = tuple(sorted(t.cues)), None, None
        else:
            # the frames alone over the budget raise ValueError (the frame budget's problem)
            plan = plan_transcript(t.cues, count_tokens, n, frame_tokens, int(budget_tokens))
            kept, tokens, cut = plan.cues, plan.transcript_tokens, plan.cut
        interleave = self.spec.layout == "interleaved" and n > 0
        pieces = tuple(interleave_plan(kept, times, group)) if interleave else ()
        block = "" if interleave else block_text(kept)
        if tokens is None:
            tokens = sum(count_tokens(p) for p in pieces if isinstance(p, str)) if interleave else count_tokens(block)
        record = {
            "source": t.source,
            "fingerprint": t.fingerprint,
            "layout": "interleaved" if interleave else "block",
            "cues": len(kept),
            "total_cues": len(t.cues),
            "tokens": int(tokens),
            "cut": cut,
        }
        rendered = Rendered(pieces, block, record)
        with self._lock:
            self._rendered[key] = rendered
        vid = request.doc.get("video_id")
        if vid:
            provenance.record_video(str(vid), transcript=summary(record))
        return rendered

    def recall(self, reused: Sequence[tuple[NaruRequest, StoredResponse | None]]) -> None:
        """What the answers reused from the response store were given, for their payloads'
        ``transcript`` (an answer reused is not asked again, so its record comes from the store).
        ``reused``: each reused request with its stored response."""
        done: set[str] = set()
        for request, hit in reused:
            vid = str(request.doc.get("video_id") or "")
            record = (getattr(hit, "usage", None) or {}).get("transcript")
            if vid and vid not in done and getattr(hit, "status", None) == "ok" and isinstance(record, Mapping):
                provenance.record_video(vid, transcript=summary(record))
                done.add(vid)

    def usage(self, request: NaruRequest) -> JSONObject:
        """What ``request``'s answer was given of the transcript (its usage's ``transcript``)."""
        with self._lock:
            hits = [r for (video, _, _), r in self._rendered.items() if video == str(request.video)]
        return {"transcript": dict(hits[-1].record)} if hits else {}
