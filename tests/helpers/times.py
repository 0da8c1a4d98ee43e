"""The times a model is told its frames were at, read back from its inputs, by the family's
declared ``Family.times`` (naru_eval/adapters/family.py ``TIME_ENCODINGS``).

One reader per encoding, never per family: a new family over a known encoding is read with no
edit here; a new encoding needs its reader (:func:`told_times` says so).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from naru_eval.adapters.family import TIME_ENCODINGS


def _decoded(adapter: Any, out: Mapping[str, Any]) -> str:
    return adapter.processor.tokenizer.decode(out["input_ids"][0])


def _patch_starts(out: Mapping[str, Any], key: str) -> list[float]:
    """Qwen2.5-VL: each temporal patch at ``k x second_per_grid_t`` of its video part."""
    grids, spacing = out["video_grid_thw"], out[key]
    starts: list[float] = []
    for (t, _, _), spg in zip(grids.tolist(), [float(x) for x in spacing], strict=True):
        base = starts[-1] + spg if starts else 0.0  # a chunk continues after the previous one
        starts += [base + k * spg for k in range(int(t))]
    return starts


def _qwen3(adapter: Any, out: Mapping[str, Any]) -> list[float]:
    return [float(t) for t in re.findall(r"<([\d.]+) seconds>", _decoded(adapter, out))]


def _glm(adapter: Any, out: Mapping[str, Any]) -> list[float]:
    return [float(t) for t in re.findall(r"<\|end_of_image\|>(\d+)", _decoded(adapter, out))]


def _labels(adapter: Any, out: Mapping[str, Any]) -> list[float]:
    labels = re.findall(r"[Ff]rame (\d+) sampled at ([\d.]+) seconds", _decoded(adapter, out))
    assert [int(i) for i, _ in labels] == list(range(1, len(labels) + 1)), labels
    return [float(t) for _, t in labels]


def _tmrope(adapter: Any, out: Mapping[str, Any]) -> list[float]:
    """The temporal patches' time positions over the rate (the processor's own spacing, which the
    model does not use beside them, must agree with them: the video's real rate reached it)."""
    from naru_eval.adapters.hf.qwen_omni import GRID_T

    geo = adapter.builder.geometry()
    told = [float(p) / geo.position_id_per_seconds for p in out[GRID_T].tolist()]
    own = float(out["video_second_per_grid"][0])
    assert len(told) < 2 or abs((told[-1] - told[0]) / (len(told) - 1) - own) <= own / 2, (told, own)
    return told


def _spacing(adapter: Any, out: Mapping[str, Any]) -> list[float]:
    """Qwen2.5-VL: its one spacing per video part, or, for frames chosen for the question (not
    evenly spaced), each temporal patch's own time the builder puts on the time axis."""
    from naru_eval.adapters.hf.qwen import PATCH_T

    own = out.get(PATCH_T)
    return [float(x) for x in own.tolist()] if own is not None else _patch_starts(out, "second_per_grid_ts")


READERS: dict[str, Callable[[Any, Mapping[str, Any]], list[float] | None]] = {
    "m-rope-spacing": _spacing,
    "qwen3-timestamps": _qwen3,
    "glm-timestamps": _glm,
    "labelled-seconds": _labels,
    "tmrope": _tmrope,
    "order": lambda a, out: None,
}


def told_times(adapter: Any, out: Mapping[str, Any]) -> list[float] | None:
    """The times ``adapter``'s model is told, from the processor's outputs ``out``: one per frame
    (labels) or per temporal patch (timestamps, positions); None where it is told only the order."""
    encoding = adapter.family.times
    if encoding not in READERS:
        raise AssertionError(
            f"{adapter.model_id}: Family.times={encoding!r} has no reader in tests/helpers/times.py "
            f"(known: {sorted(READERS)}); add one for the new encoding"
        )
    return READERS[encoding](adapter, out)


def assert_told_truly(adapter: Any, out: Mapping[str, Any], timestamps: np.ndarray, fps: float) -> None:
    """The model is told the frames' true times (``timestamps``, seconds), within its encoding's
    resolution: a millisecond label, a timestamp rounded to 0.1 s, whole seconds, a time
    position (1 / its rate), or Qwen2.5-VL's one spacing (one source frame at ``fps``)."""
    told, want = told_times(adapter, out), true_times(adapter, timestamps)
    if want is None:
        assert told is None
        return
    assert told is not None and len(told) == len(want), (told, want)
    tol = {
        "m-rope-spacing": 1.0 / fps,
        "qwen3-timestamps": 0.051,
        "glm-timestamps": 0.0,
        "labelled-seconds": 0.0006,
        "tmrope": 1.0 / adapter.builder.geometry().position_id_per_seconds if adapter.family.times == "tmrope" else 0.0,
    }[adapter.family.times]
    assert np.allclose(told, want, atol=tol + 1e-9, rtol=0), (adapter.family.times, told, want)


def true_times(adapter: Any, timestamps: np.ndarray, group: int = 2) -> list[float] | None:
    """What the model should be told of frames at ``timestamps`` (seconds), as its reference tells
    it: per frame (labels), or per temporal patch of ``group`` frames (the last padded with its last
    frame, as the processors pad): the patch's first frame (positions), the mean of its frames
    rounded to 0.1 s (Qwen3-VL's text), its first frame's whole seconds (GLM-4.1V); Qwen2.5-VL's
    spacing counts from the first frame."""
    ts = [float(t) for t in timestamps]
    padded = ts + ts[-1:] * (-len(ts) % group)
    patches = [padded[i : i + group] for i in range(0, len(padded), group)]
    encoding = adapter.family.times
    table: dict[str, list[float] | None] = {
        "m-rope-spacing": [p[0] - ts[0] for p in patches],
        "qwen3-timestamps": [round(sum(p) / len(p), 1) for p in patches],
        "glm-timestamps": [float(int(p[0])) for p in patches],
        "labelled-seconds": ts,
        "tmrope": [p[0] for p in patches],
        "order": None,
    }
    assert set(table) == set(READERS) == set(TIME_ENCODINGS), "a time encoding without its rule here"
    return table[encoding]
