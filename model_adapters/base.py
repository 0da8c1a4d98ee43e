"""The shared base of every naru-eval adapter.

lmms-eval hands a simple model ``(ctx, gen_kwargs, doc_to_visual, doc_id, task, split)`` per
request; the base turns each into a typed :class:`NaruRequest` (doc, prompt, video path) and
calls the one method a family overrides, :meth:`NaruModel.respond`. Everything else (request
plumbing, progress, the failure marker) lives here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from tqdm import tqdm

#: Text recorded for a request that failed after its retries. The extractor reads it as
#: invalid ("failed"), so it is scored wrong and counted, never parsed as an answer.
FAILED_MARKER = "[NARU_REQUEST_FAILED]"


class NaruRequest(NamedTuple):
    """One question as an adapter sees it."""

    doc: Mapping[str, Any]
    prompt: str
    videos: Sequence[str]
    gen_kwargs: Mapping[str, Any]
    task: str
    doc_id: int

    @property
    def question_id(self) -> str:
        return str(self.doc["question_id"])


def failed(reason: str) -> str:
    """The response text of a failed request (never scored as an answer)."""
    return f"{FAILED_MARKER} {reason}"


class NaruModel(lmms):
    """Base adapter: subclasses implement :meth:`respond` (and may override :meth:`prepare`)."""

    is_simple = True

    def __init__(self, batch_size: int | str = 1, **kwargs: Any) -> None:
        super().__init__()
        self.batch_size = int(batch_size)
        self.extra_args = kwargs

    # -- what a family overrides ------------------------------------------------------------
    def respond(self, request: NaruRequest) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Called once with every request before the first answer (for upfront checks)."""

    # -- lmms-eval plumbing ------------------------------------------------------------------
    def to_naru_requests(self, requests: Sequence[Instance]) -> list[NaruRequest]:
        out = []
        for req in requests:
            ctx, gen_kwargs, doc_to_visual, doc_id, task, split = req.args
            doc = self.task_dict[task][split][doc_id]
            videos = [v for v in (doc_to_visual(doc) or []) if v]
            out.append(NaruRequest(doc, ctx, videos, dict(gen_kwargs or {}), task, doc_id))
        return out

    def generate_until(self, requests: list[Instance]) -> list[str]:
        naru_requests = self.to_naru_requests(requests)
        self.prepare(naru_requests)
        return [self.respond(r) for r in tqdm(naru_requests, disable=self.rank != 0, desc="naru")]

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError("NARU tasks are generative; loglikelihood is not supported")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError("NARU tasks are single-round")
