"""The answer extractor against real-world response styles (>= 40 rows)."""

import pytest

from naru_eval.core.extract import INVALID_KINDS, VALID_METHODS, extract_answer

OPTIONS = (
    "The host bows and apologises",
    "The guest laughs loudly",
    "The host changes the topic",
    "Nobody reacts",
)

# (response, expected letter or None, expected method)
CASES = [
    # bare letters and markup
    ("C", "C", "bare"),
    ("C.", "C", "bare"),
    (" (C) ", "C", "bare"),
    ("[C]", "C", "bare"),
    ("**C**", "C", "bare"),
    ("c", "C", "bare"),
    ("Ｃ", "C", "bare"),
    ("（Ｃ）", "C", "bare"),
    ("C\n", "C", "bare"),
    ("`B`", "B", "bare"),
    ("D!", "D", "bare"),
    # explicit statements
    ("The answer is C.", "C", "explicit"),
    ("Answer: C", "C", "explicit"),
    ("answer: (b)", "B", "explicit"),
    ("The correct answer is (D) because the host stays silent.", "D", "explicit"),
    ("Final answer: **B**", "B", "explicit"),
    ("A man enters the room and sits down, so the answer is C.", "C", "explicit"),
    ("Based on the video, the best answer is B, since the guest laughs.", "B", "explicit"),
    ("The best option is D.", "D", "explicit"),
    ("I would choose C.", "C", "explicit"),
    ("Option B is correct.", "B", "explicit"),
    ("C is the correct answer.", "C", "explicit"),
    ("答えはCです。", "C", "explicit"),
    ("答え：Ｂ", "B", "explicit"),
    ("正解は（Ｄ）です", "D", "explicit"),
    ("回答: A", "A", "explicit"),
    ("Cが正解です。", "C", "explicit"),
    ("<think>Maybe A? No, the host apologised.</think>The answer is A", "A", "explicit"),
    ("Answer is A. Final answer: C", "C", "explicit"),
    ("The answer is A. Yes, the answer is A.", "A", "explicit"),
    # leading letter followed by text
    ("C. The host changes the topic", "C", "leading"),
    ("(B) The guest laughs loudly", "B", "leading"),
    ("D) Nobody reacts", "D", "leading"),
    ("B: the guest laughs", "B", "leading"),
    ("**A** The host bows and apologises", "A", "leading"),
    ("Ａ．お辞儀をして謝る", "A", "leading"),
    # a marked letter inside prose
    ("Looking at the scene, (B) fits best.", "B", "marked"),
    ("I think option D fits the mood.", "D", "marked"),
    # option text quoted
    ("The host changes the topic.", "C", "option_text"),
    ("In the video, nobody reacts at all.", "D", "option_text"),
    ("the guest laughs loudly", "B", "option_text"),
    # stray standalone capital
    ("I think it's C", "C", "stray"),
    ("Probably D", "D", "stray"),
    # the article "A" is not an option letter
    ("A man walks in and the crowd cheers.", None, "invalid:no_letter"),
    ("A", "A", "bare"),
    # invalid answers
    ("", None, "invalid:empty"),
    ("   \n ", None, "invalid:empty"),
    (None, None, "invalid:empty"),
    ("[LMMS_EVAL_REQUEST_FAILED after 5 retries] 429", None, "invalid:failed"),
    ("[NARU_REQUEST_FAILED] timeout", None, "invalid:failed"),
    ("I'm sorry, but I cannot determine the answer from the video.", None, "invalid:refusal"),
    ("I can't see the video, so I am unable to answer.", None, "invalid:refusal"),
    ("わかりません", None, "invalid:refusal"),
    ("None of the options are correct.", None, "invalid:none_of_options"),
    ("The answer is E.", None, "invalid:off_option"),
    ("E", None, "invalid:off_option"),
    ("Either (A) or (C).", None, "invalid:ambiguous"),
    ("The answer is A or the answer is B", None, "invalid:ambiguous"),
    ("Hmm, the video is interesting.", None, "invalid:no_letter"),
    ("B or C", None, "invalid:ambiguous"),
]


def test_table_is_large():
    assert len(CASES) >= 40


@pytest.mark.parametrize(("response", "letter", "method"), CASES)
def test_extract(response, letter, method):
    got = extract_answer(response, OPTIONS)
    assert (got.letter, got.method) == (letter, method)


def test_methods_are_declared():
    for _, letter, method in CASES:
        if letter is None:
            assert method.split(":", 1)[1] in INVALID_KINDS
        else:
            assert method in VALID_METHODS


def test_deterministic():
    for response, *_ in CASES:
        assert extract_answer(response, OPTIONS) == extract_answer(response, OPTIONS)


def test_option_text_needs_options():
    assert extract_answer("The host changes the topic.").letter is None


# A reasoning model's completion (e.g. naru_nemotron_omni): the letter is read after the reasoning.
REASONING_CASES = [
    # a letter inside a finished reasoning never counts
    ("<think>The answer is A, surely. Option (B)? No.</think>\n\nC", "C", "bare"),
    ("<think>答えはAです。</think>The answer is D.", "D", "explicit"),
    # the chat template opened the reasoning in the prompt: only what follows </think> is read
    ("The answer is A... wait, the host apologised.</think>\nThe answer is B", "B", "explicit"),
    ("first A</think>maybe</think>(C)", "C", "bare"),
    # the budget ran out while reasoning: no answer, even with a letter in the reasoning
    ("<think>The answer is B. Let me double-check the second scene", None, "invalid:unfinished_reasoning"),
    ("<think>x</think>A<think>but then", None, "invalid:unfinished_reasoning"),
    # reasoning finished, nothing after it
    ("<think>The answer is C.</think>", None, "invalid:empty"),
    ("<THINK>It is A.</THINK>B", "B", "bare"),
]


@pytest.mark.parametrize(("response", "letter", "method"), REASONING_CASES)
def test_reasoning_is_never_read(response, letter, method):
    got = extract_answer(response, OPTIONS)
    assert (got.letter, got.method) == (letter, method)
    if letter is None:
        assert method.split(":", 1)[1] in INVALID_KINDS


def test_strip_reasoning():
    from naru_eval.core.extract import strip_reasoning

    assert strip_reasoning("<think>a</think> B") == " B"
    assert strip_reasoning("a</think>B") == "B"
    assert strip_reasoning("<think>a") is None
    assert strip_reasoning("plain C") == "plain C"
