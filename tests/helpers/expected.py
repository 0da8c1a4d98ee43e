"""Replay predictions in the response styles models produce, and the metrics they must give
(computed here from the annotations, without the extractor)."""

from __future__ import annotations

import random
from pathlib import Path

from naru_eval.core.data import CATEGORIES, CULTURAL, LETTERS, NARRATIVE
from tests.helpers.data import read_jsonl, write_jsonl

# (template, yields the letter?) - the intended outcome is known without the extractor
STYLES = [
    ("{L}", True),
    ("The answer is ({L}).", True),
    ("答えは{L}です。", True),
    ("**{L}**", True),
    ("{L}. {T}", True),
    ("Final answer: {L}", True),
    ("I cannot determine the answer from the video.", False),
    ("", False),
    ("[LMMS_EVAL_REQUEST_FAILED] 503", False),
]


def make_predictions(annotations: Path, out: Path, seed: int = 1) -> dict[str, str | None]:
    """Write replay predictions; return question_id -> intended letter (None = invalid)."""
    rng = random.Random(seed)
    intended: dict[str, str | None] = {}
    rows = []
    for rec in read_jsonl(annotations):
        letter = rng.choice(LETTERS)
        template, valid = STYLES[rng.randrange(len(STYLES))]
        text = template.format(L=letter, T=rec["options"][LETTERS.index(letter)])
        intended[rec["question_id"]] = letter if valid else None
        rows.append({"question_id": rec["question_id"], "response": text})
    write_jsonl(out, rows)
    return intended


def expected_metrics(annotations: Path, intended: dict[str, str | None], ids: set[str]) -> dict[str, float]:
    recs = [r for r in read_jsonl(annotations) if r["question_id"] in ids]

    def acc(cats):
        sel = [r for r in recs if r["category"] in cats]
        return 100.0 * sum(intended[r["question_id"]] == r["answer"] for r in sel) / len(sel)

    # the authors' aggregation: category accuracies, their mean per level, the mean of the levels
    out = {c: acc((c,)) for c in CATEGORIES}
    out["narrative"] = sum(out[c] for c in NARRATIVE) / len(NARRATIVE)
    out["cultural"] = sum(out[c] for c in CULTURAL) / len(CULTURAL)
    out["overall"] = (out["narrative"] + out["cultural"]) / 2
    out["accuracy"] = acc(CATEGORIES)  # micro, over every question
    out["invalid_rate"] = 100.0 * sum(intended[r["question_id"]] is None for r in recs) / len(recs)
    return out
