"""``naru-eval leaderboard`` / ``compare`` on real lmms-eval output directories, the paper reference
and its consistency check, and the HTML page in headless Chromium."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from naru_eval.cli.results import register
from naru_eval.core.data import CATEGORIES, CULTURAL, NARRATIVE
from naru_eval.core.runfiles import legacy_sampling, parse_model_args, sampling_budget
from naru_eval.core.scoring import METRICS, metrics_from_samples_log
from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset
from naru_eval.report.leaderboard import build_leaderboard
from naru_eval.report.paper import (
    PAPER,
    consistency_checks,
    implied_overall,
    load_reference,
    official_results,
    paper_source,
    reference_from_source,
)
from naru_eval.report.published import OFFICIAL_DATA, published_rows
from naru_eval.report.render import markdown, render_html
from naru_eval.report.runs import same_model_args
from tests.helpers.data import read_jsonl
from tests.helpers.expected import expected_metrics, make_predictions

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


def published_dicts() -> list[dict]:
    """The published rows (typed entries) as the JSON document holds them."""
    return [r.model_dump(mode="json", by_alias=True, exclude_unset=True) for r in published_rows()]


def run_cli(*argv: str) -> int:
    """The subcommands through an argparse harness, as naru_eval/cli/main.py will wire them."""
    parser = argparse.ArgumentParser(prog="naru-eval")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


# --------------------------------------------------------------------------- the paper (fast)


def test_paper_reference_file_is_built_from_the_package_figures():
    """results/paper_reference.json, the reference the code loads, and the package's own copy of
    the paper's figures agree; nothing outside the repository is read."""
    ref_file = json.loads((ROOT / "results" / "paper_reference.json").read_text(encoding="utf-8"))
    assert ref_file == load_reference().model_dump() == reference_from_source(paper_source()).model_dump()
    src = ref_file["source"]["file"]
    assert not Path(src).is_absolute() and (ROOT / src).is_file()
    assert ref_file["paper"] == PAPER == {"title": PAPER["title"], "arxiv": "2608.13210"}
    assert ref_file["table_i"]["counts"] == PAPER_COUNTS
    assert ref_file["table_ii"]["rows"]["Gemini-3-Flash"]["overall"] == 76.2
    assert ref_file["table_iii"]["rows"]["MiniCPM-o-2.6"] == 0.21
    assert ref_file["frame_sweep"]["overall"]["Gemini-3-Pro"] == {"8": 64, "128": 71}


def test_paper_overall_follows_from_narrative_cultural():
    """The authors' aggregation: overall = (narrative + cultural) / 2, not question-weighted."""
    assert implied_overall(84.2, 68.2) == pytest.approx(76.2)
    checks = consistency_checks(load_reference())
    flash = next(c for c in checks if c.model == "Gemini-3-Flash")
    assert flash.ok is True and flash.stated == 76.2 and "(84.2 + 68.2)/2 = 76.200" in flash.detail
    assert all(c.ok for c in checks if c.name.startswith("table I:"))
    assert all(c.ok is not False for c in checks)
    # rows with only an overall cannot be checked, and say so
    assert next(c for c in checks if c.model == "Qwen3-VL-8B").ok is None


# Table III overall as published vs the mean of the published (2-decimal) category recalls.
# Gemini-3-Pro's categories average 0.7444, printed 0.75: within the rounding of its inputs.
TABLE_III_OFF_BY_INPUT_ROUNDING = {"Gemini-3-Pro"}


def test_published_rows_reproduce_every_value_the_paper_prints():
    """From the committed official figures, the leaderboard's published rows give every value of
    the paper's table II (to one decimal) and table III (to two decimals, see above)."""
    lb = build_leaderboard([], reps=10)
    rows = {(r["task"], r["model"]): r for r in lb.data["published"]["rows"]}
    assert rows == {(r["task"], r["model"]): r for r in published_dicts()}
    ref = load_reference()
    for model, printed in ref.table_ii.rows.items():
        got = rows[("naru_mcq", model)]["metrics"]
        for metric, value in printed.items():
            assert round(got[metric], 1) == value, (model, metric, got[metric], value)
    for model, value in ref.table_iii.rows.items():
        got = rows[("naru_open", model)]["metrics"]["overall"]
        assert abs(got - value) <= 0.005 + 0.005 + 1e-9, (model, got, value)
        assert (round(got, 2) == value) == (model not in TABLE_III_OFF_BY_INPUT_ROUNDING), (model, got, value)
    # the micro mean would not give table II: Gemini-3-Pro 70.1, Gemini-2.5-Flash 51.5, Qwen3-VL-8B 37.5
    for model, micro in (("Gemini-3-Pro", 70.1), ("Gemini-2.5-Flash", 51.5), ("Qwen3-VL-8B", 37.5)):
        assert round(rows[("naru_mcq", model)]["metrics"]["accuracy"], 1) == micro


def test_published_rows_are_complete_and_marked():
    off = official_results()
    pub = published_dicts()
    mcq = [r for r in pub if r["task"] == "naru_mcq"]
    opn = [r for r in pub if r["task"] == "naru_open"]
    assert len(mcq) == 13 == len(off["mcq_rq1"]["rows"]) and len(opn) == 8 == len(off["open_rq3"]["rows"])
    for r in pub:
        assert r["published"] is True and r["data"] == OFFICIAL_DATA and r["ci95"] is None
        assert r["sampling"] and r["from"], r["model"]
        assert all(r["metrics"][c] is not None for c in ("overall", "narrative", "cultural", *CATEGORIES))
    by = {r["model"]: r for r in mcq}
    assert by["Qwen3-VL-8B"]["sampling"] == "0.25 FPS" and by["InternVL3.5"]["sampling"] == "64 Frames"
    assert by["InternVL3.5"]["from"] == "Shanghai AI Lab"
    # an independent computation from the raw counts: InternVL3.5 N.1 = 37 of 185
    assert by["InternVL3.5"]["metrics"]["N.1"] == pytest.approx(100 * 37 / 185)
    assert by["DeepFrame Platform"]["metrics"]["N.1"] == 86.2 and by["DeepFrame Platform"]["counts"] is None
    nar = sum(by["Qwen3-VL-8B"]["metrics"][c] for c in NARRATIVE) / 4
    cul = sum(by["Qwen3-VL-8B"]["metrics"][c] for c in CULTURAL) / 5
    assert by["Qwen3-VL-8B"]["metrics"]["overall"] == pytest.approx((nar + cul) / 2)
    q = next(r for r in opn if r["model"] == "Qwen3-VL-8B")
    assert q["metrics"]["overall"] == pytest.approx(sum(q["metrics"][c] for c in CATEGORIES) / 9)


def test_committed_leaderboard_is_the_published_one():
    """results/leaderboard.{json,md,html} are what `naru-eval leaderboard` builds from the
    official figures; the page names the paper by title and arXiv id only, and says what the
    published rows are."""
    committed = json.loads((ROOT / "results" / "leaderboard.json").read_text(encoding="utf-8"))
    fresh = build_leaderboard([], reps=committed["bootstrap"]["reps"]).data
    for key in ("published", "tables", "paper", "entries", "data_note", "aggregation"):
        assert committed[key] == fresh[key], key
    md = (ROOT / "results" / "leaderboard.md").read_text(encoding="utf-8")
    page = (ROOT / "results" / "leaderboard.html").read_text(encoding="utf-8")
    assert md == markdown(committed) and page == render_html(committed)
    for text in (md, page):
        assert "arXiv 2608.13210" in text and PAPER["title"] in text
        assert "not runs of ours" in text and "never merged or compared" in text
        for internal in ("seed 00", "(seed", "summary", "/work", "shared/"):
            assert internal not in text.lower(), internal
    assert "| Gemini-3-Flash | published | Google | 0.25 FPS | - | official | 76.2 |" in md


def test_sampling_labels_read_back_and_the_legacy_fallback_is_labelled():
    """A recorded label reads back as the budget it names (the inverse of ``Sampling.label``); a
    log older than the recorded sampling falls back to an explicit ``num_frames=``/``fps=`` of its
    model_args, labelled so, and never to a guessed adapter default."""
    from naru_eval.core.budgets import Sampling

    for s in (Sampling(frames=128), Sampling(fps=0.25), Sampling(fps=2.0), Sampling(frames=2048)):
        assert sampling_budget(s.label) == (s.frames, s.fps)
    assert sampling_budget("32 Frames (model_args)") == (32, None)
    assert sampling_budget("model's own sampler") == sampling_budget("n/a") == sampling_budget(None) == (None, None)
    assert legacy_sampling({"num_frames": "16"}) == "16 Frames (model_args)"
    assert legacy_sampling({"num_frames": "16", "fps": "0.5"}) == "0.5 FPS (model_args)"  # fps wins
    assert legacy_sampling({"pretrained": "x"}) == "not recorded"  # no adapter default guessed


def test_consistency_check_catches_an_inconsistent_row_and_counts():
    ref = load_reference()
    ref.table_ii.rows["Gemini-3-Flash"]["overall"] = 77.0
    ref.table_i.counts["C.5"] = 150
    bad = {(c.name, c.model): c.ok for c in consistency_checks(ref)}
    assert bad[("table II: overall from narrative and cultural", "Gemini-3-Flash")] is False
    assert bad[("table I: cultural count C.1-C.5", None)] is False
    assert bad[("table I: narrative count N.1-N.4", None)] is True


def test_model_args_helpers():
    assert parse_model_args("pretrained=a/b,num_frames=8,,flag") == {"pretrained": "a/b", "num_frames": "8", "flag": ""}
    assert same_model_args("predictions=x,api_key=[REDACTED],num_frames=8", "predictions=x,api_key=s3cr3t,num_frames=8")
    assert not same_model_args("predictions=x,num_frames=8", "predictions=y,num_frames=8")


# --------------------------------------------------------------------------- real lmms-eval runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real lmms-eval runs of naru_replay: model-a (8 frames; naru_mcq + naru_mcq_500) and
    model-b (32 frames; naru_mcq), 45 questions over 12 videos."""
    from naru_eval.lmms.run import run_lmms_eval

    base = tmp_path_factory.mktemp("lb")
    data = make_dataset(base / "data", SyntheticSpec(counts={c: 5 for c in PAPER_COUNTS}, n_videos=12, seed=3))
    out = {"data": data, "base": base}
    for name, seed, frames, tasks in (("a", 11, 8, ["naru_mcq", "naru_mcq_500"]), ("b", 12, 32, ["naru_mcq"])):
        preds = base / f"preds_{name}.jsonl"
        intended = make_predictions(data / "annotations.jsonl", preds, seed=seed)
        args = f"predictions={preds},pretrained=model-{name},num_frames={frames}"
        run = run_lmms_eval("naru_replay", args, tasks, base / "runs" / name, env={"NARU_DATA_DIR": str(data)})
        assert run.ok, run.stderr[-4000:]
        # a key in the logged model_args (naru_replay refuses unknown args, so it is written in):
        # the leaderboard must not show it
        res = run.results()
        res["config"]["model_args"] += f",api_key=SECRET-{name}"
        run.results_file.write_text(json.dumps(res), encoding="utf-8")
        out[name] = {"dir": base / "runs" / name, "run": run, "intended": intended}
    return out


@pytest.mark.slow
def test_leaderboard_numbers_come_from_the_sample_logs(runs, tmp_path):
    from naru_eval.core.data import load_local

    fingerprint = load_local(runs["data"]).fingerprint
    lb = build_leaderboard([runs["a"]["dir"], runs["b"]["dir"]], reps=500)
    assert not lb.errors, lb.errors
    entries = {(e["model"], e["task"]): e for e in lb.data["entries"]}
    assert set(entries) == {("model-a", "naru_mcq"), ("model-a", "naru_mcq_500"), ("model-b", "naru_mcq")}
    for name, task in entries:
        e = entries[(name, task)]
        run = runs[name[-1]]["run"]
        log = run.sample_files[task]
        from_log = metrics_from_samples_log(log)
        ids = {s["overall"]["question_id"] for s in read_jsonl(log)}
        independent = expected_metrics(runs["data"] / "annotations.jsonl", runs[name[-1]]["intended"], ids)
        for m in METRICS:
            assert e["metrics"][m] == pytest.approx(from_log[m], abs=1e-9), (name, task, m)
            assert e["metrics"][m] == pytest.approx(independent[m], abs=1e-9), (name, task, m)
            assert e["metrics"][m] == pytest.approx(run.metric(task, m), abs=1e-9), (name, task, m)
            lo, hi = e["ci95"][m]
            assert lo <= e["metrics"][m] <= hi
        assert e["reported_matches_log"] is True and e["metrics_source"] == "sample_log"
        assert e["n"]["overall"] == len(ids) and e["n"]["videos"] == 12
        assert e["n"]["narrative"] + e["n"]["cultural"] == len(ids)
        assert e["frames"] == (8 if name == "model-a" else 32) and e["fps"] is None and e["judge"] is None
        assert e["run"]["adapter"] == "naru_replay" and e["run"]["task_version"] == 3.0
        assert e["run"]["model_args"]["num_frames"] == str(e["frames"])
        # the sampling the payloads record; "(model_args)": the adapter recorded none
        assert e["sampling"].removesuffix(" (model_args)") == f"{e['frames']} Frames" and e["data"] == fingerprint
        assert e["id"] == f"{name} | {task} | {e['sampling']} | judge=- | data={fingerprint}"
        # the micro interval tracks lmms-eval's own clustered standard error (an independent estimate)
        se = run.results()["results"][task]["accuracy_stderr_clustered,none"]
        assert 0.5 * 1.96 * se < (e["ci95"]["accuracy"][1] - e["ci95"]["accuracy"][0]) / 2 < 1.6 * 1.96 * se
    # the runs are on synthetic data: they sit in a table of their own, sorted by
    # overall, and the published rows are a separate table (the reference), never interleaved
    assert fingerprint.startswith("synthetic-")
    mcq_tables = [t for t in lb.data["tables"] if t["task"] == "naru_mcq"]
    assert [t["data"] for t in mcq_tables] == [None, fingerprint] and len(mcq_tables[0]["rows"]) == 13
    table = mcq_tables[1]
    assert table["status"] == "synthetic" and len(table["rows"]) == 2
    by_id = {r["id"]: r for r in [*lb.data["published"]["rows"], *lb.data["entries"]]}
    overall = [by_id[i]["metrics"]["overall"] for i in table["rows"]]
    assert overall == sorted(overall, reverse=True)
    assert lb.data["schema_version"] == 3
    assert lb.data["bootstrap"] == {
        "method": "percentile bootstrap, videos resampled with replacement; overall/narrative/cultural "
        "recomputed as means of category means on each resample",
        "cluster": "video_id",
        "reps": 500,
        "seed": 0,
        "level": 0.95,
    }
    assert "SECRET" not in json.dumps(lb.data)


@pytest.mark.slow
def test_leaderboard_cli_outputs_and_paper_rows(runs, tmp_path, capsys):
    out = tmp_path / "results" / "leaderboard.json"
    rc = run_cli(
        "leaderboard", str(runs["a"]["dir"]), str(runs["b"]["dir"]), "-o", str(out), "--reps", "300",
        "--paper-name", "model-a=Gemini-3-Flash", "--paper-name", "model-b=Qwen3-VL-8B",
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    page = out.with_suffix(".html").read_text(encoding="utf-8")
    a_full = next(e for e in data["entries"] if e["model"] == "model-a" and e["task"] == "naru_mcq")
    rows = {(r["model"], r["source"], r["task"], r["metric"]): r for r in data["paper"]["comparison"]}
    paper = load_reference().table_ii.rows["Gemini-3-Flash"]
    for metric, value in paper.items():
        r = rows[("model-a", "table_ii", "naru_mcq", metric)]
        assert r["paper"] == value and r["diff"] == pytest.approx(a_full["metrics"][metric] - value)
        assert r["paper_in_ci"] == (a_full["ci95"][metric][0] <= value <= a_full["ci95"][metric][1])
    sweep = rows[("model-a", "frame_sweep", "naru_mcq_500", "overall")]
    assert sweep["paper"] == 53 and sweep["approximate"] is True
    assert rows[("model-b", "table_ii", "naru_mcq", "overall")]["paper"] == 37.4
    # the consistency check is in every output
    assert data["paper"]["consistent"] is True
    assert any(c["model"] == "Gemini-3-Flash" and c["ok"] for c in data["paper"]["consistency"])
    for text in (md, printed):
        assert "(84.2 + 68.2)/2 = 76.200 ≈ 76.2" in text
    assert "Runs beside the paper's tables" in md and "| model-a | Gemini-3-Flash | table_ii |" in md
    assert "76.200" in page and "Gemini-3-Flash" in page
    assert "leaderboard page: " in printed and str(out.with_suffix(".html").resolve()) in printed
    # the heat map is drawn; no model has two budgets, so the sweep figures say why they are missing
    assert (out.parent / "leaderboard_plots" / "category_heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Not drawn: frame-budget figures" in page
    for forbidden in ("http://", "https://", "<script src", "<link"):
        assert forbidden not in page


@pytest.mark.slow
def test_duplicates_are_noted_and_conflicts_are_errors(runs, tmp_path, capsys):
    dup = tmp_path / "copy_of_a"
    shutil.copytree(runs["a"]["dir"], dup)
    lb = build_leaderboard([runs["a"]["dir"], dup], reps=200)
    assert not lb.errors and not lb.data["conflicts"]
    assert len(lb.data["entries"]) == 2  # naru_mcq and naru_mcq_500, once each
    assert {d["id"] for d in lb.data["duplicates"]} == {e["id"] for e in lb.data["entries"]}
    assert all("identical" in d["note"] for d in lb.data["duplicates"])
    assert any("duplicate entry" in w for w in lb.warnings)

    # the same key with different numbers: one answer flipped in a copy
    other = tmp_path / "rerun_of_a"
    shutil.copytree(runs["a"]["dir"], other)
    log = next(other.rglob("*_samples_naru_mcq.jsonl"))
    lines = read_jsonl(log)
    for payload in lines[0].values():
        if isinstance(payload, dict) and "correct" in payload:
            payload["correct"] = not payload["correct"]
            for key in ("score", "item_score"):
                if key in payload and payload is not lines[0]["invalid_rate"]:
                    payload[key] = 100.0 - payload[key]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    lb = build_leaderboard([runs["a"]["dir"], other], reps=200)
    assert len(lb.data["conflicts"]) == 1
    conflict = lb.data["conflicts"][0]
    fp = lines[0]["overall"]["data_fingerprint"]
    assert conflict["id"].startswith("model-a | naru_mcq | 8 Frames") and conflict["id"].endswith(f" | data={fp}")
    assert "overall" in conflict["differences"] and len(conflict["files"]) == 2
    assert sum(1 for e in lb.data["entries"] if e.get("conflict")) == 2  # both kept, flagged
    assert lb.errors and "conflicting entries" in lb.errors[0]
    # and the command fails
    rc = run_cli(
        "leaderboard", str(runs["a"]["dir"]), str(other), "-o", str(tmp_path / "lb.json"), "--reps", "100", "--no-plots"
    )
    assert rc == 1
    assert "conflicting entries for model-a | naru_mcq" in capsys.readouterr().err

    # the same model on different data: never a conflict, never in one table; the data column says which
    for x in lines:
        for payload in x.values():
            if isinstance(payload, dict) and "data_fingerprint" in payload:
                payload["data_fingerprint"] = "otherdata0000000"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    # results.json as lmms-eval would have written it for this log (a run whose reported numbers do
    # not recompute from its log is never ranked: test_hostile_input.py)
    rf = next(other.rglob("*_results.json"))
    res = json.loads(rf.read_text(encoding="utf-8"))
    res["results"]["naru_mcq"].update({f"{m},none": v for m, v in metrics_from_samples_log(log).items()})
    rf.write_text(json.dumps(res), encoding="utf-8")
    lb = build_leaderboard([runs["a"]["dir"], other], reps=200)
    assert not lb.errors and not lb.data["conflicts"]
    mcq = [e for e in lb.data["entries"] if e["task"] == "naru_mcq"]
    assert sorted(e["data"] for e in mcq) == sorted([fp, "otherdata0000000"])
    tables = [t for t in lb.data["tables"] if t["task"] == "naru_mcq" and t["data"] is not None]
    assert sorted(t["data"] for t in tables) == sorted([fp, "otherdata0000000"])
    for t in tables:  # each holds the one run on its data (and no published row: not the official data)
        assert sum(1 for i in t["rows"] if not i.startswith("published")) == 1
    assert any("different data" in w and "never compared" in w for w in lb.warnings)
    md = markdown(lb.data)
    assert f"## naru_mcq: runs on data {fp}" in md and "## naru_mcq: runs on data otherdata0000000" in md
    rc = run_cli("compare", str(runs["a"]["dir"]), str(other), "--task", "naru_mcq", "--reps", "50")
    assert rc == 2 and "different data" in capsys.readouterr().err


@pytest.mark.slow
def test_incomplete_runs_are_left_out_with_a_warning(runs, tmp_path):
    part = tmp_path / "partial"
    shutil.copytree(runs["b"]["dir"], part)
    rf = next(part.rglob("*_results.json"))
    res = json.loads(rf.read_text())
    res["n-samples"]["naru_mcq"]["effective"] -= 1
    rf.write_text(json.dumps(res))
    lb = build_leaderboard([part], reps=100)
    assert lb.data["entries"] == [] and any("incomplete" in w for w in lb.warnings)
    assert len(build_leaderboard([part], reps=100, include_incomplete=True).data["entries"]) == 1


@pytest.mark.slow
def test_compare_command_on_real_runs(runs, tmp_path, capsys):
    a_log = runs["a"]["run"].sample_files["naru_mcq"]
    rc = run_cli(
        "compare",
        str(a_log),
        str(runs["b"]["dir"]),
        "--reps",
        "300",
        "--permutations",
        "500",
        "-o",
        str(tmp_path / "c.json"),
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert "| overall | 45 |" in text and "How to read this" in text and "n=45 paired questions over 12 videos" in text
    report = json.loads((tmp_path / "c.json").read_text())
    row = next(r for r in report["tasks"]["naru_mcq"]["rows"] if r["metric"] == "overall")
    want = (
        metrics_from_samples_log(runs["b"]["run"].sample_files["naru_mcq"])["overall"]
        - metrics_from_samples_log(a_log)["overall"]
    )
    assert row["diff"] == pytest.approx(want)
    # a run against itself: no difference, p = 1
    rc = run_cli(
        "compare", str(runs["b"]["dir"]), str(runs["b"]["dir"]), "--json", "--reps", "100", "--permutations", "100"
    )
    same = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert all(r["diff"] == 0 and r["p"] == 1.0 for r in same["tasks"]["naru_mcq"]["rows"] if r["n"])


# --------------------------------------------------------------------------- the page in a browser


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={cwd / 'profile'}",
            *args,
        ],
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_html_page_renders_offline_in_headless_chromium(runs, tmp_path):
    # a sweep-like set: model-a at two budgets (the same answers), so every figure is drawn
    f32 = tmp_path / "a_f32"
    shutil.copytree(runs["a"]["dir"], f32)
    rf = next(f32.rglob("*_results.json"))
    res = json.loads(rf.read_text())
    res["config"]["model_args"] = res["config"]["model_args"].replace("num_frames=8", "num_frames=32")
    rf.write_text(json.dumps(res))
    for log in f32.rglob("*_samples_*.jsonl"):  # the leaderboard reads the sampling the payloads record
        log.write_text(log.read_text().replace('"sampling": "8 Frames"', '"sampling": "32 Frames"'))
    out = tmp_path / "lb" / "leaderboard.json"
    rc = run_cli("leaderboard", str(runs["a"]["dir"]), str(f32), str(runs["b"]["dir"]), "-o", str(out), "--reps", "200",
                 "--paper-name", "model-a=Gemini-3-Flash")  # fmt: skip
    assert rc == 0
    page = out.with_suffix(".html")
    n_entries = len(json.loads(out.read_text())["entries"])
    assert n_entries == 5

    dom = chromium("--virtual-time-budget=3000", "--dump-dom", page.as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert html.count('<tr class="entry">') == n_entries
    assert "model-a" in html and "model-b" in html and "Gemini-3-Flash" in html
    imgs = html.count('<img class="plot"')
    assert imgs == 5  # Fig. 3 and Fig. 4 for naru_mcq and naru_mcq_500, the heat map
    assert html.count('src="data:image/png;base64,') == imgs

    shot = tmp_path / "page.png"
    cap = chromium("--window-size=1300,9000", "--hide-scrollbars", f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    assert cap.returncode == 0 and shot.exists(), cap.stderr[-2000:]
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 9000)  # tall: the published tables come first, the figures below them
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # not blank
    # the figures' colours (viridis cells, blue/orange lines and bars) reach the screen: the inline
    # CSS and tables are grey scale, so strongly coloured pixels come from the decoded PNGs
    coloured = sum(n for n, (r, g, b) in colours if max(r, g, b) - min(r, g, b) > 80)
    assert coloured > 20000, coloured


# --------------------------------------------------------------------------- naru_open runs (fast)


def write_open_run(run_dir: Path, model: str, fingerprint: str, seed: int) -> list:
    """A naru_open run directory as lmms-eval leaves it: ``<stamp>_results.json`` (the numbers the
    task's aggregation reports) beside ``<stamp>_samples_naru_open.jsonl`` (the payloads of
    :func:`naru_eval.judge.score.open_payloads`), 10 videos with unbalanced categories."""
    import random

    from naru_eval.judge.score import JudgedSample, compute_open_metrics, open_payloads

    rng = random.Random(seed)
    samples = []
    for v in range(10):
        for k in range(rng.randint(3, 8)):
            cat = CATEGORIES[(v + k * k) % 9]
            unscored = rng.random() < 0.1
            samples.append(
                JudgedSample(
                    question_id=f"q{v}_{k}", video_id=f"vid{v}", category=cat,
                    level="narrative" if cat in NARRATIVE else "cultural", question="q", reference="r",
                    response="a", status="unscored" if unscored else "scored",
                    recall=None if unscored else round(rng.random(), 2), data_fingerprint=fingerprint,
                    adapter="naru_replay",
                )
            )  # fmt: skip
    d = run_dir / model
    d.mkdir(parents=True)
    with open(d / "20260101_000000_samples_naru_open.jsonl", "w", encoding="utf-8") as f:
        for i, s in enumerate(samples):
            f.write(json.dumps({"doc_id": i, **open_payloads(s)}) + "\n")
    reported = {f"{m},none": v for m, v in compute_open_metrics(samples).items()}
    results = {
        "results": {"naru_open": reported},
        "config": {"model": "naru_replay", "model_args": f"pretrained={model},num_frames=8"},
        "n-samples": {"naru_open": {"original": len(samples), "effective": len(samples)}},
        "versions": {"naru_open": 3.0},
    }
    (d / "20260101_000000_results.json").write_text(json.dumps(results), encoding="utf-8")
    return samples


ROOT_OF = {
    "fpA": lambda base: base / "a" / "model-x" / "20260101_000000_samples_naru_open.jsonl",
    "fpB": lambda base: base / "b" / "model-x" / "20260101_000000_samples_naru_open.jsonl",
}


def test_open_runs_get_macro_bootstrap_cis_and_their_data(tmp_path):
    """naru_open entries: the table III macro recomputed from the log, its video-clustered
    bootstrap interval (the one bootstrap, seeded), the data fingerprint the samples record; runs
    on different data sit in separate tables, never merged; table III is compared with ``overall``."""
    from naru_eval.judge.score import compute_open_metrics, metrics_from_open_log
    from naru_eval.report.stats import bootstrap_open_ci

    a = write_open_run(tmp_path / "a", "model-x", "fpA", seed=1)
    b = write_open_run(tmp_path / "b", "model-x", "fpB", seed=2)
    lb = build_leaderboard([tmp_path / "a", tmp_path / "b"], paper_names={"model-x": "Qwen3-VL-8B"}, reps=300, seed=5)
    assert not lb.errors and not lb.data["conflicts"], lb.errors
    entries = {e["data"]: e for e in lb.data["entries"]}
    assert set(entries) == {"fpA", "fpB"}
    for fp, samples in (("fpA", a), ("fpB", b)):
        e = entries[fp]
        assert e["metrics_source"] == "sample_log_open" and e["reported_matches_log"] is True
        assert e["id"] == f"model-x | naru_open | 8 Frames (model_args) | judge={e['judge'] or '-'} | data={fp}"
        # the macro by hand: mean of the nine category mean recalls (unscored left out)
        cat = {c: [s.recall for s in samples if s.category == c and s.recall is not None] for c in CATEGORIES}
        means = [sum(v) / len(v) for v in cat.values() if v]
        assert e["metrics"]["overall"] == pytest.approx(sum(means) / len(means))
        assert e["metrics"] == pytest.approx(compute_open_metrics(samples))
        want = bootstrap_open_ci(samples, reps=300, seed=5)
        for m in ("overall", "narrative", "cultural", "recall", *CATEGORIES):
            assert e["ci95"][m] == pytest.approx(list(want[m])), m
            lo, hi = e["ci95"][m]
            assert lo <= e["metrics"][m] <= hi and hi - lo > 0, m
        assert metrics_from_open_log(ROOT_OF[fp](tmp_path))["overall"] == pytest.approx(e["metrics"]["overall"])
    tables = [t for t in lb.data["tables"] if t["task"] == "naru_open"]
    # fpA and fpB are not the official data: the published rows are a table of their own,
    # the reference, and each run's data has its own table, never interleaved with them
    assert [t["data"] for t in tables] == [None, "fpA", "fpB"]
    assert len(tables[0]["rows"]) == 8 and all(i.startswith("published |") for i in tables[0]["rows"])
    for t in tables[1:]:
        ours = [i for i in t["rows"] if i in {e["id"] for e in lb.data["entries"]}]
        assert ours == [entries[t["data"]]["id"]] and len(t["rows"]) == 1 and t["kind"] == "open"
        assert t["status"] == "other"
    assert any("different data" in w for w in lb.warnings)
    comp = [r for r in lb.data["paper"]["comparison"] if r["source"] == "table_iii"]
    assert {r["metric"] for r in comp} == {"overall"} and {r["paper"] for r in comp} == {0.44}
    assert {r["ours"] for r in comp} == {entries["fpA"]["metrics"]["overall"], entries["fpB"]["metrics"]["overall"]}
    md = markdown(lb.data)
    lo, hi = entries["fpA"]["ci95"]["overall"]
    assert f"{entries['fpA']['metrics']['overall']:.2f} [{lo:.2f}, {hi:.2f}]" in md
    assert "## naru_open: runs on data fpA" in md and "## naru_open: runs on data fpB" in md
    assert f"[{lo:.2f}, {hi:.2f}]" in render_html(lb.data)


def test_a_reported_number_the_log_does_not_reproduce_is_named(tmp_path):
    """lmms-eval's results.json disagreeing with the sample log: a warning names the metric and
    the entry keeps the log's number."""
    samples = write_open_run(tmp_path / "a", "model-x", "fpA", seed=1)
    path = tmp_path / "a" / "model-x" / "20260101_000000_results.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    results["results"]["naru_open"]["overall,none"] += 0.1
    path.write_text(json.dumps(results), encoding="utf-8")
    lb = build_leaderboard([tmp_path / "a"], reps=50)
    (e,) = lb.data["entries"]
    assert e["reported_matches_log"] is False
    from naru_eval.judge.score import compute_open_metrics

    assert e["metrics"]["overall"] == pytest.approx(compute_open_metrics(samples)["overall"])
    (w,) = [w for w in lb.warnings if "differ from the sample log" in w]
    assert "naru_open: overall reported by lmms-eval" in w


def test_committed_leaderboard_json_is_a_valid_document_and_round_trips():
    """results/leaderboard.json validates as the typed document, and writing the model gives the
    same file back (the models are the schema; nothing is lost or reordered)."""
    from naru_eval.report.models import LeaderboardDocument, dump_json, load_model

    path = Path(__file__).resolve().parents[2] / "results" / "leaderboard.json"
    doc = load_model(LeaderboardDocument, path)
    assert dump_json(doc) == path.read_text(encoding="utf-8")
    assert doc.published.rows[0].published and doc.published.rows[0].from_


def test_a_malformed_leaderboard_or_manifest_is_an_error_naming_the_file(tmp_path):
    from naru_eval.report.models import LeaderboardDocument, load_model
    from naru_eval.report.runs import find_manifest, read_manifest
    from naru_eval.report.sweep import write_manifest

    bad = tmp_path / "leaderboard.json"
    bad.write_text(json.dumps({"schema_version": 2, "entries": "nope"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"leaderboard\.json: not a valid LeaderboardDocument.*entries"):
        load_model(LeaderboardDocument, bad)
    run = tmp_path / "f8"
    (run / "manifest.json").parent.mkdir()
    (run / "manifest.json").write_text(json.dumps({"status": "finished?", "updated_at": "x"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"f8/manifest\.json: not a valid SweepManifest.*status"):
        read_manifest(find_manifest(run / "x_results.json", tmp_path))
    (run / "manifest.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"manifest\.json: not JSON"):
        write_manifest(run, {"status": "done"})
    with pytest.raises(ValueError, match=r"not a valid SweepManifest.*labl"):
        write_manifest(tmp_path / "f16", {"status": "running", "updated_at": "t", "labl": "typo"})


def test_docs_schema_section_is_generated_from_the_models(capsys):
    """docs/leaderboard.md's schema section is the text the models generate (written once: edit the
    models, then ``naru-eval leaderboard-schema --write docs/leaderboard.md``)."""
    from naru_eval.report.schema_doc import SCHEMA_BEGIN, with_schema

    doc = Path(__file__).resolve().parents[2] / "docs" / "leaderboard.md"
    text = doc.read_text(encoding="utf-8")
    assert SCHEMA_BEGIN in text and with_schema(text) == text
    assert "| `conflict` (optional) | bool \\| null |" in text  # a field of the Entry model
    assert "| `invocations` (optional) | int \\| null |" in text  # a field of the SweepManifest model
    stale = text.replace("the annotations' fingerprint; `official` for published rows", "edited by hand")
    assert with_schema(stale) == text


def test_leaderboard_schema_command_checks_and_writes(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    from naru_eval.report.schema_doc import SCHEMA_BEGIN, SCHEMA_END

    doc.write_text(f"intro\n{SCHEMA_BEGIN}\nold\n{SCHEMA_END}\noutro\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["leaderboard-schema", "--write", str(doc), "--check"])
    assert args.func(args) == 1 and "out of date" in capsys.readouterr().out
    args = parser.parse_args(["leaderboard-schema", "--write", str(doc)])
    assert args.func(args) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("intro\n") and text.endswith(f"{SCHEMA_END}\noutro\n") and "#### `Entry`" in text
    args = parser.parse_args(["leaderboard-schema", "--write", str(doc), "--check"])
    assert args.func(args) == 0


def test_html_escapes_every_value_from_a_run():
    """The page is rendered with autoescape: a run named ``<script>…`` (or a warning, a results
    path, a model arg holding markup) shows as text, never as markup."""
    evil = "<script>alert('x')</script>"
    data = build_leaderboard([], reps=10).data
    row = dict(data["published"]["rows"][0])
    run = {
        "results_file": f"runs/{evil}_results.json",
        "samples_file": "s.jsonl",
        "adapter": "naru_replay",
        "model_args": {"pretrained": evil},
        "num_frames": 8,
        "fps": None,
        "task_version": 1,
        "task_hash": None,
        "lmms_eval_version": None,
        "date": None,
        "n_samples": {"original": 1, "effective": 1},
    }
    row.update(id=f"{evil} | naru_mcq", model=evil, published=False, data=evil, run=run, manifest=None, cost=None)
    data["entries"] = [row]
    data["tables"][0]["rows"].insert(0, row["id"])
    data["warnings"] = [f"warning about {evil}"]
    page = render_html(data)
    assert "<script" not in page
    assert page.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") >= 6  # name, id, data, args, file, warning
    assert "<tr class='entry'><td class='l'>&lt;script&gt;" in page
