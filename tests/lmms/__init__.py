"""Tests of naru_eval.lmms."""
