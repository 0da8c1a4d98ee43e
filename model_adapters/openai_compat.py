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

The mode is the run's input mode (``video`` / ``images`` / ``server-sampled``): recorded with
every sample (:meth:`OpenAICompat.provenance`) and part of the response store's key.

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
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import quote, urlsplit

from loguru import logger
from pydantic import Field, field_validator, model_validator

from model_adapters.args import AdapterArgs, ArgParser, Flag
from model_adapters.base import Answer, NaruModel, NaruRequest, RequestFailed
from naru_eval.api.caller import ApiCaller
from naru_eval.api.limiter import AdaptiveLimiter, limiter_for
from naru_eval.api.openai_client import make_openai_client, openai_errors, usage_of
from naru_eval.api.retry import RetryArgs, RetryError, RetryPolicy, is_connection_error, is_timeout
from naru_eval.judge.config import is_reasoning_family

#: ``auto``: ``video`` for a Qwen-family served model, else ``frames`` (:func:`resolve_video_mode`)
VIDEO_MODES = ("auto", "video", "frames", "video_url")
#: video_mode -> the input mode the model gets (naru_eval.core.provenance)
INPUT_MODES = {"video": "video", "frames": "images", "video_url": "server-sampled"}
DEFAULT_MAX_TOKENS = 16
#: vLLM's media type for pre-extracted frames: the payload is comma-separated base64 JPEGs
#: (vllm/multimodal/media/video.py, VideoMediaIO.load_base64)
VIDEO_JPEG_PREFIX = "data:video/jpeg;base64,"
#: served names of the Qwen video families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen2.5/3-Omni, Qwen3.5)
_QWEN_VIDEO = re.compile(r"qwen[\d.]*[-_]?(?:vl|omni)|qwen3[._-]?5", re.IGNORECASE)

#: arguments lmms-eval adds by itself (``create_from_arg_string``); they change nothing here
_LMMS_EVAL_EXTRAS = ("device", "max_batch_size")
#: argument names that look like secrets but are not
_NOT_SECRET = frozenset({"max_tokens", "max_new_tokens"})


def is_qwen_video_family(model: str) -> bool:
    """Whether a served model name is a Qwen video family, whose processor gives one video
    temporal positions and timestamps that separate images do not get."""
    return bool(_QWEN_VIDEO.search(str(model).rsplit("/", 1)[-1]))


def qwen_patch_size(model: str) -> int | None:
    """qwen-vl-utils' ``image_patch_size`` of a Qwen video family by its served name (16 for
    Qwen3-VL / Qwen3.5, 14 for Qwen2-VL / Qwen2.5-VL / Omni), None for any other model."""
    if not is_qwen_video_family(model):
        return None
    return 16 if re.search(r"qwen3", str(model), re.IGNORECASE) else 14


#: prompt tokens left beside the media for the question, the options and the answer
TEXT_MARGIN_TOKENS = 1024


def media_tokens(model: str, mode: str, frames: int, height: int, width: int) -> int | None:
    """The prompt tokens ``frames`` frames of ``height`` x ``width`` px cost a Qwen family, by its
    processor's rule (qwen-vl-utils ``smart_resize`` and limits; factor = patch x the 2x2 merge):
    as one video, frame pairs share a temporal patch's tokens (Qwen3-VL / Qwen3.5 add a ``<t
    seconds>`` timestamp and vision start/end per patch, counted as 8); as images, every frame
    pays its own. None for another family or a server-sampled video (unknown here)."""
    patch = qwen_patch_size(model)
    if patch is None or mode not in ("video", "frames"):
        return None
    from qwen_vl_utils import vision_process as vp

    f = patch * vp.SPATIAL_MERGE_SIZE
    lo, hi = (
        (vp.VIDEO_MIN_TOKEN_NUM, vp.VIDEO_MAX_TOKEN_NUM)
        if mode == "video"
        else (vp.IMAGE_MIN_TOKEN_NUM, vp.IMAGE_MAX_TOKEN_NUM)
    )
    rh, rw = vp.smart_resize(int(height), int(width), factor=f, min_pixels=lo * f * f, max_pixels=hi * f * f)
    grid = (rh // f) * (rw // f)
    if mode == "video":
        return -(-int(frames) // 2) * (grid + (8 if patch == 16 else 0)) + 2
    return int(frames) * (grid + 2)


def resolve_video_mode(mode: str, model: str | None) -> str:
    """``auto`` -> ``video`` for a Qwen-family served model, else ``frames``; others as given."""
    if mode != "auto":
        return mode
    return "video" if model and is_qwen_video_family(model) else "frames"


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
    video_mode: Literal["auto", "video", "frames", "video_url"] = Field(
        "auto",
        description="video: our frames as one video part; frames: JPEG image parts; video_url: one URL the "
        "server samples (auto: video for Qwen-family models, else frames)",
    )
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
    decode_workers: int = Field(0, ge=0, description="processes decoding the next videos ahead (0: decode inline)")
    decode_budget_mb: int = Field(4096, ge=1, description="decoded frames held ahead, in MiB")
    prefix_first: Flag = Field(
        True, description="ask a video's first question alone, its others once it is answered (prefix cache)"
    )

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
        if self.max_images_per_prompt is not None and resolve_video_mode(self.video_mode, self.model) != "frames":
            raise ValueError(
                "max_images_per_prompt applies to video_mode=frames only "
                "(video mode sends one video part; in video_url mode the server samples the frames itself)"
            )
        return self


def jpeg_base64(frame: Any, quality: int) -> str:
    """The base64 JPEG of one uint8 HxWx3 RGB frame (deterministic at a fixed quality)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame, mode="RGB").save(buf, format="JPEG", quality=quality)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def encode_jpeg(frame: Any, quality: int) -> str:
    """A ``data:image/jpeg;base64,...`` URL of one uint8 HxWx3 RGB frame."""
    return "data:image/jpeg;base64," + jpeg_base64(frame, quality)


def encode_video(frames: Any, quality: int) -> str:
    """One ``data:video/jpeg;base64,...`` URL of the frames, in order: vLLM decodes the
    comma-separated JPEGs back into one video without sampling them again."""
    return VIDEO_JPEG_PREFIX + ",".join(jpeg_base64(f, quality) for f in frames)


def video_metadata(sampled: Any) -> dict[str, Any]:
    """The timing of the sampled frames as vLLM's ``media_io_kwargs["video"]`` takes it (and
    the model's processor reads: Qwen2.5-VL's temporal position spacing, Qwen3-VL's
    timestamps): the same numbers the HF path hands its processor. ``num_frames=-1`` keeps
    every frame sent, whatever the server's default."""
    info = sampled.info
    indices = [int(i) for i in sampled.indices]
    return {
        "num_frames": -1,
        "fps": float(info.fps),
        "frames_indices": indices,
        # vLLM requires at least one frame number per frame sent; a budget above the video's
        # frame count repeats frames (the sampler's rule), so the count is at least the frames sent
        "total_num_frames": max(int(info.frame_count), len(indices)),
        "duration": float(info.duration_s),
    }


class _Parts:
    """One video's encoded parts (and, in video mode, its timing), built once under its own lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parts: list[dict[str, Any]] | None = None
        self.media_io_kwargs: dict[str, Any] | None = None


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
        #: the resolved mode: video, frames or video_url (``auto`` decided by the served name)
        self.video_mode = resolve_video_mode(args.video_mode, self.model)
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
        self.prefix_first = args.prefix_first
        # decode-ahead (the base's, naru_eval.media.prefetch): the next videos decode in worker
        # processes while the server answers this one (video and frames modes)
        self.decode_workers = args.decode_workers
        self.decode_budget_bytes = args.decode_budget_mb << 20
        #: video -> the qwen-vl-utils plan of a rate-sampled Qwen video (video mode)
        self._plans: dict[str, Any] = {}
        #: video -> set once its first question of this call is answered (prefix_first)
        self._first_done: dict[str, threading.Event] = {}
        self._first_lock = threading.Lock()

    # -- configuration checks -----------------------------------------------------------------
    @staticmethod
    def _refuse_secrets(args: Mapping[str, Any]) -> None:
        _ARGS.refuse_secrets(args, ("OPENAI_API_KEY",), _NOT_SECRET)

    @property
    def input_mode(self) -> str:
        """What the model is given (naru_eval.core.provenance): ``video``, ``images`` or ``server-sampled``."""
        return INPUT_MODES[self.video_mode]

    def provenance(self) -> dict[str, str | None]:
        """The input mode of every answer of this run (written into each sample payload)."""
        return {"adapter": self.model_id, "input_mode": self.input_mode}

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
        if self.video_mode in ("frames", "video"):
            desc["jpeg_quality"] = self.jpeg_quality
        patch = qwen_patch_size(self.model)
        if self.video_mode == "video" and self.fps is not None and patch is not None:
            from qwen_vl_utils import vision_process as vp  # MODEL_SEQ_LEN may come from the environment

            desc["qwen_vl_utils_sizing"] = {"patch_size": patch, "model_seq_len": vp.MODEL_SEQ_LEN}
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
        """The most frames one question sends (frames or video mode), and the request that sends them.

        A fixed budget sends ``num_frames`` (capped by ``max_frames``) for every video; an fps
        budget sends ``fps x duration`` (capped), so the longest video decides. Durations come
        from the doc (the preflight fills them in), else from the container.
        """
        with_video = [r for r in requests if r.video is not None]
        if not with_video or self.video_mode == "video_url":
            return None
        if self.num_frames is not None:
            n = min(self.num_frames, self.max_frames) if self.max_frames else self.num_frames
            return n, with_video[0]
        from naru_eval.media.plan import frames_for_fps
        from naru_eval.media.video import probe_video

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
        if self.max_images_per_prompt is None or self.video_mode != "frames":
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
        models = list(getattr(listing, "data", []) or [])
        served = [m.id for m in models]
        if served and self.model not in served:
            raise ValueError(
                f"naru_openai_compat: model {self.model!r} is not served at {self.base_url}; it serves {served}"
            )
        card = next((m for m in models if m.id == self.model), None)
        owner = getattr(card, "owned_by", None)
        self._check_model_len(requests, getattr(card, "max_model_len", None))
        if self.video_mode == "video" and owner == "sglang" and any(r.video for r in requests):
            raise ValueError(
                f"naru_openai_compat: {self.base_url} is an SGLang server, which takes no pre-extracted "
                "frames as one video (it decodes and samples a video file itself; docs/openai_compat.md). "
                "Use video_mode=frames (our frames as images) or video_mode=video_url (server-sampled), "
                "or serve the model with vLLM. Nothing was asked."
            )

    def most_media_tokens(self, requests: Sequence[NaruRequest]) -> tuple[int, int, int, int, str] | None:
        """(tokens, frames, height, width, video) of the video whose frames cost the most prompt
        tokens (:func:`media_tokens`), or None when the rule is not known here."""
        if qwen_patch_size(self.model) is None or self.video_mode == "video_url":
            return None
        from naru_eval.media.plan import DEFAULT_MAX_PIXELS, frames_for_fps, target_size
        from naru_eval.media.video import probe_video

        worst: tuple[int, int, int, int, str] | None = None
        for video in dict.fromkeys(r.video for r in requests if r.video is not None):
            plan = self.video_plan(video)
            if plan is not None:
                n, h, w = plan.nframes, plan.height, plan.width
            else:
                info = probe_video(video, check_end=False)
                w, h = target_size(info.width, info.height, self.max_pixels or DEFAULT_MAX_PIXELS)
                if self.num_frames is not None:
                    n = min(self.num_frames, self.max_frames) if self.max_frames else self.num_frames
                else:
                    n = frames_for_fps(info.duration_s, float(self.fps or 0), self.max_frames)
            tokens = media_tokens(self.model, self.video_mode, n, h, w)
            if tokens is not None and (worst is None or tokens > worst[0]):
                worst = (tokens, n, h, w, video)
        return worst

    def _check_model_len(self, requests: Sequence[NaruRequest], max_model_len: Any) -> None:
        """The server's ``max_model_len`` (vLLM and SGLang list it in ``GET /models``) holds the
        longest video's tokens and the question: else one clear error before the first question,
        instead of a 400 on every question of the long videos."""
        if not isinstance(max_model_len, int) or max_model_len <= 0:
            return
        worst = self.most_media_tokens(requests)
        if worst is None or worst[0] + TEXT_MARGIN_TOKENS <= max_model_len:
            return
        tokens, n, h, w, video = worst
        raise ValueError(
            f"naru_openai_compat: {Path(video).name} costs {self.model} {tokens:,} prompt tokens as "
            f"{'one video' if self.video_mode == 'video' else 'images'} ({n} frames of {w}x{h} px) + "
            f"~{TEXT_MARGIN_TOKENS} for the question, over the server's max_model_len={max_model_len:,}. "
            "Raise --max-model-len (docs/openai_compat.md, Server recipes) or lower the budget. Nothing was asked."
        )

    # -- the frames -------------------------------------------------------------------------------
    def video_plan(self, video: str) -> Any:
        """Video mode, rate sampling (``fps=``), a Qwen family: the frame count and size
        qwen-vl-utils gives (``model_adapters.qwen.qwen_video_plan``, the HF path's rule), so the
        server gets the frames and tokens the HF path feeds the model; None otherwise."""
        patch = qwen_patch_size(self.model)
        if self.video_mode != "video" or self.fps is None or patch is None:
            return None
        if video not in self._plans:
            from model_adapters.qwen import qwen_video_plan
            from naru_eval.media.video import probe_video

            info = probe_video(video, check_end=False)
            try:
                self._plans[video] = qwen_video_plan(
                    info.frame_count, info.fps, info.height, info.width, fps=self.fps, patch_size=patch,
                    max_frames=self.max_frames, max_pixels=self.max_pixels,
                )  # fmt: skip
            except ValueError as e:  # e.g. fewer frames than qwen-vl-utils' FRAME_FACTOR
                raise RequestFailed(f"video {video}: qwen-vl-utils sampling at fps={self.fps:g}: {e}") from None
        return self._plans[video]

    def frame_params(self, video: str) -> dict[str, Any]:
        plan = self.video_plan(video)
        if plan is None:
            return super().frame_params(video)
        from naru_eval.media.frame_cache import sampling_params

        return sampling_params(num_frames=plan.nframes, max_pixels=plan.max_pixels)

    def frames(self, request: NaruRequest) -> Any:
        sampled = super().frames(request)
        plan = self.video_plan(request.video) if request.video is not None else None
        if plan is None:
            return sampled
        from model_adapters.qwen import resize_frames

        return sampled._replace(frames=resize_frames(sampled.frames, plan.height, plan.width))

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

    def _entry(self, request: NaruRequest) -> _Parts:
        """The video's encoded parts, decoded and encoded once even when several of its questions
        are in flight (a small LRU of videos)."""
        assert request.video is not None
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
                if self.video_mode == "video":
                    entry.parts = [
                        {"type": "video_url", "video_url": {"url": encode_video(sampled.frames, self.jpeg_quality)}}
                    ]
                    entry.media_io_kwargs = {"video": video_metadata(sampled)}
                else:
                    entry.parts = [
                        {"type": "image_url", "image_url": {"url": encode_jpeg(f, self.jpeg_quality)}}
                        for f in sampled.frames
                    ]
        return entry

    def video_parts(self, request: NaruRequest) -> list[dict[str, Any]]:
        """The message parts for the request's video (identical for every question on it); none
        for a text-only request (the blind tasks)."""
        if request.video is None:
            return []
        if self.video_mode == "video_url":
            return [{"type": "video_url", "video_url": {"url": self.video_url(request.video)}}]
        parts = self._entry(request).parts
        assert parts is not None
        return parts

    def extra_body(self, request: NaruRequest) -> dict[str, Any] | None:
        """Video mode: the frames' timing as vLLM's per-request ``media_io_kwargs`` (the same for
        every question of a video); nothing otherwise."""
        if request.video is None or self.video_mode != "video":
            return None
        return {"media_io_kwargs": self._entry(request).media_io_kwargs}

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

    # -- the prefix cache ---------------------------------------------------------------------------
    def _wait_for_first(self, request: NaruRequest) -> threading.Event | None:
        """``prefix_first``: the first question of a video to get here goes on at once and gets
        the event to set when answered; every later one waits for that event, so the server has
        the video's prefix cached by then (instead of several questions computing it side by
        side). The wait holds no request slot (the limiter is taken per HTTP attempt)."""
        if not self.prefix_first or request.video is None:
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
            return self._ask(request)
        finally:
            if first is not None:  # answered or failed: the video's other questions go now
                first.set()

    def _ask(self, request: NaruRequest) -> Answer:
        messages = self.messages(request)
        settings = self.settings(request.gen_kwargs)
        extra = self.extra_body(request)
        if extra is not None:
            settings["extra_body"] = extra

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
