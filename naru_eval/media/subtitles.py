"""Subtitles into the one transcript form (:mod:`naru_eval.media.transcript`).

Two sources:

- a file, ``<dir>/<video_id>.srt`` / ``.vtt`` / ``.ass`` / ``.ssa`` (:func:`find_subtitle_file`,
  :func:`read_subtitle_file`), read by :mod:`naru_eval.media.subtitle_formats`. Its bytes are
  decoded by their byte-order mark, else as ISO-2022-JP when they are 7-bit with its escape
  sequences, else as UTF-16 without a mark when every other byte is NUL, else as UTF-8, else as
  the Japanese legacy encoding (Shift-JIS/CP932, EUC-JP) that charset-normalizer finds; a file
  whose lines are partly UTF-8 and partly not is refused (it would be read as mojibake). Its
  format is what its content says (a ``WEBVTT`` signature, an ASS section, else SubRip); when
  that is not what its extension says, the transcript's source records it. A file over
  :data:`MAX_SUBTITLE_BYTES`, or with more than :data:`MAX_CUES` cues, is refused: the file is
  held once as bytes and read line by line, so memory stays near the file's size.
- the video's own text subtitle stream (:func:`read_embedded`): SubRip/ASS in Matroska,
  mov_text in MP4, WebVTT, through PyAV. FFmpeg's decoders give each packet as an ASS event; its
  text goes through the same stripping. Bitmap subtitles (PGS, DVD, DVB) are an error: they need
  OCR, not parsing.

Every problem is a :class:`~naru_eval.media.transcript.TranscriptError` naming the file (and the
line: every bad line at once); a file that yields no cue is one too.

Times: a file's times are seconds from the start of the video (its first frame, the sampler's
0); an embedded stream's packet times are shifted by the video stream's start
(:func:`naru_eval.media.transcript.video_start_s`) onto the same clock.
"""

from __future__ import annotations

import codecs
import io
import os
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naru_eval.media.subtitle_formats import (
    READERS,
    CueSink,
    SubtitleFormat,
    TooManyCues,
    ass_plain,
    sniff_format,
)
from naru_eval.media.transcript import Cue, Transcript, TranscriptError, video_start_s

if TYPE_CHECKING:
    import av.stream

#: subtitle file extensions, in the order :func:`find_subtitle_file` names them, and the format
#: each says (the content decides, see :func:`read_subtitle_file`)
EXTENSION_FORMATS: dict[str, SubtitleFormat] = {".srt": "srt", ".vtt": "vtt", ".ass": "ass", ".ssa": "ass"}
SUBTITLE_EXTENSIONS: tuple[str, ...] = tuple(EXTENSION_FORMATS)
_FORMAT_NAMES = {"srt": "SubRip", "vtt": "WebVTT", "ass": "ASS/SSA"}

#: the largest subtitle file read (bytes): a 4-hour film's subtitles are well under 1 MB, heavy
#: ASS typesetting a few tens of MB; the file is held once while it is read
MAX_SUBTITLE_BYTES = 128 * 2**20
#: the most cues one transcript may hold: one every 0.5 s for 27 hours
MAX_CUES = 200_000

#: Japanese legacy encodings charset-normalizer chooses between after UTF-8 (ISO-2022-JP is
#: told by its escape sequences before UTF-8: it is 7-bit, so UTF-8 would always "decode" it)
LEGACY_ENCODINGS: tuple[str, ...] = ("cp932", "euc_jp")
_ISO2022_ESCAPES: tuple[bytes, ...] = (b"\x1b$B", b"\x1b$@", b"\x1b(J", b"\x1b(I")
_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_UTF8 = ("utf-8", "utf-8-sig")
_CHUNK = 1 << 20
_BYTE_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _decodes(data: bytes, encoding: str) -> bool:
    """Whether all of ``data`` decodes as ``encoding`` (checked a chunk at a time: no copy of
    the file's text is made)."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    view = memoryview(data)
    try:
        for i in range(0, len(view), _CHUNK):
            decoder.decode(view[i : i + _CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _byte_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line, counted as the text reader counts them (CRLF, CR, LF)."""
    for n, m in enumerate(_BYTE_LINE.finditer(data), 1):
        yield n, m.group(0).rstrip(b"\r\n")


def _first_undecodable(data: bytes, encoding: str) -> tuple[int, str] | None:
    """(line, why) of the first line that does not decode as ``encoding``, or None."""
    for n, line in _byte_lines(data):
        try:
            line.decode(encoding)
        except UnicodeDecodeError as e:
            return n, f"byte {line[e.start : e.start + 1].hex()} at column {e.start + 1}"
    return None


def _wide_without_bom(data: bytes) -> str | None:
    """UTF-16 or UTF-32 (and which byte order) when the file's first 4 KiB have the NUL bytes
    those give ASCII text (digits, colons and line ends are in every subtitle file), else None."""
    sample = data[:4096]
    n = len(sample) - len(sample) % 4
    if n < 8:
        return None
    sample = sample[:n]
    zeros = sample.count(0)
    if zeros < n // 4:
        return None
    at = [sample[k::4].count(0) for k in range(4)]
    quarter = n // 4
    if min(at[0], at[1], at[2]) > 0.9 * quarter and at[3] < 0.5 * quarter:
        return "utf-32-be"
    if min(at[1], at[2], at[3]) > 0.9 * quarter and at[0] < 0.5 * quarter:
        return "utf-32-le"
    even, odd = at[0] + at[2], at[1] + at[3]
    if even >= 0.9 * zeros and odd < 0.25 * n:
        return "utf-16-be"
    if odd >= 0.9 * zeros and even < 0.25 * n:
        return "utf-16-le"
    return None


def detect_encoding(data: bytes, path: str | os.PathLike[str]) -> str:
    """The encoding of a subtitle file's bytes (see the module docstring). A file that mixes
    UTF-8 lines with others, or that no candidate decodes, is an error naming the first line."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return enc
    if data.isascii() and any(esc in data for esc in _ISO2022_ESCAPES):
        return "iso2022_jp"
    wide = _wide_without_bom(data)
    if wide is not None:
        return wide
    if _decodes(data, "utf-8"):
        return "utf-8"
    bad = _first_undecodable(data, "utf-8")
    assert bad is not None
    utf8 = next((n for n, line in _byte_lines(data) if not line.isascii() and _decodes(line, "utf-8")), None)
    if utf8 is not None:
        raise TranscriptError(
            path,
            f"mixes encodings: line {utf8} is UTF-8 with non-ASCII text, line {bad[0]} is not UTF-8 ({bad[1]}); "
            "read as one encoding it would be mojibake: save the whole file as UTF-8",
            line=bad[0],
        )
    import charset_normalizer

    best = charset_normalizer.from_bytes(data, cp_isolation=list(LEGACY_ENCODINGS)).best()
    if best is None or not _decodes(data, best.encoding):
        raise TranscriptError(
            path,
            f"line {bad[0]} is not UTF-8 ({bad[1]}), and the file is not Shift-JIS/CP932, EUC-JP or ISO-2022-JP "
            "either: save it as UTF-8",
            line=bad[0],
        )
    return str(best.encoding)


def _numbered(stream: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a text stream read with universal newlines (CRLF, CR
    and LF are each one line end), the line end removed, a byte-order mark at its start dropped."""
    for n, line in enumerate(stream, 1):
        yield n, line.rstrip("\n").lstrip("\ufeff")


def _numbered_lines(data: bytes, encoding: str) -> Iterator[tuple[int, str]]:
    """:func:`_numbered` lines of ``data`` decoded as ``encoding`` as they are read."""
    return _numbered(io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors="strict", newline=None))


def find_subtitle_file(directory: str | os.PathLike[str], video_id: str) -> Path | None:
    """``<directory>/<video_id>.<ext>`` for one of :data:`SUBTITLE_EXTENSIONS`; None when there is
    none; two of them for one video is an error (which one was meant cannot be told), as is a
    name the file system refuses (too long)."""
    d = Path(directory)
    found: list[Path] = []
    for ext in SUBTITLE_EXTENSIONS:
        p = d / f"{video_id}{ext}"
        try:
            if p.is_file():
                found.append(p)
        except OSError as e:  # a name too long for the file system
            raise TranscriptError(p, f"cannot be looked up ({e.strerror or e})") from None
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise TranscriptError(d, f"video {video_id!r} has {len(found)} subtitle files ({names}): keep one")
    return found[0] if found else None


def _problems(sink: CueSink) -> str:
    """The bad lines in one message: the reason alone for one, else the lines and each reason."""
    shown = sink.problems
    if sink.problem_count == 1:
        return shown[0].reason
    lines = ", ".join(str(b.line) for b in shown)
    more = f" (and {sink.problem_count - len(shown)} more)" if sink.problem_count > len(shown) else ""
    detail = "; ".join(f"line {b.line}: {b.reason}" for b in shown)
    return f"{sink.problem_count} bad lines at line {lines}{more}: {detail}"


def parse_lines(
    lines: Iterable[tuple[int, str]],
    path: str | os.PathLike[str],
    source: str,
    expected: SubtitleFormat | None = None,
    max_cues: int = MAX_CUES,
) -> Transcript:
    """A transcript of a subtitle file's numbered lines, its format sniffed from its first
    non-blank line (:func:`~naru_eval.media.subtitle_formats.sniff_format`). ``source`` names it;
    when the format is not ``expected`` (the extension's), the source says what it was read as."""
    it = iter(lines)
    head: list[tuple[int, str]] = []
    for item in it:
        head.append(item)
        if item[1].strip():
            break
    else:
        raise TranscriptError(path, "is empty: no cues")
    fmt = sniff_format(head[-1][1])
    sink = CueSink(max_cues)
    try:
        READERS[fmt](chain(head, it), sink)
    except TooManyCues as e:
        raise TranscriptError(
            path,
            f"holds more than {e.limit} cues (the cap on one video's transcript): is it one video's subtitles?",
            line=e.line,
        ) from None
    if sink.problems:
        raise TranscriptError(path, _problems(sink), line=sink.problems[0].line)
    if not sink.cues:
        what = f"{sink.read} cue(s) read, none with text" if sink.read else "no cue"
        raise TranscriptError(path, f"has no cues as {_FORMAT_NAMES[fmt]} ({what}): an empty or mislabelled file?")
    if expected is not None and fmt != expected:
        source = _with_note(source, f"read as {_FORMAT_NAMES[fmt]}")
    return Transcript.of(sink.cues, source)


def _with_note(source: str, note: str) -> str:
    return source[:-1] + f"; {note})" if source.endswith(")") else f"{source} ({note})"


def parse_subtitles(text: str, fmt: SubtitleFormat, path: str | os.PathLike[str], source: str) -> Transcript:
    """A transcript of subtitle ``text`` (a string already decoded) whose extension says ``fmt``;
    ``path`` names it in errors."""
    return parse_lines(_numbered(io.StringIO(text, newline=None)), path, source, fmt)


def read_subtitle_file(path: str | os.PathLike[str]) -> Transcript:
    """The transcript of a ``.srt`` / ``.vtt`` / ``.ass`` / ``.ssa`` file (see the module docstring)."""
    p = Path(path)
    expected = EXTENSION_FORMATS.get(p.suffix.lower())
    if expected is None:
        raise TranscriptError(p, f"not a subtitle file (expected one of {', '.join(SUBTITLE_EXTENSIONS)})")
    try:
        size = p.stat().st_size
        if size > MAX_SUBTITLE_BYTES:
            raise TranscriptError(
                p,
                f"is {size:,} bytes, over the {MAX_SUBTITLE_BYTES:,}-byte cap on a subtitle file: "
                "is it one video's subtitles?",
            )
        data = p.read_bytes()
    except OSError as e:
        raise TranscriptError(p, f"cannot be read ({e.strerror or e})") from None
    encoding = detect_encoding(data, p)
    source = f"file:{p.name}" + (f" ({encoding})" if encoding not in _UTF8 else "")
    try:
        return parse_lines(_numbered_lines(data, encoding), p, source, expected, MAX_CUES)
    except UnicodeDecodeError as e:
        bad = None if encoding.startswith(("utf-16", "utf-32")) else _first_undecodable(data, encoding)
        if bad is not None:
            raise TranscriptError(p, f"line {bad[0]} does not decode as {encoding} ({bad[1]})", line=bad[0]) from None
        raise TranscriptError(p, f"does not decode as {encoding} ({e.reason})") from None


# --------------------------------------------------------------------------- embedded streams


def _language(stream: Any) -> str:
    return str((stream.metadata or {}).get("language", "")).lower()


def _kind(stream: av.stream.Stream) -> tuple[str, str]:
    """(codec name, ``text`` / ``bitmap`` / ``other``) of a subtitle stream, by FFmpeg's own
    descriptor of the codec (its name is the codec's, e.g. ``hdmv_pgs_subtitle``, not its
    decoder's, ``pgssub``)."""
    ctx = stream.codec_context
    codec = getattr(ctx, "codec", None) if ctx is not None else None
    if codec is None:
        return str(getattr(ctx, "name", None) or "unknown"), "other"
    name = str(getattr(codec, "canonical_name", None) or codec.name)
    return name, "text" if codec.text_sub else "bitmap" if codec.bitmap_sub else "other"


def subtitle_streams(container: Any) -> list[tuple[int, str, str, str]]:
    """(index among the subtitle streams, codec name, text/bitmap/other, language) of each
    subtitle stream."""
    return [(i, *_kind(s), _language(s)) for i, s in enumerate(container.streams.subtitles)]


#: what a refusal of bitmap subtitles tells the user to do
OCR_HINT = "bitmap subtitles are pictures of text: they need OCR, not parsing; give a subtitle file instead"


def choose_stream(path: str | os.PathLike[str], container: Any, stream: int | None = None) -> int:
    """The subtitle stream to read: ``stream`` (its index among the subtitle streams), else the
    first Japanese text stream, else the first text stream. No text stream is an error."""
    streams = subtitle_streams(container)
    if stream is not None:
        if not 0 <= stream < len(streams):
            raise TranscriptError(path, f"subtitle stream {stream} asked for, the file has {len(streams)}")
        i, codec, kind, _ = streams[stream]
        if kind != "text":
            hint = f" ({OCR_HINT})" if kind == "bitmap" else ""
            raise TranscriptError(path, f"subtitle stream {i} is {codec}, not text{hint}")
        return i
    text = [s for s in streams if s[2] == "text"]
    if not text:
        if streams:
            codecs_found = ", ".join(sorted({c for _, c, _, _ in streams}))
            hint = f" ({OCR_HINT})" if any(k == "bitmap" for _, _, k, _ in streams) else ""
            raise TranscriptError(path, f"no text subtitle stream (only {codecs_found}){hint}")
        raise TranscriptError(path, "no subtitle stream")
    japanese = [s for s in text if s[3] in ("jpn", "ja", "jp")]
    return (japanese or text)[0][0]


def _event_text(ass_line: bytes, path: str | os.PathLike[str], at_s: float) -> str:
    """The plain text of an FFmpeg ASS event (``ReadOrder,Layer,Style,Name,MarginL,MarginR,
    MarginV,Effect,Text``); empty for a drawing."""
    try:
        line = ass_line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TranscriptError(path, f"subtitle packet at {at_s:.3f} s is not UTF-8 ({e})") from None
    parts = line.rstrip("\r\n").split(",", 8)
    if len(parts) < 9:
        raise TranscriptError(path, f"subtitle packet at {at_s:.3f} s: not an ASS event ({line[:60]!r})")
    return ass_plain(parts[8])


def read_embedded(path: str | os.PathLike[str], stream: int | None = None) -> Transcript:
    """The transcript of the video's own text subtitle stream (see :func:`choose_stream`); a
    stream with no cue, or more than :data:`MAX_CUES`, is an error."""
    import av

    max_cues = MAX_CUES
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
                        body = _event_text(bytes(rect.ass), p, start) if hasattr(rect, "ass") else ""
                        if body and end >= 0:
                            if len(cues) >= max_cues:
                                raise TranscriptError(
                                    p, f"subtitle stream {index} holds more than {max_cues} cues (at {start:.3f} s)"
                                )
                            cues.append(Cue(max(0.0, start), max(0.0, end), body))
    except TranscriptError:
        raise
    except Exception as e:  # PyAV raises several error types for corrupt files
        raise TranscriptError(p, f"subtitle stream cannot be read ({type(e).__name__}: {e})") from None
    if not cues:
        raise TranscriptError(p, f"subtitle stream {index} has no cues with text")
    return Transcript.of(cues, f"embedded:{index}")
