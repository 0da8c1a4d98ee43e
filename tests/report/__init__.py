"""Tests of naru_eval.report."""
