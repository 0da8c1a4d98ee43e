"""The audio sampler's one decode pass: every packet of an audio stream decoded, downmixed,
resampled and placed on the frames' time axis (:func:`decode_into`).

Three steps, one class each:

- :class:`Timeline`: where each decoded frame starts. A container's timestamps are rounded (to
  the millisecond in Matroska/WebM, so an AAC frame of 1024 samples at 48 kHz, 21.33 ms, is
  stamped 21 or 22 ms after the one before), and some are off: Vorbis in WebM stamps the frame at
  a block-size switch 10 ms late and the next one 10 ms early; an MPEG-TS whose rate changes
  mid-stream has its frames' timestamps interpolated at the old rate. Writing each frame at its
  own timestamp would overlap or hole the waveform every frame. So a frame whose timestamp is
  within the rounding (:func:`tolerance`) of where the previous frame ended continues from there.
  One that disagrees is held until the next frame: if that one follows on from the held frame's
  timestamp (:data:`CONFIRM`), the jump is real (a gap in the recording, a lost packet, a splice)
  and the held frame goes where its timestamp says (a jump within the rounding of whole frames is
  that many frames: lost packets); otherwise the stamp alone was off and the frame continues the
  run. A real gap is filled with silence before the resampler, so every sample after it keeps its
  place to the input sample (as swr's own timestamp compensation does); of an overlap, what was
  placed first stays.
- :class:`Resampler`: one FFmpeg filter graph (the mean of the channels, then swr to the output
  rate) per run of frames of one format. When the layout or rate changes mid-stream (a TV
  recording from stereo to 5.1, from 48 to 44.1 kHz), the run's graph is flushed and the next run
  gets its own, as the ffmpeg CLI reconfigures its filters; a run starts on the output sample
  nearest its first input sample (within 31 us at 16 kHz).
- :class:`Placer`: copies the resampled chunks into the windows' buffer at their place.

A packet the decoder refuses (a corrupt AAC frame) is skipped, as the ffmpeg CLI skips it: the
frames after it keep their timestamps, so its time is silence, and neither it nor a filled gap
is counted in the windows' ``covered_s``. Nothing is spliced.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from fractions import Fraction
from typing import Any, NamedTuple


def tolerance(time_base: Fraction, rate: int) -> int:
    """Samples (at ``rate``) within which a timestamp is the place the previous frame ended: a
    millisecond, or one tick of the stream's time base where that is coarser, and one sample for
    rounding a timestamp to a sample."""
    tick = -(-time_base.numerator * rate // time_base.denominator)
    return max(tick, -(-rate // 1000)) + 1


#: a gap up to this long is filled with silence before the resampler, which then runs on
#: unbroken (each sample after it keeps its place to the input sample); a longer one (a broken
#: timestamp) ends the run, and the next starts a graph of its own at its timestamp
FILL_MAX_S = 60


#: the next frame confirms a held frame's jump when it lies this many times closer to where the
#: held frame's timestamp puts it than the jump is long (a stream whose rate changed mid-stream
#: has its timestamps interpolated at the old rate, 1.9 ms a frame off from 48 to 44.1 kHz, while
#: a real jump is a frame or more)
CONFIRM = 8


def _rescale(samples: int, src: int, dst: int) -> int:
    """``samples`` at rate ``src`` as samples at rate ``dst`` (rounded)."""
    return samples if src == dst else (2 * samples * dst + src) // (2 * src)


class Placed(NamedTuple):
    """A frame the timeline placed (``pts`` its first sample, ``time_base`` one sample): decoded
    audio, or ``silence`` filling a gap; ``restart``: a gap too long to fill comes before it."""

    frame: Any
    silence: bool = False
    restart: bool = False


def _whole_frames(ts: int, clock: int, frame: int, tol: int) -> int:
    """A real jump forward within the timestamps' rounding of whole frames is that many frames
    (lost packets, as a coarse clock cannot say to the sample): ``ts`` made exact, else ``ts``."""
    k = round((ts - clock) / frame) if frame else 0
    return clock + k * frame if k >= 1 and abs(ts - clock - k * frame) <= tol else ts


def _timestamp(frame: Any) -> int | None:
    """The frame's timestamp in samples at its own rate (rounded), or None."""
    if frame.pts is None or frame.time_base is None:
        return None
    tb = Fraction(frame.time_base)
    num, den = int(frame.pts) * tb.numerator * int(frame.sample_rate), tb.denominator
    return (2 * num + den) // (2 * den)


def _silence(like: Any, samples: int) -> Any:
    """``samples`` of silence in ``like``'s format, layout and rate."""
    import av

    frame = av.AudioFrame(format=like.format.name, layout=like.layout, samples=samples)
    zero = 0x80 if like.format.name in ("u8", "u8p") else 0  # unsigned 8-bit silence is mid-scale
    for plane in frame.planes:
        plane.update(bytes([zero]) * plane.buffer_size)
    frame.sample_rate = like.sample_rate
    return frame


def _without_head(frame: Any, samples: int) -> Any | None:
    """``frame`` without its first ``samples`` samples (None: nothing is left)."""
    import av
    import numpy as np

    if samples >= frame.samples:
        return None
    arr = frame.to_ndarray()
    per = 1 if frame.format.is_planar else len(frame.layout.channels)  # packed: channels interleaved
    out = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(arr[:, samples * per :]), format=frame.format.name, layout=frame.layout
    )
    out.sample_rate = frame.sample_rate
    return out


class Timeline:
    """Each decoded frame's place, in samples at its own rate on the file's clock (the module
    docstring): :meth:`feed` a frame, get what is now placed; :meth:`close` at the end.

    What it returns is a gapless run for the resampler: frames with ``pts`` set to their first
    sample and ``time_base`` to one sample, silence where the timestamps leave a real gap, frames
    without their head where they overlap what was placed before (the earlier samples stay)."""

    def __init__(self) -> None:
        #: where the stream's next frame continues (the last frame's place plus its samples, even
        #: where an overlap dropped it) and where the samples given out end; in samples at ``rate``
        self.clock: int | None = None
        self.written: int | None = None
        self.rate = 0
        #: a frame whose timestamp disagreed with ``clock``, waiting for the next one to decide
        self.held: tuple[Any, int] | None = None

    def feed(self, frame: Any) -> list[Placed]:
        rate = int(frame.sample_rate)
        ts = _timestamp(frame)
        tol = tolerance(Fraction(frame.time_base), rate) if ts is not None else 0
        out: list[Placed] = []
        if self.held is not None:
            held, held_ts = self.held
            self.held = None
            held_rate = int(held.sample_rate)
            follows = _rescale(held_ts + held.samples, held_rate, rate)  # after it, by its timestamp
            contiguous = _rescale(self._clock(held_rate) + held.samples, held_rate, rate)
            jump = abs(ts - contiguous) if ts is not None else 0
            if ts is not None and jump > tol and abs(ts - follows) <= max(tol, jump // CONFIRM):
                out += self._place(held, _whole_frames(held_ts, self._clock(held_rate), held.samples, tol))
            else:
                out += self._place(held, self._clock(held_rate))  # the stamp alone was off: jitter
        if self.clock is None or ts is None:
            out += self._place(frame, ts if ts is not None else self._clock(rate) if self.clock is not None else 0)
        elif abs(ts - self._clock(rate)) <= tol:
            out += self._place(frame, self._clock(rate))
        else:
            self.held = (frame, ts)
        return out

    def close(self) -> list[Placed]:
        """The frame still held at the end of the stream: contiguous unless its timestamp is a
        whole frame or more away (a lost frame before it), as nothing follows to decide."""
        if self.held is None:
            return []
        frame, ts = self.held
        self.held = None
        clock = self._clock(int(frame.sample_rate))
        return self._place(frame, ts if abs(ts - clock) >= frame.samples else clock)

    def _clock(self, rate: int) -> int:
        assert self.clock is not None
        return _rescale(self.clock, self.rate, rate)

    def _place(self, frame: Any, start: int) -> list[Placed]:
        """``frame`` at ``start``: silence before it over a gap, its head dropped over an overlap."""
        rate = int(frame.sample_rate)
        written = _rescale(self.written, self.rate, rate) if self.written is not None else None
        clock = start + int(frame.samples)
        out: list[Placed] = []
        restart = False
        if written is not None and written < start <= written + FILL_MAX_S * rate:
            while written < start:  # a real gap: silence, in frames of at most a second
                n = min(start - written, rate)
                out.append(Placed(self._stamp(_silence(frame, n), written), silence=True))
                written += n
        elif written is not None and start > written:
            restart = True
        elif written is not None and start < written:  # an overlap: what was placed stays
            trimmed = _without_head(frame, written - start)
            if trimmed is None:
                self.clock, self.written, self.rate = clock, written, rate
                return out
            frame, start = trimmed, written
        out.append(Placed(self._stamp(frame, start), restart=restart))
        self.clock = clock
        return out

    def _stamp(self, frame: Any, start: int) -> Any:
        rate = int(frame.sample_rate)
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        if self.clock is not None:
            self.clock = _rescale(self.clock, self.rate, rate)
        self.written, self.rate = start + int(frame.samples), rate
        return frame


def frame_format(frame: Any) -> str:
    """A decoded frame's format as a run is told apart by (and named in notes)."""
    return f"{frame.sample_rate} Hz {frame.layout.name} ({len(frame.layout.channels)} ch) {frame.format.name}"


class Resampler:
    """abuffer -> the mean of the channels (pan) -> swr to ``rate`` (aresample) -> float32 mono ->
    sink: one graph for a run of frames of one format (:func:`frame_format`)."""

    def __init__(self, first: Any, rate: int) -> None:
        from av.filter import Graph

        self.format = frame_format(first)
        graph = Graph()
        src = graph.add(
            "abuffer",
            sample_rate=str(first.sample_rate),
            sample_fmt=first.format.name,
            channel_layout=first.layout.name,
            time_base=str(first.time_base),
        )
        n = len(first.layout.channels)
        gains = "+".join(f"{1.0 / n!r}*c{i}" for i in range(n))
        pan = graph.add("pan", f"mono|c0={gains}")
        resample = graph.add("aresample", str(rate))
        fmt = graph.add("aformat", sample_fmts="flt", channel_layouts="mono", sample_rates=str(rate))
        sink = graph.add("abuffersink")
        src.link_to(pan)
        pan.link_to(resample)
        resample.link_to(fmt)
        fmt.link_to(sink)
        graph.configure()
        self.graph = graph

    def push(self, frame: Any | None) -> Iterator[Any]:
        """Push ``frame`` (None: the end of the run) and yield what comes out."""
        import av

        self.graph.push(frame)
        while True:
            try:
                yield self.graph.pull()
            except (EOFError, av.error.BlockingIOError, av.error.EOFError):
                return


class Placer:
    """Copies resampled chunks into the windows' buffer by their timestamps (``windows`` in
    seconds on the frames' axis, whose 0 is ``origin_s`` on the file's clock). A chunk that starts
    within a sample of where the previous one ended continues it (the resampler rounds each
    chunk's timestamp to a sample); the part of a chunk that would overwrite placed samples (a
    timestamp that went back) is dropped, so each output sample is written once."""

    def __init__(self, windows: tuple[tuple[float, float], ...], rate: int, origin_s: float) -> None:
        import numpy as np

        self.rate = rate
        self.origin_s = origin_s
        self.bounds = [(round(s * rate), round(e * rate)) for s, e in windows]
        self.starts = [s for s, _ in self.bounds]
        sizes = [e - s for s, e in self.bounds]
        self.offsets = [0, *np.cumsum(sizes).tolist()]
        self.out = np.zeros(self.offsets[-1], np.float32)
        self.covered = [0] * len(windows)
        self.next_at: int | None = None  # where the last chunk ended
        self.first: int | None = None
        #: samples placed (each once), in or out of a window
        self.placed = 0
        #: with the sink's time base 1/rate, a timestamp is a sample number: ``pts - shift``
        self.shift: int | None = None
        self.time_base: Any = None
        #: filled gaps, as ``[lo, hi)`` samples on the frames' axis (:meth:`uncover`)
        self._silent: list[tuple[int, int]] = []

    def place(self, frame: Any) -> None:
        import numpy as np

        x = np.frombuffer(frame.planes[0], dtype=np.float32, count=frame.samples)
        at = self._at(frame)
        if self.next_at is not None:
            if abs(at - self.next_at) <= 1:
                at = self.next_at
            elif at < self.next_at:
                x, at = x[self.next_at - at :], self.next_at
        if not len(x):
            return
        end = at + len(x)
        self.next_at = end
        self.first = at if self.first is None else self.first
        self.placed += len(x)
        w = max(0, bisect.bisect_right(self.starts, at) - 1)
        while w < len(self.bounds) and self.bounds[w][0] < end:
            s, e = self.bounds[w]
            lo, hi = max(s, at), min(e, end)
            if lo < hi:
                self.out[self.offsets[w] + lo - s : self.offsets[w] + hi - s] = x[lo - at : hi - at]
                self.covered[w] += hi - lo
            w += 1

    def uncover(self, start: int, samples: int, rate: int) -> None:
        """Samples ``[start, start + samples)`` at ``rate`` on the file's clock are silence filling
        a gap: once placed, they are not counted as covered (:meth:`settle`)."""
        shift = round(self.origin_s * self.rate)
        lo = _rescale(start, rate, self.rate) - shift
        self._silent.append((lo, _rescale(start + samples, rate, self.rate) - shift))

    def settle(self) -> None:
        """Take the filled gaps out of the counts of covered and placed samples."""
        for lo, hi in self._silent:
            self.placed -= max(0, min(hi, self.next_at or lo) - max(lo, self.first or lo))
            for w, (s, e) in enumerate(self.bounds):
                self.covered[w] -= max(0, min(e, hi, self.next_at or lo) - max(s, lo, self.first or lo))
        self._silent = []

    def _at(self, frame: Any) -> int:
        """The chunk's first sample on the frames' axis (no timestamp: where the last one ended)."""
        if frame.pts is None or frame.time_base is None:
            return self.next_at if self.next_at is not None else round(-self.origin_s * self.rate)
        if frame.time_base != self.time_base:
            self.time_base = frame.time_base
            exact = frame.time_base.numerator == 1 and frame.time_base.denominator == self.rate
            self.shift = round(self.origin_s * self.rate) if exact else None
        if self.shift is not None:
            return int(frame.pts) - self.shift
        return round((float(frame.pts * frame.time_base) - self.origin_s) * self.rate)

    @property
    def done(self) -> bool:
        """A second past the last window (nothing later can land in one)."""
        return bool(self.bounds) and self.next_at is not None and self.next_at >= self.bounds[-1][1] + self.rate


class DecodeReport(NamedTuple):
    """What one pass met: the decoded formats in order (several: the format changed mid-stream),
    the packets the decoder refused (skipped; their time is silence) and the frames decoded."""

    formats: tuple[str, ...]
    skipped_packets: int
    frames: int


def decode_into(container: Any, stream: Any, placer: Placer, rate: int) -> DecodeReport:
    """Decode ``stream`` from its first packet until ``placer`` is done (or the stream ends),
    every frame placed by the timeline and resampled by its run's graph."""
    import av

    timeline = Timeline()
    resampler: Resampler | None = None
    formats: list[str] = []
    skipped = frames = 0

    def end_run() -> None:
        if resampler is not None:
            for out in resampler.push(None):  # the run's last samples, out of swr's filter
                placer.place(out)

    def resample(item: Placed) -> None:
        nonlocal resampler
        frame = item.frame
        if resampler is None or item.restart or frame_format(frame) != resampler.format:
            end_run()
            resampler = Resampler(frame, rate)
            if not formats or formats[-1] != resampler.format:
                formats.append(resampler.format)
        if item.silence:
            placer.uncover(int(frame.pts), int(frame.samples), int(frame.sample_rate))
        for out in resampler.push(frame):
            placer.place(out)

    for packet in container.demux(stream):
        try:
            decoded = packet.decode()
        except av.error.FFmpegError:
            skipped += 1  # the ffmpeg CLI logs it and decodes on; its samples are missing
            continue
        for frame in decoded:
            frames += 1
            for item in timeline.feed(frame):
                resample(item)
        if placer.done:
            break
    if not placer.done:
        for item in timeline.close():
            resample(item)
        end_run()
    placer.settle()
    return DecodeReport(tuple(formats), skipped, frames)
