"""Checks of an interleaved transcript in what a model received, against the sampled frames' times."""

from __future__ import annotations

import re
from collections.abc import Sequence

from naru_eval.core.transcripts import cue_line
from naru_eval.media.transcript import Cue

CUE = re.compile(r"\[(\d+\.\d)–(\d+\.\d)\] ([^\n]*)")


def check_interleaved(
    text: str, cues: Sequence[Cue], frame_times: Sequence[float], group: int, pad: str, per_group: int
) -> list[int]:
    """Every cue's line appears once in ``text`` (the decoded prompt), in the stretch between the
    video tokens right after the last group of frames whose first frame's time is at or before
    the cue's start (before the first frame: before all video tokens). ``pad``: the video token,
    ``per_group``: its tokens per group of ``group`` frames. Returns each cue's group slot."""
    pieces = re.split(f"((?:{re.escape(pad)})+)", text)
    n_groups = -(-len(frame_times) // group)
    starts = [float(frame_times[g * group]) for g in range(n_groups)]
    seen: dict[str, int] = {}
    before = 0  # groups before the current stretch of text
    slots = []
    for piece in pieces:
        if piece.startswith(pad):
            tokens = len(piece) // len(pad)
            assert tokens % per_group == 0, f"a video run of {tokens} tokens is not whole groups of {per_group}"
            before += tokens // per_group
            continue
        for m in CUE.finditer(piece):
            line = m.group(0)
            start = float(m.group(1))
            assert line not in seen, f"{line!r} given twice"
            seen[line] = before
            if before == 0:
                assert start < starts[0] + 0.05, f"{line!r} before the first frame ({starts[0]})"
            else:
                assert start >= starts[before - 1] - 0.05, f"{line!r} after group {before - 1} at {starts[before - 1]}"
            if before < n_groups:
                assert start < starts[before] + 0.05, f"{line!r} placed before group {before} at {starts[before]}"
    assert before == n_groups, f"{before} groups of video tokens, {n_groups} expected"
    for c in cues:
        assert cue_line(c) in seen, f"cue {cue_line(c)!r} missing"
        slots.append(seen[cue_line(c)])
    assert len(seen) == len(cues)
    return slots
