"""``naru_replay``: answers from a JSONL of ``{"question_id", "response"}`` made elsewhere.

Scores predictions from any source through the same extractor and metrics. Every question id
the run needs must be in the file: missing ids are one error, listing them all, raised before
any answer is given. ``"response": null`` marks a failed request (scored invalid).

Model args: :class:`ReplayArgs` (``predictions``, an optional ``pretrained`` label, the base's
sampling and store args: the sampling labels the run, e.g. a frame sweep's budget); any other arg
is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from naru_eval.adapters.args import SamplingArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import Family
from naru_eval.adapters.request import NaruRequest, failed
from naru_eval.settings import UserError


class ReplayError(UserError):
    """A predictions file that cannot be replayed (missing, malformed, or missing questions)."""


def load_predictions(path: str | Path) -> dict[str, str | None]:
    """question_id -> response; bad lines (not UTF-8, not JSON, no id) and duplicate ids are
    reported together, each with its file and line; a folder or unreadable file is named."""
    p = Path(path)
    if not p.exists():
        raise ReplayError(f"naru_replay: predictions file {p} does not exist")
    if not p.is_file():
        raise ReplayError(f"naru_replay: predictions {p} is a folder, not a JSONL file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ReplayError(f"naru_replay: cannot read the predictions file {p} ({e.strerror or e})") from None
    preds: dict[str, str | None] = {}
    problems = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append(f"{p}:{lineno}: not valid UTF-8 (byte {e.start + 1} of the line); save the file as UTF-8")
            continue
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            qid = str(rec["question_id"])
            resp = rec.get("response")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            problems.append(f"{p}:{lineno}: expected {{'question_id', 'response'}} ({type(e).__name__}: {e})")
            continue
        if resp is not None and not isinstance(resp, str):
            problems.append(f"{p}:{lineno}: 'response' must be a string or null")
            continue
        if qid in preds:
            problems.append(f"{p}:{lineno}: duplicate question_id {qid!r}")
            continue
        preds[qid] = resp
    if problems:
        shown = problems[:50] + ([f"... and {len(problems) - 50} more"] if len(problems) > 50 else [])
        raise ReplayError(
            f"naru_replay: invalid predictions file ({len(problems)} problem(s)):\n  - " + "\n  - ".join(shown)
        )
    return preds


class ReplayArgs(SamplingArgs):
    """Args of ``naru_replay``."""

    predictions: str = Field(description='a JSONL of {"question_id", "response"}')
    pretrained: str | None = Field(None, description="the model that made the predictions (the leaderboard's label)")


class NaruReplay(NaruModel):
    """Answers made elsewhere, replayed from a JSONL."""

    #: no inputs: the model that made the predictions was given whatever it was given elsewhere
    family = Family(id="naru_replay", args=ReplayArgs, inputs=())
    uses_store = False  # the predictions file is the store
    args: ReplayArgs

    def __init__(self, **model_args: object) -> None:
        super().__init__(**model_args)
        self.predictions_path = self.args.predictions
        self.predictions = load_predictions(self.args.predictions)

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        missing = sorted({r.question_id for r in requests} - self.predictions.keys())
        if missing:
            shown = ", ".join(missing[:50]) + (f", ... ({len(missing) - 50} more)" if len(missing) > 50 else "")
            raise ReplayError(
                f"naru_replay: {len(missing)} question id(s) of the task are missing from "
                f"{self.predictions_path}: {shown}"
            )

    def respond(self, request: NaruRequest) -> str:
        resp = self.predictions[request.question_id]
        return failed("replay: null response") if resp is None else resp
