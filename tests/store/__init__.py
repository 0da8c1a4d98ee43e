"""Tests of naru_eval.store."""
