"""Hostile and careless input to every reader of sample logs, and what the
tables compare: truncated, empty and foreign logs are named (file and line) with a non-zero exit
and no traceback; forged leaderboard rows are never ranked; Markdown cells are escaped; runs sit
beside the published rows only on the official data, synthetic data is marked as such."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from naru_eval.cli.main import main
from naru_eval.core.data import CATEGORIES, LETTERS, NaruQuestion
from naru_eval.core.runfiles import parse_model_args
from naru_eval.core.scoring import compute_metrics, metric_payloads, score_response
from naru_eval.report.leaderboard import build_leaderboard
from naru_eval.report.render import markdown, md, render_html

PAPER_COUNTS = {
    "N.1": 185,
    "N.2": 187,
    "N.3": 186,
    "N.4": 187,
    "C.1": 143,
    "C.2": 147,
    "C.3": 148,
    "C.4": 149,
    "C.5": 149,
}
OPTS = ("red", "green", "blue", "white")


def questions(counts: dict[str, int], videos: int = 12) -> list[NaruQuestion]:
    out, n = [], 0
    for cat in CATEGORIES:
        for _ in range(counts.get(cat, 0)):
            out.append(NaruQuestion(f"q{n:05d}", f"v{n % videos}", cat, "What colour?", OPTS, LETTERS[(n * 7) % 4]))
            n += 1
    return out


def write_run(
    folder: Path,
    qs: list[NaruQuestion],
    fingerprint: str,
    model_args: str = "pretrained=model-x,num_frames=8",
    input_mode: str | None = "video",
    tamper: float = 0.0,
    task: str = "naru_mcq",
    variant: str = "",
    adapter: str | None = "naru_replay",
    flip: int = 3,
) -> Path:
    """A naru_mcq run folder as lmms-eval leaves it: the sample log (payloads of
    ``metric_payloads``, with the provenance an adapter records: ``adapter`` None is a model that
    records none, one of lmms-eval's own) and the results file reporting the metrics the log gives
    (+ ``tamper``); every ``flip``-th answer is wrong."""
    prov = (
        {"adapter": adapter, "input_mode": input_mode, "sampling": "8 Frames", "variant": variant} if adapter else None
    )
    samples = [
        score_response(
            q, q.answer if i % flip else LETTERS[(LETTERS.index(q.answer) + 1) % 4], fingerprint, provenance=prov
        )
        for i, q in enumerate(qs)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"20260101_000000_samples_{task}.jsonl"
    with open(log, "w", encoding="utf-8") as f:
        for i, s in enumerate(samples):
            f.write(json.dumps({"doc_id": i, **metric_payloads(s)}) + "\n")
    reported = {
        f"{m},none": (v + tamper if m == "overall" and v is not None else v)
        for m, v in compute_metrics(samples).items()
    }
    results = {
        "results": {task: reported},
        "config": {"model": adapter or "qwen2_5_vl", "model_args": model_args},
        "n-samples": {task: {"original": len(samples), "effective": len(samples)}},
        "versions": {task: 3.0},
    }
    (folder / "20260101_000000_results.json").write_text(json.dumps(results), encoding="utf-8")
    return log


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "JSONDecodeError" not in text, text


# --------------------------------------------------------------------------- truncated logs


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    """A run whose sample log was cut mid-line (a crash or a full disk): line 3 is half a line."""
    log = write_run(tmp_path / "run", questions({c: 2 for c in CATEGORIES}), "fp0000")
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + lines[2][:40], encoding="utf-8")
    return log


def test_score_names_the_file_and_line_of_a_truncated_log(truncated, capsys):
    assert main(["score", str(truncated)]) == 2
    err = capsys.readouterr().err
    assert f"{truncated}:3: not a JSON line" in err and "truncated or corrupt" in err
    no_traceback(err)


def test_compare_names_the_file_and_line_of_a_truncated_log(truncated, tmp_path, capsys):
    good = write_run(tmp_path / "good", questions({c: 2 for c in CATEGORIES}), "fp0000")
    assert main(["compare", str(good), str(truncated), "--reps", "10", "--permutations", "10"]) == 2
    err = capsys.readouterr().err
    assert f"{truncated}:3: not a JSON line" in err
    no_traceback(err)


def test_diagnose_names_the_file_and_line_of_a_truncated_log(truncated, capsys):
    assert main(["diagnose", str(truncated.parent), "--bootstrap", "10"]) == 2
    err = capsys.readouterr().err
    assert f"{truncated}:3: not a JSON line" in err
    no_traceback(err)


def test_leaderboard_names_a_truncated_log_ranks_nothing_and_fails(truncated, tmp_path, capsys):
    rc = main(
        ["leaderboard", str(truncated.parent), "-o", str(tmp_path / "lb" / "lb.json"), "--no-plots", "--reps", "10"]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert f"{truncated}:3: not a JSON line" in err
    no_traceback(err)
    doc = json.loads((tmp_path / "lb" / "lb.json").read_text(encoding="utf-8"))
    assert doc["entries"] == [] and len(doc["unverified"]) == 1


def test_a_bare_nan_in_a_log_is_not_json(tmp_path, capsys):
    log = write_run(tmp_path / "run", questions({c: 1 for c in CATEGORIES}), "fp0000")
    text = log.read_text(encoding="utf-8").replace('"duration_s": null', '"duration_s": NaN', 1)
    log.write_text(text, encoding="utf-8")
    assert main(["score", str(log)]) == 2
    assert (
        f"{log}:1: not a JSON line (non-finite number NaN (not JSON; write a finite number or null))"
        in capsys.readouterr().err
    )


def test_a_log_of_another_task_gets_the_right_message_without_a_traceback(tmp_path, capsys):
    """A naru_open log given to ``score`` (an MCQ reader): named as not an MCQ log, exit 2."""
    from naru_eval.judge.score import JudgedSample, open_payloads

    s = JudgedSample("q1", "v1", "N.1", "narrative", "q", "r", "a", "scored", recall=0.5)
    log = tmp_path / "20260101_000000_samples_naru_open.jsonl"
    log.write_text(json.dumps({"doc_id": 0, **open_payloads(s)}) + "\n", encoding="utf-8")
    assert main(["score", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log}:1: no NARU MCQ 'overall' payload; not a NARU MCQ sample log" in err
    no_traceback(err)


# --------------------------------------------------------------------------- empty logs


def test_an_empty_log_is_an_error(tmp_path, capsys):
    log = tmp_path / "20260101_000000_samples_naru_mcq.jsonl"
    log.write_text("\n", encoding="utf-8")
    assert main(["score", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log}: empty sample log" in err
    no_traceback(err)


# --------------------------------------------------------------------------- forged rows


def test_a_run_whose_log_is_not_a_naru_log_is_never_ranked(tmp_path):
    """results.json edited to 99.0 beside a log of another benchmark: refused, listed apart with
    the reason, in no table."""
    run = tmp_path / "forged"
    run.mkdir()
    (run / "20260101_000000_samples_naru_mcq.jsonl").write_text('{"doc_id": 0, "acc": 1}\n', encoding="utf-8")
    results = {
        "results": {"naru_mcq": {"overall,none": 99.0}},
        "config": {"model": "naru_replay", "model_args": "pretrained=forged-model"},
        "n-samples": {"naru_mcq": {"original": 1, "effective": 1}},
    }
    (run / "20260101_000000_results.json").write_text(json.dumps(results), encoding="utf-8")
    lb = build_leaderboard([run], reps=10)
    assert lb.data["entries"] == []
    (u,) = lb.data["unverified"]
    assert u["model"] == "forged-model" and "not a NARU sample log" in u["reason"]
    ranked = {i for t in lb.data["tables"] for i in t["rows"]}
    assert not any("forged-model" in i for i in ranked)
    md_text = markdown(lb.data)
    assert "## Unverified runs (not ranked)" in md_text
    assert not any(line.startswith("| forged-model") and "99.0" in line for line in md_text.splitlines())


def test_a_run_whose_reported_numbers_do_not_recompute_is_never_ranked(tmp_path):
    write_run(tmp_path / "run", questions({c: 3 for c in CATEGORIES}), "fp0000", tamper=20.0)
    lb = build_leaderboard([tmp_path / "run"], reps=10)
    (e,) = lb.data["entries"]
    assert e["reported_matches_log"] is False
    assert all(e["id"] not in t["rows"] for t in lb.data["tables"])
    (u,) = lb.data["unverified"]
    assert "overall" in u["reason"] and "does not recompute" in u["reason"]


# --------------------------------------------------------------------------- Markdown injection


def _cells(line: str) -> int:
    """The cells of a Markdown table row: unescaped pipes."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_markdown_escapes_every_cell(tmp_path):
    evil = "evil | injected | row<script>alert(1)</script>\n| injected | row |"
    write_run(tmp_path / "run", questions({c: 3 for c in CATEGORIES}), "fp0000", model_args=f"pretrained={evil}")
    lb = build_leaderboard([tmp_path / "run"], reps=10, labels={})
    text = markdown(lb.data)
    assert "<script" not in text and "&lt;script&gt;" in text
    assert not any(line.startswith("| injected") for line in text.splitlines())
    # every row of every table has as many cells as its header
    for block in text.split("\n\n"):
        rows = [x for x in block.splitlines() if x.startswith("|")]
        if rows:
            assert {_cells(r) for r in rows} == {_cells(rows[0])}, block
    assert md("a|b\nc<d>\\") == "a\\|b c&lt;d&gt;&#92;"


def test_a_link_in_model_args_is_no_live_link_in_the_markdown(tmp_path):
    """``[text](https://…)`` in model args became a live link in leaderboard.md."""
    from markdown_it import MarkdownIt

    evil = "[official NARU run](https://evil.example/x) ![img](https://evil.example/i.png) <https://a.b> www.c.d"
    write_run(tmp_path / "run", questions({c: 3 for c in CATEGORIES}), "fp0000", model_args=f"pretrained={evil}")
    lb = build_leaderboard([tmp_path / "run"], reps=10, labels={})
    html = MarkdownIt("commonmark").enable("table").render(markdown(lb.data))
    assert "evil.example" in html and 'href="https://evil' not in html and "<img" not in html
    assert 'href="https://a.b' not in html
    assert md("[a](https://b)") == "&#91;a&#93;(https&#58;//b)"


def test_two_leaderboard_builds_never_mix_their_files(tmp_path, monkeypatch):
    """One build wrote leaderboard.json/.md, a concurrent one .html: three plain writes."""
    import threading
    import time

    from naru_eval.report import render

    lb_a, lb_b = (build_leaderboard([], reps=10) for _ in range(2))
    lb_a.document = lb_a.document.model_copy(update={"generated_at": "BUILD-A"})
    lb_b.document = lb_b.document.model_copy(update={"generated_at": "BUILD-B"})
    real = render.render_html

    def slow_html(doc, *a, **k):  # A renders its page slowly: B starts and ends meanwhile
        if doc.generated_at == "BUILD-A":
            time.sleep(0.6)
        return real(doc, *a, **k)

    monkeypatch.setattr(render, "render_html", slow_html)
    out = tmp_path / "lb" / "leaderboard.json"
    a = threading.Thread(target=render.write_outputs, args=(lb_a, out), kwargs={"plots": False})
    a.start()
    time.sleep(0.2)
    render.write_outputs(lb_b, out, plots=False)
    a.join()
    marks = {
        p.suffix: ("BUILD-A" in p.read_text(), "BUILD-B" in p.read_text()) for p in out.parent.glob("leaderboard.*")
    }
    assert len(marks) == 3 and len(set(marks.values())) == 1, marks  # all three from one build
    assert not list(out.parent.glob(".*.tmp"))
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)


# --------------------------------------------------------------------------- the tables say what they compare


def test_a_run_with_table_i_counts_sits_beside_the_published_rows_marked_unverified(tmp_path):
    write_run(tmp_path / "run", questions(PAPER_COUNTS, videos=50), "0123456789abcdef")
    lb = build_leaderboard([tmp_path / "run"], reps=10)
    (e,) = lb.data["entries"]
    assert e["data_status"] == "counts-match" and e["n"]["overall"] == 1481 and e["input_mode"] == "video"
    (table,) = [t for t in lb.data["tables"] if t["task"] == "naru_mcq"]
    assert table["status"] == "counts-match" and e["id"] in table["rows"] and len(table["rows"]) == 13 + 1
    text = markdown(lb.data)
    assert "## naru_mcq: runs on data 0123456789abcdef (counts match Table I, release unverified)" in text
    assert "| model-x | run | - | 8 Frames | video | 0123456789abcdef |" in text


def test_a_known_official_fingerprint_sits_beside_the_published_rows(tmp_path, monkeypatch):
    from naru_eval.report import published

    monkeypatch.setattr(published, "official_fingerprints", lambda: frozenset({"feedfacefeedface"}))
    write_run(tmp_path / "run", questions({c: 3 for c in CATEGORIES}), "feedfacefeedface")
    lb = build_leaderboard([tmp_path / "run"], reps=10)
    (table,) = [t for t in lb.data["tables"] if t["task"] == "naru_mcq"]
    assert table["status"] == "official" and len(table["rows"]) == 14


def test_synthetic_data_with_the_paper_counts_is_never_beside_the_published_rows(tmp_path):
    """``make-synthetic --paper-counts`` has Table I's counts; its annotations say synthetic, so its
    fingerprint does, and its runs get a table of their own that says so."""
    from naru_eval.core.data import load_local
    from naru_eval.core.synthetic import SyntheticSpec, make_dataset

    data = make_dataset(tmp_path / "data", SyntheticSpec(counts=dict(PAPER_COUNTS), n_videos=2, seconds=1.0))
    assert all(json.loads(x)["synthetic"] is True for x in (data / "annotations.jsonl").read_text().splitlines())
    ds = load_local(data)
    assert ds.fingerprint.startswith("synthetic-") and all(q.synthetic for q in ds.questions)
    write_run(tmp_path / "run", ds.questions, ds.fingerprint)
    lb = build_leaderboard([tmp_path / "run"], reps=10)
    (e,) = lb.data["entries"]
    assert e["data_status"] == "synthetic"
    tables = [t for t in lb.data["tables"] if t["task"] == "naru_mcq"]
    assert [(t["data"], t.get("status")) for t in tables] == [(None, None), (ds.fingerprint, "synthetic")]
    assert tables[1]["rows"] == [e["id"]]
    text = markdown(lb.data)
    assert (
        f"## naru_mcq: runs on data {ds.fingerprint} (SYNTHETIC data: not comparable with the published rows)" in text
    )


def test_real_data_keeps_its_fingerprint(tmp_path):
    """The ``synthetic`` field changes nothing for data without it: the fingerprint of real data is
    what it was before the field existed."""
    import hashlib

    from naru_eval.core.data import fingerprint_questions

    qs = questions({"N.1": 2})
    h = hashlib.sha256()
    for q in qs:
        doc = q.to_doc()
        doc.pop("synthetic")
        h.update(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode())
    assert fingerprint_questions(qs) == h.hexdigest()[:16]


def test_compare_refuses_runs_of_different_input_modes(tmp_path, capsys):
    qs = questions({c: 2 for c in CATEGORIES})
    a = write_run(tmp_path / "a", qs, "fp0000", input_mode="video")
    b = write_run(tmp_path / "b", qs, "fp0000", input_mode="images")
    assert main(["compare", str(a), str(b), "--reps", "10", "--permutations", "10"]) == 2
    err = capsys.readouterr().err
    assert "different input modes" in err and "video vs images" in err


CHROMIUM = Path("/usr/bin/chromium")


def _measure(page: Path, width: int, tmp: Path) -> dict[str, int]:
    """The page's width, the window's and the most any table overflows its box, at ``width`` px,
    as headless Chromium lays it out (a probe script added to a copy of the page)."""
    import subprocess

    probe = tmp / f"probe_{width}.html"
    script = (
        "<script>var m=0;document.querySelectorAll('.scroll').forEach(function(d){m=Math.max(m,d.scrollWidth-"
        "d.clientWidth)});document.title='W='+document.documentElement.scrollWidth+' V='+window.innerWidth+"
        "' S='+m;</script></body>"
    )
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", script), encoding="utf-8")
    p = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp / 'profile'}",
         f"--window-size={width},1000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    m = re.search(r"<title>W=(\d+) V=(\d+) S=(\d+)</title>", p.stdout)
    assert m, p.stderr[-2000:]
    return {"page": int(m[1]), "window": int(m[2]), "overflow": int(m[3])}


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_the_page_fits_a_1400px_window_and_a_phone(tmp_path):
    """A page with runs (intervals under every value) fits a 1,400-px window with no table cut or
    scrolled; at a phone's width the page itself still fits (wide tables scroll in their box)."""
    from naru_eval.report.render import render_html

    write_run(tmp_path / "runs" / "a", questions(PAPER_COUNTS, videos=50), "0123456789abcdef",
              model_args="pretrained=Qwen/Qwen2.5-VL-7B-Instruct-with-a-long-name,num_frames=128")  # fmt: skip
    write_run(tmp_path / "runs" / "b", questions({c: 5 for c in CATEGORIES}), "synthetic-0123456789abcdef")
    page = tmp_path / "leaderboard.html"
    page.write_text(render_html(build_leaderboard([tmp_path / "runs"], reps=50).data), encoding="utf-8")
    wide = _measure(page, 1400, tmp_path)
    assert wide["page"] <= wide["window"] and wide["overflow"] == 0, wide
    phone = _measure(page, 390, tmp_path)  # Chromium's smallest headless window is wider than 390
    assert phone["window"] <= 600 and phone["page"] <= phone["window"], phone


def test_the_page_shows_only_what_holds_information():
    """No all-N/A column, no "n/a" consistency rows, no empty cost/git/versions columns."""
    from naru_eval.report.render import render_html

    lb = build_leaderboard([], reps=10)
    page, text = render_html(lb.data), markdown(lb.data)
    assert "invalid_rate" not in page and "<th>recall</th>" not in page  # N/A for every published row
    assert ">n/a<" not in page and "| n/a |" not in text  # ("n/a (platform)" is a published sampling)
    assert "Not checkable (the paper prints only an overall): Gemini-3-Pro" in page
    assert ">cost<" not in page and ">git<" not in page and ">versions<" not in page


def test_a_log_that_is_not_utf8_names_the_line(tmp_path, capsys):
    log = write_run(tmp_path / "run", questions({c: 1 for c in CATEGORIES}), "fp0000")
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0] + b'{"doc_id": 1, "x": "\xff\xfe"}\n' + b"".join(lines[2:]))
    assert main(["score", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log}:2: not UTF-8 text" in err
    no_traceback(err)


def test_runs_of_different_input_modes_are_different_entries(tmp_path):
    """The same model and sampling given a video or separate images: two entries (the input mode is
    in the key and beside the sampling), never a duplicate or a conflict."""
    qs = questions({c: 3 for c in CATEGORIES})
    write_run(tmp_path / "a", qs, "fp0000", input_mode="video")
    write_run(tmp_path / "b", qs, "fp0000", input_mode="images")
    lb = build_leaderboard([tmp_path / "a", tmp_path / "b"], reps=10)
    assert not lb.errors and not lb.data["conflicts"] and not lb.data["duplicates"]
    assert sorted(e["input_mode"] for e in lb.data["entries"]) == ["images", "video"]
    assert sorted(e["id"].rsplit(" | ", 1)[1] for e in lb.data["entries"]) == ["input=images", "input=video"]


@pytest.mark.parametrize(
    ("variant", "model_args"),
    [
        ("audio=false", "model=gemini-3-flash,audio=false"),  # Gemini without the soundtrack
        ("max_pixels=200704", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct,max_pixels=200704"),  # smaller frames
        ("enable_thinking=true", "pretrained=Qwen/Qwen3.5-9B,enable_thinking=true"),  # thinking on
    ],
)
def test_runs_that_differ_only_in_a_variant_are_two_entries_without_a_label(tmp_path, variant, model_args):
    """Two runs of one model on the same data, one with an answer-changing argument that is none of
    the sampling, judge or input mode: two entries (never a conflict, no --label needed), each
    labelled by what differs."""
    qs = questions({c: 3 for c in CATEGORIES})
    name = parse_model_args(model_args).get("pretrained") or parse_model_args(model_args)["model"]
    default_args = ",".join(a for a in model_args.split(",") if not a.startswith(variant.split("=")[0]))
    write_run(tmp_path / "default", qs, "fp0000", model_args=default_args)
    write_run(tmp_path / "variant", qs, "fp0000", model_args=model_args, variant=variant, flip=2)
    lb = build_leaderboard([tmp_path / "default", tmp_path / "variant"], reps=10)
    assert not lb.errors and not lb.data["conflicts"] and not lb.data["duplicates"], lb.errors
    by_model = {e["model"]: e for e in lb.data["entries"]}
    assert set(by_model) == {name, f"{name} ({variant})"}
    assert by_model[name]["variant"] == "" and by_model[f"{name} ({variant})"]["variant"] == variant
    assert by_model[f"{name} ({variant})"]["id"].endswith(f" | input=video | variant={variant}")
    assert by_model[name]["metrics"]["overall"] != by_model[f"{name} ({variant})"]["metrics"]["overall"]
    text = markdown(lb.data)
    assert f"| {name} ({variant}) | run | - | 8 Frames | video | fp0000 |" in text


def test_gemini_without_audio_and_the_default_gemini_run_are_two_entries(tmp_path):
    """Gemini's default run (the video with its soundtrack) and ``audio=false`` on the same data:
    their payloads differ in input mode and variant, and they are two entries, no --label needed."""
    qs = questions({c: 3 for c in CATEGORIES})
    write_run(tmp_path / "default", qs, "fp0000", model_args="model=gemini-3-flash", input_mode="video+audio")
    write_run(
        tmp_path / "mute", qs, "fp0000", model_args="model=gemini-3-flash,audio=false", input_mode="video",
        variant="audio=false", flip=2,
    )  # fmt: skip
    lb = build_leaderboard([tmp_path / "default", tmp_path / "mute"], reps=10)
    assert not lb.errors and not lb.data["conflicts"] and not lb.data["duplicates"], lb.errors
    got = sorted((e["model"], e["input_mode"], e["variant"]) for e in lb.data["entries"])
    assert got == [("gemini-3-flash", "video+audio", ""), ("gemini-3-flash (audio=false)", "video", "audio=false")]


def test_the_input_mode_is_a_column_of_every_table(tmp_path):
    """md, html and json: the input mode sits beside the sampling in every table, the published
    rows' included ("-": the authors do not say)."""
    write_run(tmp_path / "a", questions({c: 3 for c in CATEGORIES}), "fp0000", input_mode="images")
    lb = build_leaderboard([tmp_path / "a"], reps=10)
    (e,) = lb.data["entries"]
    assert e["input_mode"] == "images"
    text = markdown(lb.data)
    heads = [x for x in text.splitlines() if x.startswith("| model |")]
    assert len(heads) == len(lb.data["tables"]) and all("| sampling | input | data |" in h for h in heads)
    assert "| Gemini-3-Flash | published | Google | 0.25 FPS | - | official |" in text
    page = render_html(lb.data)
    assert page.count('<th class="l">input</th>') == len(lb.data["tables"])
    assert "<td class='l'>images</td>" in page and "<td class='l'>-</td>" in page


def test_an_input_ablation_is_paired_only_when_asked_and_says_what_it_compares(tmp_path, capsys):
    """``compare --across-inputs`` pairs runs of different input modes per question and per
    category, and its output (text and JSON) names the two modes."""
    qs = questions({c: 2 for c in CATEGORIES})
    a = write_run(tmp_path / "a", qs, "fp0000", input_mode="video")
    b = write_run(tmp_path / "b", qs, "fp0000", input_mode="images", flip=2)
    args = ["compare", str(a), str(b), "--reps", "10", "--permutations", "10"]
    assert main(args) == 2 and "--across-inputs" in capsys.readouterr().err
    assert main([*args, "--across-inputs"]) == 0
    text = capsys.readouterr().out
    assert "input modes: A video, B images (an input ablation)" in text
    assert "input ablation: A's input mode video against B's images, paired per question and per category" in text
    rows = [x.split("|")[1].strip() for x in text.splitlines() if x.startswith("| ") and "metric" not in x]
    assert set(CATEGORIES) <= set(rows)
    assert main([*args, "--across-inputs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["tasks"]["naru_mcq"]
    assert doc["input_modes"] == {"a": "video", "b": "images"} and doc["across_inputs"] is True
    assert doc["paired_questions"] == len(qs)


def test_a_model_that_sampled_its_own_frames_is_marked_and_never_merged_with_ours(tmp_path, capsys):
    """A run whose payloads carry no naru-eval provenance (one of lmms-eval's own models): its
    sampling is the model's own sampler and its input mode model-sampled, in the key and the
    tables; it is never one entry with a run of ours and compare pairs it only as an ablation."""
    qs = questions({c: 3 for c in CATEGORIES})
    ours = write_run(tmp_path / "ours", qs, "fp0000", model_args="pretrained=Qwen/Qwen2.5-VL-7B-Instruct")
    theirs = write_run(
        tmp_path / "own", qs, "fp0000", model_args="pretrained=Qwen/Qwen2.5-VL-7B-Instruct", adapter=None
    )
    lb = build_leaderboard([tmp_path / "ours", tmp_path / "own"], reps=10)
    assert not lb.errors and not lb.data["conflicts"] and not lb.data["duplicates"]
    own = next(e for e in lb.data["entries"] if e["run"]["adapter"] == "qwen2_5_vl")
    assert (own["sampling"], own["input_mode"], own["frames"]) == ("model's own sampler", "model-sampled", None)
    assert "| model's own sampler | model-sampled |" in markdown(lb.data)
    assert any("sampled its frames itself" in w for w in lb.warnings)
    assert len({e["id"] for e in lb.data["entries"]}) == 2
    assert main(["compare", str(ours), str(theirs), "--reps", "10", "--permutations", "10"]) == 2
    assert "video vs model-sampled" in capsys.readouterr().err


def test_an_unreadable_results_file_is_named_once_and_skipped(tmp_path):
    write_run(tmp_path / "run", questions({c: 1 for c in CATEGORIES}), "fp0000")
    rf = tmp_path / "run" / "20260101_000000_results.json"
    rf.write_text("{", encoding="utf-8")
    lb = build_leaderboard([tmp_path / "run"], reps=10)
    assert lb.data["entries"] == [] and lb.data["unverified"] == []
    (w,) = lb.warnings
    assert "20260101_000000_results.json: unreadable results file" in w and w.endswith("; skipped")


@pytest.mark.parametrize("mode_b", ["video+transcript", "transcript", "video+audio+transcript"])
def test_frames_against_frames_and_transcript_is_paired_per_category(tmp_path, capsys, mode_b):
    """The transcript modes are input modes like any other: a leaderboard column, and ``compare
    --across-inputs`` pairs frames only against them per question and per category."""
    qs = questions({c: 2 for c in CATEGORIES})
    a = write_run(tmp_path / "a", qs, "fp0000", input_mode="video")
    b = write_run(tmp_path / "b", qs, "fp0000", input_mode=mode_b, flip=3)
    (e,) = build_leaderboard([tmp_path / "b"], reps=10).data["entries"]
    assert e["input_mode"] == mode_b
    args = ["compare", str(a), str(b), "--reps", "10", "--permutations", "10"]
    assert main(args) == 2 and "--across-inputs" in capsys.readouterr().err
    assert main([*args, "--across-inputs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["tasks"]["naru_mcq"]
    assert doc["input_modes"] == {"a": "video", "b": mode_b} and doc["paired_questions"] == len(qs)
