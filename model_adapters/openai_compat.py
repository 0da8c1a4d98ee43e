"""``naru_openai_compat``: any OpenAI-compatible chat-completions server (vLLM, SGLang, ...).

    lmms-eval --model naru_openai_compat \\
        --model_args model=Qwen/Qwen2.5-VL-7B-Instruct,base_url=http://127.0.0.1:8000/v1,num_frames=128 \\
        --tasks naru_mcq --output_path results --log_samples

The request goes through the real ``openai`` SDK (``chat.completions.create``), temperature 0,
``max_tokens`` from the task's generation kwargs (``max_tokens`` or ``max_new_tokens``, else
16). The user message holds the video first and the question after it, so the ~10 questions of
one video share a prompt prefix the server's prefix cache serves; the base submits requests
grouped by video, ``max_concurrency`` at a time, and a video's first question goes alone: its
other questions wait until it is answered, so they find the video's prefix cached instead of
computing it again side by side (``prefix_first``).

* ``video_mode=video`` (the default for Qwen-family served models): the sampler's frames, exactly
  and in order, as ONE ``video_url`` part, vLLM's pre-extracted form (a ``data:video/jpeg``
  URL of comma-separated base64 JPEG frames), with the timing the model's processor reads
  (fps, frame numbers, total frames, duration) as the request's ``media_io_kwargs``.
* ``video_mode=frames`` (the default otherwise): each frame a base64 JPEG ``image_url`` part.
* ``video_mode=video_url``: one ``video_url`` part (``file://`` URL, or ``video_url_prefix`` +
  the file's name, or its path under ``video_root``); the server decodes and samples the video
  itself and no frame is decoded here.

The mode is the run's input mode (``video`` / ``images`` / ``server-sampled``): the delivery of
the input plan's frames (:meth:`OpenAICompat.input_plan`), recorded with every sample and part of
the response store's key. Its args, the served model's family by name, the wire form and the
server checks are the library's (``naru_eval.providers.openai_compat``); the Qwen rule for a
rate-sampled Qwen video is ``naru_eval.adapters.qwen_sampling``, the HF path's.

The API key is read from ``OPENAI_API_KEY`` only: lmms-eval writes ``model_args`` into
``results.json``, so a key given there is refused. The SDK's own retries are off; the one retry
policy is :mod:`naru_eval.api.retry`. A request that still fails, is refused, is empty or is
filtered raises :class:`RequestFailed` (stored as a failure, scored invalid, retried next run).
See docs/openai_compat.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from loguru import logger

from naru_eval.adapters.audio import AudioMixin
from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.qwen_sampling import QwenVideoPlan, qwen_video_plan
from naru_eval.adapters.request import Answer, NaruRequest, RequestFailed
from naru_eval.adapters.transcript import Rendered, chars_estimate
from naru_eval.api.caller import ApiCaller
from naru_eval.api.lazy import Lazy
from naru_eval.api.limiter import AdaptiveLimiter, limiter_for
from naru_eval.api.openai_client import is_reasoning_family, make_openai_client, openai_errors, usage_of
from naru_eval.api.retry import RetryError, is_connection_error, is_timeout
from naru_eval.core.budgets import Sampling
from naru_eval.core.inputs import FrameDelivery, FramesInput, InputPlan
from naru_eval.media.audio_plan import QWEN2_5_OMNI, QWEN3_OMNI, AudioEncoder
from naru_eval.providers.openai_compat import preflight
from naru_eval.providers.openai_compat.args import OpenAICompatArgs, check_server_url, resolve_video_mode
from naru_eval.providers.openai_compat.served import media_tokens, qwen_patch_size
from naru_eval.providers.openai_compat.wire import (
    AudioUrlPart,
    MediaIO,
    MediaPart,
    UserMessage,
    VideoParts,
    audio_parts,
    video_url,
)
from naru_eval.settings import UserError

if TYPE_CHECKING:
    from naru_eval.media.frame_cache import SamplingParams
    from naru_eval.media.sampler import SampledFrames

#: video_mode -> how the frames reach the model (the input plan's delivery, its input mode)
DELIVERY: dict[str, FrameDelivery] = {"video": "video", "frames": "images", "video_url": "server-sampled"}
DEFAULT_MAX_TOKENS = 16
#: the audio plan fills the served context
NO_CONTEXT = (
    "the server did not report its max_model_len (GET /models); give max_model_len=<the --max-model-len it was "
    "started with> for the audio plan"
)


class ServerUnreachable(RuntimeError):
    """Too many requests in a row could not reach the server: the run stops (a rerun resumes)."""


class CompletionParams(TypedDict, total=False):
    """The keyword arguments of ``chat.completions.create`` besides the model and the messages."""

    max_tokens: int
    temperature: float
    max_completion_tokens: int
    extra_body: dict[str, MediaIO]


class OpenAICompat(AudioMixin, NaruModel):
    """Any OpenAI-compatible chat-completions server (vLLM, SGLang, ...)."""

    family = Family(
        id="naru_openai_compat",
        args=OpenAICompatArgs,
        default=Official(
            Sampling(frames=32),
            note="the served model is the user's: set its official row's num_frames/fps (docs/openai_compat.md)",
        ),
        inputs=("frames", "audio"),
    )
    args: OpenAICompatArgs
    #: the served context ``GET /models`` reported (set by the preflight)
    served_max_model_len: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        args = self.args
        resolved_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
        if not resolved_url:
            raise ValueError(f"{self.model_id}: give base_url=http://HOST:PORT/v1 or set OPENAI_BASE_URL")
        check_server_url(resolved_url)
        assert args.model is not None
        self.model = args.model
        self.base_url = str(resolved_url)
        self.video_root = Path(args.video_root) if args.video_root else None
        #: the base's thread pool size (``NaruModel``), and the limiter's ceiling
        self.max_concurrency = args.max_concurrency
        self.retry_policy = args.retry_policy()
        self.timeout = args.timeout
        self.abort_after = args.abort_after if args.abort_after is not None else max(10, 2 * self.max_concurrency)
        self.reasoning = is_reasoning_family(self.model) if args.reasoning == "auto" else bool(args.reasoning)
        if args.max_completion_tokens is not None and not self.reasoning:
            raise ValueError(
                f"{self.model_id}: max_completion_tokens is for reasoning models (reasoning=true); "
                "other models take the task's max_new_tokens"
            )
        #: the wait between retries; tests replace it
        self.sleep: Callable[[float], None] = time.sleep
        #: the endpoint+model's adaptive limit: at most ``max_concurrency`` in flight, halved on a 429
        self.limiter: AdaptiveLimiter = limiter_for(self.base_url, self.model, self.max_concurrency)
        #: the one API path (naru_eval.api.caller): retries, the limiter, logging
        self.caller = ApiCaller(
            self.model_id,
            self.retry_policy,
            catch=openai_errors,
            limiter=self.limiter,
            warn=logger.warning,
            sleep=lambda s: self.sleep(s),
        )
        self._client: Lazy[Any] = Lazy(
            lambda: make_openai_client(self.base_url, timeout=self.timeout, who=self.model_id, info=logger.info)
        )
        #: the encoded parts of the last few videos (video and frames modes)
        self._parts = VideoParts(max(4, self.max_concurrency + 1), self.video_mode == "video", args.jpeg_quality)
        self._unreachable = 0
        self._unreachable_lock = threading.Lock()
        # decode-ahead (the base's, naru_eval.media.prefetch): the next videos decode in worker
        # processes while the server answers this one (video and frames modes)
        self.decode_workers = args.decode_workers
        self.decode_budget_bytes = args.decode_budget_mb << 20
        #: video -> the qwen-vl-utils plan of a rate-sampled Qwen video (video mode)
        self._plans: dict[str, QwenVideoPlan] = {}
        #: video -> set once its first question of this call is answered (prefix_first)
        self._first_done: dict[str, threading.Event] = {}
        self._first_lock = threading.Lock()
        #: the served model's tokenizer (None: not looked for yet; False: none, the estimate)
        self._tokenizer: Any = None
        #: video -> its soundtrack's parts (audio=true), encoded once
        self._audio_parts: dict[str, list[AudioUrlPart]] = {}
        self._audio_lock = threading.Lock()
        if self.gives_audio:
            self.audio_encoder()  # an unknown front end is refused before anything runs

    # -- what the model is given ---------------------------------------------------------------
    @property
    def video_mode(self) -> str:
        """The resolved mode: video, frames or video_url (``auto`` decided by the served name)."""
        return resolve_video_mode(self.args.video_mode, self.args.model)

    def input_plan(self) -> InputPlan:
        """The frames as the video mode sends them: one video, images, or a URL the server
        samples itself (nothing decoded here); with ``audio=true`` the soundtrack's windows as
        audio parts after them (``video=false``: the audio alone)."""
        delivery = DELIVERY[self.video_mode]
        frames = FramesInput(self.sampling, delivery, decoded=delivery != "server-sampled")
        if not self.args.video and not self.args.audio and self.transcripts is None:
            raise ValueError(f"{self.model_id}: video=false and audio=false leave the model nothing of the video")
        return InputPlan(frames=frames if self.args.video else None, audio=self.audio_input())

    # -- the soundtrack (audio=true) ---------------------------------------------------------------
    def audio_encoder(self) -> AudioEncoder:
        """The served model's audio front end (``audio_encoder``, else by its name)."""
        name = self.args.audio_encoder
        if name == "auto":
            served = str(self.model).rsplit("/", 1)[-1].lower()
            name = (
                "qwen3_omni"
                if "qwen3" in served and "omni" in served
                else "qwen2_5_omni"
                if "omni" in served
                else "auto"
            )
        encoders = {"qwen2_5_omni": QWEN2_5_OMNI, "qwen3_omni": QWEN3_OMNI}
        if name not in encoders:
            raise ValueError(
                f"{self.model_id}: audio=true, and {self.model!r} is not a model whose audio tokens are known here; "
                f"name its front end with audio_encoder={'|'.join(encoders)}"
            )
        return encoders[name]

    def context_tokens(self) -> int:
        """The served context: ``max_model_len=``, else what ``GET /models`` reported."""
        ctx = self.args.max_model_len or self.served_max_model_len
        if not ctx:
            raise RequestFailed(f"audio: {NO_CONTEXT}")
        return int(ctx)

    def frame_tokens_of(self, sampled: SampledFrames) -> int:
        n, h, w = sampled.frames.shape[:3]
        tokens = media_tokens(self.model, self.video_mode if self.video_mode != "video_url" else "video", n, h, w)
        if tokens is None:
            raise RequestFailed(f"audio: {self.unknown_frame_tokens()}")
        return tokens

    def unknown_frame_tokens(self) -> str:
        return (
            f"the frames' tokens of the served model {self.model!r} are not known here, and the audio plan counts "
            "them beside the audio (audio alone too): the rule is read from a Qwen-Omni family's name, which a "
            "vLLM --served-model-name hides; serve it under a name that says its family (e.g. "
            "--served-model-name Qwen/Qwen2.5-Omni-7B) and give that as model="
        )

    def check_audio_plan(self, requests: Sequence[NaruRequest]) -> None:
        """``audio=true``: what every answer's audio plan needs, known before the first question
        (each failed every question at answer time): the frames' token rule of the served model
        and the served context. All problems in one :class:`UserError`."""
        if not self.gives_audio or not any(r.video for r in requests):
            return
        problems = []
        if (
            media_tokens(self.model, self.video_mode if self.video_mode != "video_url" else "video", 1, 448, 448)
            is None
        ):
            problems.append(self.unknown_frame_tokens())
        if not (self.args.max_model_len or self.served_max_model_len):
            problems.append(NO_CONTEXT)
        if problems:
            raise UserError(f"{self.model_id}: audio=true, and nothing was asked: " + "; ".join(problems))

    def audio_url_parts(self, request: NaruRequest) -> list[AudioUrlPart]:
        """The soundtrack's windows of the request's video, in time order, as ``audio_url`` parts
        (the same for every question of the video, encoded once)."""
        video = request.video
        if video is None or not self.gives_audio:
            return []
        with self._audio_lock:
            if video in self._audio_parts:
                return self._audio_parts[video]
        sampled = self.frames(request)
        audio, plan = self.soundtrack(sampled, self.frame_tokens_of(sampled) if self.gives_frames else 0)
        parts = [p for k in range(len(audio.windows)) for p in audio_parts(audio.window(k), audio.rate)]
        self._audio_records[video] = self.audio_usage(audio, plan)
        with self._audio_lock:
            self._audio_parts[video] = parts
            while len(self._audio_parts) > max(4, self.max_concurrency + 1):
                self._audio_parts.pop(next(iter(self._audio_parts)))
        return parts

    @property
    def input_mode(self) -> str:
        """What the model is given (naru_eval.core.provenance): ``video``, ``images`` or ``server-sampled``."""
        return self.inputs.mode

    def describe(self) -> dict[str, Any]:
        """What changes the answers: the served model and how the video is sent (not the URL).
        The input mode is part of it, so the response store never hands an answer given to one
        mode to a run of another."""
        desc = {
            **super().describe(),
            "served_model": self.model,
            "video_mode": self.video_mode,
            "input_mode": self.input_mode,
        }
        if self.gives_audio:
            desc["audio"] = {**self.audio_description(), "encoder": self.audio_encoder().name}
        if self.video_mode in ("frames", "video"):
            desc["jpeg_quality"] = self.args.jpeg_quality
        patch = qwen_patch_size(self.model)
        if self.video_mode == "video" and self.fps is not None and patch is not None:
            from qwen_vl_utils import vision_process as vp  # MODEL_SEQ_LEN may come from the environment

            desc["qwen_vl_utils_sizing"] = {"patch_size": patch, "model_seq_len": vp.MODEL_SEQ_LEN}
        if self.reasoning:  # no temperature, max_completion_tokens: another request
            desc["reasoning"] = True
            desc["max_completion_tokens"] = self.args.max_completion_tokens
        return desc

    # -- the client -------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client, built on first use (SDK retries off)."""
        return self._client.get()

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Before the first question: the frames fit the server's image limit, and the server
        answers and serves ``model`` (else one clear error, and nothing is asked;
        :mod:`naru_eval.providers.openai_compat.preflight`)."""
        if not requests:
            return
        preflight.check_before_asking(self, requests)
        self.check_audio(requests)  # audio=true: every video's track, all problems at once
        self.check_audio_plan(requests)  # and what each answer's audio plan needs

    # -- the frames -------------------------------------------------------------------------------
    def video_plan(self, video: str) -> QwenVideoPlan | None:
        """Video mode, rate sampling (``fps=``), a Qwen family: the frame count and size
        qwen-vl-utils gives (``naru_eval.adapters.qwen_sampling.qwen_video_plan``, the HF path's
        rule), so the server gets the frames and tokens the HF path feeds the model; None otherwise."""
        patch = qwen_patch_size(self.model)
        s = self.sampling
        if self.video_mode != "video" or s.fps is None or patch is None:
            return None
        if video not in self._plans:
            from naru_eval.media.video import probe_video

            info = probe_video(video, check_end=False)
            try:
                self._plans[video] = qwen_video_plan(
                    info.frame_count, info.fps, info.height, info.width, fps=s.fps, patch_size=patch,
                    max_frames=s.max_frames, max_pixels=s.max_pixels,
                )  # fmt: skip
            except ValueError as e:  # e.g. fewer frames than qwen-vl-utils' FRAME_FACTOR
                raise RequestFailed(f"video {video}: qwen-vl-utils sampling at fps={s.fps:g}: {e}") from None
        return self._plans[video]

    def frame_params(self, video: str) -> SamplingParams:
        plan = self.video_plan(video)
        if plan is None:
            return super().frame_params(video)
        from naru_eval.media.frame_cache import sampling_params

        # qwen-vl-utils' size, by its own resize from the native frames (the HF path's frames)
        return sampling_params(num_frames=plan.nframes, size=(plan.height, plan.width), resize="float")

    # -- the message ------------------------------------------------------------------------------
    def video_parts(self, request: NaruRequest) -> list[MediaPart]:
        """The message parts for the request's video (identical for every question on it, encoded
        once); none for a text-only request (the blind tasks) or audio only."""
        if request.video is None or not self.gives_frames:
            return []
        if self.video_mode == "video_url":
            url = video_url(request.video, self.args.video_url_prefix, self.video_root)
            return [{"type": "video_url", "video_url": {"url": url}}]
        parts = self._parts.get(request.video, lambda: self.frames(request)).parts
        assert parts is not None
        return parts

    def extra_body(self, request: NaruRequest) -> dict[str, MediaIO] | None:
        """Video mode: the frames' timing as vLLM's per-request ``media_io_kwargs`` (the same for
        every question of a video); nothing otherwise."""
        if request.video is None or self.video_mode != "video" or not self.gives_frames:
            return None
        media_io = self._parts.get(request.video, lambda: self.frames(request)).media_io
        assert media_io is not None
        return {"media_io_kwargs": media_io}

    def messages(self, request: NaruRequest) -> list[UserMessage]:
        """Video parts first, then the soundtrack's (audio=true), then the transcript (block), then
        the question: one video's questions share a prompt prefix. An interleaved transcript
        (``video_mode=frames``) puts its lines as text parts between the frames' image parts."""
        frames = self.video_parts(request)
        view = self.transcript_view(request)
        if view is not None and view.interleaved:
            woven: list[Any] = []
            for piece in view.pieces:
                if isinstance(piece, str):
                    woven.append({"type": "text", "text": piece + "\n"})
                else:
                    woven.extend(frames[piece.start : piece.stop])
            frames = woven
        media: list[Any] = [*frames, *self.audio_url_parts(request)]
        if view is not None and view.block:
            media.append({"type": "text", "text": view.block + "\n"})
        return [{"role": "user", "content": [*media, {"type": "text", "text": request.prompt}]}]

    # -- the transcript (naru_eval.adapters.transcript) -------------------------------------------
    interleave_refusal = (
        "video_mode=video and video_url send the video as one part (the server cannot take text inside it); "
        "video_mode=frames can interleave"
    )

    def can_interleave_transcript(self) -> bool:
        return self.video_mode == "frames"

    def count_tokens(self, text: str) -> int:
        """The served model's tokenizer where one is at hand (transformers, local files only),
        else one token per character (``naru_eval.adapters.transcript.chars_estimate``)."""
        if self._tokenizer is None:
            try:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.model, local_files_only=True)
            except Exception:  # noqa: BLE001 - no local tokenizer: the documented estimate
                self._tokenizer = False
        if self._tokenizer is False:
            return chars_estimate(text)
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def transcript_view(self, request: NaruRequest) -> Rendered | None:
        """The video's transcript as given, fitted into the served context (``max_model_len=``,
        else GET /models') beside the frames' tokens where both are known; else nothing is cut
        and the record's ``cut`` stays empty (the server refuses an overlong request)."""
        if self.transcripts is None or request.video is None:
            return None
        sampled = self.frames(request) if self.needs_frames else None
        times = [float(t) for t in sampled.timestamps] if sampled is not None else None
        ctx = self.args.max_model_len or self.served_max_model_len
        budget: int | None = None
        frame_tokens: Callable[[int], int] = lambda n: 0  # noqa: E731
        if ctx:
            if sampled is not None:
                h, w = sampled.frames.shape[1:3]
                mode = self.video_mode if self.video_mode != "video_url" else "video"
                if media_tokens(self.model, mode, 1, h, w) is not None:
                    frame_tokens = lambda n: int(media_tokens(self.model, mode, n, h, w) or 0)  # noqa: E731
                    budget = int(ctx) - self.args.transcript_reserve_tokens
            elif not self.gives_frames:
                budget = int(ctx) - self.args.transcript_reserve_tokens
        return self.render_transcript(request, times, self.count_tokens, frame_tokens, budget)

    @staticmethod
    def max_tokens(gen_kwargs: Mapping[str, Any]) -> int:
        for name in ("max_tokens", "max_new_tokens"):
            if gen_kwargs.get(name) not in (None, ""):
                return int(gen_kwargs[name])
        return DEFAULT_MAX_TOKENS

    def request_params(self, gen_kwargs: Mapping[str, Any]) -> CompletionParams:
        """The request parameters sent (as the judge's ``JudgeConfig.request_params``): temperature 0
        and ``max_tokens``; for a reasoning model (gpt-5*, o-series, or ``reasoning=true``)
        ``max_completion_tokens`` and no temperature, which such models refuse to change."""
        if self.reasoning:
            return {"max_completion_tokens": self.args.max_completion_tokens or self.max_tokens(gen_kwargs)}
        return {"max_tokens": self.max_tokens(gen_kwargs), "temperature": 0.0}

    # -- the prefix cache ---------------------------------------------------------------------------
    def _wait_for_first(self, request: NaruRequest) -> threading.Event | None:
        """``prefix_first``: the first question of a video to get here goes on at once and gets
        the event to set when answered; every later one waits for that event, so the server has
        the video's prefix cached by then (instead of several questions computing it side by
        side). The wait holds no request slot (the limiter is taken per HTTP attempt)."""
        if not self.args.prefix_first or request.video is None:
            return None
        with self._first_lock:
            done = self._first_done.get(request.video)
            if done is None:
                done = self._first_done[request.video] = threading.Event()
                return done
        done.wait()
        self.breaker.check()  # the first question may have stopped the run (a configuration error)
        return None

    def finish(self) -> None:
        """The next ``generate_until`` call starts afresh (its first question per video goes alone)."""
        with self._first_lock:
            self._first_done.clear()

    # -- one question -----------------------------------------------------------------------------
    def respond(self, request: NaruRequest) -> Answer:
        first = self._wait_for_first(request)
        try:
            return self.with_audio_usage(request, self._ask(request))
        finally:
            if first is not None:  # answered or failed: the video's other questions go now
                first.set()

    def _ask(self, request: NaruRequest) -> Answer:
        messages = self.messages(request)
        params = self.request_params(request.gen_kwargs)
        extra = self.extra_body(request)
        if extra is not None:
            params["extra_body"] = extra

        def create() -> Any:
            return self.client.chat.completions.create(model=self.model, messages=messages, **params)

        try:
            called = self.caller.call(create, f"question {request.question_id}")
        except RetryError as e:
            self._note_unreachable(e)
            raise RequestFailed(
                f"openai_compat: {e}",
                {"attempts": e.attempts, "status": e.status, "error": type(e.last_error).__name__},
            ) from e
        with self._unreachable_lock:
            self._unreachable = 0
        return self.answer_from(called.value, called.attempts)

    def _note_unreachable(self, e: RetryError) -> None:
        if not (is_connection_error(e.last_error) and not is_timeout(e.last_error)):
            with self._unreachable_lock:
                self._unreachable = 0
            return
        with self._unreachable_lock:
            self._unreachable += 1
            count = self._unreachable
        if count >= self.abort_after:
            raise ServerUnreachable(
                f"{self.model_id}: {count} requests in a row could not reach {self.base_url} ({e}); "
                "stopping. Answers so far are in the response store; rerun to resume."
            ) from e

    @staticmethod
    def answer_from(completion: Any, attempts: int = 1) -> Answer:
        """The answer of a ``ChatCompletion``, or RequestFailed (no choice, refusal, filter, empty)."""
        usage: dict[str, Any] = {"attempts": attempts}
        u = getattr(completion, "usage", None)
        if u is not None:
            usage.update(usage_of(u))
        usage["system_fingerprint"] = getattr(completion, "system_fingerprint", None)
        usage["response_model"] = getattr(completion, "model", None)
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise RequestFailed("openai_compat: the reply has no choices", usage)
        choice = choices[0]
        usage["finish_reason"] = choice.finish_reason
        message = choice.message
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise RequestFailed(f"openai_compat: refusal: {str(refusal)[:300]}", usage)
        if choice.finish_reason == "content_filter":
            raise RequestFailed("openai_compat: finish_reason=content_filter", usage)
        text = message.content or ""
        if not text.strip():
            raise RequestFailed(f"openai_compat: empty completion (finish_reason={choice.finish_reason})", usage)
        return Answer(text, usage)
