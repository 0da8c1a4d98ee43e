"""Tests of naru_eval.media."""
