"""The language model's position ids, computed here rather than by the installed transformers.

Qwen's multimodal RoPE (M-RoPE) gives every token three positions (time, height, width). The
reference layout (Qwen's original ``get_rope_index``, transformers up to 5.2, vLLM's
``MRotaryEmbedding``):

- text tokens carry one position on all three axes, one more than the largest position used so
  far (over all three axes), starting at 0;
- a vision block starting at ``s`` (one more than the text before it) gets
  ``(s + t_index, s + row, s + column)`` on its merged grid; ``t_index`` is the temporal patch
  number times ``second_per_grid_t x tokens_per_second`` (Qwen2.5-VL: seconds on the time axis),
  floored, or the patch number itself when the model has no ``tokens_per_second``;
- so the text after a video continues from the largest position the video used, plus one, and
  decoding continues from the end of the prompt (``rope_deltas`` = that maximum + 1 - length).

transformers 5.24's ``Qwen2_5_VLModel.get_rope_index`` advances the text after a video by
``max(h, w) / merge`` instead, ignoring the temporal extent (huggingface/transformers issue
45381), while its ``rope_deltas`` still uses the largest position; the shared-prefix and
per-question paths then give the model different positions. The adapters therefore pass the
positions of :func:`mrope_positions` to the model explicitly in both paths
(docs/adapters.md "Position ids").

Qwen3-VL and Qwen3.5 write a timestamp before each temporal patch, so their video is split into
one-patch blocks (``split_video_frames``): each block has ``t_index`` 0 and the text between
blocks continues past the block's largest position; their reference and transformers 5.17 / 5.24
agree, and they use this same function.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

T = TypeVar("T")

#: the layouts an adapter records (provenance ``positions`` and the run key)
QWEN_REFERENCE = "qwen-reference"  # M-RoPE as above, computed by this module in both paths
SEQUENTIAL = "sequential"  # one position per token, 0..L-1 (InternVL's 1-D RoPE)
NO_ROPE = "no-rope"  # no positional encoding in the attention layers (NemotronH: order only)
#: the model computes its positions itself, in both paths (GLM-4.1V's M-RoPE from its token types):
#: nothing is passed, and the recorded layout says whose they are
MODEL_OWN = "model-own"


class MRopeGeometry(NamedTuple):
    """What of a Qwen config the layout depends on."""

    image_token_id: int | None
    video_token_id: int | None
    spatial_merge_size: int
    #: Qwen2.5-VL's vision_config.tokens_per_second (time-axis positions per second); None: the
    #: temporal patch number is the position (Qwen2-VL, Qwen3-VL, Qwen3.5)
    tokens_per_second: float | None
    #: one block per temporal patch (Qwen3-VL, Qwen3.5: a timestamp precedes each)
    split_video_frames: bool


def geometry_of(config: PretrainedConfig, split_video_frames: bool) -> MRopeGeometry:
    """The geometry of a loaded Qwen model's config (top level + ``vision_config``)."""
    vision = config.vision_config
    tps = getattr(vision, "tokens_per_second", None)
    return MRopeGeometry(
        image_token_id=getattr(config, "image_token_id", None),
        video_token_id=getattr(config, "video_token_id", None),
        spatial_merge_size=int(vision.spatial_merge_size),
        tokens_per_second=None if tps is None else float(tps),
        split_video_frames=split_video_frames,
    )


class _Block(NamedTuple):
    token: int
    t: int
    h: int
    w: int
    seconds_per_t: float | None  # None: the patch number itself (images, no tokens_per_second)
    #: each temporal patch's own time (seconds from the block's first), where the frames are not
    #: evenly spaced (frames chosen for the question): the time axis at the true times
    patch_seconds: tuple[float, ...] | None = None


def _blocks(
    geo: MRopeGeometry,
    image_grid_thw: Sequence[Sequence[int]] | None,
    video_grid_thw: Sequence[Sequence[int]] | None,
    second_per_grid_ts: Sequence[float] | None,
    patch_seconds: Sequence[Sequence[float]] | None = None,
) -> tuple[Iterator[_Block], Iterator[_Block]]:
    m = geo.spatial_merge_size
    images = [
        _Block(int(geo.image_token_id or -1), int(t), int(h) // m, int(w) // m, None)
        for t, h, w in image_grid_thw or []
    ]
    videos: list[_Block] = []
    for i, (t, h, w) in enumerate(video_grid_thw or []):
        sec = float(second_per_grid_ts[i]) if second_per_grid_ts is not None else 1.0
        spacing = sec if geo.tokens_per_second is not None else None
        own = tuple(float(x) for x in patch_seconds[i]) if patch_seconds is not None else None
        if own is not None and len(own) != int(t):
            raise ValueError(f"M-RoPE positions: video {i} has {t} temporal patches and {len(own)} patch times")
        if geo.split_video_frames:
            videos += [_Block(int(geo.video_token_id or -1), 1, int(h) // m, int(w) // m, spacing)] * int(t)
        else:
            videos.append(_Block(int(geo.video_token_id or -1), int(t), int(h) // m, int(w) // m, spacing, own))
    return iter(images), iter(videos)


def _as_list(x: torch.Tensor | Sequence[T] | None) -> list[T] | None:
    """A processor output (a tensor, or a list where the processor gives one) as a list."""
    if x is None:
        return None
    return x.tolist() if hasattr(x, "tolist") else list(x)


def mrope_positions(
    input_ids: torch.Tensor | Sequence[int],
    geo: MRopeGeometry,
    image_grid_thw: torch.Tensor | Sequence[Sequence[int]] | None = None,
    video_grid_thw: torch.Tensor | Sequence[Sequence[int]] | None = None,
    second_per_grid_ts: torch.Tensor | Sequence[float] | None = None,
    patch_seconds: Sequence[Sequence[float]] | None = None,
) -> tuple[torch.Tensor, int]:
    """The reference M-RoPE positions of one sequence: a ``3 x L`` int64 tensor, and the delta
    decoding adds to the cache position (the largest position + 1 - L).

    ``input_ids``: the sequence's token ids (no padding); the grids and ``second_per_grid_ts``
    as the processor returns them. A vision block must hold exactly its grid's merged tokens.
    ``patch_seconds``: per video, each temporal patch's time from the video's first patch, for
    frames not evenly spaced (chosen for the question): the time axis then puts patch ``k`` at
    ``floor(patch_seconds[k] x tokens_per_second)`` (the reference's ``k x second_per_grid_t x
    tokens_per_second`` where the spacing is even), so the positions keep the true times.
    """
    import torch

    ids = torch.as_tensor(input_ids).reshape(-1).cpu()
    images, videos = _blocks(
        geo, _as_list(image_grid_thw), _as_list(video_grid_thw), _as_list(second_per_grid_ts), patch_seconds
    )
    n = int(ids.numel())
    kind = torch.full((n,), -1, dtype=torch.long)  # -1: text, else the vision token id
    for tok in (geo.image_token_id, geo.video_token_id):
        if tok is not None:
            kind[ids == int(tok)] = int(tok)
    cuts = [0, *(torch.nonzero(kind[1:] != kind[:-1]).reshape(-1) + 1).tolist(), n] if n else [0]
    parts: list[torch.Tensor] = []
    next_pos = 0
    for start, end in zip(cuts[:-1], cuts[1:], strict=True):
        token = int(kind[start])
        if token < 0:  # a text run: one position per token, on all three axes
            parts.append(torch.arange(next_pos, next_pos + end - start, dtype=torch.long).expand(3, -1))
            next_pos += end - start
            continue
        i = start
        while i < end:  # the run holds one or more blocks of this token's grids, in order
            block = next(videos if token == geo.video_token_id else images, None)
            if block is None:
                raise ValueError(f"M-RoPE positions: vision token at {i} has no grid left")
            size = block.t * block.h * block.w
            if i + size > end:
                raise ValueError(f"M-RoPE positions: the block at {i} does not hold its grid's {size} tokens")
            steps = torch.arange(block.t, dtype=torch.long)
            if block.patch_seconds is not None and geo.tokens_per_second is not None:
                # float32, as the reference's product: seconds x tokens/second, floored
                own = torch.tensor(block.patch_seconds, dtype=torch.float32)
                steps = (own * geo.tokens_per_second).long()
            elif block.seconds_per_t is not None and geo.tokens_per_second is not None:
                # float32, in the reference's order: patch number x seconds per patch x tokens/second
                steps = (steps.to(torch.float32) * block.seconds_per_t * geo.tokens_per_second).long()
            shape = (block.t, block.h, block.w)
            t_idx = steps.view(-1, 1, 1).expand(shape).reshape(-1)
            h_idx = torch.arange(block.h, dtype=torch.long).view(1, -1, 1).expand(shape).reshape(-1)
            w_idx = torch.arange(block.w, dtype=torch.long).view(1, 1, -1).expand(shape).reshape(-1)
            pos = torch.stack([t_idx, h_idx, w_idx]) + next_pos
            parts.append(pos)
            next_pos = int(pos.max()) + 1
            i += size
    positions = torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)
    return positions, next_pos - n


def generation_position_ids(
    input_ids: torch.Tensor,
    geo: MRopeGeometry,
    image_grid_thw: torch.Tensor | None = None,
    video_grid_thw: torch.Tensor | None = None,
    second_per_grid_ts: torch.Tensor | Sequence[float] | None = None,
    patch_seconds: Sequence[Sequence[float]] | None = None,
) -> torch.Tensor:
    """The ``position_ids`` a Qwen model's ``forward`` / ``generate`` takes for a ``1 x L`` prompt:
    ``4 x 1 x L``, the plain token index (what the attention mask is built from) above the three
    M-RoPE rows, on the ids' device. ``generate`` extends every row by one per new token, so
    decoding continues from the end of the prompt."""
    import torch

    if input_ids.shape[0] != 1:
        raise ValueError("M-RoPE positions are computed for one sequence at a time (batch size 1)")
    mrope, _ = mrope_positions(input_ids[0], geo, image_grid_thw, video_grid_thw, second_per_grid_ts, patch_seconds)
    text = torch.arange(mrope.shape[1], dtype=torch.long).view(1, -1)
    return torch.cat([text, mrope], dim=0).unsqueeze(1).to(input_ids.device)
