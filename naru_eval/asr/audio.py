"""A video's soundtrack as 16-kHz mono float32 samples on the frames' clock, decoded with PyAV.

Sample 0 is the time of the video stream's first frame (the frame sampler's 0,
:func:`naru_eval.media.transcript.video_start_s`): an audio stream that starts later is padded
with silence in front, one that starts earlier is cut, so a cue's time is a frame's time. (The
one audio sampler of the omni families will take this over; until then ASR decodes here.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.media.transcript import TranscriptError, video_start_s

if TYPE_CHECKING:
    import numpy as np

#: Whisper's and Silero VAD's sampling rate
SAMPLE_RATE = 16_000


def decode_audio(path: str | os.PathLike[str], stream: int = 0) -> np.ndarray:
    """The ``stream``-th audio stream of ``path``, resampled to 16 kHz mono float32 and placed on
    the frames' clock. No audio stream, or one that does not decode, is an error naming the file."""
    import av
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise TranscriptError(p, "file does not exist")
    chunks: list[np.ndarray] = []
    first_s: float | None = None
    try:
        with av.open(str(p)) as container:
            if len(container.streams.audio) <= stream:
                raise TranscriptError(p, f"no audio stream {stream} (the file has {len(container.streams.audio)})")
            origin = video_start_s(container)
            a = container.streams.audio[stream]
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(a):
                if first_s is None and frame.pts is not None and frame.time_base is not None:
                    first_s = float(frame.pts * frame.time_base) - origin
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1).astype(np.float32, copy=False))
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1).astype(np.float32, copy=False))
    except TranscriptError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise TranscriptError(p, f"audio cannot be decoded ({type(e).__name__}: {e})") from None
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    shift = int(round((first_s or 0.0) * SAMPLE_RATE))
    if shift > 0:
        samples = np.concatenate([np.zeros(shift, np.float32), samples])
    elif shift < 0:
        samples = samples[-shift:]
    return samples
