"""Prompt text for the NARU tasks. Bump the tasks' ``metadata.version`` when this changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from naru_eval.core.data import LETTERS

DEFAULT_PRE_PROMPT = ""
DEFAULT_POST_PROMPT = "Answer with the option's letter (A, B, C or D) from the given choices directly."


def format_options(options: Sequence[str]) -> str:
    return "\n".join(f"({letter}) {text}" for letter, text in zip(LETTERS, options, strict=True))


def mcq_prompt(question: str, options: Sequence[str], kwargs: Mapping[str, str] | None = None) -> str:
    """Question, the four options as ``(A) ...``, and the answer instruction."""
    kwargs = kwargs or {}
    pre = kwargs.get("pre_prompt", DEFAULT_PRE_PROMPT)
    post = kwargs.get("post_prompt", DEFAULT_POST_PROMPT)
    body = f"{question}\n{format_options(options)}"
    return f"{pre}{body}\n{post}" if post else f"{pre}{body}"
