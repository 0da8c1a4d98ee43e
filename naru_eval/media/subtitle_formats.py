"""The three subtitle text formats, read line by line into timed cues: SubRip (SRT), WebVTT and
SubStation Alpha (ASS/SSA).

Each reader takes the file's lines (decoded, line ends removed) and hands every cue to a
:class:`CueSink` with its times in milliseconds and its text already plain. Nothing is glued or
dropped silently: a line that looks like a timing but does not parse, a time with a sign, an ASS
event whose times or fields are wrong, a cue that ends before it starts are each one
:class:`BadLine` naming the line, and the reader goes on, so every bad line is named at once.

- **SRT** has no specification; FFmpeg's demuxer (``libavformat/srtdec.c``) is the reference: a
  timing line starts a cue, the cue's text runs to the next timing line (blank lines inside it
  are skipped), and a number alone on the line right before a timing line is that cue's index.
  Hours have as many digits as they need, minutes and seconds one or two, milliseconds three.
  Unlike FFmpeg, a timing-like line that does not parse is named instead of read as text, and
  text before the first cue is named instead of dropped.
- **WebVTT** follows the W3C parsing rules (https://w3c.github.io/webvtt/#file-parsing): blocks
  separated by blank lines; a block is a cue when its first or second line holds ``-->``; a line
  holding ``-->`` later in a block ends that block and starts the next (so a missing blank line
  never glues two cues); ``NOTE``, ``STYLE``, ``REGION`` and other blocks without a timing are
  not cues. A cue whose timing does not parse is named (the rules would drop it silently).
- **ASS/SSA**: the ``Dialogue:`` lines of ``[Events]``, split by its ``Format:`` line; times
  ``h:mm:ss.cc`` (hours unlimited); ``Comment:`` events and drawings (``{\\p1}…{\\p0}``) are not
  dialogue.

Markup becomes plain text (:func:`srt_plain`, :func:`vtt_plain`, :func:`ass_plain`); line breaks
and runs of spaces become one space; control characters (NUL, BEL, ESC, …) are removed.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from naru_eval.media.transcript import Cue

SubtitleFormat = Literal["srt", "vtt", "ass"]

#: how many bad lines an error lists before it only counts them
SHOWN_PROBLEMS = 20

# --------------------------------------------------------------------------- plain text

#: C0 controls, DEL and C1 controls: those that are whitespace become a space, the others go
_CONTROLS = {c: (" " if chr(c).isspace() else None) for c in (*range(0x20), *range(0x7F, 0xA0))}
_SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    """``text`` on one line: control characters removed, line breaks and runs of spaces (any
    Unicode space, the ideographic one included) made one space."""
    return _SPACES.sub(" ", text.translate(_CONTROLS)).strip()


#: an ASS override block: ``{`` to the next ``}`` (anything inside is a tag or a comment)
_ASS_BLOCK = re.compile(r"(\{[^}]*\})")
#: ``\pN`` in an override block: drawing mode on (N > 0) or off (N = 0)
_ASS_DRAWING = re.compile(r"\\p(\d+)")


def ass_plain(text: str) -> str:
    """An ASS event's text as it reads: override blocks (``{\\b1}``, ``{\\pos(…)}``, comments in
    braces) removed, ``\\N``/``\\n``/``\\h`` as spaces, and drawings (from ``{\\p1}`` to
    ``{\\p0}``, libass's rule) removed."""
    out: list[str] = []
    drawing = False
    for part in _ASS_BLOCK.split(text):
        if part.startswith("{") and part.endswith("}"):
            for level in _ASS_DRAWING.findall(part):
                drawing = int(level) > 0
        elif not drawing:
            out.append(part)
    plain = "".join(out).replace("\\N", " ").replace("\\n", " ").replace("\\h", " ")
    return clean(plain)


#: an HTML-like tag in a SubRip cue: ``<i>``, ``</font>``, ``<font color="…">``, and the WebVTT
#: tags Netflix and YouTube SubRip files carry (``<c.japanese>``); a name starts with a letter, so
#: ``2<3,5>1`` and furigana's ``<よ`` stay text
_SRT_TAG = re.compile(r"</?\s*[A-Za-z][\w.\-:]*(?:\s[^<>]*)?/?>")
_SRT_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def srt_plain(text: str) -> str:
    """A SubRip cue's text as it reads: HTML-like tags removed (``<br>`` a space), then read as
    FFmpeg hands it to a renderer, ASS text (:func:`ass_plain`: ``{\\an8}`` and other brace blocks
    hidden)."""
    return ass_plain(_SRT_TAG.sub("", _SRT_BR.sub(lambda _: "\\N", text)))


#: a WebVTT tag: ``<`` to ``>`` (class, voice, language, ruby and timestamp tags alike)
_VTT_TAG = re.compile(r"<[^>]*(?:>|$)")


def vtt_plain(text: str) -> str:
    """A WebVTT cue's text as it reads: every tag (``<c.class>``, ``<v Name>``, ``<00:01.500>``)
    removed, character references (``&amp;``, ``&lrm;``) decoded."""
    return clean(html.unescape(_VTT_TAG.sub("", text)))


# --------------------------------------------------------------------------- the cues


@dataclass(frozen=True)
class BadLine:
    """One bad line of a subtitle file."""

    line: int
    reason: str


class TooManyCues(Exception):
    """The file holds more cues than the sink takes (see :class:`CueSink`)."""

    def __init__(self, line: int, limit: int) -> None:
        super().__init__(line, limit)
        self.line = line
        self.limit = limit


@dataclass
class CueSink:
    """Where a reader puts its cues and problems. Cues with no text are not kept; more than
    ``max_cues`` is :class:`TooManyCues` (raised at once: the rest is not read)."""

    max_cues: int
    cues: list[Cue] = field(default_factory=list)
    problems: list[BadLine] = field(default_factory=list)
    problem_count: int = 0
    read: int = 0

    def problem(self, line: int, reason: str) -> None:
        self.problem_count += 1
        if len(self.problems) < SHOWN_PROBLEMS:
            self.problems.append(BadLine(line, reason))

    def add(self, start_ms: int, end_ms: int, text: str, line: int) -> None:
        self.read += 1
        if end_ms < start_ms:
            self.problem(line, f"the cue ends ({_clock(end_ms)}) before it starts ({_clock(start_ms)})")
            return
        if not text:
            return
        if len(self.cues) >= self.max_cues:
            raise TooManyCues(line, self.max_cues)
        self.cues.append(Cue(start_ms / 1000.0, end_ms / 1000.0, text))


def _clock(ms: int) -> str:
    s, ms = divmod(ms, 1000)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}.{ms:03d}"


def _short(line: str) -> str:
    return repr(line.strip()[:80])


# --------------------------------------------------------------------------- SRT

_SRT_TIME = r"(\d+):(\d{1,2}):(\d{1,2})[,.](\d{3})"
#: a SubRip timing line (anything after the end time, e.g. FFmpeg's ``X1:…`` box, is ignored)
SRT_TIMING = re.compile(rf"^\s*{_SRT_TIME}\s*-->\s*{_SRT_TIME}(?:\s.*)?$")
#: what a person meant as a timing line: an arrow ``-->`` anywhere, or a line that starts with
#: a (signed) number and a colon and reaches an arrow (``00:10:00,250 -> 00:10:02``); a cue's
#: text that merely mentions ``10:30 -> 11:00`` does not start so
TIMING_LIKE = re.compile(r"-->|^\s*[-+]?\d+\s*:[^>]*?-+>")
_NUMBER = re.compile(r"^\s*\d+\s*$")
_SIGNED = re.compile(r"(?:^|-->)\s*[-+]\s*\d")
_NO_HOURS = re.compile(r"^\s*\d{1,2}:\d{1,2}[,.]\d+\s*-->")


def _srt_ms(g: tuple[str, ...]) -> tuple[int, str | None]:
    h, m, s, ms = (int(x) for x in g)
    if m > 59 or s > 59:
        return 0, f"minutes and seconds go to 59, got {g[1]}:{g[2]}"
    return ((h * 60 + m) * 60 + s) * 1000 + ms, None


def _srt_timing_problem(line: str) -> str:
    """Why a timing-like line is not a SubRip timing."""
    if _SIGNED.search(line):
        return f"a signed time in {_short(line)}: times count from the video's start"
    if _NO_HOURS.match(line):
        return f"a time without hours in {_short(line)}: SRT times are HH:MM:SS,mmm"
    return f"malformed timing line {_short(line)} (expected `HH:MM:SS,mmm --> HH:MM:SS,mmm`)"


def read_srt(lines: Iterable[tuple[int, str]], sink: CueSink) -> None:
    """SubRip cues from numbered lines (see the module docstring). The text after a timing-like
    line that does not parse belongs to that broken cue: it is not named again."""
    current: tuple[int, int, int] | None = None  # start, end, line of the open cue
    broken = False  # the open cue's timing line did not parse
    text: list[str] = []

    def close() -> None:
        if current is not None and not broken:
            sink.add(current[0], current[1], srt_plain("\n".join(text)), current[2])

    for n, line in lines:
        if not line.strip():
            continue
        m = SRT_TIMING.match(line)
        if m is None and not TIMING_LIKE.search(line):
            if current is not None:
                text.append(line)
            elif not _NUMBER.match(line):
                sink.problem(n, f"text before the first timing line: {_short(line)}")
            continue
        if text and _NUMBER.match(text[-1]):
            text.pop()  # the index of the cue this line starts
        close()
        text = []
        if m is None:
            sink.problem(n, _srt_timing_problem(line))
            current, broken = (0, 0, n), True
            continue
        start, why = _srt_ms(m.groups()[:4])
        end, why_end = _srt_ms(m.groups()[4:])
        if why or why_end:
            sink.problem(n, f"{why or why_end} in {_short(line)}")
        current, broken = (start, end, n), bool(why or why_end)
    close()


# --------------------------------------------------------------------------- WebVTT


def vtt_timestamp(s: str, at: int) -> tuple[int, int] | None:
    """(milliseconds, position after it) of the WebVTT timestamp at ``s[at:]``, or None (the
    rules' "collect a WebVTT timestamp": ``[hours:]mm:ss.ttt``, two-digit minutes and seconds up
    to 59, three-digit milliseconds, hours of any length)."""

    def digits(i: int) -> tuple[str, int]:
        j = i
        while j < len(s) and "0" <= s[j] <= "9":
            j += 1
        return s[i:j], j

    first, i = digits(at)
    if not first:
        return None
    hours_given = len(first) != 2 or int(first) > 59
    if i >= len(s) or s[i] != ":":
        return None
    second, i = digits(i + 1)
    if len(second) != 2:
        return None
    if hours_given or (i < len(s) and s[i] == ":"):
        if i >= len(s) or s[i] != ":":
            return None
        third, i = digits(i + 1)
        if len(third) != 2:
            return None
        h, m, sec = int(first), int(second), int(third)
    else:
        h, m, sec = 0, int(first), int(second)
    if i >= len(s) or s[i] != ".":
        return None
    frac, i = digits(i + 1)
    if len(frac) != 3 or m > 59 or sec > 59:
        return None
    return ((h * 60 + m) * 60 + sec) * 1000 + int(frac), i


def vtt_timing(line: str) -> tuple[int, int] | None:
    """(start, end) in milliseconds of a WebVTT timing line, or None (the rules' "collect
    WebVTT cue timings and settings": the settings after the end time are not read)."""
    i = len(line) - len(line.lstrip(" \t"))
    first = vtt_timestamp(line, i)
    if first is None:
        return None
    start, i = first
    while i < len(line) and line[i] in " \t":
        i += 1
    if line[i : i + 3] != "-->":
        return None
    i += 3
    while i < len(line) and line[i] in " \t":
        i += 1
    second = vtt_timestamp(line, i)
    if second is None:
        return None
    return start, second[0]


def _vtt_timing_problem(line: str) -> str:
    if _SIGNED.search(line):
        return f"a signed time in {_short(line)}: times count from the video's start"
    return f"malformed timing line {_short(line)} (expected `[HH:]MM:SS.mmm --> [HH:]MM:SS.mmm [settings]`)"


def read_vtt(lines: Iterable[tuple[int, str]], sink: CueSink) -> None:
    """WebVTT cues from numbered lines, the first being the ``WEBVTT`` signature (see the module
    docstring); the header's lines up to the first blank one are not cues."""
    it: Iterator[tuple[int, str]] = iter(lines)
    pending: list[tuple[int, str]] = []  # a line that ended one block and starts the next

    def next_line() -> tuple[int, str] | None:
        return pending.pop() if pending else next(it, None)

    if next_line() is None:  # the signature line
        return
    in_header = True
    at_end = False
    while not at_end:
        # one block: the rules' "collect a WebVTT block"
        count = 0
        seen_arrow = False
        timing: tuple[int, int, int] | None = None  # start, end, line
        body: list[str] = []
        at_end = True
        while (item := next_line()) is not None:
            n, line = item
            count += 1
            if "-->" in line:
                if not in_header and (count == 1 or (count == 2 and not seen_arrow)):
                    seen_arrow = True
                    parsed = vtt_timing(line)
                    if parsed is None:
                        sink.problem(n, _vtt_timing_problem(line))
                    else:
                        timing = (parsed[0], parsed[1], n)
                    body = []  # what came before is the cue's identifier, not its text
                    continue
                pending.append(item)  # this line starts the next block
                at_end = False
                break
            if not line:
                at_end = False
                break
            if not in_header and count <= 2 and not seen_arrow and TIMING_LIKE.search(line):
                sink.problem(n, _vtt_timing_problem(line))  # the rules would drop this cue unsaid
            body.append(line)
        in_header = False
        if timing is not None:
            sink.add(timing[0], timing[1], vtt_plain("\n".join(body)), timing[2])


# --------------------------------------------------------------------------- ASS / SSA

#: an ASS time: h:mm:ss.cc (hours unlimited; libass and FFmpeg read the fraction as centiseconds)
_ASS_TIME = re.compile(r"^\s*(\d+):(\d{1,2}):(\d{1,2})[.:](\d{2})\s*$")
_ASS_DEFAULT_FIELDS = ("layer", "start", "end", "style", "name", "marginl", "marginr", "marginv", "effect", "text")


def _ass_ms(value: str) -> int | None:
    m = _ASS_TIME.match(value)
    if m is None:
        return None
    h, mi, s, cs = (int(x) for x in m.groups())
    if mi > 59 or s > 59:
        return None
    return ((h * 60 + mi) * 60 + s) * 1000 + cs * 10


def read_ass(lines: Iterable[tuple[int, str]], sink: CueSink) -> None:
    """ASS/SSA cues from numbered lines: each ``Dialogue:`` of ``[Events]`` (or of a file that
    has no sections) by its ``Format:`` line (see the module docstring)."""
    section = ""
    fields: tuple[str, ...] = _ASS_DEFAULT_FIELDS
    for n, line in lines:
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            section = s.lower()
            continue
        if section not in ("", "[events]"):
            continue
        head, colon, rest = s.partition(":")
        kind = head.strip().lower()
        if not colon or kind not in ("format", "dialogue", "comment"):
            continue
        if kind == "format":
            fields = tuple(f.strip().lower() for f in rest.split(","))
            continue
        values = rest.lstrip().split(",", max(0, len(fields) - 1))
        if len(values) < len(fields):
            sink.problem(n, f"{len(values)} field(s), the Format line names {len(fields)}")
            continue
        times: list[int] = []
        for key in ("start", "end"):
            if key not in fields:
                sink.problem(n, f"the Format line names no {key} time")
                break
            raw = values[fields.index(key)]
            ms = _ass_ms(raw)
            if ms is None:
                why = "a signed time" if raw.strip().startswith(("-", "+")) else "expected h:mm:ss.cc"
                sink.problem(n, f"bad {key} time {raw.strip()!r} ({why})")
                break
            times.append(ms)
        if len(times) < 2 or kind == "comment":
            continue
        text = values[fields.index("text")] if "text" in fields else values[-1]
        sink.add(times[0], times[1], ass_plain(text), n)


READERS = {"srt": read_srt, "vtt": read_vtt, "ass": read_ass}


def sniff_format(first: str) -> SubtitleFormat:
    """The format a file's first non-blank line says: ``WEBVTT`` starts WebVTT, a ``[section]``
    or a ``Dialogue:``/``Format:`` line starts ASS/SSA, anything else is read as SubRip."""
    s = first.strip()
    if s.startswith("WEBVTT") and (len(s) == 6 or s[6] in " \t"):
        return "vtt"
    if (s.startswith("[") and s.endswith("]")) or s.lower().startswith(("dialogue:", "format:", "scripttype:")):
        return "ass"
    return "srt"
