"""Tests of naru_eval.core."""
