"""Default frame budgets: the most frames each open-weight family samples per video.

The NARU paper evaluates open-weight models with "the maximum uniform sparse-frame sampling
permitted by each model's context window" (64-128 frames in its runs; its frame sweep is
8/16/32/64/128). These are the context-maximal budgets: the most frames the context allows. A run's *default*
sampling is a different thing, :data:`DEFAULT_SAMPLING`: the setting each model has on the
official NARU leaderboard, so a default run reproduces the published row. The rule used for
the budgets, per family:

    budget = the largest sweep value (<= 128) whose visual tokens, at the frame size the NARU
             sampler delivers (<= 448x448 px), fit the checkpoint's context window, and that
             the model's own documentation allows for video.

Every number below names where its inputs come from. ``num_frames=`` (or ``fps=`` with
``max_frames=``) in ``--model_args`` overrides the default, e.g. ``num_frames=<FRAME_BUDGETS
frames>`` for the context-maximal setting; see docs/adapters.md.
"""

from __future__ import annotations

from typing import NamedTuple


class FrameBudget(NamedTuple):
    """A family's default frame count and the arithmetic behind it."""

    frames: int
    checkpoint: str  # the reference checkpoint the numbers are for
    context_tokens: int  # the language model's context window (max_position_embeddings)
    tokens_per_frame: int  # visual tokens one <=448x448 frame costs
    source: str


#: family -> default frame budget (the family classes read ``.frames``)
FRAME_BUDGETS: dict[str, FrameBudget] = {
    "qwen2_5_vl": FrameBudget(
        frames=128,
        checkpoint="Qwen/Qwen2.5-VL-7B-Instruct",
        context_tokens=128_000,
        tokens_per_frame=128,
        source=(
            "config.json max_position_embeddings=128000; 14 px patches, 2x2 spatial merge and 2-frame "
            "temporal patches: a 448x448 frame costs (448/28)^2/2 = 128 tokens, so 128 frames = 16,384 "
            "tokens. qwen-vl-utils 0.0.14 (vision_process.py) allows FPS_MAX_FRAMES=768 and "
            "VIDEO_MAX_TOKEN_NUM=768 per frame with MODEL_SEQ_LEN=128000, so 128 is the sweep's top value."
        ),
    ),
    "qwen3_vl": FrameBudget(
        frames=128,
        checkpoint="Qwen/Qwen3-VL-8B-Instruct",
        context_tokens=262_144,
        tokens_per_frame=98,
        source=(
            "config.json text_config.max_position_embeddings=262144 (256K native context, model card); "
            "16 px patches, 2x2 merge, 2-frame temporal patches: (448/32)^2/2 = 98 tokens per frame plus a "
            "'<t seconds>' timestamp per temporal patch; 128 frames ~ 13K tokens. transformers "
            "Qwen3VLVideoProcessor max_frames=768."
        ),
    ),
    "qwen3_5": FrameBudget(
        frames=128,
        checkpoint="Qwen/Qwen3.5-9B",
        context_tokens=262_144,
        tokens_per_frame=98,
        source=(
            "Qwen3.5 reuses the Qwen3-VL vision tower and video processor (transformers 5.24 maps "
            "qwen3_5 to Qwen3VLProcessor/Qwen3VLVideoProcessor): 98 tokens per frame; model card: "
            "262,144-token native context. Not checked against a downloaded config here."
        ),
    ),
    "internvl3_5": FrameBudget(
        frames=128,
        checkpoint="OpenGVLab/InternVL3_5-8B-HF",
        context_tokens=40_960,
        tokens_per_frame=256,
        source=(
            "InternVL3_5-8B config.json llm_config (Qwen3-8B) max_position_embeddings=40960; one 448x448 "
            "tile per video frame, image_seq_length=256 tokens (+ 'FrameN: <img></img>' ~ 6 tokens): "
            "128 frames ~ 33.5K tokens fit 40,960; 256 frames would not."
        ),
    ),
    "minicpm_o_2_6": FrameBudget(
        frames=64,
        checkpoint="openbmb/MiniCPM-o-2_6",
        context_tokens=32_768,
        tokens_per_frame=64,
        source=(
            "config.json max_position_embeddings=32768; 64 resampler queries per 448x448 slice "
            "(preprocessor_config.json image_feature_size=64). The model card's video example sets "
            "MAX_NUM_FRAMES=64, as does lmms-eval 0.7.3 (lmms_eval/models/simple/minicpm_o.py): the "
            "model's documented video limit, below what the context would hold."
        ),
    ),
    "nemotron_omni": FrameBudget(
        frames=128,
        checkpoint="nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16",
        context_tokens=262_144,
        tokens_per_frame=128,
        source=(
            "model card: 256K-token context; transformers 5.24 NemotronH_Omni_Reasoning_V3VideoProcessor "
            "resizes each frame to one tile of ~video_target_num_patches=1024 16-px patches (512x512 px), "
            "packs 2 frames into a tubelet and pixel-shuffles 2x2: 1024 / 4 = 256 tokens per tubelet, 128 per "
            "frame. 128 frames = 16,384 tokens; 2048 frames = 262,144 tokens, the whole context, so 2048 "
            "only fits with Efficient Video Sampling pruning (video_pruning_rate > 0)."
        ),
    ),
}


def default_frames(family: str) -> int:
    """The context-maximal frame budget of ``family`` (a key of :data:`FRAME_BUDGETS`); a run's
    default is :func:`default_sampling`."""
    try:
        return FRAME_BUDGETS[family].frames
    except KeyError:
        raise KeyError(f"no frame budget for family {family!r}; known: {sorted(FRAME_BUDGETS)}") from None


class Sampling(NamedTuple):
    """How a run samples its video: a fixed frame count or a rate (exactly one is set).

    ``label`` is the form the official NARU leaderboard prints ("128 Frames", "0.25 FPS")."""

    frames: int | None = None
    fps: float | None = None

    @property
    def label(self) -> str:
        if self.fps is not None:
            return f"{self.fps:g} FPS"
        if self.frames is not None:
            return f"{self.frames} Frames"
        return "n/a"


#: lmms-eval model id -> the adapter's default sampling (what a run without num_frames=/fps= uses):
#: the "sampling" of the model's row on the official NARU leaderboard (the authors' project page,
#: results_RQ1.json / results_RQ3.json). The adapters read their defaults from here and nowhere else.
DEFAULT_SAMPLING: dict[str, Sampling] = {
    "naru_qwen2_5_vl": Sampling(frames=128),  # Qwen2.5-VL-7B: "128 Frames"
    "naru_qwen3_vl": Sampling(fps=0.25),  # Qwen3-VL-8B: "0.25 FPS" (frame count and size: qwen-vl-utils)
    "naru_qwen3_5": Sampling(frames=128),  # Qwen3.5-9B: "128 Frames"
    "naru_internvl3_5": Sampling(frames=64),  # InternVL3.5: "64 Frames"
    "naru_minicpm_o": Sampling(frames=128),  # MiniCPM-o-2.6: "128 Frames"
    "naru_gemini": Sampling(fps=0.25),  # Gemini-3-Pro/3-Flash/2.5-Flash: "0.25 FPS"
    "naru_nemotron_omni": Sampling(frames=128),  # Nemotron-3-Nano-Omni-30B-A3B-Reasoning (BF16): "128 Frames"
}

#: checkpoint (the last part of a hub id) -> its official sampling, where it differs from its
#: adapter's: the leaderboard ran the NVFP4 Nemotron checkpoint at "2048 Frames".
CHECKPOINT_SAMPLING: dict[str, Sampling] = {
    "Nemotron-3-Nano-Omni-30B-A3B-Reasoning-NVFP4": Sampling(frames=2048),
}


def default_sampling(model_id: str, pretrained: str | None = None) -> Sampling | None:
    """The default sampling of lmms-eval model ``model_id`` (for checkpoint ``pretrained``, when
    its official row differs); None when the adapter has no fixed default (replay, an
    OpenAI-compatible server whose frames the user sets)."""
    if pretrained:
        name = str(pretrained).rstrip("/").rsplit("/", 1)[-1]
        if name in CHECKPOINT_SAMPLING and model_id in DEFAULT_SAMPLING:
            return CHECKPOINT_SAMPLING[name]
    return DEFAULT_SAMPLING.get(model_id)


def resolve_sampling(
    model_id: str, num_frames: int | None, fps: float | None, pretrained: str | None = None
) -> tuple[int | None, float | None]:
    """``(num_frames, fps)`` as given, or, when neither is, the adapter's official default (the
    one place every adapter takes it from); an adapter without a default then is an error."""
    if num_frames is not None or fps is not None:
        return num_frames, fps
    official = default_sampling(model_id, pretrained)
    if official is None:
        raise ValueError(f"{model_id}: no default sampling in naru_eval.core.budgets.DEFAULT_SAMPLING")
    return official.frames, official.fps
