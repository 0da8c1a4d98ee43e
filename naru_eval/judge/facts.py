"""Step 1: decompose each reference answer into self-contained atomic facts, once per question.

The facts are frozen in the judge store under (question id, reference hash, judge model,
facts prompt version): the first decomposition stored wins, and every model's responses to the
question are scored against it, so all models share one denominator and 8 models cost 500
decompositions, not 4,000. ``export_facts`` writes them for audit (``naru-eval judge facts``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from naru_eval.judge.client import CallResult, JudgeClient
from naru_eval.judge.items import JudgeItem
from naru_eval.judge.prompts import FACTS_PROMPT_VERSION, fact_ids, facts_messages, retry_note
from naru_eval.judge.schemas import FactList, FactRecord
from naru_eval.store.judge_cache import JudgeStore

MAX_FACTS = 32


@dataclass(frozen=True)
class FactSet:
    question_id: str
    ref_hash: str
    judge_model: str
    prompt_version: str
    facts: tuple[str, ...] = ()
    reason: str | None = None  # why no facts (the question is then unscored for every model)
    calls: tuple[CallResult, ...] = field(default=(), compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.reason is None and bool(self.facts)

    @property
    def ids(self) -> list[str]:
        return fact_ids(len(self.facts))

    def as_list(self) -> list[FactRecord]:
        """The facts as verdict records without a verdict (an unscored response)."""
        return [{"id": i, "text": t} for i, t in zip(self.ids, self.facts, strict=True)]


def clean_facts(raw: Sequence[str]) -> tuple[list[str], str | None]:
    facts = [" ".join(str(f).split()) for f in raw]
    facts = [f for f in facts if f]
    if not facts:
        return [], "no facts returned"
    if len(facts) > MAX_FACTS:
        return [], f"{len(facts)} facts (more than {MAX_FACTS})"
    return facts, None


class LLMDecomposer:
    """Decomposition by the judge model (``client`` is the facts model's client)."""

    prompt_version = FACTS_PROMPT_VERSION

    def __init__(self, client: JudgeClient, store: JudgeStore) -> None:
        self.client = client
        self.store = store

    @property
    def model(self) -> str:
        return self.client.config.model

    def frozen(self, item: JudgeItem) -> FactSet | None:
        facts = self.store.get_facts(item.question_id, item.ref_hash, self.model, self.prompt_version)
        if facts is None:
            return None
        return FactSet(item.question_id, item.ref_hash, self.model, self.prompt_version, tuple(facts))

    def decompose(self, item: JudgeItem) -> FactSet:
        """The frozen facts, decomposing (and freezing) them first when needed. Raises
        JudgeUnavailable when the judge cannot be reached (nothing is frozen then)."""
        hit = self.frozen(item)
        if hit is not None:
            return hit
        base = facts_messages(item.question, item.reference)
        max_attempts = self.client.config.parse_attempts
        calls: list[CallResult] = []
        messages = list(base)
        reason: str | None = "not attempted"
        for attempt in range(1, max_attempts + 1):
            result = self.client.call("facts", messages, FactList, prompt_version=self.prompt_version)
            calls.append(result)
            parsed, reason = result.parse(FactList)
            if parsed is not None:
                facts, reason = clean_facts(parsed.facts)
                if reason is None:
                    frozen = self.store.freeze_facts(
                        item.question_id,
                        item.ref_hash,
                        self.model,
                        self.prompt_version,
                        facts,
                        question=item.question,
                        reference=item.reference,
                        category=item.category,
                        call_key=result.key,
                    )
                    return FactSet(
                        item.question_id,
                        item.ref_hash,
                        self.model,
                        self.prompt_version,
                        tuple(frozen),
                        None,
                        tuple(calls),
                    )
            messages = [*base, retry_note(attempt + 1, max_attempts, reason or "invalid")]
        return FactSet(
            item.question_id,
            item.ref_hash,
            self.model,
            self.prompt_version,
            (),
            f"{reason} (after {max_attempts} attempt(s))",
            tuple(calls),
        )


class ExportedFact(TypedDict):
    id: str
    text: str


class ExportedFacts(TypedDict):
    """One line of the facts export (``naru-eval judge facts``): a question's frozen facts."""

    question_id: str
    category: str | None
    ref_hash: str
    judge_model: str
    prompt_version: str
    question: str | None
    reference: str | None
    facts: list[ExportedFact] | None  # None: not decomposed yet (status "missing")
    status: str


def export_facts(
    store: JudgeStore,
    out: str | Path,
    *,
    judge_model: str,
    prompt_version: str = FACTS_PROMPT_VERSION,
    items: Iterable[JudgeItem] | None = None,
) -> int:
    """Write the frozen facts (of ``items``, or all of the model) as JSONL; returns the count."""
    rows: list[ExportedFacts] = []
    if items is not None:
        for it in items:
            facts = store.get_facts(it.question_id, it.ref_hash, judge_model, prompt_version)
            rows.append(
                {
                    "question_id": it.question_id,
                    "category": it.category,
                    "ref_hash": it.ref_hash,
                    "judge_model": judge_model,
                    "prompt_version": prompt_version,
                    "question": it.question,
                    "reference": it.reference,
                    "facts": [{"id": i, "text": t} for i, t in zip(fact_ids(len(facts)), facts, strict=True)]
                    if facts is not None
                    else None,
                    "status": "ok" if facts else "missing",
                }
            )
    else:
        for rec in store.iter_facts(judge_model, prompt_version):
            facts = rec["facts"]
            rows.append(
                {
                    "question_id": rec["question_id"],
                    "ref_hash": rec["ref_hash"],
                    "judge_model": rec["judge_model"],
                    "prompt_version": rec["prompt_version"],
                    "question": rec["question"],
                    "reference": rec["reference"],
                    "category": rec["category"],
                    "facts": [{"id": i, "text": t} for i, t in zip(fact_ids(len(facts)), facts, strict=True)],
                    "status": "ok",
                }
            )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)
