"""The open-ended judge of ``naru_open`` (paper sec. IV-D): atomic-fact recall by an LLM judge.

1. :mod:`~naru_eval.judge.facts`: each reference answer is decomposed into self-contained atomic
   facts once, frozen per (question, reference hash, judge model, prompt version);
2. :mod:`~naru_eval.judge.verify`: one call per response gives each fact covered / partial /
   not_covered / contradicted with an evidence span (ids checked, response fenced);
3. :mod:`~naru_eval.judge.score`: recall, recall with partial credit, the share recovering at least
   one fact, per category / narrative / cultural / overall; unscored responses counted apart.

:mod:`~naru_eval.judge.client` (openai SDK, structured outputs, retries, bounded concurrency,
cache, cost), :mod:`~naru_eval.judge.pipeline` (:class:`Judge`), :mod:`~naru_eval.judge.protocols`
(MINERVA 0-2 majority vote), :mod:`~naru_eval.judge.offline` (approximate, no API),
:mod:`~naru_eval.judge.audit` (human validation), :mod:`~naru_eval.judge.mcq_fallback` (opt-in
LLM fallback of MCQ extraction), :mod:`~naru_eval.lmms.open_task` (lmms-eval glue). See docs/judge.md.

Nothing heavy is imported here: lmms-eval imports the task bridge at start-up.
"""

from naru_eval.judge.config import DEFAULT_MODEL, JudgeConfig

__all__ = ["DEFAULT_MODEL", "JudgeConfig"]
