"""The server-recipe checks the OpenAI-compatible adapter runs before its first question: the frames fit
the server's image limit, ``GET /models`` serves the model, its ``max_model_len`` holds the
longest video, and an SGLang server is not sent pre-extracted frames as one video. Each failure
is one clear error naming the fix, and nothing is asked (docs/openai_compat.md, Server recipes).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from naru_eval.api.caller import ApiCaller
from naru_eval.api.retry import RetryError
from naru_eval.core.budgets import Sampling
from naru_eval.providers.openai_compat.args import OpenAICompatArgs
from naru_eval.providers.openai_compat.served import media_tokens, qwen_patch_size

if TYPE_CHECKING:
    from naru_eval.adapters.qwen_sampling import QwenVideoPlan
    from naru_eval.adapters.request import NaruRequest


class CheckedAdapter(Protocol):
    """What the checks read of the adapter (``model_adapters/openai_compat.py``)."""

    args: OpenAICompatArgs
    model: str
    base_url: str
    video_mode: str
    sampling: Sampling
    caller: ApiCaller
    #: the served context ``GET /models`` reports (the audio plan's, when none is given)
    served_max_model_len: int | None

    @property
    def client(self) -> Any: ...

    def video_plan(self, video: str) -> QwenVideoPlan | None: ...


#: prompt tokens left beside the media for the question, the options and the answer
TEXT_MARGIN_TOKENS = 1024


class MediaCost(NamedTuple):
    """The prompt tokens one video's frames cost, and what they are."""

    tokens: int
    frames: int
    height: int
    width: int
    video: str


def check_before_asking(adapter: CheckedAdapter, requests: Sequence[NaruRequest]) -> None:
    """Every check, in order: the image limit, then (``check_model``) what the server says."""
    check_image_limit(adapter, requests)
    if adapter.args.check_model:
        check_server(adapter, requests)


def frames_per_question(adapter: CheckedAdapter, requests: Sequence[NaruRequest]) -> tuple[int, NaruRequest] | None:
    """The most frames one question sends (frames or video mode), and the request that sends them.

    A fixed budget sends ``num_frames`` (capped by ``max_frames``) for every video; an fps
    budget sends ``fps x duration`` (capped), so the longest video decides. Durations come
    from the doc (the preflight fills them in), else from the container.
    """
    with_video = [r for r in requests if r.video is not None]
    if not with_video or adapter.video_mode == "video_url":
        return None
    s = adapter.sampling
    if s.frames is not None:
        n = min(s.frames, s.max_frames) if s.max_frames else s.frames
        return n, with_video[0]
    from naru_eval.media.plan import frames_for_fps
    from naru_eval.media.video import probe_video

    durations: dict[str, float] = {}
    first: dict[str, NaruRequest] = {}
    for r in with_video:
        assert r.video is not None
        if r.video in durations:
            continue
        dur = r.duration_s
        durations[r.video] = dur if dur is not None and dur > 0 else probe_video(r.video, check_end=False).duration_s
        first[r.video] = r
    longest = max(durations, key=lambda v: durations[v])
    assert s.fps is not None
    return frames_for_fps(durations[longest], s.fps, s.max_frames), first[longest]


def check_image_limit(adapter: CheckedAdapter, requests: Sequence[NaruRequest]) -> None:
    """Frames mode: the most images one question sends is within ``max_images_per_prompt``."""
    if adapter.args.max_images_per_prompt is None or adapter.video_mode != "frames":
        return
    most = frames_per_question(adapter, requests)
    if most is None:
        return
    n, request = most
    if n > adapter.args.max_images_per_prompt:
        s = adapter.sampling
        how = (
            f"num_frames={s.frames}"
            if s.frames is not None
            else f"fps={s.fps} x {Path(str(request.video)).name} ({request.duration_s or 'probed'} s)"
        )
        raise ValueError(
            f"naru_openai_compat: {how} sends {n} images per question (e.g. {request.question_id}), "
            f"over the server's limit max_images_per_prompt={adapter.args.max_images_per_prompt}. Lower the budget "
            f"(num_frames, or max_frames with fps) or raise the server's limit (vLLM: "
            f"--limit-mm-per-prompt '{{\"image\": {n}}}'). Nothing was asked."
        )


def check_server(adapter: CheckedAdapter, requests: Sequence[NaruRequest]) -> None:
    """``GET /models``: the server answers and serves ``adapter.model``, its ``max_model_len`` holds
    the longest video, and an SGLang server is not sent our frames as one video."""
    try:
        listing = adapter.caller.call(lambda: adapter.client.models.list(), "GET /models").value
    except RetryError as e:
        if e.status in (404, 405, 501):  # a server without /models: nothing to check
            return
        raise RuntimeError(f"naru_openai_compat: the server at {adapter.base_url} is not usable: {e}") from e
    models = list(getattr(listing, "data", []) or [])
    served = [m.id for m in models]
    if served and adapter.model not in served:
        raise ValueError(
            f"naru_openai_compat: model {adapter.model!r} is not served at {adapter.base_url}; it serves {served}"
        )
    card = next((m for m in models if m.id == adapter.model), None)
    owner = getattr(card, "owned_by", None)
    served_len = getattr(card, "max_model_len", None)
    if isinstance(served_len, int) and served_len > 0:
        adapter.served_max_model_len = served_len  # the audio plan's context when none is given
    check_model_len(adapter, requests, getattr(card, "max_model_len", None))
    if adapter.video_mode == "video" and owner == "sglang" and any(r.video for r in requests):
        raise ValueError(
            f"naru_openai_compat: {adapter.base_url} is an SGLang server, which takes no pre-extracted "
            "frames as one video (it decodes and samples a video file itself; docs/openai_compat.md). "
            "Use video_mode=frames (our frames as images) or video_mode=video_url (server-sampled), "
            "or serve the model with vLLM. Nothing was asked."
        )


def most_media_tokens(adapter: CheckedAdapter, requests: Sequence[NaruRequest]) -> MediaCost | None:
    """The video whose frames cost the most prompt tokens (:func:`media_tokens`), or None when
    the rule is not known here."""
    if qwen_patch_size(adapter.model) is None or adapter.video_mode == "video_url":
        return None
    from naru_eval.media.plan import DEFAULT_MAX_PIXELS, frames_for_fps, target_size
    from naru_eval.media.video import probe_video

    worst: MediaCost | None = None
    s = adapter.sampling
    for video in dict.fromkeys(r.video for r in requests if r.video is not None):
        plan = adapter.video_plan(video)
        if plan is not None:
            n, h, w = plan.nframes, plan.height, plan.width
        else:
            info = probe_video(video, check_end=False)
            w, h = target_size(info.width, info.height, s.max_pixels or DEFAULT_MAX_PIXELS)
            if s.frames is not None:
                n = min(s.frames, s.max_frames) if s.max_frames else s.frames
            else:
                n = frames_for_fps(info.duration_s, float(s.fps or 0), s.max_frames)
        tokens = media_tokens(adapter.model, adapter.video_mode, n, h, w)
        if tokens is not None and (worst is None or tokens > worst.tokens):
            worst = MediaCost(tokens, n, h, w, video)
    return worst


def check_model_len(adapter: CheckedAdapter, requests: Sequence[NaruRequest], max_model_len: Any) -> None:
    """The server's ``max_model_len`` (vLLM and SGLang list it in ``GET /models``) holds the
    longest video's tokens and the question: else one clear error before the first question,
    instead of a 400 on every question of the long videos."""
    if not isinstance(max_model_len, int) or max_model_len <= 0:
        return
    worst = most_media_tokens(adapter, requests)
    if worst is None or worst.tokens + TEXT_MARGIN_TOKENS <= max_model_len:
        return
    tokens, n, h, w, video = worst
    raise ValueError(
        f"naru_openai_compat: {Path(video).name} costs {adapter.model} {tokens:,} prompt tokens as "
        f"{'one video' if adapter.video_mode == 'video' else 'images'} ({n} frames of {w}x{h} px) + "
        f"~{TEXT_MARGIN_TOKENS} for the question, over the server's max_model_len={max_model_len:,}. "
        "Raise --max-model-len (docs/openai_compat.md, Server recipes) or lower the budget. Nothing was asked."
    )
