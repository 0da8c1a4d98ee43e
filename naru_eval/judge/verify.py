"""Step 2: one call per response grades every frozen fact.

Each fact gets ``covered`` / ``partial`` / ``not_covered`` / ``contradicted`` and an evidence
span. The ids returned must be exactly the ids sent, each once: anything else (a missing, extra
or repeated id), an unparseable output, a refusal or a length stop is asked again with a
corrective note (a distinct, separately cached request), up to ``parse_attempts`` times; then
the response is *unscored*. The response is fenced (see :mod:`naru_eval.judge.prompts`).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from naru_eval.judge.client import CallResult, JudgeClient
from naru_eval.judge.facts import FactSet
from naru_eval.judge.items import JudgeItem
from naru_eval.judge.prompts import VERIFY_PROMPT_VERSION, retry_note, verify_messages
from naru_eval.judge.schemas import CoverageReport, FactRecord


@dataclass
class Coverage:
    """Verdicts for one response, or the reason there are none."""

    verdicts: list[FactRecord] = field(default_factory=list)
    reason: str | None = None
    attempts: int = 0
    calls: list[CallResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reason is None


def id_problem(report: CoverageReport, ids: Sequence[str]) -> str | None:
    """Why the returned ids are not exactly ``ids`` (None when they are)."""
    got = [v.fact_id.strip() for v in report.verdicts]
    counts = Counter(got)
    missing = [i for i in ids if i not in counts]
    extra = sorted(set(got) - set(ids))
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if not (missing or extra or repeated):
        return None
    parts = []
    if missing:
        parts.append(f"missing ids {missing}")
    if extra:
        parts.append(f"unknown ids {extra}")
    if repeated:
        parts.append(f"repeated ids {repeated}")
    return "id mismatch: " + ", ".join(parts)


def _squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def evidence_found(evidence: str, response: str) -> bool | None:
    """Whether the evidence span occurs in the response (spaces and case ignored); None if empty."""
    if not evidence.strip():
        return None
    return _squash(evidence) in _squash(response)


def build_verdicts(facts: FactSet, report: CoverageReport, response: str) -> list[FactRecord]:
    by_id = {v.fact_id.strip(): v for v in report.verdicts}
    out: list[FactRecord] = []
    for fid, text in zip(facts.ids, facts.facts, strict=True):
        v = by_id[fid]
        out.append(
            {
                "id": fid,
                "text": text,
                "verdict": v.verdict,
                "evidence": v.evidence,
                "evidence_found": evidence_found(v.evidence, response),
            }
        )
    return out


class LLMVerifier:
    prompt_version = VERIFY_PROMPT_VERSION

    def __init__(self, client: JudgeClient) -> None:
        self.client = client

    def verify(self, item: JudgeItem, facts: FactSet, response: str) -> Coverage:
        """Raises JudgeUnavailable when the judge cannot be reached."""
        base = verify_messages(item.question, facts.facts, response)
        max_attempts = self.client.config.parse_attempts
        cov = Coverage()
        messages = list(base)
        reason: str | None = None
        for attempt in range(1, max_attempts + 1):
            cov.attempts = attempt
            result = self.client.call("verify", messages, CoverageReport, prompt_version=self.prompt_version)
            cov.calls.append(result)
            parsed, reason = result.parse(CoverageReport)
            if parsed is not None:
                reason = id_problem(parsed, facts.ids)
                if reason is None:
                    cov.verdicts = build_verdicts(facts, parsed, response)
                    return cov
            messages = [*base, retry_note(attempt + 1, max_attempts, reason or "invalid", facts.ids)]
        cov.reason = f"{reason} (after {max_attempts} attempt(s))"
        return cov
