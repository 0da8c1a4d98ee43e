"""Decoding the exact frames: seeking to the keyframe before each, checking every timestamp.

A frame is the one whose presentation timestamp is the frame index's (:mod:`naru_eval.media.index`),
or an error; frames are converted with their own colour matrix and range
(:mod:`naru_eval.media.pixels`), turned and resized as a player shows them, into one
preallocated array.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naru_eval.media.index import FrameIndex
from naru_eval.media.pixels import RGBConverter, colour_name, reference_resize
from naru_eval.media.plan import target_size
from naru_eval.media.video import VideoError, displayed_size, seek_start, seeks_by_bytes

if TYPE_CHECKING:
    import numpy as np

#: Frame threads only while this many cores are idle (cores minus the 1-minute load average,
#: which counts the sampling process itself). Measured (docs/performance.md): once the cores are
#: taken, frame threads keep several packets in flight that every seek flushes, and slice
#: threads win by up to 35 % (1.5x at 200x120 with a load of 1.9 on 2 cores); with one core
#: idle of 2 (the sampler alone, load ~1) they still lost at 1080p N=8 (0.50 s vs 0.36 s), so a
#: 2-core machine always decodes with slice threads and frame threads need two idle cores.
IDLE_CORES_FOR_FRAME_THREADS = 2.0


def machine_busy() -> bool:
    """Fewer than ``IDLE_CORES_FOR_FRAME_THREADS`` idle cores (1-minute load average): frame threads lose there."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        return cores - os.getloadavg()[0] < IDLE_CORES_FOR_FRAME_THREADS
    except OSError:
        return False


def choose_threads(stream: Any, slice_only: bool) -> None:
    """Slice threads on a busy machine and where ``slice_only``, frame threads otherwise."""
    stream.thread_type = "SLICE" if slice_only or machine_busy() else "AUTO"


class Decoder:
    """One open file, one decoder run at a time, frames written into one preallocated array.

    ``size`` (height, width): every frame converted at its coded size, turned, then resized to
    exactly that size by :func:`~naru_eval.media.pixels.reference_resize` (in the arithmetic
    ``resize`` names); else converted and
    scaled in one swscale pass to ``max_pixels`` of the displayed size.
    """

    def __init__(
        self,
        p: Path,
        container: Any,
        stream: Any,
        index: FrameIndex,
        max_pixels: int | None,
        n: int,
        size: tuple[int, int] | None = None,
        resize: str = "float",
    ) -> None:
        self.p, self.container, self.stream, self.index = p, container, stream, index
        self.max_pixels, self.n, self.size, self.resize = max_pixels, n, size, resize
        self.by_bytes = seeks_by_bytes(container)
        self.sar = stream.codec_context.sample_aspect_ratio
        self.decoder: Any = None
        self.last_pts: int | None = None  # the last frame the current run gave out
        self.run_key = -1  # the keyframe (position in key_pts) the current run started from
        self.out: np.ndarray | None = None
        self.out_size = (0, 0)
        self.kept = 0
        self.turns = 0
        self.coded_size = (0, 0)
        self.colour = ""
        self._last_k = -1
        self._rgb = RGBConverter()

    # -- output
    def _keep(self, frame: Any) -> None:
        import numpy as np

        if self.out is None:
            w, h, self.turns = displayed_size(frame, self.sar)
            self.colour = colour_name(frame)
            if self.size is not None:
                self.out_size = (self.size[1], self.size[0])
                self.coded_size = (frame.width, frame.height)  # converted at native size, resized after
            else:
                self.out_size = target_size(w, h, self.max_pixels)
                ow, oh = self.out_size
                self.coded_size = (oh, ow) if self.turns % 2 else (ow, oh)
            ow, oh = self.out_size
            self.out = np.empty((self.n, oh, ow, 3), np.uint8)
        cw, ch = self.coded_size
        rgb = self._rgb(frame, cw, ch)
        if self.turns:
            rgb = np.rot90(rgb, self.turns)
        if self.size is not None:
            rgb = reference_resize(rgb, self.size[0], self.size[1], self.resize)
        self.out[self.kept] = rgb
        self.kept += 1

    def frames(self) -> np.ndarray:
        import numpy as np

        return self.out if self.out is not None else np.zeros((0, 0, 0, 3), np.uint8)

    def _repeat_last(self) -> None:
        assert self.out is not None
        self.out[self.kept] = self.out[self.kept - 1]
        self.kept += 1

    # -- seeking
    def _key_for(self, k: int) -> int:
        """The last keyframe (in decode order) whose timestamp is at or before frame k's; -1: none."""
        import numpy as np

        return int(np.searchsorted(self.index.key_pts, self.index.pts[k], side="right")) - 1

    def _seek(self, j: int) -> None:
        """To keyframe j, or to the start of the file for j < 0 (frames before the first keyframe)."""
        pos = int(self.index.key_pos[j]) if j >= 0 else -1
        if j < 0:
            seek_start(self.container, self.stream)
        elif self.by_bytes and pos >= 0:
            self.container.seek(pos, unsupported_byte_offset=True)
        else:
            self.container.seek(int(self.index.key_pts[j]), stream=self.stream, backward=True, any_frame=False)
        self.decoder = self.container.decode(self.stream)
        self.last_pts = None
        self.run_key = j

    def exact(self, k: int) -> int:
        """Decode frame k; return k. Raises unless the frame given out has frame k's timestamp."""
        import av

        if self.kept and self._last_k == k:
            self._repeat_last()  # N > T repeats a frame: no decode
            return k
        want = int(self.index.pts[k])
        j = self._key_for(k)
        continuing = (
            self.decoder is not None
            and self.last_pts is not None
            and self.last_pts < want
            and (j < 0 or int(self.index.key_pts[j]) <= self.last_pts)
        )
        if not continuing:
            self._seek(j)
        for _attempt in range(4):
            started_at: int | None = self.last_pts
            try:
                for frame in self.decoder:
                    if frame.pts is None:
                        raise VideoError(self.p, "a decoded frame carries no timestamp: cannot verify frame numbers")
                    if started_at is None:
                        started_at = frame.pts
                    self.last_pts = frame.pts
                    if frame.pts == want:
                        self._keep(frame)
                        self._last_k = k
                        return k
                    if frame.pts > want:
                        break
            except av.error.FFmpegError:
                pass
            # Decoding began after the target (an open-GOP leading picture, a seek that landed late)
            # or passed it without giving it out: start one keyframe earlier.
            if self.run_key < 0:
                break
            j = min(j, self.run_key) - 1
            self._seek(j)
        raise VideoError(self.p, f"could not decode frame {k} of {len(self.index.pts)} (timestamp {want})")
