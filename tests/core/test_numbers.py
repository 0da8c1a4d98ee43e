"""The one number formatter (naru_eval.core.numbers)."""

import math

from naru_eval.core.numbers import fmt_ci, fmt_num


def test_fmt_num_missing_values_read_na():
    assert fmt_num(None) == "N/A" and fmt_num(math.nan) == "N/A" and fmt_num(None, signed=True) == "N/A"


def test_fmt_num_digits_sign_scale_suffix():
    assert fmt_num(12.345) == "12.3"
    assert fmt_num(0.5, 2) == "0.50"
    assert fmt_num(3.0, 1, signed=True) == "+3.0" and fmt_num(-3.0, 1, signed=True) == "-3.0"
    assert fmt_num(0.1234, 1, scale=100, suffix="%") == "12.3%"
    assert (
        fmt_ci([1.0, 2.24], 1) == "[1.0, 2.2]" and fmt_ci(None) == "" and fmt_ci([-1, 2], signed=True) == "[-1.0, +2.0]"
    )
