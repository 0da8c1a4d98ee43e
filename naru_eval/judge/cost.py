"""What judging costs: the arithmetic behind docs/judge.md (``naru-eval judge cost``).

The token counts are ASSUMPTIONS (prompt sizes measured on the prompts of this package with
~4 characters per token; outputs and hidden reasoning guessed for ``reasoning_effort=medium``);
``naru-eval judge score`` reports the measured usage and cost of a real run, which is the
number to trust. Reasoning tokens are billed as output tokens. The batch figures price the
verification calls at the Batch API's price (the standard price times the entry's
``batch_discount``; unknown without one); the decompositions stay live.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from naru_eval.judge.config import DEFAULT_MODEL, batch_factor, default_prices, price_for


@dataclass(frozen=True)
class TokenAssumptions:
    facts_input: int = 600  # system prompt ~230 + question and reference
    facts_output: int = 150  # ~5 facts as JSON
    facts_reasoning: int = 500
    verify_input: int = 900  # system prompt ~330 + question + facts + a response of ~300 tokens
    verify_output: int = 220  # ~5 verdicts with evidence spans
    verify_reasoning: int = 700
    minerva_input: int = 700
    minerva_output: int = 80
    minerva_reasoning: int = 400


class CostLine(BaseModel):
    """One kind of judge call: how many, their tokens, and their dollars live and in a batch."""

    calls: int
    input_tokens: int
    output_tokens: int
    usd: float | None
    batch_usd: float | None


class JudgeCostEstimate(BaseModel):
    """``naru-eval judge cost``: what judging ``n_models`` runs of ``n_questions`` costs."""

    model: str
    price_per_1M: dict[str, float] | None
    n_questions: int
    n_models: int
    assumptions: TokenAssumptions
    facts: CostLine
    verify: CostLine
    total_usd: float | None
    per_model_usd: float | None
    without_frozen_facts_usd: float | None
    batch_factor: float | None
    #: --batch: the verifications at the batch price, the (shared) decompositions live
    total_batch_usd: float | None
    per_model_batch_usd: float | None
    minerva: CostLine | None = None

    def to_json(self) -> str:
        """As ``--json`` prints it (``minerva`` only when asked for)."""
        return self.model_dump_json(indent=2, exclude={"minerva"} if self.minerva is None else None)


def estimate_cost(
    n_questions: int = 500,
    n_models: int = 8,
    model: str = DEFAULT_MODEL,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    tokens: TokenAssumptions = TokenAssumptions(),  # noqa: B008 - frozen
    minerva_k: int = 0,
) -> JudgeCostEstimate:
    """Calls, tokens and dollars of judging ``n_models`` runs. Without a price for ``model`` the
    dollar figures are None (unknown), never another model's price."""
    p = price_for(model, default_prices() if prices is None else prices)
    factor = None if p is None else batch_factor(p)

    def line(calls: int, tin: int, tout: int) -> CostLine:
        usd = None if p is None else calls * (tin * float(p["input"]) + tout * float(p["output"])) / 1e6
        batch = None if usd is None or factor is None else usd * factor
        return CostLine(calls=calls, input_tokens=calls * tin, output_tokens=calls * tout, usd=usd, batch_usd=batch)

    facts = line(n_questions, tokens.facts_input, tokens.facts_output + tokens.facts_reasoning)
    verify = line(n_questions * n_models, tokens.verify_input, tokens.verify_output + tokens.verify_reasoning)
    fusd, vusd, vbatch = facts.usd, verify.usd, verify.batch_usd
    return JudgeCostEstimate(
        model=model,
        price_per_1M=dict(p) if p is not None else None,
        n_questions=n_questions,
        n_models=n_models,
        assumptions=tokens,
        facts=facts,
        verify=verify,
        total_usd=None if fusd is None or vusd is None else fusd + vusd,
        per_model_usd=None if vusd is None or not n_models else vusd / n_models,
        without_frozen_facts_usd=None if fusd is None or vusd is None else fusd * n_models + vusd,
        batch_factor=factor,
        total_batch_usd=None if vbatch is None or fusd is None else fusd + vbatch,
        per_model_batch_usd=None if vbatch is None or not n_models else vbatch / n_models,
        minerva=line(
            n_questions * n_models * minerva_k, tokens.minerva_input, tokens.minerva_output + tokens.minerva_reasoning
        )
        if minerva_k
        else None,
    )
