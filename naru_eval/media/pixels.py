"""Pixels as the file means them: YUV to RGB with the frame's own colour matrix and range, and
the resize each model family's reference pipeline applies.

**Colour.** PyAV's ``reformat(format="rgb24")`` sets no colour coefficients unless the source and
destination colourspace (or range) differ; both default to the frame's own, so by default
swscale converts every frame with BT.601, whatever it is tagged. :class:`RGBConverter` passes the
frame's matrix and range explicitly (and a different destination matrix, which RGB output
ignores, so PyAV applies them), as the ffmpeg CLI's ``scale`` filter does
(``sws_getCoefficients(frame->colorspace)``): BT.709, BT.601 (BT.470BG, SMPTE 170M), BT.2020,
SMPTE 240M and FCC by their own coefficients, untagged frames by BT.601 (FFmpeg's rule), limited
or full range as tagged, 8- or 10-bit. Scaling uses swscale's bicubic filter, the CLI's default,
so a frame equals ``ffmpeg -i FILE -vf scale=W:H -pix_fmt rgb24`` pixel for pixel at native size
and resized alike (tests/media/test_pixels.py).

PyAV caches one swscale context per reformatter and colour settings persist on it (a BT.601 source
never resets coefficients an earlier BT.709 frame set), so a converter keeps one reformatter per
(matrix, range): a stream whose tags change mid-way cannot leak one frame's matrix into another's.

**Resize.** :func:`reference_resize` is the reference pipelines' own resize of a native-size RGB
frame, bicubic with antialiasing, in one of the two arithmetics torchvision has for it:

- ``"float"``: ``torchvision.transforms.functional.resize(..., BICUBIC, antialias=True)`` on the
  uint8 tensor (torchvision computes in float32, then rounds and clamps): qwen-vl-utils'
  ``fetch_video`` step, and (but for that rounding) Nemotron-Omni's video processor;
- ``"uint8"``: ``torchvision.transforms.v2.functional.resize`` on the uint8 tensor, which on the
  CPU runs torch's fixed-point uint8 kernel: what transformers' video processors (InternVL's)
  do to the frames they are given.

torchvision is imported on first use, only by samplings that ask for an exact ``size``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: What the frame cache's key says about how pixels are made: a change here makes older entries misses.
CONVERSION = "rgb24 frame-matrix frame-range swscale-bicubic; size: torchvision-bicubic-antialias"
#: The arithmetics of :func:`reference_resize`
RESIZES = ("float", "uint8")

#: FFmpeg's AVColorSpace values and names (``av_color_space_name``), for the record
_MATRIX = {
    0: "rgb",
    1: "bt709",
    2: "unknown",
    4: "fcc",
    5: "bt470bg",
    6: "smpte170m",
    7: "smpte240m",
    8: "ycgco",
    9: "bt2020nc",
    10: "bt2020c",
}
_RANGE = {0: "unknown", 1: "tv", 2: "pc"}


def colour_name(frame: Any) -> str:
    """The frame's colour tags as FFmpeg names them, ``matrix/range`` (e.g. ``bt709/tv``); an
    untagged matrix converts as BT.601, an untagged range as limited (``tv``)."""
    matrix = _MATRIX.get(int(frame.colorspace), str(int(frame.colorspace)))
    return f"{matrix}/{_RANGE.get(int(frame.color_range), str(int(frame.color_range)))}"


class RGBConverter:
    """Frames to RGB24 at a given size, with each frame's own colour matrix and range: a view of
    swscale's output (no copy; ``Decoder`` copies it once, into its array)."""

    def __init__(self) -> None:
        self._by_tags: dict[tuple[int, int], Any] = {}

    def __call__(self, frame: Any, width: int, height: int) -> np.ndarray:
        from av.video.reformatter import Interpolation, VideoReformatter

        matrix, full = int(frame.colorspace), int(frame.color_range)
        key = (matrix, full)
        reformatter = self._by_tags.get(key)
        if reformatter is None:
            reformatter = self._by_tags[key] = VideoReformatter()
        out = reformatter.reformat(
            frame,
            width=width,
            height=height,
            format="rgb24",
            src_colorspace=matrix,
            dst_colorspace=5 if matrix == 1 else 1,  # any other: PyAV sets coefficients only on a change
            interpolation=Interpolation.BICUBIC,
            src_color_range=full,
            dst_color_range=2,  # RGB is full range (swscale ignores it for RGB output)
        )
        import numpy as np

        plane = out.planes[0]  # rows of line_size bytes, width * 3 of them pixels
        rows = np.frombuffer(memoryview(plane), np.uint8).reshape(height, plane.line_size)
        return rows[:, : width * 3].reshape(height, width, 3)


def reference_resize(rgb: np.ndarray, height: int, width: int, resize: str = "float") -> np.ndarray:
    """One uint8 H x W x 3 frame resized by torchvision's antialiased bicubic, in the arithmetic
    ``resize`` names (see the module docstring); uint8 out either way."""
    import numpy as np

    if resize not in RESIZES:
        raise ValueError(f"resize={resize!r}: one of {', '.join(RESIZES)}")
    if rgb.shape[:2] == (height, width):
        return rgb
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as tvf
    from torchvision.transforms.v2 import functional as tvf2

    x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1).contiguous()[None]
    fn = tvf.resize if resize == "float" else tvf2.resize
    y = fn(x, [height, width], interpolation=InterpolationMode.BICUBIC, antialias=True)
    return y[0].permute(1, 2, 0).numpy()
