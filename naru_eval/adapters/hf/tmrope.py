"""TMRoPE: the time-aligned multimodal positions of Qwen2.5-Omni and Qwen3-Omni, computed here.

Both thinkers give every token three positions (time, height, width), like Qwen's M-RoPE
(:mod:`naru_eval.adapters.hf.positions`), with audio on the time axis: one position per audio token,
``position_id_per_seconds`` (25 for Qwen2.5-Omni, 13 for Qwen3-Omni) per second of video. The
reference (transformers 5.24 ``Qwen2_5OmniPreTrainedModelForConditionalGeneration.get_rope_index``,
``Qwen3OmniMoePreTrainedModelForConditionalGeneration.get_rope_index``, and their processors'
``replace_video_with_audio_token``) lays out one video with its audio as one block,
``<|vision_bos|><|audio_bos|> ... <|audio_eos|><|vision_eos|>``:

- block start ``B``: Qwen2.5-Omni gives both opening tokens one position, ``B`` = it + 1; Qwen3-Omni
  gives them two, ``B`` = the second + 1;
- a video token of temporal patch ``k`` gets ``B + t_k`` on the time axis and ``B`` + its row /
  column on the others; ``t_k = k x second_per_grid x position_id_per_seconds`` (floored for
  Qwen2.5-Omni, a float for Qwen3-Omni): patch ``k`` is placed at ``2k / fps`` seconds, as if
  frames were taken from time 0 at a constant rate;
- audio token ``j`` gets ``B + j`` on all three axes (one token per 1/25 s, or 13 per second);
- the order of the tokens in the sequence: Qwen2.5-Omni cuts both into chunks of
  ``seconds_per_chunk`` (2 s) of time positions and writes each chunk's video, then its audio;
  Qwen3-Omni merges the two by time position, video first on a tie;
- the closing tokens continue from the largest position of the last run of one modality (Qwen2.5-
  Omni: both at that + 1; Qwen3-Omni: that + 1 and + 2), the text after them from there.

What this module changes, and why (docs/adapters.md "TMRoPE"):

1. **True times.** NARU's frames are segment centres, not frames from 0 at a constant rate, so the
   reference's ``t_k`` puts each patch about one frame interval early against the audio (112 s for
   64 frames over 2 hours). Here ``t_k`` is the time of the patch's first frame
   (:func:`grid_time_positions`) and an audio token's is its own time in the soundtrack
   (:func:`audio_time_positions`: a window's tokens start at the window's start), so a sound and
   the frame shown at that moment get the same time position.
2. **Chunks by time.** The reference pairs the i-th video chunk with the i-th audio chunk, where a
   chunk of either list starts whenever a token's position passes the next multiple of 50. That is
   the chunking by time the Qwen2.5-Omni report describes as long as every 2-s chunk holds video,
   as at the 2 fps it was trained with; with NARU's sparse frames (one patch per 28 s or more) the
   video list skips chunks, a patch is paired with audio from another minute, and the tokens are
   written out of time order. Here each chunk is the tokens whose time position falls in it
   (:func:`chunk_order`): the same sequence as the reference when every chunk holds video.

:func:`omni_block_tokens` writes a block's token ids in that order and :func:`omni_positions`
gives any sequence's positions from its token ids and the time positions of its video patches
and audio tokens (the order of the tokens does not enter a token's own position). The adapters
pass these positions to the model in the shared-prefix and the per-question path alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

#: the layouts an adapter records (provenance ``positions`` and the run key)
TMROPE_TRUE_TIME = "tmrope-true-time"

Layout = Literal["qwen2_5_omni", "qwen3_omni"]


class OmniGeometry(NamedTuple):
    """What of a Qwen-Omni thinker config the layout depends on."""

    layout: Layout
    image_token_id: int
    video_token_id: int
    audio_token_id: int
    vision_bos_id: int
    vision_eos_id: int
    audio_bos_id: int
    audio_eos_id: int
    spatial_merge_size: int
    position_id_per_seconds: float
    seconds_per_chunk: float = 2.0

    @property
    def floors(self) -> bool:
        """Qwen2.5-Omni's time positions are integers (floored); Qwen3-Omni's are floats."""
        return self.layout == "qwen2_5_omni"


def geometry_of(config: PretrainedConfig, layout: Layout) -> OmniGeometry:
    """The geometry of a loaded thinker's config (``config`` a thinker config)."""
    return OmniGeometry(
        layout=layout,
        image_token_id=int(config.image_token_id),
        video_token_id=int(config.video_token_id),
        audio_token_id=int(config.audio_token_id),
        vision_bos_id=int(config.vision_start_token_id),
        vision_eos_id=int(config.vision_end_token_id),
        audio_bos_id=int(config.audio_start_token_id),
        audio_eos_id=int(getattr(config, "audio_end_token_id", config.audio_start_token_id + 1)),
        spatial_merge_size=int(config.vision_config.spatial_merge_size),
        position_id_per_seconds=float(config.position_id_per_seconds),
        seconds_per_chunk=float(getattr(config, "seconds_per_chunk", 2.0) or 2.0),
    )


def _t(geo: OmniGeometry, value: float) -> float:
    return float(math.floor(value)) if geo.floors else float(value)


def grid_time_positions(geo: OmniGeometry, first_frame_times: Sequence[float]) -> list[float]:
    """Each temporal patch's time position: its first frame's time (seconds on the frames' axis,
    the soundtrack's too) x ``position_id_per_seconds``, computed in float32 as the reference does
    (floored for Qwen2.5-Omni)."""
    import numpy as np

    prod = np.asarray(first_frame_times, np.float32) * np.float32(geo.position_id_per_seconds)
    return [_t(geo, float(v)) for v in prod]


def reference_grid_positions(geo: OmniGeometry, grids: int, second_per_grid: float) -> list[float]:
    """The reference's ``t_k``: ``k x second_per_grid x position_id_per_seconds`` in float32."""
    import numpy as np

    prod = np.arange(grids, dtype=np.float32) * np.float32(second_per_grid) * np.float32(geo.position_id_per_seconds)
    return [_t(geo, float(v)) for v in prod]


def audio_time_positions(geo: OmniGeometry, windows: Sequence[tuple[float, int]]) -> list[float]:
    """Each audio token's time position: ``(start seconds, tokens)`` per window, token ``j`` of a
    window at ``start x position_id_per_seconds + j`` (one position per token, as the encoder
    emits ``position_id_per_seconds`` tokens a second)."""
    out: list[float] = []
    for start, n in windows:
        base = _t(geo, float(start) * geo.position_id_per_seconds)
        out.extend(base + j for j in range(int(n)))
    return out


def _video_token_t(geo: OmniGeometry, thw: Sequence[int], grid_t: Sequence[float]) -> list[float]:
    t, h, w = (int(x) for x in thw)
    per = (h // geo.spatial_merge_size) * (w // geo.spatial_merge_size)
    if len(grid_t) != t:
        raise ValueError(f"TMRoPE: {len(grid_t)} patch time positions for a video of {t} temporal patches")
    return [float(v) for v in grid_t for _ in range(per)]


def chunk_order(geo: OmniGeometry, video_t: Sequence[float], audio_t: Sequence[float]) -> list[tuple[str, int]]:
    """The order of a block's video and audio tokens, as ``("v"|"a", index)``.

    Qwen2.5-Omni: chunks of ``seconds_per_chunk`` of time positions, in time order, each its
    video then its audio. Qwen3-Omni: merged by time position, video first on a tie."""
    if geo.layout == "qwen3_omni":
        out: list[tuple[str, int]] = []
        i = j = 0
        while i < len(video_t) and j < len(audio_t):
            if video_t[i] <= audio_t[j]:
                out.append(("v", i))
                i += 1
            else:
                out.append(("a", j))
                j += 1
        return out + [("v", k) for k in range(i, len(video_t))] + [("a", k) for k in range(j, len(audio_t))]
    per_chunk = int(geo.position_id_per_seconds * geo.seconds_per_chunk)
    chunks: dict[int, tuple[list[int], list[int]]] = {}
    for k, t in enumerate(video_t):
        chunks.setdefault(int(t // per_chunk), ([], []))[0].append(k)
    for k, t in enumerate(audio_t):
        chunks.setdefault(int(t // per_chunk), ([], []))[1].append(k)
    order: list[tuple[str, int]] = []
    for c in sorted(chunks):
        vids, auds = chunks[c]
        order += [("v", k) for k in vids] + [("a", k) for k in auds]
    return order


def omni_block_tokens(
    geo: OmniGeometry, video_grid_thw: Sequence[int], grid_t: Sequence[float], audio_t: Sequence[float]
) -> list[int]:
    """The token ids that replace a video's single ``<|VIDEO|>`` placeholder when its audio comes
    with it: ``<|audio_bos|>``, the video and audio tokens in :func:`chunk_order`, ``<|audio_eos|>``
    (the chat template writes the ``<|vision_bos|>`` / ``<|vision_eos|>`` around them)."""
    video_t = _video_token_t(geo, video_grid_thw, grid_t)
    ids = [geo.audio_bos_id]
    for kind, _ in chunk_order(geo, video_t, audio_t):
        ids.append(geo.video_token_id if kind == "v" else geo.audio_token_id)
    ids.append(geo.audio_eos_id)
    return ids


def omni_positions(
    input_ids: torch.Tensor | Sequence[int],
    geo: OmniGeometry,
    video_grid_thw: torch.Tensor | Sequence[Sequence[int]] | None = None,
    grid_t: Sequence[Sequence[float]] | None = None,
    audio_t: Sequence[Sequence[float]] | None = None,
) -> tuple[torch.Tensor, float]:
    """TMRoPE positions of one unpadded sequence: a ``3 x L`` tensor (int64 for Qwen2.5-Omni,
    float32 for Qwen3-Omni) and the delta decoding adds (the largest position + 1 - L).

    ``video_grid_thw``, ``grid_t`` (each video's patch time positions) and ``audio_t`` (each audio
    block's token time positions, relative to its block start) in the order the blocks appear. A
    video block whose ``<|vision_bos|>`` is followed by ``<|audio_bos|>`` carries its audio (the
    next entry of ``audio_t``); an ``<|audio_bos|>`` block alone is audio only; a block must hold
    exactly its tokens.
    """
    import numpy as np
    import torch

    ids = [int(x) for x in (input_ids.tolist() if hasattr(input_ids, "tolist") else input_ids)]
    raw_grids = (
        video_grid_thw.tolist() if video_grid_thw is not None and hasattr(video_grid_thw, "tolist") else video_grid_thw
    )
    grids = [list(map(int, g)) for g in raw_grids or []]
    grid_t = list(grid_t or [])
    audio_t = list(audio_t or [])
    n = len(ids)
    pos = np.zeros((3, n), np.float64)
    m = geo.spatial_merge_size
    two = geo.layout == "qwen3_omni"  # Qwen3-Omni gives the two opening (closing) tokens two positions
    next_pos = 0.0  # the position the next text token gets
    vi = ai = 0
    i = 0

    def text(k: int) -> None:
        nonlocal next_pos
        pos[:, k] = next_pos
        next_pos += 1

    while i < n:
        tok = ids[i]
        joint = tok == geo.vision_bos_id and i + 1 < n and ids[i + 1] == geo.audio_bos_id
        if tok == geo.vision_bos_id and i + 1 < n and ids[i + 1] == geo.image_token_id:
            raise ValueError("TMRoPE positions: image blocks are not laid out here (NARU gives video)")
        if joint or tok == geo.vision_bos_id or tok == geo.audio_bos_id:
            opening = 2 if joint else 1
            for k in range(opening):
                pos[:, i + k] = next_pos + (k if two else 0)
            start = next_pos + (opening if two and joint else 1)
            i += opening
            has_video = tok == geo.vision_bos_id
            has_audio = joint or tok == geo.audio_bos_id
            v_t: list[float] = []
            hw: list[tuple[int, int]] = []
            if has_video:
                if vi >= len(grids):
                    raise ValueError(f"TMRoPE positions: a video block at {i} has no grid left")
                t, h, w = grids[vi]
                hh, ww = h // m, w // m
                v_t = _video_token_t(geo, grids[vi], grid_t[vi])
                hw = [(r, c) for _ in range(t) for r in range(hh) for c in range(ww)]
                vi += 1
            a_t: list[float] = []
            if has_audio:
                if ai >= len(audio_t):
                    raise ValueError(f"TMRoPE positions: an audio block at {i} has no audio positions left")
                a_t = [float(x) for x in audio_t[ai]]
                ai += 1
            kv = ka = 0
            last_kind, run_max = "", -math.inf
            while i < n and ids[i] in (geo.video_token_id, geo.audio_token_id):
                if ids[i] == geo.video_token_id:
                    if kv >= len(v_t):
                        raise ValueError(f"TMRoPE positions: the block at {i} holds more video tokens than its grid")
                    r, c = hw[kv]
                    p = (start + v_t[kv], start + r, start + c)
                    kv += 1
                    kind = "v"
                else:
                    if ka >= len(a_t):
                        raise ValueError(f"TMRoPE positions: the block at {i} holds more audio tokens than its audio")
                    p = (start + a_t[ka],) * 3
                    ka += 1
                    kind = "a"
                pos[:, i] = p
                run_max = max(p) if kind != last_kind else max(run_max, *p)
                last_kind = kind
                i += 1
            if kv != len(v_t) or ka != len(a_t):
                raise ValueError(
                    f"TMRoPE positions: the block before {i} holds {kv} of {len(v_t)} video and {ka} of "
                    f"{len(a_t)} audio tokens"
                )
            after = (run_max + 1) if last_kind else start
            closing = 0
            for want in (
                (geo.audio_eos_id, geo.vision_eos_id)
                if joint
                else (geo.vision_eos_id if has_video else geo.audio_eos_id,)
            ):
                if i < n and ids[i] == want:
                    pos[:, i] = after + (closing if two else 0)
                    closing += 1
                    i += 1
            next_pos = after + (closing if two else 1) if closing else after
            continue
        text(i)
        i += 1
    positions = torch.from_numpy(pos.astype(np.float32) if not geo.floors else pos.astype(np.int64))
    largest = float(pos.max()) if n else -1.0
    return positions, largest + 1 - n


def generation_position_ids(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The ``4 x 1 x L`` ``position_ids`` a thinker's ``forward`` / ``generate`` takes: the plain
    token index above the three TMRoPE rows, on the ids' device."""
    import torch

    if input_ids.shape[0] != 1:
        raise ValueError("TMRoPE positions are computed for one sequence at a time (batch size 1)")
    text = torch.arange(positions.shape[1], dtype=positions.dtype).view(1, -1)
    return torch.cat([text, positions], dim=0).unsqueeze(1).to(input_ids.device)


class TimedProcessor(Protocol):
    """A processor that lays the tokens out in time (the Qwen omni processors)."""

    position_id_per_seconds: float


def check_position_rate(processor: TimedProcessor, config: PretrainedConfig, source: str = "the checkpoint") -> float:
    """The positions per second processor and model agree on, or a ``ValueError`` with both numbers.

    The processor lays the tokens out by its ``position_id_per_seconds`` and the model's
    ``get_rope_index`` counts by its config's; Qwen3-Omni's config class defaults to 25 and its
    processor to 13, and with the two apart some video and audio tokens take each other's
    positions while the forward pass still runs."""
    proc_rate = float(processor.position_id_per_seconds)
    model_rate = float(config.position_id_per_seconds)
    if proc_rate != model_rate:
        raise ValueError(
            f"{source}: the processor lays out {proc_rate:g} positions per second of video and the model's "
            f"config counts {model_rate:g} (position_id_per_seconds); they must agree (the published Qwen3-Omni "
            "config.json says 13, its config class defaults to 25: set thinker_config.position_id_per_seconds)"
        )
    return model_rate
