"""The one answer extractor: read an option letter A-D from a free-text model response.

Deterministic and conservative. It never guesses: a response no letter can be read from
is returned as invalid (``letter=None``) with a reason, and the scorer counts it wrong and
in ``invalid_rate``. Rules, in priority order:

0. reasoning is never read: ``<think>...</think>`` blocks are dropped, a completion that starts
   inside a reasoning the chat template opened ("...</think>C") keeps what follows the last
   ``</think>``, and a reasoning that never closed (``<think>`` left open: the generation budget
   ran out while thinking) has no answer -> invalid ("unfinished_reasoning");
1. empty, failure markers (``[LMMS_EVAL_REQUEST_FAILED...]``, ``[NARU_REQUEST_FAILED...]``)
   -> invalid;
2. explicit statements ("the answer is C", "Answer: (C)", "答えはC", "正解：Ｃ",
   "option C is correct") -> that letter; several different letters -> the last
   "final answer" statement, else invalid (ambiguous);
3. the whole response is one marked letter ("C", "(C)", "**C**", "C.", "[C]");
4. a leading letter with a delimiter ("C. ...", "(C) ...", "C) ...", "C: ...");
5. refusals and "none of the options" -> invalid;
6. one letter marked as an option anywhere ("(C)", "**C**", "option C");
7. the response quotes exactly one option's text;
8. exactly one stray standalone capital B/C/D (or "A" not used as an article).

Text is NFKC-normalised first, so full-width letters and brackets work.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

LETTERS = "ABCD"

#: Methods a valid extraction can report, strongest first.
VALID_METHODS = ("explicit", "bare", "leading", "marked", "option_text", "stray")
#: Reasons an extraction is invalid.
INVALID_KINDS = (
    "empty",
    "failed",
    "refusal",
    "none_of_options",
    "off_option",
    "ambiguous",
    "no_letter",
    "unfinished_reasoning",
)

FAILURE_MARKERS = ("[LMMS_EVAL_REQUEST_FAILED", "[NARU_REQUEST_FAILED")
#: The method of a letter read by the opt-in LLM fallback (naru_eval.judge.mcq_fallback), not
#: by these rules; only with NARU_MCQ_LLM_FALLBACK=1.
LLM_FALLBACK_METHOD = "llm_fallback"


class Extraction(NamedTuple):
    """Result of reading one response: ``letter`` is None when invalid."""

    letter: str | None
    method: str  # one of VALID_METHODS, or "invalid:<kind>"

    @property
    def valid(self) -> bool:
        return self.letter is not None


def _invalid(kind: str) -> Extraction:
    return Extraction(None, f"invalid:{kind}")


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)


def strip_reasoning(response: str) -> str | None:
    """The answer part of ``response``, or None when its reasoning never finished.

    Closed ``<think>...</think>`` blocks are removed; an opening tag left open means the model
    was still reasoning when generation stopped, so there is no answer; a closing tag with no
    opening one (the chat template opened the reasoning in the prompt) keeps what follows it,
    as lmms-eval's ``strip_reasoning_tags`` does."""
    text = _THINK.sub("", response)
    if _THINK_OPEN.search(text):
        return None
    closes = list(_THINK_CLOSE.finditer(text))
    return text[closes[-1].end() :] if closes else text


# A letter that is not part of a longer Latin word. Japanese text has no word boundaries,
# so lookarounds on ASCII letters are used instead of \b.
_L = r"(?<![A-Za-z])([A-Ea-e])(?![A-Za-z])"
_OPEN = r"[\(\[\{<（【「『\*\"'“‘_`]*"
_CLOSE = r"[\)\]\}>）】」』\*\"'”’_`]*"

_EXPLICIT_EN = re.compile(
    r"(?:(?:final|correct|best|right)\s+)?answer"
    r"(?:\s+(?:is|would\s+be|will\s+be|should\s+be|must\s+be))?"
    r"\s*(?:[:：=]\s*)?(?:probably\s+|likely\s+|most\s+likely\s+)?"
    r"(?:option\s+|choice\s+|letter\s+)?"
    + _OPEN
    + _L
    + _CLOSE
    + r"|(?:correct|right|best)\s+(?:option|choice)\s*(?:is|would\s+be|:|：)\s*"
    + _OPEN
    + _L
    + _CLOSE,
    re.I,
)
_EXPLICIT_SELECT = re.compile(
    r"(?:I\s+(?:would\s+)?(?:choose|pick|select|go\s+with)|I'?d\s+(?:choose|pick|select|go\s+with))"
    r"\s+(?:option\s+|choice\s+)?" + _OPEN + _L + _CLOSE,
    re.I,
)
_EXPLICIT_IS_CORRECT = re.compile(
    r"(?:option|choice)?\s*"
    + _OPEN
    + r"(?<![A-Za-z])([A-E])(?![A-Za-z])"
    + _CLOSE
    + r"\s*(?:is|would\s+be)\s+(?:the\s+)?(?:correct|right|best)(?:\s+(?:answer|option|choice))?",
)
_EXPLICIT_JA = re.compile(
    r"(?:答え|正解|回答|解答|選択肢|最終回答|答)\s*(?:は|:|：|=)?\s*(?:選択肢)?\s*"
    + _OPEN
    + r"(?<![A-Za-z])([A-E])(?![A-Za-z])"
    + _CLOSE
)
_EXPLICIT_JA_POST = re.compile(
    _OPEN + r"(?<![A-Za-z])([A-E])(?![A-Za-z])" + _CLOSE + r"\s*(?:が正解|が正しい|が答え|です|を選びます|を選択)"
)
_FINAL = re.compile(r"(?:final\s+answer|最終回答|最終的な答え)", re.I)

_BARE = re.compile(r"^\s*" + _OPEN + r"([A-Ea-e])" + _CLOSE + r"\s*[\.。:：!！]?\s*$")
_LEADING = re.compile(
    r"^\s*(?:"
    r"[\(\[（【]([A-E])[\)\]）】]"  # (C) ...
    r"|\*\*([A-E])\*\*"  # **C** ...
    r"|([A-E])\s*[\.\)\]:：、．）]"  # C. / C) / C: ...
    r")"
)
_MARKED = re.compile(
    r"[\(（\[【]([A-E])[\)）\]】]"  # (C)
    r"|\*\*([A-E])\*\*"  # **C**
    r"|(?:option|choice)\s+" + r"(?<![A-Za-z])([A-E])(?![A-Za-z])",
    re.I,
)
_STRAY = re.compile(r"(?<![A-Za-z'’])([A-E])(?![A-Za-z'’])")
_REFUSAL = re.compile(
    r"(?:I\s*(?:cannot|can't|can’t|am\s+unable\s+to|'m\s+unable\s+to|am\s+not\s+able\s+to|"
    r"do\s+not\s+have|don't\s+have|don’t\s+have)\s+(?:\w+\s+){0,4}?"
    r"(?:answer|determine|tell|see|access|view|watch|help|provide|know)"
    r"|as\s+an\s+ai|not\s+possible\s+to\s+(?:determine|answer|tell)"
    r"|insufficient\s+information|not\s+enough\s+information"
    r"|わかりません|分かりません|判断できません|答えられません|回答できません)",
    re.I,
)
_NONE_OF = re.compile(
    r"(?:none\s+of\s+(?:the\s+)?(?:above|options|choices|answers)|no\s+correct\s+(?:answer|option)"
    r"|neither\s+of|どれも|いずれも(?:正しく|当てはまら)|該当なし)",
    re.I,
)


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _squash(text: str) -> str:
    """Lower-case, NFKC, punctuation and whitespace removed: for option-text matching."""
    text = _norm(text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def _letters(matches: Sequence[re.Match[str]]) -> list[str]:
    out = []
    for m in matches:
        letter = next(g for g in m.groups() if g)
        out.append(letter.upper())
    return out


def _decide(letters: list[str]) -> Extraction | None:
    """One distinct letter -> it; an off-option letter -> invalid; several -> None."""
    distinct = set(letters)
    if len(distinct) != 1:
        return None
    (letter,) = distinct
    if letter not in LETTERS:
        return _invalid("off_option")
    return Extraction(letter, "")


def _explicit(text: str) -> Extraction | None:
    found: list[tuple[int, str, bool]] = []  # (position, letter, is_final)
    for pattern in (_EXPLICIT_EN, _EXPLICIT_SELECT, _EXPLICIT_IS_CORRECT, _EXPLICIT_JA, _EXPLICIT_JA_POST):
        for m in pattern.finditer(text):
            letter = next(g for g in m.groups() if g)
            # A lower-case "a" after "answer is" is the article ("the answer is a man ..."),
            # unless it stands alone.
            if letter.islower():
                tail = text[m.end() :]
                if re.match(r"\s+[A-Za-z]", tail) or not re.match(r"\s*(?:[\.\)\]。]|$)", tail):
                    continue
            prefix = text[max(0, m.start() - 20) : m.start() + 20]
            found.append((m.start(), letter.upper(), bool(_FINAL.search(prefix))))
    if not found:
        return None
    found.sort()
    decided = _decide([letter for _, letter, _ in found])
    if decided is not None:
        return decided._replace(method="explicit") if decided.valid else decided
    finals = [letter for _, letter, is_final in found if is_final]
    if finals:
        last = finals[-1]
        if last not in LETTERS:
            return _invalid("off_option")
        return Extraction(last, "explicit")
    return _invalid("ambiguous")


def extract_answer(response: str | None, options: Sequence[str] | None = None) -> Extraction:
    """Read the option letter from ``response``; ``options`` enables option-text matching."""
    if response is None:
        return _invalid("empty")
    if any(marker in response for marker in FAILURE_MARKERS):
        return _invalid("failed")
    answer = strip_reasoning(response)
    if answer is None:
        return _invalid("unfinished_reasoning")
    text = _norm(answer).strip()
    if not text:
        return _invalid("empty")

    explicit = _explicit(text)
    if explicit is not None:
        return explicit

    m = _BARE.match(text)
    if m:
        letter = m.group(1).upper()
        return Extraction(letter, "bare") if letter in LETTERS else _invalid("off_option")

    m = _LEADING.match(text)
    if m:
        letter = next(g for g in m.groups() if g)
        return Extraction(letter, "leading") if letter in LETTERS else _invalid("off_option")

    if _NONE_OF.search(text):
        return _invalid("none_of_options")
    if _REFUSAL.search(text):
        return _invalid("refusal")

    marked = _letters(list(_MARKED.finditer(text)))
    if marked:
        decided = _decide(marked)
        if decided is None:
            return _invalid("ambiguous")
        return decided._replace(method="marked") if decided.valid else decided

    if options:
        squashed = _squash(text)
        hits = [LETTERS[i] for i, option in enumerate(options[:4]) if _squash(option) and _squash(option) in squashed]
        if len(hits) == 1:
            return Extraction(hits[0], "option_text")
        if len(hits) > 1:
            # One option's text can contain another's; prefer the longest if it is unique.
            longest = max(len(_squash(options[LETTERS.index(h)])) for h in hits)
            top = [h for h in hits if len(_squash(options[LETTERS.index(h)])) == longest]
            if len(top) == 1:
                return Extraction(top[0], "option_text")
            return _invalid("ambiguous")

    stray = []
    for m in _STRAY.finditer(text):
        letter = m.group(1)
        # "A" followed by a word is the English article, not an option.
        if letter == "A" and re.match(r"\s+[A-Za-z]", text[m.end() :]):
            continue
        # "I" and sentence-initial capitals are not candidates: only A-E reach here anyway.
        stray.append(letter)
    if stray:
        decided = _decide(stray)
        if decided is None:
            return _invalid("ambiguous")
        return decided._replace(method="stray") if decided.valid else decided
    return _invalid("no_letter")
