"""Tests of naru_eval.cli."""
