"""Thin bridge from the lmms-eval YAMLs into naru_eval; all logic lives in naru_eval.lmms_tasks."""

from naru_eval.lmms_tasks import (  # noqa: F401
    aggregate,
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    process_docs_500,
    process_docs_all,
    process_results,
)
