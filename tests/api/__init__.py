"""Tests of naru_eval.api."""
