"""Decoding the exact frames: seeking to the keyframe before each, checking every timestamp.

A frame is the one whose presentation timestamp is the frame index's (:mod:`naru_eval.media.index`),
or an error; frames are converted with their own colour matrix and range
(:mod:`naru_eval.media.pixels`), turned and resized as a player shows them, into one
preallocated array, on conversion threads while the decoder goes on. Nothing is decoded that no
target needs: non-reference pictures are skipped, and a decoder whose next target lies past a
keyframe is drained rather than fed pictures that would only push the target out.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naru_eval.media.index import FrameIndex
from naru_eval.media.pixels import RGBConverter, colour_name, reference_resize
from naru_eval.media.plan import target_size
from naru_eval.media.video import (
    PictureSkipper,
    VideoError,
    displayed_size,
    process_cores,
    seek_start,
    seeks_by_bytes,
)

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
        return process_cores() - os.getloadavg()[0] < IDLE_CORES_FOR_FRAME_THREADS
    except OSError:
        return False


def choose_threads(stream: Any, slice_only: bool) -> None:
    """Slice threads on a busy machine and where ``slice_only``, frame threads otherwise."""
    stream.thread_type = "SLICE" if slice_only or machine_busy() else "AUTO"


#: Threads that turn decoded frames into RGB while the decoder goes on (swscale and torch release
#: the GIL). Unlike frame threads they waste no work on a seek, so they are used wherever the
#: process has two cores or more, busy or not; each holds its own converter.
MAX_CONVERSION_THREADS = 4


def conversion_threads() -> int:
    """How many: the process's cores up to ``MAX_CONVERSION_THREADS``; 0 (convert inline) on one core."""
    cores = process_cores()
    return 0 if cores < 2 else min(MAX_CONVERSION_THREADS, cores)


class Decoder:
    """One open file, one decoder run at a time, frames written into one preallocated array.

    ``targets`` are the frame numbers :meth:`exact` will be asked for (in that order), so that
    nothing else is decoded that need not be: a non-reference picture none of them is, where the
    codec allows it (:class:`~naru_eval.media.video.PictureSkipper`), and, where the next target
    lies past the next keyframe (a seek follows), the pictures decoded after a target only to push
    it out of the decoder's reorder buffer (it is drained instead). Neither changes a picture that
    comes out. ``size`` (height, width): every frame converted at its coded size, turned, then
    resized to exactly that size by :func:`~naru_eval.media.pixels.reference_resize` (in the
    arithmetic ``resize`` names); else converted and scaled in one swscale pass to ``max_pixels``
    of the displayed size.
    """

    def __init__(
        self,
        p: Path,
        container: Any,
        stream: Any,
        index: FrameIndex,
        max_pixels: int | None,
        targets: list[int],
        size: tuple[int, int] | None = None,
        resize: str = "float",
    ) -> None:
        self.p, self.container, self.stream, self.index = p, container, stream, index
        self.max_pixels, self.n, self.size, self.resize = max_pixels, len(targets), size, resize
        self.targets = targets
        self.wanted = frozenset(int(index.pts[k]) for k in targets)
        self.shortcuts = True  # skipping and draining; off for good once a target did not come out
        self.drain_at: int | None = None  # the timestamp of the packet after which to drain the decoder
        self.drained = False
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
        self._threads = conversion_threads()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[None]] = deque()
        self._repeats: list[int] = []  # positions that repeat the frame before (N > T)
        self._local = threading.local()  # each thread's RGBConverter

    # -- output
    def _keep(self, frame: Any) -> None:
        """Frame ``frame`` is the next one out: converted into ``out`` inline or by a conversion
        thread (at most two per thread waiting, so decoded frames held stay bounded)."""
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
        at = self.kept
        self.kept += 1
        if not self._threads:
            self._convert(frame, at)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="naru-frames")
        self._pending.append(self._pool.submit(self._convert, frame, at))
        while len(self._pending) > 2 * self._threads:
            self._pending.popleft().result()

    def _convert(self, frame: Any, at: int) -> None:
        """RGB with the frame's colour, turned and resized, into ``out[at]`` (any thread)."""
        import numpy as np

        rgb_of = getattr(self._local, "rgb", None)
        if rgb_of is None:
            rgb_of = self._local.rgb = RGBConverter()
        cw, ch = self.coded_size
        rgb = rgb_of(frame, cw, ch)
        if self.turns:
            rgb = np.rot90(rgb, self.turns)
        if self.size is not None:
            rgb = reference_resize(rgb, self.size[0], self.size[1], self.resize)
        assert self.out is not None
        self.out[at] = rgb

    def frames(self) -> np.ndarray:
        """The frames kept, once every conversion has finished (its error raised here)."""
        import numpy as np

        while self._pending:
            self._pending.popleft().result()
        if self.out is None:
            return np.zeros((0, 0, 0, 3), np.uint8)
        for at in self._repeats:  # ascending: a repeat of a repeat copies a frame already filled
            self.out[at] = self.out[at - 1]
        return self.out

    def stop(self) -> None:
        """End the current decoder run (the container's decoder free for other work)."""
        if self.decoder is not None:
            self.decoder.close()
            self.decoder = None

    def close(self) -> None:
        """Stop the conversion threads (after :meth:`frames`, or on an error: pending ones dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _repeat_last(self) -> None:
        self._repeats.append(self.kept)
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
        self.decoder = self._frames()
        self.last_pts = None
        self.run_key = j
        self.drained = False

    def _frames(self) -> Iterator[Any]:
        """``container.decode(stream)`` from the last seek, with the shortcuts (see the class)."""
        with PictureSkipper(self.stream.codec_context, self.wanted.__contains__ if self.shortcuts else None) as skip:
            for packet in self.container.demux(self.stream):
                skip(packet)
                yield from packet.decode()
                if self.drain_at is not None and packet.pts == self.drain_at:
                    self.drained = True  # the run ends here: the next target is decoded after a seek
                    yield from self.stream.codec_context.decode(None)
                    return

    def _drain_point(self, k: int, want: int) -> int | None:
        """``want`` (frame k's timestamp) where the next target after k is reached through a
        keyframe past ``want`` (a seek follows, so nothing decoded after this target is used);
        never for containers without an index (a picture may span packets there: fields)."""
        if not self.shortcuts or self.by_bytes:
            return None
        at = bisect.bisect_right(self.targets, k)  # targets ascend (segment centres)
        if at == len(self.targets):
            return want
        j = self._key_for(self.targets[at])
        return want if j >= 0 and int(self.index.key_pts[j]) > want else None

    def exact(self, k: int) -> int:
        """Decode frame k; return k. Raises unless the frame given out has frame k's timestamp."""
        import av

        if self.kept and self._last_k == k:
            self._repeat_last()  # N > T repeats a frame: no decode
            return k
        want = int(self.index.pts[k])
        self.drain_at = self._drain_point(k, want)
        j = self._key_for(k)
        continuing = (
            self.decoder is not None
            and not self.drained
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
            # or passed it without giving it out: start one keyframe earlier (having passed it,
            # decoding every picture from then on).
            if self.run_key < 0:
                break
            if started_at is None or started_at <= want:
                self.shortcuts = False
                self.drain_at = None
            j = min(j, self.run_key) - 1
            self._seek(j)
        raise VideoError(self.p, f"could not decode frame {k} of {len(self.index.pts)} (timestamp {want})")
