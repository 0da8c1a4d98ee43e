"""``naru_openai_compat``: any OpenAI-compatible chat-completions server (vLLM, SGLang, ...).

    lmms-eval --model naru_openai_compat \\
        --model_args model=Qwen/Qwen2.5-VL-7B-Instruct,base_url=http://127.0.0.1:8000/v1,num_frames=32 \\
        --tasks naru_mcq --output_path results --log_samples

The request goes through the real ``openai`` SDK (``chat.completions.create``), temperature 0,
``max_tokens`` from the task's generation kwargs (``max_tokens`` or ``max_new_tokens``, else
16). The user message holds the video first and the question after it, so the ~10 questions of
one video share a prompt prefix the server's prefix cache serves; the base submits requests
grouped by video, ``max_concurrency`` at a time.

* ``video_mode=frames`` (default): the sampler's frames, each a base64 JPEG ``image_url`` part.
* ``video_mode=video_url``: one ``video_url`` part (``file://`` URL, or ``video_url_prefix`` +
  the file's name, or its path under ``video_root``); the server decodes the video itself and no
  frame is decoded here.

The API key is read from ``OPENAI_API_KEY`` only: lmms-eval writes ``model_args`` into
``results.json``, so a key given there is refused. The SDK's own retries are off; the one retry
policy is :mod:`naru_eval.api.retry`. A request that still fails, is refused, is empty or is
filtered raises :class:`RequestFailed` (stored as a failure, scored invalid, retried next run).
See docs/openai_compat.md.
"""

from __future__ import annotations

import base64
import inspect
import io
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import quote, urlsplit

from loguru import logger
from pydantic import Field, field_validator, model_validator

from model_adapters.args import AdapterArgs, ArgParser
from model_adapters.base import Answer, NaruModel, NaruRequest, RequestFailed
from naru_eval.api.caller import ApiCaller
from naru_eval.api.limiter import AdaptiveLimiter, limiter_for
from naru_eval.api.openai_client import make_openai_client, openai_errors, usage_of
from naru_eval.api.retry import RetryArgs, RetryError, RetryPolicy, is_connection_error, is_timeout
from naru_eval.judge.config import is_reasoning_family

VIDEO_MODES = ("frames", "video_url")
DEFAULT_MAX_TOKENS = 16

#: arguments lmms-eval adds by itself (``create_from_arg_string``); they change nothing here
_LMMS_EVAL_EXTRAS = ("device", "max_batch_size")
#: argument names that look like secrets but are not
_NOT_SECRET = frozenset({"max_tokens", "max_new_tokens"})


class ServerUnreachable(RuntimeError):
    """Too many requests in a row could not reach the server: the run stops (a rerun resumes)."""


_ARGS = ArgParser("naru_openai_compat")
#: the base's arguments (frame budget, response store, batch size) passed through
_BASE_ARGS = tuple(n for n in inspect.signature(NaruModel.__init__).parameters if n not in ("self", "kwargs"))


def check_server_url(url: str) -> str:
    """An http(s) URL without credentials (lmms-eval writes model_args into results.json)."""
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"naru_openai_compat: base_url must be an http(s) URL, got {url!r}")
    if parts.username or parts.password:
        raise ValueError(
            "naru_openai_compat: base_url must not carry credentials (user:password@); "
            "lmms-eval writes model_args into results.json. Use OPENAI_API_KEY."
        )
    return str(url)


class OpenAICompatArgs(RetryArgs, AdapterArgs):
    """``naru_openai_compat``'s own ``--model_args`` (the frame budget and store go to the base);
    docs/openai_compat.md explains each."""

    model: str | None = Field(None, validate_default=True, description="the served model name (required)")
    base_url: str | None = Field(None, description="http(s)://HOST:PORT/v1 (else $OPENAI_BASE_URL)")
    video_mode: Literal["frames", "video_url"] = Field("frames", description="frames: JPEG parts; video_url: one URL")
    video_url_prefix: str | None = Field(None, description="video_url mode: an http(s) prefix + the file's name")
    video_root: str | None = Field(None, description="video_url mode: URLs keep the path under this folder")
    jpeg_quality: int = Field(85, ge=1, le=100, description="JPEG quality of the frames sent")
    max_concurrency: int = Field(8, ge=1, description="the ceiling of requests in flight (AIMD below it)")
    timeout: float = Field(300.0, ge=0, description="seconds per HTTP request")
    abort_after: int | None = Field(None, ge=1, description="stop after this many unreachable requests in a row")
    check_model: bool = Field(True, description="check GET /models serves model before asking")
    max_images_per_prompt: int | None = Field(None, ge=1, description="the server's image limit (frames mode)")
    reasoning: bool | Literal["auto"] = Field("auto", description="a reasoning model (auto: gpt-5*, o-series)")
    max_completion_tokens: int | None = Field(None, ge=1, description="reasoning models' output budget")

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: Any) -> Any:
        if v is None or not str(v).strip():
            raise ValueError("model=<served model name> is required")
        return str(v)

    @field_validator("video_mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Any:
        if v is not None and v not in VIDEO_MODES:
            raise ValueError(f"video_mode must be one of {VIDEO_MODES}, got {v!r}")
        return v

    @field_validator("reasoning", mode="before")
    @classmethod
    def _auto(cls, v: Any) -> Any:
        return "auto" if v is None or (isinstance(v, str) and v.strip().lower() == "auto") else v

    @model_validator(mode="after")
    def _modes(self) -> OpenAICompatArgs:
        prefix = self.video_url_prefix
        if self.video_mode == "video_url" and prefix and not prefix.startswith(("http://", "https://")):
            raise ValueError(f"video_url_prefix must be an http(s) URL, got {prefix!r}")
        if self.max_images_per_prompt is not None and self.video_mode != "frames":
            raise ValueError(
                "max_images_per_prompt applies to video_mode=frames only "
                "(in video_url mode the server samples the frames itself)"
            )
        return self


def encode_jpeg(frame: Any, quality: int) -> str:
    """A ``data:image/jpeg;base64,...`` URL of one uint8 HxWx3 RGB frame."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class _Parts:
    """One video's encoded parts, built once under its own lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parts: list[dict[str, Any]] | None = None


class OpenAICompat(NaruModel):
    model_id = "naru_openai_compat"
    default_num_frames = 32
    Args: ClassVar[type[OpenAICompatArgs]] = OpenAICompatArgs

    def __init__(self, **kwargs: Any) -> None:
        self._refuse_secrets(kwargs)
        for extra in _LMMS_EVAL_EXTRAS:
            kwargs.pop(extra, None)
        args, base = self.Args.parse(self.model_id, kwargs, passthrough=_BASE_ARGS)
        #: the typed model args, as given
        self.args = args
        resolved_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
        if not resolved_url:
            raise ValueError("naru_openai_compat: give base_url=http://HOST:PORT/v1 or set OPENAI_BASE_URL")
        check_server_url(resolved_url)
        super().__init__(**base)
        assert args.model is not None
        self.model = args.model
        self.base_url = str(resolved_url)
        self.video_mode = args.video_mode
        self.video_url_prefix = args.video_url_prefix
        self.video_root = Path(args.video_root) if args.video_root else None
        self.jpeg_quality = args.jpeg_quality
        self.max_concurrency = args.max_concurrency
        self.retry_policy = RetryPolicy(
            max_attempts=args.max_retries + 1, base_delay=args.retry_base_delay, max_delay=args.retry_max_delay
        )
        self.max_retries = args.max_retries
        self.timeout = args.timeout
        self.abort_after = args.abort_after if args.abort_after is not None else max(10, 2 * self.max_concurrency)
        self.check_model = args.check_model
        if self.video_mode == "video_url":
            self.needs_frames = False  # the server decodes the video itself
        self.max_images_per_prompt = args.max_images_per_prompt
        self.reasoning = is_reasoning_family(self.model) if args.reasoning == "auto" else bool(args.reasoning)
        self.max_completion_tokens = args.max_completion_tokens
        if self.max_completion_tokens is not None and not self.reasoning:
            raise ValueError(
                "naru_openai_compat: max_completion_tokens is for reasoning models (reasoning=true); "
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
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._parts: OrderedDict[str, _Parts] = OrderedDict()
        self._parts_lock = threading.Lock()
        self._parts_capacity = max(4, self.max_concurrency + 1)
        self._unreachable = 0
        self._unreachable_lock = threading.Lock()

    # -- configuration checks -----------------------------------------------------------------
    @staticmethod
    def _refuse_secrets(args: Mapping[str, Any]) -> None:
        _ARGS.refuse_secrets(args, ("OPENAI_API_KEY",), _NOT_SECRET)

    def describe(self) -> dict[str, Any]:
        """What changes the answers: the served model and how the video is sent (not the URL)."""
        desc = {**super().describe(), "served_model": self.model, "video_mode": self.video_mode}
        if self.video_mode == "frames":
            desc["jpeg_quality"] = self.jpeg_quality
        if self.reasoning:  # no temperature, max_completion_tokens: another request
            desc["reasoning"] = True
            desc["max_completion_tokens"] = self.max_completion_tokens
        return desc

    # -- the client -------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client, built on first use (SDK retries off)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = make_openai_client(
                        self.base_url, timeout=self.timeout, who=self.model_id, info=logger.info
                    )
        return self._client

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        return self.caller.call(fn, what).value

    def frames_per_question(self, requests: Sequence[NaruRequest]) -> tuple[int, NaruRequest] | None:
        """The most images one question sends (frames mode), and the request that sends them.

        A fixed budget sends ``num_frames`` (capped by ``max_frames``) for every video; an fps
        budget sends ``fps x duration`` (capped), so the longest video decides. Durations come
        from the doc (the preflight fills them in), else from the container.
        """
        with_video = [r for r in requests if r.video is not None]
        if not with_video or self.video_mode != "frames":
            return None
        if self.num_frames is not None:
            n = min(self.num_frames, self.max_frames) if self.max_frames else self.num_frames
            return n, with_video[0]
        from naru_eval.media.video import frames_for_fps, probe_video

        durations: dict[str, float] = {}
        first: dict[str, NaruRequest] = {}
        for r in with_video:
            assert r.video is not None
            if r.video in durations:
                continue
            dur = r.doc.get("duration_s")
            durations[r.video] = (
                float(dur)
                if dur not in (None, "") and float(dur) > 0
                else probe_video(r.video, check_end=False).duration_s
            )
            first[r.video] = r
        longest = max(durations, key=lambda v: durations[v])
        assert self.fps is not None
        return frames_for_fps(durations[longest], self.fps, self.max_frames), first[longest]

    def _check_image_limit(self, requests: Sequence[NaruRequest]) -> None:
        if self.max_images_per_prompt is None:
            return
        most = self.frames_per_question(requests)
        if most is None:
            return
        n, request = most
        if n > self.max_images_per_prompt:
            how = (
                f"num_frames={self.num_frames}"
                if self.num_frames is not None
                else f"fps={self.fps} x {Path(str(request.video)).name} ({request.doc.get('duration_s') or 'probed'} s)"
            )
            raise ValueError(
                f"naru_openai_compat: {how} sends {n} images per question (e.g. {request.question_id}), "
                f"over the server's limit max_images_per_prompt={self.max_images_per_prompt}. Lower the budget "
                f"(num_frames, or max_frames with fps) or raise the server's limit (vLLM: "
                f"--limit-mm-per-prompt '{{\"image\": {n}}}'). Nothing was asked."
            )

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        """Before the first question: the frames fit the server's image limit, and the server
        answers and serves ``model`` (else one clear error, and nothing is asked)."""
        if not requests:
            return
        self._check_image_limit(requests)
        if not self.check_model:
            return
        try:
            listing = self._call(lambda: self.client.models.list(), "GET /models")
        except RetryError as e:
            if e.status in (404, 405, 501):  # a server without /models: nothing to check
                return
            raise RuntimeError(f"naru_openai_compat: the server at {self.base_url} is not usable: {e}") from e
        served = [m.id for m in getattr(listing, "data", []) or []]
        if served and self.model not in served:
            raise ValueError(
                f"naru_openai_compat: model {self.model!r} is not served at {self.base_url}; it serves {served}"
            )

    # -- the message ------------------------------------------------------------------------------
    def video_url(self, path: str) -> str:
        p = Path(path)
        if self.video_url_prefix is None:
            return p.resolve().as_uri()
        if self.video_root is not None:
            rel = p.resolve().relative_to(self.video_root.resolve()).as_posix()
        else:
            rel = p.name
        return self.video_url_prefix.rstrip("/") + "/" + quote(rel)

    def video_parts(self, request: NaruRequest) -> list[dict[str, Any]]:
        """The message parts for the request's video (identical for every question on it); none
        for a text-only request (the blind tasks)."""
        if request.video is None:
            return []
        if self.video_mode == "video_url":
            return [{"type": "video_url", "video_url": {"url": self.video_url(request.video)}}]
        with self._parts_lock:
            entry = self._parts.get(request.video)
            if entry is None:
                entry = self._parts[request.video] = _Parts()
                while len(self._parts) > self._parts_capacity:
                    self._parts.popitem(last=False)
            else:
                self._parts.move_to_end(request.video)
        with entry.lock:  # concurrent questions on one video decode and encode it once
            if entry.parts is None:
                sampled = self.frames(request)
                entry.parts = [
                    {"type": "image_url", "image_url": {"url": encode_jpeg(f, self.jpeg_quality)}}
                    for f in sampled.frames
                ]
            return entry.parts

    def messages(self, request: NaruRequest) -> list[dict[str, Any]]:
        """Video parts first, then the question: one video's questions share a prompt prefix."""
        return [{"role": "user", "content": [*self.video_parts(request), {"type": "text", "text": request.prompt}]}]

    @staticmethod
    def max_tokens(gen_kwargs: Mapping[str, Any]) -> int:
        for name in ("max_tokens", "max_new_tokens"):
            if gen_kwargs.get(name) not in (None, ""):
                return int(gen_kwargs[name])
        return DEFAULT_MAX_TOKENS

    def settings(self, gen_kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The sampling settings sent: temperature 0 and ``max_tokens``; for a reasoning model
        (gpt-5*, o-series, or ``reasoning=true``) ``max_completion_tokens`` and no temperature,
        which such models refuse to change."""
        if self.reasoning:
            return {"max_completion_tokens": self.max_completion_tokens or self.max_tokens(gen_kwargs)}
        return {"max_tokens": self.max_tokens(gen_kwargs), "temperature": 0.0}

    # -- one question -----------------------------------------------------------------------------
    def respond(self, request: NaruRequest) -> Answer:
        messages = self.messages(request)
        settings = self.settings(request.gen_kwargs)

        def create() -> Any:
            return self.client.chat.completions.create(model=self.model, messages=messages, **settings)

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
                f"naru_openai_compat: {count} requests in a row could not reach {self.base_url} ({e}); "
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
