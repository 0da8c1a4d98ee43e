"""Synthetic NARU-format data: real video files and questions, made on the fly.

Used by ``naru-eval demo`` and the tests, since the real NARU videos cannot be shipped. Each
video is a sequence of solid-colour segments encoded with H.264 through PyAV; each question asks
about them, with four options and a seeded gold letter. Every question says ``"synthetic": true``,
so the data's fingerprint starts with ``synthetic-`` and the leaderboard never ranks its runs
beside the published rows, even with the paper's counts (``--paper-counts``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from naru_eval.core.data import CATEGORIES, LETTERS

if TYPE_CHECKING:
    import numpy as np

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 200, 60),
    "blue": (30, 60, 220),
    "yellow": (230, 220, 40),
    "magenta": (210, 40, 200),
    "cyan": (40, 210, 210),
    "white": (240, 240, 240),
    "black": (15, 15, 15),
}

#: The paper's table I category counts (1,481 questions).
PAPER_COUNTS: dict[str, int] = {
    "N.1": 185, "N.2": 187, "N.3": 186, "N.4": 187,
    "C.1": 143, "C.2": 147, "C.3": 148, "C.4": 149, "C.5": 149,
}  # fmt: skip


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate; ``counts`` is questions per category."""

    counts: dict[str, int]
    n_videos: int = 6
    seconds: float = 3.0
    fps: int = 4
    size: tuple[int, int] = (48, 32)  # width, height (even, for yuv420p)
    segments: int = 3
    seed: int = 0
    subset_flags: bool = False  # write official-looking subset_500 flags
    #: give each video a soundtrack (AAC, 48 kHz stereo): each segment hums its colour's own pitch
    audio: bool = False


#: the pitch (Hz) each colour hums in a synthetic soundtrack
PITCHES: dict[str, float] = {name: 220.0 * 2 ** (i / 4) for i, name in enumerate(COLOURS)}
AUDIO_RATE = 48_000


def write_video(
    path: Path, colours: Sequence[str], seconds: float, fps: int, size: tuple[int, int], audio: bool = False
) -> None:
    """Encode equal-length solid-colour segments as an H.264 MP4; with ``audio``, an AAC track in
    which each segment is a tone of its colour's pitch (:data:`PITCHES`)."""
    import av
    import numpy as np

    width, height = size
    n_frames = max(len(colours), int(round(seconds * fps)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"g": str(max(2, fps)), "preset": "ultrafast", "crf": "30"}
        sound = container.add_stream("aac", rate=AUDIO_RATE) if audio else None
        if sound is not None:
            sound.layout = "stereo"
        for i in range(n_frames):
            colour = COLOURS[colours[min(len(colours) - 1, i * len(colours) // n_frames)]]
            img = np.empty((height, width, 3), dtype=np.uint8)
            img[:] = colour
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is None:
            return
        total = int(round(n_frames / fps * AUDIO_RATE))
        chunk = 1024
        for at in range(0, total, chunk):
            idx = np.arange(at, min(total, at + chunk))
            seg = np.minimum(len(colours) - 1, idx * len(colours) // total)
            pitch = np.array([PITCHES[colours[k]] for k in seg])
            wave = (0.3 * np.sin(2 * np.pi * pitch * idx / AUDIO_RATE)).astype(np.float32)
            af = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(np.stack([wave, wave])), format="fltp", layout="stereo"
            )
            af.sample_rate, af.pts = AUDIO_RATE, at
            for packet in sound.encode(af):
                container.mux(packet)
        for packet in sound.encode():
            container.mux(packet)


def make_dataset(out_dir: str | Path, spec: SyntheticSpec) -> Path:
    """Write ``annotations.jsonl`` and ``videos/`` under ``out_dir``; return ``out_dir``."""
    out = Path(out_dir)
    rng = random.Random(spec.seed)
    names = list(COLOURS)
    video_colours: dict[str, list[str]] = {}
    for v in range(spec.n_videos):
        vid = f"vid{v:03d}"
        video_colours[vid] = [rng.choice(names) for _ in range(spec.segments)]
        write_video(out / "videos" / f"{vid}.mp4", video_colours[vid], spec.seconds, spec.fps, spec.size, spec.audio)
    records = []
    n = 0
    vids = sorted(video_colours)
    for cat in CATEGORIES:
        for k in range(spec.counts.get(cat, 0)):
            vid = vids[n % len(vids)]
            seg = k % spec.segments
            truth = video_colours[vid][seg]
            distractors = rng.sample([c for c in names if c != truth], 3)
            gold = rng.randrange(4)
            options = distractors[:gold] + [truth] + distractors[gold:]
            options = [f"The screen is {c}" for c in options]
            records.append(
                {
                    "question_id": f"q{n:05d}",
                    "video_id": vid,
                    "category": cat,
                    "question": f"[{cat}] 動画の第{seg + 1}区間で画面は何色ですか? (What colour fills segment {seg + 1}?)",
                    "options": options,
                    "answer": LETTERS[gold],
                    "duration_s": spec.seconds,
                    "reference_answer": f"The screen is {truth} in segment {seg + 1}.",
                    # never NARU data: its runs are never ranked beside the published rows
                    "synthetic": True,
                }
            )
            n += 1
    if spec.subset_flags:
        chosen = set(rng.sample(range(len(records)), min(500, len(records) // 3)))
        for i, rec in enumerate(records):
            rec["subset_500"] = i in chosen
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "annotations.jsonl", "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return out


#: Response styles the demo's replayed answers are drawn from: (template, kind). ``{L}`` is a
#: letter, ``{T}`` that option's text. Invalid kinds carry no letter.
RESPONSE_STYLES: tuple[tuple[str, str], ...] = (
    ("{L}", "letter"),
    ("({L})", "letter"),
    ("The answer is {L}.", "letter"),
    ("答えは{L}です。", "letter"),
    ("**{L}**", "letter"),
    ("{L}. {T}", "letter"),
    ("{T}", "letter"),
    ("I'm sorry, but I cannot determine the answer from the video.", "invalid"),
    ("", "invalid"),
)


def demo_responses(annotations: Path, seed: int = 0, accuracy: float = 0.6) -> list[dict[str, str]]:
    """Seeded replayed answers in mixed styles: right with probability ``accuracy``."""
    rng = random.Random(seed)
    out = []
    for line in annotations.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rng.random() < accuracy:
            letter = rec["answer"]
        else:
            letter = rng.choice([x for x in LETTERS if x != rec["answer"]])
        template, _kind = rng.choice(RESPONSE_STYLES)
        text = template.format(L=letter, T=rec["options"][LETTERS.index(letter)])
        out.append({"question_id": rec["question_id"], "response": text})
    return out


# --------------------------------------------------------------------------- index-coded videos

_BITS = 16  # frames 0..65535
_GRID = 4  # 4 x 4 blocks


def write_indexed_video(
    path: str | Path,
    n_frames: int,
    fps: float = 10,
    gop: int = 10,
    size: tuple[int, int] = (64, 64),
    codec: str = "libx264",
    bframes: int = 2,
    container_options: dict[str, str] | None = None,
    preset: str | None = None,
) -> Path:
    """A video whose frame i shows i in binary (a 4x4 grid of black/white blocks).

    Lets tests check that a sampler returns exactly the frames it claims, through compression.
    """
    import av
    from av.video.stream import VideoStream

    width, height = size
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", options=container_options or {}) as c:
        # PyAV takes an int or a Fraction (a float rate has no numerator and fails)
        rate = int(fps) if float(fps).is_integer() else Fraction(fps).limit_denominator(1001)
        s = c.add_stream(codec, rate=rate)
        if not isinstance(s, VideoStream):
            raise ValueError(f"write_indexed_video: {codec} is not a video codec")
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        opts: dict[str, object] = {"g": str(gop), "keyint_min": str(gop)}
        if codec == "libx264":
            opts.update(
                {"crf": "18", "bf": str(bframes), "preset": preset or ("ultrafast" if width > 320 else "medium")}
            )
        s.options = opts
        for i in range(n_frames):
            for packet in s.encode(av.VideoFrame.from_ndarray(index_image(i, width, height), format="rgb24")):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def index_image(i: int, width: int, height: int) -> np.ndarray:
    """The RGB image of frame ``i``: ``i`` in binary, a 4x4 grid of black/white blocks."""
    import numpy as np

    img = np.zeros((height, width, 3), np.uint8)
    bw, bh = width // _GRID, height // _GRID
    for b in range(_BITS):
        if (i >> b) & 1:
            r, col = divmod(b, _GRID)
            img[r * bh : (r + 1) * bh, col * bw : (col + 1) * bw] = 255
    return img


def read_frame_index(frame: np.ndarray) -> int:
    """Decode the index a :func:`write_indexed_video` frame shows (any resolution)."""
    h, w = frame.shape[:2]
    bw, bh = w / _GRID, h / _GRID
    value = 0
    for b in range(_BITS):
        r, col = divmod(b, _GRID)
        y0, y1 = int(r * bh + bh / 4), int((r + 1) * bh - bh / 4)
        x0, x1 = int(col * bw + bw / 4), int((col + 1) * bw - bw / 4)
        if frame[y0:y1, x0:x1].mean() > 128:
            value |= 1 << b
    return value


# --------------------------------------------------------------------------- synthetic dialogue

#: Everyday Japanese dialogue lines the synthetic subtitles are drawn from (each a cue's text)
DIALOGUE: tuple[str, ...] = (
    "おはようございます。今日はいい天気ですね。",
    "ちょっと待って、それ本当なの？",
    "すみません、駅はどちらですか。",
    "昨日のことは、もう気にしないで。",
    "ええ、そうですね。私もそう思います。",
    "お母さん、ただいま！",
    "あの人、また遅刻してるよ。",
    "ありがとう。助かったよ、本当に。",
    "いや、それはちょっと違うんじゃないかな。",
    "せっかくだから、一緒に行きませんか。",
    "うん、うん。それで、どうなったの？",
    "お疲れさまでした。また明日。",
    "なるほどね、そういうことだったのか。",
    "まあ、仕方ないよ。次は頑張ろう。",
    "先生、この問題がわかりません。",
    "へえ、知らなかった。",
)


def dialogue_srt(seconds: float, chars_per_s: float = 3.7, seed: int = 0) -> str:
    """SubRip text of synthetic dialogue over ``seconds``: lines from :data:`DIALOGUE`, each cue as
    long as its text takes at ``chars_per_s`` (3.7: ReazonSpeech's average speaking rate, 16.9 M
    characters over 1,253 h), cues back to back with a seeded pause of 0-2 s between them."""
    rng = random.Random(seed)
    out: list[str] = []
    t = rng.uniform(0.0, 2.0)
    n = 0
    while True:
        text = rng.choice(DIALOGUE)
        end = t + len(text) / chars_per_s
        if end > seconds:
            break
        n += 1
        out.append(f"{n}\n{_srt_time(t)} --> {_srt_time(end)}\n{text}\n")
        t = end + rng.uniform(0.0, 2.0)
    return "\n".join(out)


def _srt_time(s: float) -> str:
    ms = int(round(s * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    sec, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{sec:02d},{ms:03d}"


def write_subtitles(data_dir: str | Path, out_dir: str | Path, chars_per_s: float = 3.7) -> Path:
    """``<out_dir>/<video_id>.srt`` of synthetic dialogue for each video of a synthetic data
    directory, as long as the video (its annotation's ``duration_s``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    durations: dict[str, float] = {}
    for line in (Path(data_dir) / "annotations.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        durations[rec["video_id"]] = float(rec["duration_s"])
    for i, (vid, seconds) in enumerate(sorted(durations.items())):
        (out / f"{vid}.srt").write_text(dialogue_srt(seconds, chars_per_s, seed=i), encoding="utf-8")
    return out
