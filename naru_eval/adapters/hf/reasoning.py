"""A reasoning model's response: the reasoning kept apart from the answer, never read as one.

A reasoning model writes ``<think>reasoning</think>answer``. :func:`think_split` gives the
response text the extractor scores: ``<think>\nreasoning\n</think>\n\nanswer`` (the task's stop
strings cut the answer only), or an open ``<think>\nreasoning`` when the token budget ran out
before the reasoning closed, which the extractor scores invalid (``unfinished_reasoning``),
never a letter read from inside the reasoning. :func:`answer_of` reads the ``<answer>…</answer>``
a model (GLM-4.1V-Thinking) puts its answer in. Split on the tokens themselves where they are one
token each: they are special tokens, which plain decoding drops.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from naru_eval.adapters.hf.builder import cut_at_stops
from naru_eval.core.json_types import JSON

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


def token_id(tokenizer: PreTrainedTokenizerBase, token: str) -> int | None:
    """The id of ``token`` when the vocabulary has it as one token."""
    tid = tokenizer.convert_tokens_to_ids(token)
    if tid is None or isinstance(tid, list) or (tokenizer.unk_token_id is not None and tid == tokenizer.unk_token_id):
        return None
    return int(tid)


def think_split(tok: PreTrainedTokenizerBase, new_ids: list[int], until: JSON, answer_tags: bool = False) -> str:
    """``<think>reasoning</think>answer`` of generated ids (the task's stops cut the answer only),
    or an open ``<think>reasoning`` when the budget ran out before the reasoning closed; split on
    the ``</think>`` token itself where it is one (a special token, which plain decoding drops).
    ``answer_tags``: the answer is what the model put inside ``<answer>…</answer>`` (:func:`answer_of`)."""
    close_id, open_id = (token_id(tok, t) for t in (THINK_CLOSE, THINK_OPEN))

    def text(ids: list[int]) -> str:
        return str(tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))

    if close_id is not None:  # split on the token: decoding may drop special tokens
        ids = [i for i in new_ids if i != open_id] if open_id is not None else list(new_ids)
        if close_id in ids:
            cut = ids.index(close_id)
            after = ids[cut + 1 :]
            reasoning, answer = text(ids[:cut]), answer_of(tok, after) if answer_tags else text(after)
        else:
            reasoning, answer = text(ids), None
    else:  # not a single token, so not special: it survives decoding
        full = text(list(new_ids)).replace(THINK_OPEN, "")
        reasoning, sep, rest = full.partition(THINK_CLOSE)
        answer = rest if sep else None
    reasoning = reasoning.replace(THINK_CLOSE, "").strip()
    if answer is None:
        return f"{THINK_OPEN}\n{reasoning}"
    if answer_tags and close_id is None:
        answer = answer_tag(answer)
    read = cut_at_stops(answer.strip(), until)
    return f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n{read}"


def answer_of(tok: PreTrainedTokenizerBase, ids: list[int]) -> str:
    """The answer in generated ``ids``: between ``<answer>`` and ``</answer>`` where they are tokens
    of their own (an unclosed one: to the end), else the text with its answer tag read
    (:func:`answer_tag`); no tag at all: the text as it is."""
    open_a, close_a = token_id(tok, ANSWER_OPEN), token_id(tok, ANSWER_CLOSE)
    if open_a is not None and open_a in ids:
        ids = ids[ids.index(open_a) + 1 :]
        if close_a is not None and close_a in ids:
            ids = ids[: ids.index(close_a)]
        return str(tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)).strip()
    return answer_tag(str(tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)))


def answer_tag(answer: str) -> str:
    """The text inside ``<answer>…</answer>`` (an unclosed tag: to the end), or ``answer`` as it
    is when the model wrote no tag."""
    m = re.search(re.escape(ANSWER_OPEN) + r"(.*?)(?:" + re.escape(ANSWER_CLOSE) + r"|$)", answer, flags=re.S)
    return m.group(1).strip() if m else answer.strip()
