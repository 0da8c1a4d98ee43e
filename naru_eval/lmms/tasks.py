"""What the lmms-eval task YAMLs call (through ``tasks/naru/utils.py``, a thin bridge).

The YAMLs point lmms-eval at a one-row placeholder file; ``process_docs`` replaces it with the
real NARU questions from ``NARU_DATA_DIR`` / ``NARU_HF_DATASET``, after the preflight has
checked the schema and every video. A failed preflight raises one error listing every problem
before any inference.

The hooks take and give :class:`~naru_eval.core.doc.NaruDoc` rows: lmms-eval forces a question
through a ``datasets.Dataset`` row between ``process_docs`` and every other hook (and the
adapters), so each question is written once (:func:`~naru_eval.core.doc.to_doc`) and read back
once per hook that needs it typed (:func:`~naru_eval.core.doc.question_of`, ``run_fields``,
``rotation_of``); see naru_eval/core/doc.py. The payloads the hooks return and the aggregation
hooks follow the tasks' metric tables (naru_eval.core.metrics; the YAMLs' ``metric_list`` is
generated from them: naru_eval/lmms/metric_lists.py).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from naru_eval.core import provenance
from naru_eval.core.data import Dataset, NaruQuestion
from naru_eval.core.doc import NaruDoc, Rotation, question_of, rotation_of, run_fields, to_doc
from naru_eval.core.json_types import JSONMapping, JSONObject, as_str
from naru_eval.core.metrics import Payload, aggregate_score, aggregate_sum
from naru_eval.core.metrics import aggregate_macro as _aggregate_macro
from naru_eval.core.prompts import mcq_prompt
from naru_eval.core.scoring import MCQ, Fallback, ScoredSample, metric_payloads, score_response
from naru_eval.core.sharding import order_for_ranks, world_size_from_env
from naru_eval.core.subset import select_subset
from naru_eval.core.validate import ValidationReport, validate
from naru_eval.lmms.launch import check_launch
from naru_eval.settings import exit_on_user_error, settings

if TYPE_CHECKING:
    import datasets

Q = TypeVar("Q", bound=NaruQuestion)


@functools.lru_cache(maxsize=4)
def _preflight(env_key: tuple[str | None, ...]) -> ValidationReport:
    """Load and preflight once per process and data source. The report is cached even when it
    failed: lmms-eval retries a failing dataset load five times, and the answer will not change."""
    return validate(videos=not settings().skip_video_check)


def _preflight_report() -> ValidationReport:
    """The preflighted data; a bad setting or bad data stops lmms-eval with the message alone
    (exit status 2), not a traceback retried five times into ``RetryError[...]``."""
    with exit_on_user_error("naru preflight"):
        s = settings()
        report = _preflight((s.data_dir, s.hf_dataset, s.hf_split, s.video_dir, str(s.skip_video_check)))
        report.raise_for_problems()
    assert report.dataset is not None
    return report


def _to_hf(
    report: ValidationReport, questions: list[NaruQuestion], rotations: Mapping[str, Rotation] | None = None
) -> datasets.Dataset:
    """Docs for lmms-eval: the question, its video path, and its duration (from the annotation,
    else as the preflight read it from the container) so duration diagnostics need no data dir;
    and the data's fingerprint, which every payload records (the leaderboard's ``data`` column)."""
    import datasets  # lazy

    dataset = report.dataset
    assert dataset is not None
    rows: list[JSONObject] = []
    for q in questions:
        path = dataset.video_file(q)
        probed = report.paths.get(str(path)) or report.videos.get(q.video_id)
        rows.append(
            to_doc(
                q,
                video=str(path) if path is not None else None,
                data_fingerprint=dataset.fingerprint,
                duration_s=probed.duration_s if probed is not None else None,
                rotation=(rotations or {}).get(q.question_id),
            )
        )
    return datasets.Dataset.from_list(rows)


def _questions(report: ValidationReport) -> list[NaruQuestion]:
    assert report.dataset is not None
    return report.dataset.questions


def _for_ranks(questions: list[Q]) -> list[Q]:
    """``questions`` in the order that keeps each video on one rank (naru_eval.core.sharding),
    once the launch is checked: an ``accelerate launch`` that started fewer processes than its
    ``--num_processes`` stops here, before any compute (naru_eval.lmms.launch)."""
    check_launch()
    return order_for_ranks(questions, world_size_from_env())


def _subset_500(report: ValidationReport) -> list[NaruQuestion]:
    """The diagnostic subset, in the rank-balanced order."""
    return _for_ranks(select_subset(_questions(report)))


def process_docs_all(_placeholder: datasets.Dataset) -> datasets.Dataset:
    report = _preflight_report()
    return _to_hf(report, _for_ranks(_questions(report)))


def process_docs_500(_placeholder: datasets.Dataset) -> datasets.Dataset:
    report = _preflight_report()
    return _to_hf(report, _subset_500(report))


def doc_to_visual(doc: NaruDoc) -> list[str | None]:
    return [run_fields(doc).video]


def doc_to_text(doc: NaruDoc, lmms_eval_specific_kwargs: Mapping[str, str] | None = None) -> str:
    q = question_of(doc)
    return mcq_prompt(q.question, q.options, lmms_eval_specific_kwargs)


def doc_to_target(doc: NaruDoc) -> str:
    return question_of(doc).answer


def _response(results: Sequence[object]) -> str | None:
    response = results[0] if results else None
    return response if response is None or isinstance(response, str) else str(response)


def process_results(doc: NaruDoc, results: Sequence[object]) -> dict[str, Payload]:
    """Score one response; pure and thread-safe (lmms-eval runs it in a pool, with retries)."""
    response = _response(results)
    return metric_payloads(_score(doc, response))


def _score(doc: NaruDoc, response: str | None, input_mode: str | None = None) -> ScoredSample:
    """Score ``response``; ``input_mode`` overrides the adapter's (a blind task sends no media)."""
    prov = provenance.current(as_str(doc.get("video_id")), as_str(doc.get("question_id")))
    if input_mode is not None:
        prov["input_mode"] = input_mode
    return score_response(
        question_of(doc),
        response,
        data_fingerprint=run_fields(doc).data_fingerprint,
        fallback=mcq_fallback(),
        provenance=prov,
        world_size=world_size_from_env(),
    )


def mcq_fallback() -> Fallback | None:
    """The opt-in LLM fallback of MCQ extraction over the process's judge when
    ``NARU_MCQ_LLM_FALLBACK=1`` (docs/judge.md), else None: then nothing judge-side is imported
    (lmms-eval imports this bridge at start-up)."""
    if not settings().mcq_llm_fallback:
        return None
    from naru_eval.judge.mcq_fallback import fallback_for
    from naru_eval.lmms.open_task import get_judge

    return fallback_for(get_judge)


def stop_if_nothing_answered(items: Sequence[JSONMapping]) -> None:
    """Every aggregation's first step: a run whose every question failed (each request failed for
    good: a setting that cannot work, a server that never answered) ends here, exit 1, before
    lmms-eval writes a results file of nothing but failures that would read as a score. The
    failures are in the response store, asked again on the next run; the model's log says why."""
    if items and all(x.get("method") == "invalid:failed" or x.get("status") == "failed" for x in items):
        print(
            f"naru: every one of the run's {len(items)} questions failed (no request was answered; the model's "
            "log above says why), so no results are written. The failures are asked again on the next run.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)


def aggregate(items: Sequence[JSONMapping]) -> float | None:
    """A per-item mean (``accuracy``, a category, ``invalid_rate``): mean ``score``."""
    stop_if_nothing_answered(items)
    return aggregate_score(items)


def aggregate_macro(items: Sequence[JSONMapping]) -> float | None:
    """``overall``/``narrative``/``cultural``: the authors' mean of category means."""
    stop_if_nothing_answered(items)
    return _aggregate_macro(items, MCQ.overall)


# --------------------------------------------------------------------------- task variants
# Blind (no video) and circular (rotated options) variants; see naru_eval.core.variants.


@functools.lru_cache(maxsize=4)
def _preflight_text(env_key: tuple[str | None, ...]) -> ValidationReport:
    """The schema-only preflight of the blind tasks (they never open a video)."""
    return validate(videos=False)


def load_preflighted_text() -> Dataset:
    """The schema-checked dataset, videos not probed (blind tasks need none)."""
    s = settings()
    report = _preflight_text((s.data_dir, s.hf_dataset, s.hf_split, s.video_dir))
    report.raise_for_problems()
    assert report.dataset is not None
    return report.dataset


def _blind_to_hf(questions: list[NaruQuestion], fingerprint: str | None) -> datasets.Dataset:
    import datasets  # lazy

    # video None: no adapter can reach the video through the doc either
    return datasets.Dataset.from_list([to_doc(q, video=None, data_fingerprint=fingerprint) for q in questions])


def process_docs_blind_all(_placeholder: datasets.Dataset) -> datasets.Dataset:
    dataset = load_preflighted_text()
    return _blind_to_hf(_for_ranks(dataset.questions), dataset.fingerprint)


def process_docs_blind_500(_placeholder: datasets.Dataset) -> datasets.Dataset:
    dataset = load_preflighted_text()
    return _blind_to_hf(_for_ranks(select_subset(dataset.questions)), dataset.fingerprint)


def doc_to_visual_blind(doc: NaruDoc) -> list[str]:
    """No visual input: the model sees the prompt text only."""
    return []


def process_results_blind(doc: NaruDoc, results: Sequence[object]) -> dict[str, Payload]:
    """As :func:`process_results`, each payload marked ``blind: true``."""
    from naru_eval.core.variants import blind_payloads

    response = _response(results)
    return blind_payloads(_score(doc, response, input_mode="text"))


def process_docs_circular_500(_placeholder: datasets.Dataset) -> datasets.Dataset:
    """The 500-question subset, each question as four docs: its cyclic option rotations."""
    from naru_eval.core.variants import N_ROTATIONS, circular_questions

    report = _preflight_report()
    rotated = circular_questions(select_subset(_questions(report)))
    rotations = {
        rq.question_id: Rotation(base_question_id=base, rotation=k, n_rotations=N_ROTATIONS) for rq, base, k in rotated
    }
    return _to_hf(report, _for_ranks([rq for rq, _, _ in rotated]), rotations)


def process_results_circular(doc: NaruDoc, results: Sequence[object]) -> dict[str, Payload]:
    """Score one rotated doc; payloads carry ``base_question_id`` and ``rotation``."""
    from naru_eval.core.variants import circular_payloads

    rotation = rotation_of(doc)
    sample = _score(doc, _response(results))
    return circular_payloads(sample, rotation.base_question_id, rotation.rotation, rotation.n_rotations)


def aggregate_circular(items: Sequence[JSONMapping]) -> float | None:
    """``circular``: percent of questions right in all rotations (grouped by base_question_id)."""
    from naru_eval.core.variants import aggregate_circular as _agg

    stop_if_nothing_answered(items)
    return _agg(items)


# --------------------------------------------------------------------------- naru_open
# The open-ended task (no options), scored by the LLM judge; see naru_eval.judge, docs/judge.md.


def process_docs_open_500(_placeholder: datasets.Dataset) -> datasets.Dataset:
    """The 500-question subset; its references are registered for one batch decomposition."""
    from naru_eval.judge.items import JudgeItem
    from naru_eval.lmms.open_task import register_items

    report = _preflight_report()
    questions = _subset_500(report)  # the same docs, in the same order, as naru_mcq_500
    register_items([JudgeItem.from_question(q) for q in questions])
    return _to_hf(report, questions)


def doc_to_text_open(doc: NaruDoc, lmms_eval_specific_kwargs: Mapping[str, str] | None = None) -> str:
    """``open_question`` where the data has it, else ``question``; no options."""
    from naru_eval.lmms.open_task import open_prompt

    return open_prompt(doc, lmms_eval_specific_kwargs)


def doc_to_target_open(doc: NaruDoc) -> str:
    """``reference_answer`` where present, else the correct option's text."""
    from naru_eval.judge.items import reference_of

    return reference_of(question_of(doc))


def process_results_open(doc: NaruDoc, results: Sequence[object]) -> dict[str, Payload]:
    """Judge one response (facts, coverage, recall); thread-safe, replayed from the judge cache
    when lmms-eval retries it, and never raising over the judge (unscored instead)."""
    from naru_eval.lmms.open_task import judge_doc

    return judge_doc(doc, results)


def aggregate_open_mean(items: Sequence[JSONMapping]) -> float | None:
    """Mean ``score`` over the payloads that carry it (scored questions in scope), 0-1; None when
    the judge could not be reached for too many responses."""
    from naru_eval.judge.score import OPEN

    stop_if_nothing_answered(items)
    return OPEN.aggregate_as("mean", items)


def aggregate_open_macro(items: Sequence[JSONMapping]) -> float | None:
    """naru_open ``overall``/``narrative``/``cultural``: mean of the category mean recalls."""
    from naru_eval.judge.score import OPEN

    stop_if_nothing_answered(items)
    return OPEN.aggregate_as("macro", items)


def aggregate_open_sum(items: Sequence[JSONMapping]) -> float | None:
    """Sum of ``score``: ``n_scored``, ``n_unscored``."""
    stop_if_nothing_answered(items)
    return aggregate_sum(items)


def aggregate_open_cost(items: Sequence[JSONMapping]) -> float | None:
    """``judge_cost_usd`` (nominal verification cost of the run); logs the judge's usage.

    None (unknown) when a judge call has no price: lmms-eval prints it as ``N/A`` and writes
    ``null`` to results.json, never a partial sum shown as the total."""
    from naru_eval.lmms.open_task import log_run_summary

    stop_if_nothing_answered(items)
    log_run_summary(items)
    return aggregate_sum(items)
