"""Subtitles into the one transcript form (:mod:`naru_eval.media.transcript`).

Two sources:

- a file, ``<dir>/<video_id>.srt`` / ``.vtt`` / ``.ass`` / ``.ssa`` (:func:`find_subtitle_file`,
  :func:`read_subtitle_file`), parsed by pysubs2. The bytes are decoded as their byte-order mark
  says, else as UTF-8, else as the Japanese legacy encoding (Shift-JIS/CP932, EUC-JP,
  ISO-2022-JP) that charset-normalizer finds; CRLF and CR line ends are normalised; ASS override
  tags (``{\\b1}``, ``{\\pos(…)}``), SRT/VTT markup and ASS drawings are stripped; comments
  and empty cues are dropped. pysubs2 takes a malformed timing line for text, so every line that
  looks like a timing (or an ASS event's times) is checked first: a bad one is an error naming
  the file and the line, every bad line at once.
- the video's own text subtitle stream (:func:`read_embedded`): SubRip/ASS in Matroska,
  mov_text in MP4, WebVTT, through PyAV. FFmpeg's decoders give each packet as an ASS event; its
  text goes through the same stripping. Bitmap subtitles (PGS, DVD, DVB) are an error: they need
  OCR, not parsing.

Times: a file's times are seconds from the start of the video (its first frame, the sampler's
0); an embedded stream's packet times are shifted by the video stream's start
(:func:`naru_eval.media.transcript.video_start_s`) onto the same clock.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from naru_eval.media.transcript import Cue, Transcript, TranscriptError, video_start_s

#: subtitle file extensions, in the order :func:`find_subtitle_file` names them
SUBTITLE_EXTENSIONS: tuple[str, ...] = (".srt", ".vtt", ".ass", ".ssa")
_FORMAT = {".srt": "srt", ".vtt": "vtt", ".ass": "ass", ".ssa": "ssa"}

#: Japanese legacy encodings tried (by charset-normalizer) after UTF-8
LEGACY_ENCODINGS: tuple[str, ...] = ("cp932", "euc_jp", "iso2022_jp")
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)

#: FFmpeg subtitle codecs that carry text (decoded to ASS events) and those that carry pictures
TEXT_CODECS = frozenset({"subrip", "srt", "ass", "ssa", "mov_text", "webvtt", "text", "microdvd", "subviewer"})
BITMAP_CODECS = frozenset({"hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle", "xsub", "dvb_teletext"})

_TS = r"(?:\d+:)?\d{1,2}:\d{1,2}[.,]\d{1,3}"
#: a complete SRT/WebVTT timing line (WebVTT may add cue settings after the end time)
_TIMING = re.compile(rf"^\s*{_TS}\s*-->\s*{_TS}(?:\s+.*)?$")
#: what a person meant as a timing line: it starts with digits and colons, then an arrow (a cue's
#: text that merely mentions "10:30 -> 11:00" does not start so)
_TIMING_LIKE = re.compile(r"^\s*\d[\d:.,]*\s*-+>")
#: an ASS timestamp (pysubs2 reads h:mm:ss.cc)
_ASS_TS = re.compile(r"^\s*\d+:\d{1,2}:\d{1,2}[.,]\d{1,3}\s*$")
_SPACES = re.compile(r"\s+")


def decode_subtitle_bytes(data: bytes, path: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, encoding) of a subtitle file's bytes: BOM, else UTF-8, else a Japanese legacy
    encoding; line ends normalised to ``\\n``. Undecodable bytes are an error naming the file."""
    text: str | None = None
    encoding = ""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            try:
                text, encoding = data.decode(enc), enc
            except UnicodeDecodeError as e:
                raise TranscriptError(
                    path, f"starts with a {enc} byte-order mark but does not decode as {enc}: {e}"
                ) from None
            break
    if text is None:
        try:
            text, encoding = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            import charset_normalizer

            best = charset_normalizer.from_bytes(data, cp_isolation=list(LEGACY_ENCODINGS)).best()
            if best is None:
                raise TranscriptError(
                    path,
                    "not UTF-8, and none of Shift-JIS/CP932, EUC-JP or ISO-2022-JP decodes it: save it as UTF-8",
                ) from None
            text, encoding = str(best), str(best.encoding)
    text = text.lstrip("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding


def find_subtitle_file(directory: str | os.PathLike[str], video_id: str) -> Path | None:
    """``<directory>/<video_id>.<ext>`` for one of :data:`SUBTITLE_EXTENSIONS`; None when there is
    none; two of them for one video is an error (which one was meant cannot be told)."""
    d = Path(directory)
    found = [d / f"{video_id}{ext}" for ext in SUBTITLE_EXTENSIONS if (d / f"{video_id}{ext}").is_file()]
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise TranscriptError(d, f"video {video_id!r} has {len(found)} subtitle files ({names}): keep one")
    return found[0] if found else None


def _one_line(text: str) -> str:
    """A cue's text on one line: line breaks (and runs of spaces) become one space."""
    return _SPACES.sub(" ", text).strip()


def _timing_lines(path: str | os.PathLike[str], text: str) -> list[int]:
    """Line numbers (1-based) of the SRT/WebVTT timing lines; every line that looks like a timing
    but is not a valid one is an error (pysubs2 would take it for cue text)."""
    good: list[int] = []
    bad: list[int] = []
    for n, line in enumerate(text.split("\n"), 1):
        if _TIMING.match(line):
            good.append(n)
        elif _TIMING_LIKE.search(line):
            bad.append(n)
    if bad:
        shown = ", ".join(str(n) for n in bad[:20])
        raise TranscriptError(
            path,
            f"malformed timing line(s) at line {shown} (expected `HH:MM:SS,mmm --> HH:MM:SS,mmm`)",
            line=bad[0],
        )
    return good


def _ass_event_lines(path: str | os.PathLike[str], text: str) -> list[int]:
    """Line numbers of the ASS/SSA ``Dialogue:``/``Comment:`` lines; a bad start or end time (or
    too few fields) is an error naming each bad line."""
    lines: list[int] = []
    bad: list[str] = []
    fields: list[str] = []
    section = ""
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            section = s.lower()
            continue
        if section != "[events]":
            continue
        head, _, rest = s.partition(":")
        if head.lower() == "format":
            fields = [f.strip().lower() for f in rest.split(",")]
        elif head.lower() in ("dialogue", "comment"):
            lines.append(n)
            names = fields or ["layer", "start", "end", "style", "name", "marginl", "marginr", "marginv", "effect"]
            values = rest.split(",", max(0, len(names) - 1))
            if len(values) < len(names):
                bad.append(f"line {n}: {len(values)} field(s), the Format line names {len(names)}")
                continue
            for key in ("start", "end"):
                if key in names and not _ASS_TS.match(values[names.index(key)]):
                    bad.append(f"line {n}: bad {key} time {values[names.index(key)].strip()!r}")
    if bad:
        first = int(bad[0].split(":")[0].removeprefix("line "))
        raise TranscriptError(path, "; ".join(bad[:20]), line=first)
    return lines


def parse_subtitles(text: str, fmt: str, path: str | os.PathLike[str], source: str) -> Transcript:
    """A transcript of subtitle ``text`` in pysubs2 format ``fmt`` (``srt``, ``vtt``, ``ass``,
    ``ssa``); ``path`` names the file in errors."""
    import pysubs2

    if fmt == "vtt":
        text = _strip_vtt_blocks(text)
    lines = _ass_event_lines(path, text) if fmt in ("ass", "ssa") else _timing_lines(path, text)
    try:
        subs = pysubs2.SSAFile.from_string(text, format_=fmt)
    except Exception as e:  # pysubs2 raises several types on broken files
        raise TranscriptError(path, f"cannot be parsed as {fmt} ({type(e).__name__}: {e})") from None
    events = list(subs.events)
    line_of: list[int | None] = list(lines) if len(lines) == len(events) else [None] * len(events)
    cues: list[Cue] = []
    for event, line in zip(events, line_of, strict=True):
        if event.is_comment or event.is_drawing:
            continue
        if event.end < event.start:
            raise TranscriptError(path, f"cue ends ({event.end} ms) before it starts ({event.start} ms)", line=line)
        body = _one_line(event.plaintext)
        if body:
            cues.append(Cue(max(0, event.start) / 1000.0, max(0, event.end) / 1000.0, body))
    return Transcript.of(cues, source)


def _strip_vtt_blocks(text: str) -> str:
    """WebVTT ``NOTE``, ``STYLE`` and ``REGION`` blocks blanked (lines kept, so line numbers hold):
    pysubs2 would glue them to the cue before."""
    out: list[str] = []
    blanking = False
    for line in text.split("\n"):
        if not line.strip():
            blanking = False
        elif not out or not out[-1].strip():
            blanking = line.split(" ", 1)[0].split("\t", 1)[0] in ("NOTE", "STYLE", "REGION")
        out.append("" if blanking else line)
    return "\n".join(out)


def read_subtitle_file(path: str | os.PathLike[str]) -> Transcript:
    """The transcript of a ``.srt`` / ``.vtt`` / ``.ass`` / ``.ssa`` file (its extension says which)."""
    p = Path(path)
    fmt = _FORMAT.get(p.suffix.lower())
    if fmt is None:
        raise TranscriptError(p, f"not a subtitle file (expected one of {', '.join(SUBTITLE_EXTENSIONS)})")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise TranscriptError(p, f"cannot be read ({e})") from None
    text, encoding = decode_subtitle_bytes(data, p)
    label = f"file:{p.name}" + (f" ({encoding})" if encoding not in ("utf-8", "utf-8-sig") else "")
    return parse_subtitles(text, fmt, p, label)


# --------------------------------------------------------------------------- embedded streams


def _language(stream: Any) -> str:
    return str((stream.metadata or {}).get("language", "")).lower()


def subtitle_streams(container: Any) -> list[tuple[int, str, str]]:
    """(index among the subtitle streams, codec name, language) of each subtitle stream."""
    return [(i, s.codec_context.name, _language(s)) for i, s in enumerate(container.streams.subtitles)]


def choose_stream(path: str | os.PathLike[str], container: Any, stream: int | None = None) -> int:
    """The subtitle stream to read: ``stream`` (its index among the subtitle streams), else the
    first Japanese text stream, else the first text stream. No text stream is an error."""
    streams = subtitle_streams(container)
    if stream is not None:
        if not 0 <= stream < len(streams):
            raise TranscriptError(path, f"subtitle stream {stream} asked for, the file has {len(streams)}")
        i, codec, _ = streams[stream]
        if codec not in TEXT_CODECS:
            raise TranscriptError(path, f"subtitle stream {i} is {codec}, not text")
        return i
    text = [s for s in streams if s[1] in TEXT_CODECS]
    if not text:
        if streams:
            codecs = ", ".join(sorted({c for _, c, _ in streams}))
            bitmap = {c for _, c, _ in streams} & BITMAP_CODECS
            hint = " (bitmap subtitles need OCR: give a subtitle file instead)" if bitmap else ""
            raise TranscriptError(path, f"no text subtitle stream (only {codecs}){hint}")
        raise TranscriptError(path, "no subtitle stream")
    japanese = [s for s in text if s[2] in ("jpn", "ja", "jp")]
    return (japanese or text)[0][0]


def _event_text(ass_line: bytes, path: str | os.PathLike[str], at_s: float) -> str | None:
    """The plain text of an FFmpeg ASS event (``ReadOrder,Layer,Style,Name,MarginL,MarginR,
    MarginV,Effect,Text``); None for a drawing."""
    import pysubs2

    try:
        line = ass_line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TranscriptError(path, f"subtitle packet at {at_s:.3f} s is not UTF-8 ({e})") from None
    parts = line.rstrip("\r\n").split(",", 8)
    if len(parts) < 9:
        raise TranscriptError(path, f"subtitle packet at {at_s:.3f} s: not an ASS event ({line[:60]!r})")
    event = pysubs2.SSAEvent(text=parts[8])
    return None if event.is_drawing else _one_line(event.plaintext)


def read_embedded(path: str | os.PathLike[str], stream: int | None = None) -> Transcript:
    """The transcript of the video's own text subtitle stream (see :func:`choose_stream`)."""
    import av

    p = Path(path)
    if not p.is_file():
        raise TranscriptError(p, "file does not exist")
    cues: list[Cue] = []
    try:
        with av.open(str(p)) as container:
            index = choose_stream(p, container, stream)
            s = container.streams.subtitles[index]
            origin = video_start_s(container)
            tb = s.time_base
            if tb is None:
                raise TranscriptError(p, f"subtitle stream {index} has no time base")
            for packet in container.demux(s):
                if packet.size == 0 or packet.pts is None:
                    continue
                start = float(packet.pts * tb) - origin
                end = start + (float(packet.duration * tb) if packet.duration else 0.0)
                for item in packet.decode():
                    rects = [item] if hasattr(item, "ass") else list(item)
                    for rect in rects:
                        body = _event_text(bytes(rect.ass), p, start) if hasattr(rect, "ass") else None
                        if body and end >= 0:
                            cues.append(Cue(max(0.0, start), max(0.0, end), body))
    except TranscriptError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise TranscriptError(p, f"subtitle stream cannot be read ({type(e).__name__}: {e})") from None
    return Transcript.of(cues, f"embedded:{index}")
