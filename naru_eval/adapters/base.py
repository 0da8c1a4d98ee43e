"""The shared base of every naru-eval adapter.

lmms-eval hands a simple model ``(ctx, gen_kwargs, doc_to_visual, doc_id, task, split)`` per
request. The base turns each into a typed :class:`NaruRequest`, orders the work by video so the
frame cache decodes each video once, serves answers already in the write-through
:class:`~naru_eval.store.responses.ResponseStore`, and calls the one method a family overrides,
:meth:`NaruModel.respond`. Frames come from :meth:`NaruModel.frames` (the one sampler, through
the frame cache); no model utility re-decodes the video.

What a family is (its id, args model, default sampling, budget, checkpoints, positions and
inputs) it declares once, as ``family`` (:class:`naru_eval.adapters.family.Family`); the base
derives its ``model_id`` and ``Args`` from it, parses the model args with the one parser
(:func:`naru_eval.adapters.args.parse_model_args`), resolves the one sampling value
(:attr:`NaruModel.sampling`) and builds the run's input plan (:attr:`NaruModel.inputs`,
``naru_eval.core.inputs``), which every request carries and the provenance's input mode is
derived from.

A request that fails after the adapter's bounded retries raises :class:`RequestFailed`: it is
stored as a failure, answered with the failure marker (scored invalid, counted in
``invalid_rate``), listed in the run's summary and retried on the next run. When the first
answered requests all fail with the same client error, the run stops instead
(:class:`~naru_eval.api.retry.ConfigErrorBreaker`; those failures are not stored). Identical
requests (same question, prompt, media and settings, whatever the task) are asked once.

:meth:`NaruModel.generate_until` is the loop; its three concerns are named collaborators:
:class:`RequestPlan` (which requests to ask: duplicates share an answer, stored answers are
reused), :class:`AnswerLog` (the one place answers and failures are written: the store and the
replies), and :class:`HeldFailures` (the configuration-error breaker's held-back failures).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from loguru import logger
from tqdm import tqdm
from typing_extensions import Self

from naru_eval.adapters.answers import AnswerLog, HeldFailures, RequestPlan
from naru_eval.adapters.args import RunArgs, parse_model_args
from naru_eval.adapters.family import Family
from naru_eval.adapters.request import Answer, NaruRequest, RequestFailed, failed
from naru_eval.api.retry import ConfigErrorBreaker
from naru_eval.core import provenance
from naru_eval.core.budgets import Sampling
from naru_eval.core.inputs import TEXT, FramesInput, InputPlan
from naru_eval.core.json_types import JSONObject, number
from naru_eval.settings import UserError, exit_on_user_error, settings
from naru_eval.store.responses import ResponseStore, run_key

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

    from naru_eval.adapters.transcript import Rendered, TranscriptFeed
    from naru_eval.media.frame_cache import SamplingParams
    from naru_eval.media.prefetch import FramePrefetcher
    from naru_eval.media.sampler import SampledFrames
    from naru_eval.select.selector import Chosen, FrameSelector


class NaruModel(lmms):
    """Base adapter: a family declares ``family`` and implements :meth:`respond`."""

    is_simple = True
    #: the family's facts, declared once (``naru_eval.adapters.family.Family``); ``model_id`` and
    #: ``Args`` are derived from it
    family: ClassVar[Family]
    #: the model id lmms-eval knows this adapter by (``family.id``)
    model_id: ClassVar[str] = "naru_base"
    #: the adapter's typed ``--model_args`` (``family.args``; docs/adapters.md's tables are
    #: generated from their field descriptions)
    Args: ClassVar[type[RunArgs]] = RunArgs
    #: whether answers go through the response store by default
    uses_store: ClassVar[bool] = True
    #: how many :meth:`respond` calls run at once (API adapters raise it, per class or instance).
    #: Above 1, pending requests are submitted in the same by-video order to a thread pool and
    #: each answer is written to the store the moment it completes.
    max_concurrency: int = 1
    #: decode-ahead (naru_eval.media.prefetch): worker processes (0: decode inline) and the bytes
    #: of decoded frames they may hold ahead of the model (the HF adapters set both from args)
    decode_workers: int = 0
    decode_budget_bytes: int = 4 << 30

    #: the parsed model args (an instance of ``Args``)
    args: RunArgs
    #: the run's sampling: the args', else the family's default (one frozen value to the sampler)
    sampling: Sampling
    #: the run's transcripts (``transcript=``; None: none), naru_eval.adapters.transcript
    transcripts: TranscriptFeed | None
    #: the run's input plan: what a request with media gives the model (``naru_eval.core.inputs``)
    inputs: InputPlan

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("family")
        if isinstance(declared, Family):
            cls.model_id = declared.id
            cls.Args = declared.args

    def __init__(self, **model_args: object) -> None:
        super().__init__()
        self.args = parse_model_args(self.Args, model_args, self.model_id)
        self.batch_size = self.args.batch_size
        self.sampling = self.family.resolve(self.args.sampling, self.args.checkpoint)
        self._store_path = self.args.response_store or settings().response_store
        self._store: ResponseStore | None = None
        self._use_store = self.uses_store if self.args.store is None else self.args.store
        self.failures: dict[str, str] = {}
        self.reused = 0
        #: stops the run when the first answered requests all fail with one client error
        #: (a wrong key, model name or setting) instead of storing a failure per question
        self.breaker = ConfigErrorBreaker(self.model_id)
        self.transcripts = self.transcript_feed()
        self.selector = self.frame_selector()
        plan = self.input_plan()
        if self.transcripts is not None:
            plan = replace(plan, transcript=self.transcripts.spec)
        if self.family.inputs and not plan.kinds:
            raise UserError(
                f"{self.model_id}: video=false with nothing else (audio, transcript) leaves the model nothing"
            )
        self.inputs = plan
        self.check_transcript_layout()
        # every adapter that gives a video takes its transcript as text
        undeclared = sorted(set(self.inputs.kinds) - set(self.family.inputs) - {"transcript"})
        if undeclared:
            raise TypeError(f"{self.model_id}: its input plan gives {undeclared}, which its family does not declare")

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict[str, object] | None = None) -> Self:
        """lmms-eval's constructor: a user's mistake (a setting, a file) is its message, exit 2."""
        with exit_on_user_error(cls.model_id):
            return super().create_from_arg_string(arg_string, additional_config)

    # -- what a family overrides ------------------------------------------------------------
    def respond(self, request: NaruRequest) -> str | Answer:  # pragma: no cover - abstract
        """Answer one question. Raise RequestFailed when it failed for good."""
        raise NotImplementedError

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Called once with every pending request before the first answer (upfront checks)."""

    def finish(self) -> None:
        """Called after the last answer of a ``generate_until`` call (release per-video state)."""

    def input_plan(self) -> InputPlan:
        """What a request with media gives the model: the video's frames, sampled by naru-eval's
        sampler and given as one video, unless ``video=false`` (a family that delivers them
        otherwise, or takes more inputs, overrides this; the transcript part is the base's)."""
        if "frames" not in self.family.inputs or not self.gives_video_arg:
            return TEXT
        return InputPlan(frames=FramesInput(self.sampling, delivery="video"))

    @property
    def gives_video_arg(self) -> bool:
        """The ``video=`` arg (true where the adapter has none)."""
        return bool(getattr(self.args, "video", True))

    # -- the transcript (naru_eval.adapters.transcript) -----------------------------------------
    #: whether this adapter can put transcript lines between its frames (``transcript_layout=
    #: interleaved``); one that cannot refuses it, and takes ``block``
    interleaves_transcript: ClassVar[bool] = False
    #: why not, for the refusal (docs/transcripts.md lists each adapter's layouts)
    interleave_refusal: ClassVar[str] = "its frames reach the model as one piece it cannot put text inside"

    def transcript_feed(self) -> TranscriptFeed | None:
        """The run's transcripts (None with ``transcript=none`` or an adapter that takes none)."""
        from naru_eval.adapters.args import TranscriptFields
        from naru_eval.adapters.transcript import TranscriptFeed, transcript_input

        if not isinstance(self.args, TranscriptFields):
            return None
        spec = transcript_input(self.args)
        return TranscriptFeed(spec, self.model_id) if spec is not None else None

    def render_transcript(
        self,
        request: NaruRequest,
        frame_times: Sequence[float] | None,
        count_tokens: Callable[[str], int],
        frame_tokens: Callable[[int], int],
        budget_tokens: int | None,
        group: int = 1,
    ) -> Rendered | None:
        """:meth:`TranscriptFeed.render` for ``request`` (None without a transcript); frames that
        alone overflow the context fail the request for good."""
        if self.transcripts is None:
            return None
        try:
            return self.transcripts.render(request, frame_times, count_tokens, frame_tokens, budget_tokens, group)
        except ValueError as e:
            raise RequestFailed(f"transcript: {e}") from None

    def check_transcript_layout(self) -> None:
        """``interleaved`` with frames on an adapter that cannot interleave: refused, not faked."""
        spec = self.inputs.transcript
        if spec is None or spec.layout != "interleaved" or self.inputs.frames is None:
            return
        if not self.can_interleave_transcript():
            raise UserError(
                f"{self.model_id}: transcript_layout=interleaved is not available here: {self.interleave_refusal}; "
                "give transcript_layout=block (docs/transcripts.md lists each adapter's layouts)"
            )

    def can_interleave_transcript(self) -> bool:
        """Whether this run's frames can take transcript lines between them."""
        return self.interleaves_transcript

    # -- frames chosen for the question (naru_eval.select) -----------------------------------------
    def frame_selector(self) -> FrameSelector | None:
        """The run's frame selector (``select=``; None: uniform, the official protocol)."""
        from naru_eval.adapters.args import SelectionFields

        if not isinstance(self.args, SelectionFields) or not self.args.selection.chosen:
            return None
        from naru_eval.select.selector import FrameSelector

        return FrameSelector(self.args.selection, self.model_id, device=self.args.device)

    def chosen_frames(self, request: NaruRequest) -> Chosen:
        """The frames the selector chose for ``request``: the run's budget (the count the family's
        sampling gives this video), filled by the selector."""
        from naru_eval.select.selector import Query, planned_count

        assert self.selector is not None and request.video is not None
        params = self.frame_params(request.video)
        n = planned_count(request.video, params["num_frames"], params["fps"], params["max_frames"])
        given = request.doc.get("options")
        options = tuple(str(o) for o in given) if isinstance(given, (list, tuple)) else ()
        q = Query(request.question_id, str(request.doc.get("question") or request.prompt), options)
        transcript = self.transcripts.given(request) if self.transcripts is not None else None
        return self.selector.choose(request.video, n, q, transcript)

    def prepare_selection(self, requests: Sequence[NaruRequest]) -> None:
        """Every video's candidate pool before the first answer (a pool smaller than its budget
        stops the run, every such video named)."""
        from naru_eval.select.selector import planned_count

        if self.selector is None:
            return
        budgets: dict[str, int] = {}
        with exit_on_user_error(self.model_id):
            for r in requests:
                if r.video and r.video not in budgets and self.plan_of(r).frames is not None:
                    p = self.frame_params(r.video)
                    budgets[r.video] = planned_count(r.video, p["num_frames"], p["fps"], p["max_frames"])
            self.selector.prepare(budgets)

    def provenance(self) -> dict[str, str | None]:
        """What the model is given (``naru_eval.core.provenance``): written into every sample
        payload of the run. The input mode comes from the input plan; the HF families add
        their position layout."""
        frames, s = self.inputs.frames, self.sampling
        if frames is not None and frames.delivery == "server-sampled":
            label: str | None = "default"  # the server's own sampling
        else:  # None (not recorded) when the adapter samples nothing itself and was told nothing
            label = s.label if s.frames is not None or s.fps is not None else None
        out: dict[str, str | None] = {
            "adapter": self.model_id,
            "input_mode": self.inputs.mode if self.family.inputs else None,
            "sampling": label,
            "variant": self.args.variant(),
        }
        if self.selector is not None:  # uniform (the official protocol) records none
            out["selection"] = self.selector.label()
        return out

    def describe(self) -> JSONObject:
        """What, besides the task and prompt, changes this adapter's answers (for the run key).
        ``args`` stays (empty: every arg is typed now) so that run keys are unchanged. An adapter
        that sends naru-eval's frames names how their pixels are made (``pixels``:
        ``naru_eval.media.pixels.CONVERSION``): answers given to frames converted otherwise (before
        the frames' own colour matrix and range, and the families' reference resize) are never
        reused."""
        s = self.sampling
        desc: JSONObject = {
            "model": self.model_id,
            "args": {},
            "num_frames": s.frames,
            "fps": s.fps,
            "max_frames": s.max_frames,
            "max_pixels": s.max_pixels,
        }
        if self.needs_frames:
            from naru_eval.media.pixels import CONVERSION

            desc["pixels"] = CONVERSION
        if self.transcripts is not None:  # absent with transcript=none: run keys as before
            desc["transcript"] = self.transcripts.describe()
            desc["video"] = self.inputs.frames is not None
        if self.selector is not None:  # absent with select=uniform: run keys as before
            desc["selection"] = self.selector.describe()
        return desc

    # -- the sampling, as views of the one value ----------------------------------------------
    @property
    def num_frames(self) -> int | None:
        return self.sampling.frames

    @property
    def fps(self) -> float | None:
        return self.sampling.fps

    @property
    def max_frames(self) -> int | None:
        return self.sampling.max_frames

    @property
    def max_pixels(self) -> int | None:
        return self.sampling.max_pixels

    @property
    def min_frames(self) -> int | None:
        return self.sampling.min_frames

    @property
    def needs_frames(self) -> bool:
        """Whether requests need frames from naru-eval's sampler (False: replay, a provider or
        server that samples the file itself)."""
        return self.inputs.frames is not None and self.inputs.frames.decoded

    # -- shared machinery ---------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where lmms-eval puts the counts it gathers across ranks under ``accelerate launch``:
        the device of the ``Accelerator`` its evaluator gives the model first, else the CPU. An
        adapter that holds no weights (replay, the API adapters) needs nothing else; the HF loader
        overrides it with its model's device."""
        import torch

        accelerator = getattr(self, "accelerator", None)
        return accelerator.device if accelerator is not None else torch.device("cpu")

    @property
    def store(self) -> ResponseStore | None:
        if self._use_store and self._store is None:
            self._store = ResponseStore(self._store_path)
        return self._store if self._use_store else None

    def plan_of(self, request: NaruRequest) -> InputPlan:
        """The request's input plan (the run's for a request with media built by hand)."""
        if request.inputs is not None:
            return request.inputs
        return self.inputs if request.videos else TEXT

    def frame_params(self, video: str) -> SamplingParams:
        """The sampling of ``video`` as :meth:`FrameCache.get` takes it (decode-ahead uses it too)."""
        from naru_eval.media.frame_cache import sampling_params
        from naru_eval.media.plan import DEFAULT_MAX_PIXELS

        s = self.sampling
        return sampling_params(
            num_frames=s.frames,
            fps=s.fps,
            max_frames=s.max_frames,
            max_pixels=s.max_pixels if s.max_pixels is not None else DEFAULT_MAX_PIXELS,
        )

    def frames(self, request: NaruRequest) -> SampledFrames:
        """The request's video frames from the one sampler, through the frame cache. An unreadable
        video, or one of which no frame was sampled, fails the request for good: a question is
        never asked without the video it is about."""
        from naru_eval.media.frame_cache import default_cache
        from naru_eval.media.video import VideoError

        if request.video is None:
            raise ValueError(f"question {request.question_id}: no video")
        try:
            params = self.frame_params(request.video)
            if self.selector is not None:  # exactly the frames chosen for this question
                from naru_eval.media.frame_cache import chosen_params

                chosen = self.chosen_frames(request)
                params = chosen_params(params, chosen.indices)
                provenance.record_question(request.question_id, frame_times=chosen.record())
            sampled = default_cache().get(request.video, **params)
        except VideoError as e:
            raise RequestFailed(f"video: {e}") from None
        if len(sampled.frames) == 0:
            raise RequestFailed(f"video {request.video}: no frames sampled")
        return sampled

    def decode_ahead(self, videos: Sequence[str]) -> AbstractContextManager[FramePrefetcher | None]:
        """A context that decodes ``videos`` (in the order they will be asked) in worker
        processes while the model answers (``decode_workers`` > 0), else does nothing."""
        import contextlib

        if self.decode_workers <= 0 or not self.needs_frames or len(videos) == 0 or self.selector is not None:
            return contextlib.nullcontext()  # chosen frames differ per question: decoded as asked
        from naru_eval.media.frame_cache import default_cache
        from naru_eval.media.prefetch import FramePrefetcher

        return FramePrefetcher(
            default_cache(), videos, self.frame_params, self.decode_workers, self.decode_budget_bytes
        )

    def to_naru_requests(self, requests: Sequence[Instance]) -> list[NaruRequest]:
        out = []
        for req in requests:
            ctx, gen_kwargs, doc_to_visual, doc_id, task, split = req.args
            doc = self.task_dict[task][split][doc_id]
            videos = [v for v in (doc_to_visual(doc) or []) if v]
            plan = self.inputs if videos else TEXT
            out.append(NaruRequest(doc, ctx, videos, dict(gen_kwargs or {}), task, doc_id, plan))
        return out

    def request_key(self, request: NaruRequest) -> tuple[str, str]:
        """(run key, question key) of a request.

        The run key hashes the adapter's settings and the generation kwargs, *not the task*: the
        same question with the same prompt, media and settings is one request whatever task asks
        it (``--tasks naru`` asks the 500 subset in ``naru_mcq`` and ``naru_mcq_500``). The
        question key is the question id plus a hash of the prompt and the media (video file
        names), so a blind variant (no video) or a rotated one (another prompt, another id)
        stays its own request.
        """
        desc: JSONObject = {**self.describe(), "gen_kwargs": dict(request.gen_kwargs)}
        asked: JSONObject = {"prompt": request.prompt, "media": [Path(v).name for v in request.videos]}
        if self.transcripts is not None and request.videos:
            asked["transcript"] = self.transcripts.fingerprint(request)
        digest = hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
        return run_key(desc), f"{request.question_id}:{digest}"

    def generate_until(self, requests: list[Instance]) -> list[str]:
        provenance.record(**self.provenance())
        reqs = self.to_naru_requests(requests)
        if self.transcripts is not None:  # every video's transcript, before anything is computed
            with exit_on_user_error(self.model_id):
                self.transcripts.check(reqs)
        keys = [self.request_key(r) for r in reqs]
        log = AnswerLog(self.store)
        plan = RequestPlan.of(keys, log.stored)
        self.reused += plan.reused
        store = self.store
        if self.transcripts is not None and store is not None and plan.reused_answers:
            self.transcripts.recall([(reqs[i], store.get(*keys[i])) for i in plan.reused_answers])
        if self.selector is not None and store is not None:  # the reused answers' chosen frames
            for i in plan.reused_answers:
                hit = store.get(*keys[i])
                chosen = (hit.usage or {}).get("selection") if hit is not None else None
                stamped = chosen.get("times") if isinstance(chosen, dict) else None
                if isinstance(stamped, list):
                    times = ",".join(f"{number(t):.3f}" for t in stamped)
                    provenance.record_question(reqs[i].question_id, frame_times=times)
        log.register_runs({k[0] for k in keys}, self.describe())
        if self.reused:
            logger.info(f"naru: {self.reused} answer(s) reused from {log.where}")
        if plan.n_shared:
            logger.info(f"naru: {plan.n_shared} request(s) repeat another task's identical request; asked once")
        # one video at a time: the frame cache then decodes each video once
        pending = sorted(plan.pending, key=lambda i: (reqs[i].video or "", i))
        self.prepare_selection([reqs[i] for i in pending])  # every video's pool, before any answer
        with exit_on_user_error(self.model_id):  # a preflight's UserError: its message, exit 2, nothing asked
            self.prepare([reqs[i] for i in pending])

        def record_failure(i: int, e: RequestFailed) -> None:
            self.failures[reqs[i].question_id] = str(e)
            log.failed(i, keys[i], e)

        held = HeldFailures(self.breaker, record_failure)

        def answer(i: int) -> None:
            self.breaker.check()  # a tripped breaker: nothing more is asked
            log.check_writable()  # a failed store write: nothing more is asked (the answer could not be kept)
            try:
                ans = self.respond(reqs[i])
            except RequestFailed as e:
                held.failed(i, e)  # raises ConfigurationError when the run must stop
                return
            if self.transcripts is not None and isinstance(ans, Answer) and ans.usage is not None:
                ans = ans._replace(usage={**ans.usage, **self.transcripts.usage(reqs[i])})
            if self.selector is not None and isinstance(ans, Answer) and ans.usage is not None and reqs[i].video:
                chosen = self.chosen_frames(reqs[i])  # kept with the answer: a reused one says its frames
                record = {"indices": list(chosen.indices), "times": [round(t, 3) for t in chosen.times]}
                ans = ans._replace(usage={**ans.usage, "selection": record})
            self.breaker.succeeded()
            log.answered(i, keys[i], ans)
            held.flush()

        self._answer_all(pending, [reqs[i].video for i in pending], answer)
        held.release()  # fewer answered requests than the breaker needs: ordinary failures
        out = plan.fan_out(log.replies)
        if self.failures:
            shown = "; ".join(f"{q}: {e}" for q, e in list(self.failures.items())[:20])
            logger.warning(
                f"naru: {len(self.failures)} request(s) failed and are scored invalid; "
                f"they are retried on the next run. {shown}"
            )
        return [o if o is not None else failed("no answer") for o in out]

    def _answer_all(self, pending: Sequence[int], videos: Sequence[str | None], answer: Callable[[int], None]) -> None:
        """``answer`` each pending index: inline, or on a pool of ``max_concurrency`` threads that
        starts them in the given (by-video) order; the next videos decode ahead meanwhile."""
        bar = tqdm(total=len(pending), disable=self.rank != 0, desc=self.model_id)
        workers = max(1, int(self.max_concurrency))
        with self.decode_ahead([v for v in videos if v]):  # the next videos decode while this one is answered
            try:
                if workers == 1 or len(pending) <= 1:
                    for i in pending:
                        answer(i)
                        bar.update(1)
                else:
                    # Each worker stores its own answer, so one that completes while another
                    # raised is still kept.
                    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=self.model_id)
                    try:
                        for fut in as_completed([pool.submit(answer, i) for i in pending]):
                            fut.result()
                            bar.update(1)
                    finally:
                        pool.shutdown(wait=True, cancel_futures=True)
            finally:
                self.finish()
        bar.close()

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError("NARU tasks are generative; loglikelihood is not supported")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError("NARU tasks are single-round")
