"""The judge pipeline: frozen facts -> one coverage call per response -> recall.

    judge = Judge(JudgeConfig.from_env())
    samples = judge.judge_many([(JudgeItem.from_question(q), response), ...])
    summarize(samples)

Thread-safe: ``judge`` may be called from lmms-eval's ``process_results`` pool; at most
``config.concurrency`` requests are in flight per process. Deterministic given the cache: a
repeated call replays cached outputs and returns the same sample. Judge-side failures never
raise: the sample is unscored with the reason.

With ``config.batch``, ``judge_many`` sends the verification calls as OpenAI Batch API jobs
(:mod:`naru_eval.judge.batch`); ``judge`` (one response, as ``process_results`` asks) stays live.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from naru_eval.judge.client import BatchMode, CallResult, Deferred, JudgeClient, JudgeUnavailable, UsageLedger
from naru_eval.judge.config import JudgeConfig, JudgeDescription
from naru_eval.judge.facts import FactSet, LLMDecomposer
from naru_eval.judge.items import JudgeItem, classify_response, is_abstention
from naru_eval.judge.prompts import MAX_RESPONSE_CHARS
from naru_eval.judge.protocols import MinervaReport
from naru_eval.judge.schemas import FactRecord
from naru_eval.judge.score import CallsUsage, JudgedSample, JudgeInfo, OpenReport, tally
from naru_eval.judge.verify import Coverage, LLMVerifier
from naru_eval.store.judge_cache import JudgeStore

if TYPE_CHECKING:
    from naru_eval.judge.offline import OfflineDecomposer, OfflineVerifier

log = logging.getLogger("naru_eval.judge")


def _calls_usage(calls: Iterable[CallResult]) -> CallsUsage:
    calls = list(calls)
    costs = [c.cost_usd for c in calls]
    known = [c for c in costs if c is not None]
    return {
        "calls": len(calls),
        "prompt_tokens": sum(int(c.usage.get("prompt_tokens") or 0) for c in calls),
        "completion_tokens": sum(int(c.usage.get("completion_tokens") or 0) for c in calls),
        "reasoning_tokens": sum(int(c.usage.get("reasoning_tokens") or 0) for c in calls),
        # nominal: what these outputs cost when asked, replayed from the cache or not (deterministic)
        "cost_usd": None if len(known) < len(costs) else round(sum(known), 8),
    }


class JudgeReportFile(BaseModel):
    """One ``<log>.report.json`` of ``naru-eval judge score``: the log, its scores file, the judge
    (:meth:`Judge.describe`), then the protocol's report's fields at the top level, as the file
    has always been written (:meth:`_flat`)."""

    log: str
    scores: str
    judge: JudgeDescription
    report: OpenReport | MinervaReport

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> Mapping[str, object]:
        out = handler(self)
        return {"log": out["log"], "scores": out["scores"], "judge": out["judge"], **out["report"]}


class Judge:
    def __init__(
        self,
        config: JudgeConfig,
        store: JudgeStore | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.store = store or JudgeStore(config.cache_path)
        self.ledger = UsageLedger()
        self.client: JudgeClient | None = None
        if config.backend == "openai":
            self.client = JudgeClient(config, self.store, ledger=self.ledger, sleep=sleep)
            fm = config.fact_model
            facts_client = (
                self.client
                if fm == config.model
                else JudgeClient(config.with_overrides(model=fm), self.store, ledger=self.ledger, sleep=sleep)
            )
            self.decomposer: LLMDecomposer | OfflineDecomposer = LLMDecomposer(facts_client, self.store)
            self.verifier: LLMVerifier | OfflineVerifier = LLMVerifier(self.client)
        else:
            from naru_eval.judge.offline import OfflineDecomposer, OfflineVerifier, resolve_kind

            kind = resolve_kind(config.backend)
            self.decomposer = OfflineDecomposer(self.store, kind)
            self.verifier = OfflineVerifier(kind)
        #: the Batch API jobs of the last batched judge_many (submitted, resumed)
        self.batch_jobs: dict[str, list[str]] = {"submitted": [], "resumed": []}
        self._warned_live = False
        self._facts: dict[tuple[str, str], FactSet] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    # -- description ------------------------------------------------------------------------
    @property
    def fact_model(self) -> str:
        return self.decomposer.model

    def describe(self) -> JudgeDescription:
        d = self.config.describe()
        if self.config.backend != "openai":  # no LLM: the model fields would mislead
            d = d.model_copy(update=dict(model=self.fact_model, base_url=None, temperature_note=None))
        return JudgeDescription(
            **d.model_dump(exclude={"fact_model"}),
            fact_model=self.fact_model,
            facts_prompt_version=self.decomposer.prompt_version,
            verify_prompt_version=self.verifier.prompt_version,
        )

    # -- step 1: facts -----------------------------------------------------------------------
    def facts(self, item: JudgeItem) -> FactSet:
        """The frozen facts of ``item`` (decomposed once; one thread per question does it)."""
        key = (item.question_id, item.ref_hash)
        hit = self._facts.get(key)
        if hit is not None:
            return hit
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            hit = self._facts.get(key)
            if hit is not None:
                return hit
            try:
                fs = self.decomposer.decompose(item)
            except JudgeUnavailable as e:
                # kept for this process only: a later run asks again
                fs = FactSet(
                    item.question_id,
                    item.ref_hash,
                    self.fact_model,
                    self.decomposer.prompt_version,
                    (),
                    f"judge unavailable: {e}",
                )
            if not fs.ok:
                log.warning("naru judge: no facts for %s (%s)", item.question_id, fs.reason)
            self._facts[key] = fs
            return fs

    def prefetch_facts(self, items: Sequence[JudgeItem]) -> dict[str, FactSet]:
        """Decompose every item's reference, ``concurrency`` at a time."""
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="naru-judge-facts") as ex:
            sets = list(ex.map(self.facts, items))
        return {fs.question_id: fs for fs in sets}

    # -- steps 2 and 3: one response --------------------------------------------------------
    def _prepared(self, item: JudgeItem, response: str | None) -> tuple[str, str, FactSet, bool]:
        """(kind, the text judged, the facts, whether the text was cut): what ``judge`` verifies."""
        kind, text = classify_response(response)
        fs = self.facts(item)
        truncated = len(text) > MAX_RESPONSE_CHARS
        return kind, text[:MAX_RESPONSE_CHARS] if truncated else text, fs, truncated

    def judge(self, item: JudgeItem, response: str | None) -> JudgedSample:
        if self.config.batch and not self._warned_live and (self.client is None or self.client.batch is None):
            self._warned_live = True  # one response at a time (inside lmms-eval): there is nothing to batch
            log.warning(
                "naru judge: NARU_JUDGE_BATCH applies to `naru-eval judge score`; judging one response at a "
                "time (inside lmms-eval) stays live, at the live price"
            )
        kind, text, fs, truncated = self._prepared(item, response)
        judge_info: JudgeInfo = {
            "backend": self.config.backend,
            "model": self.config.model if self.config.backend == "openai" else self.fact_model,
            "base_url": self.config.base_url if self.config.backend == "openai" else None,
            "fact_model": self.fact_model,
            "facts_prompt_version": self.decomposer.prompt_version,
            "verify_prompt_version": self.verifier.prompt_version,
            "settings": self.config.request_params() if self.config.backend == "openai" else {},
        }
        sample = replace(
            JudgedSample.unscored(item, response),
            abstention=kind == "answered" and is_abstention(text),
            response_truncated=truncated,
            judge=judge_info,
        )
        calls: list[CallResult] = []  # this response's verification calls (facts are shared: see the ledger)
        if not fs.ok:
            sample = replace(sample, reason=f"no facts: {fs.reason}")
        elif kind in ("empty", "failed"):
            verdicts: list[FactRecord] = [
                {"id": i, "text": t, "verdict": "not_covered", "evidence": "", "evidence_found": None}
                for i, t in zip(fs.ids, fs.facts, strict=True)
            ]
            sample = replace(sample, status=kind, facts=verdicts, **tally(verdicts))
        else:
            try:
                cov: Coverage = self.verifier.verify(item, fs, text)
            except JudgeUnavailable as e:
                cov = Coverage(reason=f"judge unavailable: {e}")
            calls += cov.calls
            judge_info["attempts"] = cov.attempts
            if cov.ok:
                sample = replace(sample, status="scored", facts=cov.verdicts, **tally(cov.verdicts))
            else:
                sample = replace(sample, reason=cov.reason, facts=fs.as_list())
        if not sample.scored and sample.reason:
            log.warning("naru judge: %s unscored (%s)", item.question_id, sample.reason[:300])
        judge_info["system_fingerprints"] = sorted({c.system_fingerprint for c in calls if c.system_fingerprint})
        judge_info["response_models"] = sorted({c.response_model for c in calls if c.response_model})
        return replace(sample, usage=_calls_usage(calls))

    def judge_many(self, pairs: Sequence[tuple[JudgeItem, str | None]]) -> list[JudgedSample]:
        """Judge every (item, response), ``concurrency`` at a time; results in input order. With
        ``config.batch``, the verification calls go through the Batch API first."""
        self.prefetch_facts(list({(it.question_id, it.ref_hash): it for it, _ in pairs}.values()))
        if self.config.batch and self.client is not None:
            return self._judge_many_batched(pairs)
        return self._judge_all(pairs)

    def _judge_all(self, pairs: Sequence[tuple[JudgeItem, str | None]]) -> list[JudgedSample]:
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="naru-judge") as ex:
            return list(ex.map(lambda p: self.judge(*p), pairs))

    def _collect(self, pairs: Sequence[tuple[JudgeItem, str | None]]) -> None:
        """Verify every response against the cache only; misses are collected (BatchMode.pending)."""
        for item, response in pairs:
            kind, text, fs, _ = self._prepared(item, response)
            if not fs.ok or kind in ("empty", "failed"):
                continue
            try:
                self.verifier.verify(item, fs, text)
            except (Deferred, JudgeUnavailable):
                continue

    def _judge_many_batched(self, pairs: Sequence[tuple[JudgeItem, str | None]]) -> list[JudgedSample]:
        """Rounds of collect -> Batch API job -> cache, one per parse attempt (a corrective
        retry is the next round's request), then judge from the cache alone."""
        from naru_eval.judge.batch import JudgeBatchRunner

        assert self.client is not None
        mode = BatchMode()
        runner = JudgeBatchRunner(self.client, self.store)
        self.client.batch = mode
        try:
            for _ in range(self.config.parse_attempts):
                mode.collecting = True
                mode.pending.clear()
                self._collect(pairs)
                todo = {k: v for k, v in mode.pending.items() if k not in mode.failures}
                if not todo:
                    break
                runner.run(todo)
            mode.collecting = False
            return self._judge_all(pairs)
        finally:
            self.client.batch = None
            self.batch_jobs = {"submitted": runner.submitted, "resumed": runner.resumed}
