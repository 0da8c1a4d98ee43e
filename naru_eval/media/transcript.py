"""The one timestamped transcript form every transcript source gives: cues of (start, end, text).

A subtitle file, a video's own subtitle stream and Whisper ASR (``naru-eval transcribe``) all end
up as a :class:`Transcript`: frozen, typed, its cues sorted by time (overlaps kept, gaps left as
they are), times in seconds on the frame sampler's clock (0 = the video stream's first frame, see
:func:`video_start_s`), so a cue can be placed between the sampled frames by its time. Its
:attr:`Transcript.fingerprint` (a hash of the cues) names exactly what the model was given: it
goes into the run key and the payloads. JSON is its one file format (``to_json`` / ``from_json``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: part of every cached transcript: a change to the form makes older files misses
TRANSCRIPT_FORMAT = 1


class TranscriptError(ValueError):
    """A transcript that cannot be read; the message names the file (and line, where there is one)."""

    def __init__(self, path: str | os.PathLike[str], reason: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, order=True, slots=True)
class Cue:
    """One line of speech or subtitle: seconds from the video's first frame, and its text (one
    line: a subtitle's line breaks become spaces). Slotted: a transcript may hold 200,000."""

    start: float
    end: float
    text: str

    def __post_init__(self) -> None:
        if not (self.end >= self.start >= 0.0):
            raise ValueError(f"cue [{self.start}, {self.end}] {self.text!r}: needs 0 <= start <= end")


@dataclass(frozen=True)
class Transcript:
    """A video's cues, sorted by (start, end, text), and where they came from.

    ``source`` is a short label (``file:<name>``, ``embedded:<stream>``, ``asr:<model>``): the
    leaderboard's and the run key's record of the transcript's origin, beside the fingerprint."""

    cues: tuple[Cue, ...]
    source: str

    @classmethod
    def of(cls, cues: Any, source: str) -> Transcript:
        """A transcript of ``cues`` (any iterable of :class:`Cue`), sorted; empty texts dropped."""
        kept = sorted(c for c in cues if c.text.strip())
        return cls(tuple(kept), source)

    @property
    def fingerprint(self) -> str:
        """16 hex digits of the cues' canonical JSON (times at millisecond precision): equal
        fingerprints, equal text given to the model. The source is not part of it."""
        rows = [[round(float(c.start), 3), round(float(c.end), 3), c.text] for c in self.cues]
        blob = json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def duration_s(self) -> float:
        """Seconds from 0 to the last cue's end."""
        return max((c.end for c in self.cues), default=0.0)

    def to_json(self) -> str:
        """JSON with one cue per line (a diff of two transcripts reads line by line)."""
        head = json.dumps(
            {"format": TRANSCRIPT_FORMAT, "source": self.source, "fingerprint": self.fingerprint},
            ensure_ascii=False,
        )
        rows = ",\n".join(
            json.dumps([round(float(c.start), 3), round(float(c.end), 3), c.text], ensure_ascii=False)
            for c in self.cues
        )
        return head[:-1] + ', "cues": [\n' + rows + ("\n" if rows else "") + "]}\n"

    @classmethod
    def from_json(cls, text: str, path: str | os.PathLike[str] = "<transcript>") -> Transcript:
        """The transcript of :meth:`to_json`'s text; anything else is a :class:`TranscriptError`."""
        try:
            doc = json.loads(text)
            if doc.get("format") != TRANSCRIPT_FORMAT:
                raise TranscriptError(path, f"transcript format {doc.get('format')!r}, expected {TRANSCRIPT_FORMAT}")
            out = cls.of((Cue(float(a), float(b), str(t)) for a, b, t in doc["cues"]), str(doc["source"]))
        except TranscriptError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise TranscriptError(path, f"not a naru-eval transcript ({type(e).__name__}: {e})") from None
        if doc.get("fingerprint") not in (None, out.fingerprint):
            raise TranscriptError(path, "its cues do not match its recorded fingerprint (edited or corrupt)")
        return out

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a temporary file renamed over ``path``)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, p)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Transcript:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise TranscriptError(path, f"cannot be read ({e})") from None
        return cls.from_json(text, path)


def video_start_s(container: Any) -> float:
    """Seconds of the first timestamp of the video stream a player shows (the sampler's stream,
    :func:`naru_eval.media.video.video_stream`) in ``container`` (an open PyAV container): the
    origin of the frame sampler's timestamps, so subtitle packets and audio samples are shifted by
    it onto the frames' clock (0 when the file has no video stream or no start)."""
    from naru_eval.media.video import VideoError, video_stream

    try:
        v = video_stream(Path(getattr(container, "name", "") or "<video>"), container)
    except VideoError:
        return 0.0
    if v.start_time is None or v.time_base is None:
        return 0.0
    return float(v.start_time * v.time_base)


#: bytes hashed from the start and the end of a video, and the size of each sampled block between
