"""naru-eval: the NARU benchmark (Japanese long-video narrative and cultural understanding) on lmms-eval.

The package is layered (docs/architecture.md): ``core`` (data, prompts, extraction, scoring),
``media`` (video sampling), ``store`` (SQLite stores), ``api`` (retry, prices),
``providers.gemini``, ``judge`` (open-ended judging), ``lmms`` (the lmms-eval bridge), ``report``
(leaderboard, statistics, diagnostics) and ``cli`` (``naru-eval``). The public API below is
imported lazily: ``import naru_eval`` loads nothing else.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING, Any

try:
    __version__ = metadata.version("naru-eval")
except metadata.PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0.1.0"

#: public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    "NaruQuestion": "naru_eval.core.data",
    "Dataset": "naru_eval.core.data",
    "load_local": "naru_eval.core.data",
    "load_dataset_from_env": "naru_eval.core.hub",
    "ScoredSample": "naru_eval.core.scoring",
    "score_response": "naru_eval.core.scoring",
    "compute_metrics": "naru_eval.core.scoring",
    "samples_from_log": "naru_eval.core.scoring",
    "METRICS": "naru_eval.core.scoring",
    "extract_answer": "naru_eval.core.extract",
    "run_lmms_eval": "naru_eval.lmms.run",
    "build_leaderboard": "naru_eval.report.leaderboard",
    "bootstrap_ci": "naru_eval.report.stats",
}

__all__ = [
    "METRICS",
    "Dataset",
    "NaruQuestion",
    "ScoredSample",
    "__version__",
    "bootstrap_ci",
    "build_leaderboard",
    "compute_metrics",
    "extract_answer",
    "load_dataset_from_env",
    "load_local",
    "run_lmms_eval",
    "samples_from_log",
    "score_response",
]

if TYPE_CHECKING:
    from naru_eval.core.data import Dataset, NaruQuestion, load_local
    from naru_eval.core.extract import extract_answer
    from naru_eval.core.hub import load_dataset_from_env
    from naru_eval.core.scoring import METRICS, ScoredSample, compute_metrics, samples_from_log, score_response
    from naru_eval.lmms.run import run_lmms_eval
    from naru_eval.report.leaderboard import build_leaderboard
    from naru_eval.report.stats import bootstrap_ci


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'naru_eval' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
