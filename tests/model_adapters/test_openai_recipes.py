"""The server recipes in docs/openai_compat.md match what ``naru_openai_compat`` will send.

Each recipe is a ``bash`` block of the doc's "Server recipes" section: a ``vllm serve`` (or
``python -m sglang.launch_server``) command and the ``lmms-eval`` command that evaluates through
it. The test builds the adapter from that ``--model_args`` and checks the server against it: the
input mode, the frames per question, the media limits, the prompt tokens of a 1080p video (128
frames, or 0.25 fps on a 240-minute video) by the family's own rule against the maximum model
length and the checkpoint's context, and the prefix cache left on.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from model_adapters.openai_compat import OpenAICompat
from naru_eval.adapters.registry import adapter_class, registered
from naru_eval.media.plan import DEFAULT_MAX_PIXELS, frames_for_fps, target_size
from naru_eval.providers.openai_compat.preflight import TEXT_MARGIN_TOKENS
from naru_eval.providers.openai_compat.served import media_tokens, qwen_patch_size

DOC = Path(__file__).resolve().parents[2] / "docs" / "openai_compat.md"
#: the video a recipe is sized for: NARU's longest (240 min), 1080p at 30 fps
WIDTH, HEIGHT, VIDEO_FPS, LONGEST_S = 1920, 1080, 30.0, 240 * 60
#: the question, the options and the answer: room left beside the video (the adapter's own margin)
TEXT_MARGIN = TEXT_MARGIN_TOKENS
#: each official open-weight family's context-maximal budget, as it declares it (a family whose
#: default names rows of the official leaderboard)
BUDGETS = {
    m: b
    for m in registered()
    if (b := adapter_class(m).family.budget) is not None and (d := adapter_class(m).family.default) and d.rows
}
#: the family of a served name (the docs' recipes serve the official checkpoints)
FAMILIES = [
    (r"qwen2\.5-vl", "naru_qwen2_5_vl"),
    (r"qwen3-vl", "naru_qwen3_vl"),
    (r"qwen3\.5", "naru_qwen3_5"),
    (r"internvl3_5", "naru_internvl3_5"),
    (r"minicpm-o-2_6", "naru_minicpm_o"),
    (r"nemotron-3-nano-omni", "naru_nemotron_omni"),
]


class Recipe(NamedTuple):
    server: str  # vllm | sglang
    serve: dict[str, Any]  # --flag -> value (True for a bare flag); "model" -> the served model
    model_args: dict[str, str]


def family_of(model: str) -> str:
    for pattern, family in FAMILIES:
        if re.search(pattern, model, re.IGNORECASE):
            return family
    raise AssertionError(f"no official family for {model}")


def commands(block: str) -> list[list[str]]:
    """The shell commands of a block (continuations joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", block)
    return [shlex.split(line, comments=True) for line in text.splitlines() if line.strip() and not line.startswith("#")]


def flags(argv: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                out[a] = argv[i + 1]
                i += 2
                continue
            out[a] = True
        i += 1
    return out


def recipes() -> list[Recipe]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Server recipes", 1)[1].split("\n## ", 1)[0]
    out = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        cmds = commands(block)
        serve = [c for c in cmds if c[:2] == ["vllm", "serve"] or c[:3] == ["python", "-m", "sglang.launch_server"]]
        evals = [c for c in cmds if c and c[0] == "lmms-eval"]
        assert len(serve) == 1 and len(evals) == 1, block
        argv = serve[0]
        server = "vllm" if argv[0] == "vllm" else "sglang"
        f = flags(argv[2:] if server == "vllm" else argv[3:])
        f["model"] = argv[2] if server == "vllm" else f["--model-path"]
        margs = dict(kv.split("=", 1) for kv in flags(evals[0])["--model_args"].split(","))
        out.append(Recipe(server, f, margs))
    return out


def frames_sent(model: OpenAICompat) -> tuple[int, int, int]:
    """(frames, height, width) the adapter sends for the longest 1080p video."""
    if model.fps is None:
        w, h = target_size(WIDTH, HEIGHT, model.max_pixels or DEFAULT_MAX_PIXELS)
        n = min(model.num_frames, model.max_frames) if model.max_frames else model.num_frames
        return int(n or 0), h, w
    patch = qwen_patch_size(model.model)
    if model.video_mode == "video" and patch is not None:
        from naru_eval.adapters.qwen_sampling import qwen_video_plan

        plan = qwen_video_plan(
            int(LONGEST_S * VIDEO_FPS), VIDEO_FPS, HEIGHT, WIDTH, fps=model.fps, patch_size=patch,
            max_frames=model.max_frames, max_pixels=model.max_pixels,
        )  # fmt: skip
        return plan.nframes, plan.height, plan.width
    w, h = target_size(WIDTH, HEIGHT, model.max_pixels or DEFAULT_MAX_PIXELS)
    return frames_for_fps(LONGEST_S, model.fps, model.max_frames), h, w


def prompt_tokens(family: str, mode: str, n: int, h: int, w: int, model: str) -> int:
    """The media's prompt tokens by the family's rule (the text margin is added by the caller)."""
    qwen = media_tokens(model, mode, n, h, w)  # the Qwen processor's rule, as the adapter checks it
    if qwen is not None:
        return qwen
    budget = BUDGETS[family]
    if mode == "video_url":  # the server samples: its own frames at its own per-frame cost
        return n * budget.tokens_per_frame
    return n * (budget.tokens_per_frame + 8)  # one tile / slice per frame, its markers and "Frame N:"


ALL = recipes()


def test_the_doc_has_a_recipe_per_official_family_on_both_servers():
    got = {(r.server, family_of(r.serve["model"])) for r in ALL}
    assert {f for s, f in got if s == "vllm"} == set(BUDGETS)
    assert {f for s, f in got if s == "sglang"} >= {"naru_qwen2_5_vl", "naru_qwen3_vl", "naru_qwen3_5"}


@pytest.mark.parametrize(
    "recipe",
    ALL,
    ids=lambda r: f"{r.server}-{r.serve['model']}-{r.model_args.get('fps') or r.model_args.get('num_frames')}",
)
def test_a_recipe_serves_what_the_adapter_sends(recipe: Recipe):
    serve, margs = recipe.serve, recipe.model_args
    assert margs["model"] == serve["model"]
    model = OpenAICompat(**{**margs, "base_url": "http://127.0.0.1:8000/v1"})
    family = family_of(model.model)
    n, h, w = frames_sent(model)
    if recipe.server == "sglang":
        media_frames = n
        assert model.video_mode == "frames", "SGLang takes no pre-extracted frames as one video"
        assert "--disable-radix-cache" not in serve  # RadixAttention (the prefix cache) is on by default
        length = int(serve["--context-length"])
    else:
        assert serve.get("--enable-prefix-caching") is True
        limits = json.loads(serve["--limit-mm-per-prompt"])
        io = json.loads(serve.get("--media-io-kwargs", "{}")).get("video", {})
        length = int(serve["--max-model-len"])
        if model.video_mode == "video":
            assert limits.get("video", 0) >= 1 and limits.get("image", 0) == 0
            assert io.get("num_frames") == -1  # keeps every frame sent (and each request says so too)
            media_frames = n
        elif model.video_mode == "frames":
            assert limits.get("image", 0) >= n and limits.get("video", 0) == 0
            media_frames = n
        else:  # video_url: the server samples io["num_frames"] frames itself
            assert limits.get("video", 0) >= 1
            media_frames = int(io["num_frames"])
    tokens = prompt_tokens(family, model.video_mode, media_frames, h, w, model.model) + TEXT_MARGIN
    assert tokens <= length <= BUDGETS[family].context_tokens, (family, media_frames, tokens, length)
    assert (
        model.provenance()["input_mode"]
        == {"video": "video", "frames": "images", "video_url": "server-sampled"}[model.video_mode]
    )
