"""lmms-eval glue of ``naru_open`` (called through naru_eval.lmms.tasks and tasks/naru/utils.py).

Judging runs inside ``process_results``, which lmms-eval calls from a thread pool
(``--process_docs_parallel``, default 4) and retries on exceptions, so:

* the judge is one per process and per judge configuration (the environment), shared by the
  threads; at most ``NARU_JUDGE_CONCURRENCY`` requests are in flight;
* on the first call, every reference this process will score is decomposed at once
  (concurrently; not with ``NARU_JUDGE_PREFETCH=0``): the questions whose prompts it built, since
  lmms-eval builds them (``doc_to_text``) only for the docs it evaluates here, this rank's share
  and, with ``--limit``, only the first N. The facts are frozen in the store, so the other
  threads and every later run reuse them;
* every judge output is cached, so a retried ``process_results`` replays it: same payload, no
  new call;
* nothing judge-side raises: a judge that cannot be reached or whose output cannot be used
  makes the sample *unscored* (counted in ``unscored_rate``, never scored 0). The one
  exception is a configuration error (the first answered requests all refused with the same
  400/401/403/404): it stops the run with the API's message; answers are in the response store
  and outputs in the judge cache, so the rerun after the fix loses nothing.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace

from naru_eval.api.retry import ConfigurationError
from naru_eval.core import provenance
from naru_eval.core.doc import NaruDoc, question_of
from naru_eval.core.json_types import JSONMapping, as_str
from naru_eval.core.metrics import Payload
from naru_eval.core.sharding import world_size_from_env
from naru_eval.judge.config import JudgeConfig, env_fingerprint
from naru_eval.judge.items import JudgeItem, open_prompt_question
from naru_eval.judge.pipeline import Judge
from naru_eval.judge.score import JudgedSample, open_payloads
from naru_eval.redaction import redact
from naru_eval.settings import settings

log = logging.getLogger("naru_eval.judge")


def _info(msg: str) -> None:
    """To lmms-eval's log (loguru) when it is there, else to logging."""
    try:
        from loguru import logger

        logger.info(msg)
    except ImportError:  # pragma: no cover - loguru comes with lmms-eval
        log.info(msg)


DEFAULT_POST_PROMPT = "Answer the question in a few sentences, based on the video."

_lock = threading.Lock()
_items: list[JudgeItem] = []
_judges: dict[tuple[tuple[str, str], ...], Judge] = {}  # env_fingerprint() -> the judge
_prefetched: set[tuple[int, int]] = set()  # (id of the judge, number of items) already decomposed
_prompted: set[str] = set()  # question ids whose prompts this process built (lmms-eval's doc_to_text)


def register_items(items: Sequence[JudgeItem]) -> None:
    """The questions of the task, in doc order (process_docs): decomposed in one batch later."""
    with _lock:
        _items[:] = list(items)
        _prefetched.clear()
        _prompted.clear()


def _items_to_prefetch() -> list[JudgeItem]:
    """The registered questions whose prompts this process built, in doc order."""
    with _lock:
        return [i for i in _items if i.question_id in _prompted]


def get_judge() -> Judge:
    """The process's judge for the current environment (built once, thread-safe)."""
    key = env_fingerprint()
    with _lock:
        judge = _judges.get(key)
        if judge is None:
            judge = _judges[key] = Judge(JudgeConfig.from_env())
            _info(redact(f"naru judge: {judge.describe().model_dump()}"))  # a base URL may carry ?key=
        return judge


def prefetch_enabled() -> bool:
    """Batch decomposition of the questions this process evaluates, unless ``NARU_JUDGE_PREFETCH=0``
    (then facts come one by one). A ``--limit`` run prefetches its N questions only."""
    return settings().judge_prefetch


def _ensure_prefetch(judge: Judge) -> None:
    if not prefetch_enabled():
        return
    items = _items_to_prefetch()
    key = (id(judge), len(items))
    with _lock:
        if key in _prefetched:
            return
        _prefetched.add(key)
    if items:
        judge.prefetch_facts(items)


def open_prompt(doc: NaruDoc, kwargs: Mapping[str, str] | None = None) -> str:
    question = question_of(doc)
    with _lock:
        _prompted.add(question.question_id)
    kwargs = kwargs or {}
    pre = kwargs.get("pre_prompt", "")
    post = kwargs.get("post_prompt", DEFAULT_POST_PROMPT)
    body = open_prompt_question(question)
    return f"{pre}{body}\n{post}" if post else f"{pre}{body}"


def item_of(doc: NaruDoc) -> JudgeItem:
    return JudgeItem.from_question(question_of(doc))


def judge_doc(doc: NaruDoc, results: Sequence[object]) -> dict[str, Payload]:
    response = results[0] if results else None
    if response is not None and not isinstance(response, str):
        response = str(response)
    item = item_of(doc)
    try:
        judge = get_judge()
        _ensure_prefetch(judge)
        sample = judge.judge(item, response)
    except ConfigurationError:
        raise  # a wrong key, model or setting: stop the run with the API's message
    except Exception as e:  # never let lmms-eval retry-and-crash the run over the judge
        log.error("naru judge: %s could not be judged:\n%s", item.question_id, traceback.format_exc())
        sample = replace(JudgedSample.unscored(item, response), reason=f"judge error: {type(e).__name__}: {e}")
    # the data the question came from and what the model was given, as the MCQ payloads record them
    return open_payloads(
        sample.with_provenance(
            as_str(doc.get("data_fingerprint")) or None,
            provenance.current(as_str(doc.get("video_id")), as_str(doc.get("question_id"))),
            world_size_from_env(),
        )
    )


def log_run_summary(items: Sequence[JSONMapping]) -> None:
    """Log the judge's usage and cost (called from the aggregation)."""
    with _lock:
        judges = list(_judges.values())
    for j in judges:
        _info(f"naru judge usage: {j.ledger.summary().model_dump()}")
