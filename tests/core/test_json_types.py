"""JSON as a type (naru_eval/core/json_types.py): the readers narrow as the builtins do, and a
foreign document (lmms-eval's results file) is walked without a crash on an odd level."""

from __future__ import annotations

import dataclasses

import pytest

from naru_eval.core.json_types import as_int, as_object, as_str, from_record, integer, member, number


def test_number_and_integer_read_what_float_and_int_read_and_refuse_the_rest():
    assert number(3) == 3.0 and number(2.5) == 2.5 and number("0.25") == 0.25
    assert integer(4) == 4 and integer(4.9) == 4 and integer("7") == 7
    for bad in (None, [1], {"a": 1}):
        with pytest.raises(TypeError):
            number(bad)
        with pytest.raises(TypeError):
            integer(bad)


def test_member_walks_a_document_and_gives_null_where_a_level_is_missing_or_not_an_object():
    doc = {"n-samples": {"naru_mcq": {"original": 9, "effective": 9}}, "config": "odd"}
    assert member(doc, "n-samples", "naru_mcq", "effective") == 9
    assert member(doc, "n-samples", "naru_open", "effective") is None
    assert member(doc, "config", "model") is None  # a string where an object should be
    assert as_object(member(doc, "n-samples")) == {"naru_mcq": {"original": 9, "effective": 9}}
    assert as_object(member(doc, "config")) == {}
    assert as_str("x") == "x" and as_str(1) is None
    assert as_int(3) == 3 and as_int(True) is None and as_int(3.0) is None


def test_from_record_builds_a_dataclass_from_its_own_record():
    @dataclasses.dataclass(frozen=True)
    class Rec:
        a: str
        b: int = 0

    assert from_record(Rec, {"a": "x", "b": 2, "score": 100.0}) == Rec("x", 2)  # unknown keys left out
    assert from_record(Rec, {"a": "x"}) == Rec("x")  # an older record: the default
    with pytest.raises(TypeError):
        from_record(Rec, {"b": 1})  # a required field missing
