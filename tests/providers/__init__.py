"""Tests of naru_eval.providers."""
