"""Thin bridge from the lmms-eval YAMLs into naru_eval; all logic lives in naru_eval.lmms_tasks."""

from naru_eval.lmms_tasks import (  # noqa: F401
    aggregate,
    aggregate_circular,
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    doc_to_visual_blind,
    process_docs_500,
    process_docs_all,
    process_docs_blind_500,
    process_docs_blind_all,
    process_docs_circular_500,
    process_results,
    process_results_blind,
    process_results_circular,
)
