"""What the lmms-eval task YAMLs call (through ``tasks/naru/utils.py``, a thin bridge).

The YAMLs point lmms-eval at a one-row placeholder file; ``process_docs`` replaces it with the
real NARU questions from ``NARU_DATA_DIR`` / ``NARU_HF_DATASET``, after the preflight has
checked the schema and every video. A failed preflight raises one error listing every problem
before any inference.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from naru_eval.data import Dataset, NaruQuestion
from naru_eval.prompts import mcq_prompt
from naru_eval.scoring import aggregate_score, metric_payloads, score_response
from naru_eval.sharding import order_for_ranks, world_size_from_env
from naru_eval.subset import select_subset
from naru_eval.validate import ValidationReport, validate


@functools.lru_cache(maxsize=4)
def _preflight(env_key: tuple[str | None, ...]) -> ValidationReport:
    """Load and preflight once per process and data source. The report is cached even when it
    failed: lmms-eval retries a failing dataset load five times, and the answer will not change."""
    return validate(videos=os.environ.get("NARU_SKIP_VIDEO_CHECK", "") not in ("1", "true"))


def load_preflighted() -> Dataset:
    keys = ("NARU_DATA_DIR", "NARU_HF_DATASET", "NARU_HF_SPLIT", "NARU_VIDEO_DIR", "NARU_SKIP_VIDEO_CHECK")
    report = _preflight(tuple(os.environ.get(k) for k in keys))
    report.raise_for_problems()
    assert report.dataset is not None
    return report.dataset


def _to_hf(dataset: Dataset, questions: list[NaruQuestion]) -> Any:
    import datasets  # lazy

    rows = []
    for q in questions:
        doc = q.to_doc()
        path = dataset.video_file(q)
        doc["video"] = str(path) if path is not None else None
        doc["level"] = q.level
        rows.append(doc)
    return datasets.Dataset.from_list(rows)


def process_docs_all(_placeholder: Any) -> Any:
    dataset = load_preflighted()
    return _to_hf(dataset, order_for_ranks(dataset.questions, world_size_from_env()))


def process_docs_500(_placeholder: Any) -> Any:
    dataset = load_preflighted()
    return _to_hf(dataset, order_for_ranks(select_subset(dataset.questions), world_size_from_env()))


def doc_to_visual(doc: Mapping[str, Any]) -> list[str]:
    return [doc["video"]]


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, str] | None = None) -> str:
    return mcq_prompt(doc["question"], doc["options"], lmms_eval_specific_kwargs)


def doc_to_target(doc: Mapping[str, Any]) -> str:
    return doc["answer"]


def process_results(doc: Mapping[str, Any], results: list[Any]) -> dict[str, dict[str, Any]]:
    """Score one response; pure and thread-safe (lmms-eval runs it in a pool, with retries)."""
    response = results[0] if results else None
    if response is not None and not isinstance(response, str):
        response = str(response)
    return metric_payloads(score_response(NaruQuestion.from_doc(doc), response))


def aggregate(items: list[Mapping[str, Any]]) -> float | None:
    return aggregate_score(items)
