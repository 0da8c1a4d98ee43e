"""The chat content part every adapter writes the prompt as: ``{"type": "text", "text": ...}``, the
same in the HF chat templates (``naru_eval.adapters.hf.base``) and on the OpenAI wire
(``naru_eval.providers.openai_compat.wire``)."""

from __future__ import annotations

from typing import Literal, TypedDict


class TextPart(TypedDict):
    """The prompt (or a system message) as a chat content part."""

    type: Literal["text"]
    text: str
