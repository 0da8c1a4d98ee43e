import json
from pathlib import Path

import pytest

from naru_eval.core.data import CATEGORIES, DataError, NaruQuestion, load_local
from naru_eval.core.hub import load_dataset_from_env, load_hf
from tests.helpers.data import read_jsonl, write_jsonl


def test_load_local_jsonl(small_data):
    ds = load_local(small_data)
    assert len(ds.questions) == 36
    assert {q.category for q in ds.questions} == set(CATEGORIES)
    q = ds.questions[0]
    assert isinstance(q, NaruQuestion) and len(q.options) == 4 and q.answer in "ABCD"
    assert ds.video_file(q).name == f"{q.video_id}.mp4"
    # synthetic data says so in its fingerprint (never ranked beside the published rows)
    assert ds.fingerprint.startswith("synthetic-") and len(ds.fingerprint.removeprefix("synthetic-")) == 16


def test_json_and_parquet_load_the_same(copy_data):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    ref = load_local(d)
    (d / "annotations.jsonl").unlink()
    (d / "annotations.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    assert load_local(d).questions == ref.questions
    (d / "annotations.json").unlink()
    pq.write_table(pa.Table.from_pylist(rows), d / "annotations.parquet")
    assert load_local(d).questions == ref.questions


def test_every_schema_problem_reported_at_once(copy_data):
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["category"] = "N.9"
    rows[1]["options"] = rows[1]["options"][:3]
    rows[2]["answer"] = "E"
    del rows[3]["question"]
    rows[4]["question_id"] = rows[5]["question_id"]
    rows[6]["subset_500"] = "yes"
    write_jsonl(d / "annotations.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_local(d)
    problems = err.value.problems
    assert len(problems) == 6
    text = str(err.value)
    for needle in ("'N.9'", "exactly 4", "'E'", "missing field 'question'", "duplicate question_id", "subset_500"):
        assert needle in text
    assert str(d / "annotations.jsonl") in text  # names the file


def test_bad_json_lines_named(copy_data):
    d = copy_data()
    with open(d / "annotations.jsonl", "a") as f:
        f.write("{not json\n")
    with pytest.raises(DataError, match=r"annotations.jsonl:37: not valid JSON"):
        load_local(d)


def test_an_unreadable_line_does_not_hide_the_other_problems(copy_data):
    """Two broken lines and a schema error: all three reported, the other rows still loaded."""
    d = copy_data()
    lines = (d / "annotations.jsonl").read_text(encoding="utf-8").splitlines()
    rows = read_jsonl(d / "annotations.jsonl")
    rows[5]["answer"] = "Z"
    lines[5] = json.dumps(rows[5], ensure_ascii=False)
    lines[2] = lines[2][:-5]  # truncated
    lines[20] = "{not json"
    (d / "annotations.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_local(d)
    problems = err.value.problems
    assert len(problems) == 3, problems
    assert any("annotations.jsonl:3: not valid JSON" in p for p in problems)
    assert any("annotations.jsonl:21: not valid JSON" in p for p in problems)
    assert any("'Z'" in p and rows[5]["question_id"] in p for p in problems)
    ds = load_local(d, strict=False)
    assert len(ds.questions) == 36 - 3 and len(ds.problems) == 3


def test_missing_dir_and_env(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="does not exist"):
        load_local(tmp_path / "nope")
    with pytest.raises(DataError, match="no annotation file"):
        load_local(tmp_path)
    monkeypatch.delenv("NARU_DATA_DIR", raising=False)
    monkeypatch.delenv("NARU_HF_DATASET", raising=False)
    with pytest.raises(DataError, match="NARU_DATA_DIR"):
        load_dataset_from_env()


def test_video_path_override(copy_data):
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    (d / "videos" / "vid000.mp4").rename(d / "elsewhere.mp4")
    for r in rows:
        if r["video_id"] == "vid000":
            r["video_path"] = "elsewhere.mp4"
    write_jsonl(d / "annotations.jsonl", rows)
    ds = load_local(d)
    q = next(q for q in ds.questions if q.video_id == "vid000")
    assert ds.video_file(q) == d / "elsewhere.mp4"


def test_hf_dataset_with_column_mapping(small_data, tmp_path, monkeypatch):
    """A local ``datasets`` build with renamed columns, loaded through the real HF loader."""
    import datasets

    rows = read_jsonl(small_data / "annotations.jsonl")
    renamed = [
        {("qid" if k == "question_id" else "choices" if k == "options" else k): v for k, v in r.items()} for r in rows
    ]
    hub = tmp_path / "hub" / "data"
    hub.mkdir(parents=True)
    datasets.Dataset.from_list(renamed).to_parquet(str(hub / "test-00000-of-00001.parquet"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("NARU_HF_COLUMNS", json.dumps({"qid": "question_id", "choices": "options"}))
    monkeypatch.delenv("NARU_DATA_DIR", raising=False)
    monkeypatch.setenv("NARU_HF_DATASET", str(tmp_path / "hub"))
    monkeypatch.setenv("NARU_VIDEO_DIR", str(small_data / "videos"))
    ds = load_dataset_from_env()
    assert [q.question_id for q in ds.questions] == [r["question_id"] for r in rows]
    assert ds.questions == load_local(small_data).questions
    assert ds.video_file(ds.questions[0]) == small_data / "videos" / f"{ds.questions[0].video_id}.mp4"
    # without the mapping: one error naming the missing fields, the columns found and the mapping to set
    monkeypatch.delenv("NARU_HF_COLUMNS")
    with pytest.raises(DataError) as err:
        load_hf(str(tmp_path / "hub"))
    (msg,) = err.value.problems
    assert "unknown schema" in msg and "question_id, options" in msg
    assert "Columns found: " in msg and "qid" in msg and "choices" in msg and "category" in msg
    assert "NARU_HF_COLUMNS='{" in msg


def _hf_folder(small_data: Path, root: Path, edit=None) -> Path:
    """A local Hugging Face data set folder (``root/hub``: one parquet file) of the small data."""
    import datasets

    rows = read_jsonl(small_data / "annotations.jsonl")
    if edit is not None:
        edit(rows)
    hub = root / "hub" / "data"
    hub.mkdir(parents=True)
    datasets.Dataset.from_list(rows).to_parquet(str(hub / "test-00000-of-00001.parquet"))
    return root / "hub"


def test_hf_video_paths_stay_in_the_video_folder(small_data, tmp_path, monkeypatch):
    """``video_path: private/secret.mp4`` used to open ``NARU_VIDEO_DIR/../private/secret.mp4``
    (the data folder was taken as the video folder's parent), and without NARU_VIDEO_DIR a path
    resolved against the current directory."""
    import shutil

    from naru_eval.core.validate import validate

    naru = tmp_path / "naru"
    shutil.copytree(small_data / "videos", naru / "videos")
    (naru / "private").mkdir()
    secret = shutil.copy(small_data / "videos" / "vid000.mp4", naru / "private" / "secret.mp4")

    def edit(rows):
        rows[0]["video_path"] = "private/secret.mp4"
        rows[1]["video_path"] = "clip.mp4"

    hub = _hf_folder(small_data, tmp_path, edit)
    shutil.copy(small_data / "videos" / "vid001.mp4", hub / "clip.mp4")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("NARU_DATA_DIR", raising=False)
    monkeypatch.setenv("NARU_HF_DATASET", str(hub))
    monkeypatch.setenv("NARU_VIDEO_DIR", str(naru / "videos"))
    ds = load_dataset_from_env()
    q0 = ds.questions[0]
    assert ds.video_file(q0) == naru / "videos" / "private" / "secret.mp4"  # relative to the video folder
    assert ds.roots() == [hub.resolve(), (naru / "videos").resolve()]
    report = validate()
    assert all(Path(i.path).resolve() != Path(secret).resolve() for i in report.paths.values())
    assert any("private/secret.mp4" in p and "not" in p for p in report.problems), report.problems
    # no video folder: video_path is relative to the data set's own folder, never the current directory
    monkeypatch.delenv("NARU_VIDEO_DIR")
    monkeypatch.chdir(naru)
    ds = load_dataset_from_env()
    assert ds.video_file(ds.questions[0]) == hub.resolve() / "private" / "secret.mp4"
    assert ds.video_file(ds.questions[1]) == hub.resolve() / "clip.mp4"
    report = validate()
    assert Path(report.paths[str(hub.resolve() / "clip.mp4")].path).exists()
    assert all(Path(i.path).resolve() != Path(secret).resolve() for i in report.paths.values())


def test_hf_loading_mistakes_are_named(small_data, tmp_path, monkeypatch, capsys):
    """A missing NARU_HF_DATASET folder, an unknown NARU_HF_SPLIT and a NARU_HF_COLUMNS that is not
    a JSON object each name the setting (through lmms-eval they ended as ``RetryError[...]``)."""
    from naru_eval.cli.main import main
    from naru_eval.lmms.tasks import _preflight, process_docs_all

    hub = _hf_folder(small_data, tmp_path)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("NARU_DATA_DIR", raising=False)
    monkeypatch.setenv("NARU_VIDEO_DIR", str(small_data / "videos"))
    cases = [
        ({"NARU_HF_DATASET": str(tmp_path / "nowhere")}, f"NARU_HF_DATASET={str(tmp_path / 'nowhere')!r}"),
        ({"NARU_HF_DATASET": str(hub), "NARU_HF_SPLIT": "dev"}, "NARU_HF_SPLIT='dev': not a split of"),
        (
            {"NARU_HF_DATASET": str(hub), "NARU_HF_COLUMNS": "qid=question_id"},
            "NARU_HF_COLUMNS='qid=question_id': not JSON",
        ),
        ({"NARU_HF_DATASET": str(hub), "NARU_HF_COLUMNS": '["qid"]'}, "must be a JSON object"),
        ({"NARU_HF_DATASET": str(hub), "NARU_VIDEO_DIR": str(tmp_path / "novideos")}, "NARU_VIDEO_DIR="),
    ]
    for env, needle in cases:
        monkeypatch.delenv("NARU_HF_SPLIT", raising=False)
        monkeypatch.delenv("NARU_HF_COLUMNS", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert main(["validate-data"]) in (1, 2)
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err, (needle, err)
        _preflight.cache_clear()
        with pytest.raises(SystemExit):
            process_docs_all(None)
        err = capsys.readouterr().err
        assert needle in err and "RetryError" not in err, (needle, err)
        monkeypatch.setenv("NARU_VIDEO_DIR", str(small_data / "videos"))
    _preflight.cache_clear()


# ------------------------------------------------------------------ hostile data


def _outside_video(tmp_path, small_data):
    """A real, readable video outside the data folder (``tmp_path/outside/secret.mp4``)."""
    import shutil

    outside = tmp_path / "outside"
    outside.mkdir()
    return shutil.copy(small_data / "videos" / "vid000.mp4", outside / "secret.mp4")


def test_ids_and_paths_leading_outside_the_data_folder_are_refused_all_at_once(copy_data, small_data, tmp_path):
    d = copy_data()  # tmp_path/data
    secret = _outside_video(tmp_path, small_data)
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["video_id"] = "../../outside/secret"  # videos/../../outside/secret.mp4
    rows[1]["video_path"] = "../outside/secret.mp4"
    rows[2]["video_path"] = str(secret)  # absolute
    rows[3]["answer"] = "Z"  # an ordinary schema problem, reported with the others
    write_jsonl(d / "annotations.jsonl", rows)
    link_qids = [r["question_id"] for r in rows if r["video_id"] == "vid005"]
    (d / "videos" / "vid005.mp4").unlink()
    (d / "videos" / "vid005.mp4").symlink_to(secret)  # a symlink leading out
    with pytest.raises(DataError) as err:
        load_local(d)
    problems = err.value.problems
    assert len(problems) == 5, problems
    text = str(err.value)
    assert "'video_id' must be a plain file name" in text and "'../../outside/secret'" in text
    assert "'video_path' must be relative to the data folder, without '..'" in text
    assert repr(str(secret)) in text and "'Z'" in text
    (link,) = [p for p in problems if "vid005.mp4" in p]
    assert f"{len(link_qids)} question(s)" in link and "leads outside the data folder" in link
    assert all("NARU_ALLOW_EXTERNAL_VIDEOS=1" in p for p in problems if "'Z'" not in p)
    # the non-strict load (the preflight's) keeps no question on a refused path
    ds = load_local(d, strict=False)
    kept = {q.question_id for q in ds.questions}
    assert not kept & {rows[0]["question_id"], rows[1]["question_id"], rows[2]["question_id"], *link_qids}
    assert len(kept) == 36 - 4 - len(link_qids)
    # the preflight opens none of them: no video of the outside file is probed
    from naru_eval.core.validate import validate

    report = validate(d)
    assert len(report.problems) == 5 and set(report.videos) == {f"vid00{i}" for i in range(5)}
    assert all(Path(info.path).resolve() != secret.resolve() for info in report.videos.values())


def test_outside_videos_are_allowed_with_the_documented_opt_in(copy_data, small_data, tmp_path, monkeypatch):
    d = copy_data()
    secret = _outside_video(tmp_path, small_data)
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["video_path"] = str(secret)
    rows[1]["video_id"] = "../../outside/secret"
    write_jsonl(d / "annotations.jsonl", rows)
    monkeypatch.setenv("NARU_ALLOW_EXTERNAL_VIDEOS", "1")
    ds = load_local(d)
    by_id = {q.question_id: q for q in ds.questions}
    assert ds.video_file(by_id[rows[0]["question_id"]]) == secret
    assert ds.video_file(by_id[rows[1]["question_id"]]).resolve() == secret.resolve()
    monkeypatch.delenv("NARU_ALLOW_EXTERNAL_VIDEOS")
    with pytest.raises(DataError, match="leads outside the data folder"):
        ds.video_file(by_id[rows[0]["question_id"]])  # the loaded data set is checked again at use


def test_a_videos_folder_linked_to_another_disk_needs_naru_video_dir(copy_data, tmp_path, monkeypatch):
    """A link never widens the allowed folders (an archive's ``videos -> /`` would open any
    file): the user's own link to a larger disk is named by NARU_VIDEO_DIR, one message says so."""
    d = copy_data()
    (d / "videos").rename(tmp_path / "big_disk_videos")
    (d / "videos").symlink_to(tmp_path / "big_disk_videos")
    with pytest.raises(DataError) as err:
        load_local(d)
    (problem,) = err.value.problems
    assert "36 question(s)" in problem and f"set NARU_VIDEO_DIR={tmp_path / 'big_disk_videos'}" in problem
    monkeypatch.setenv("NARU_VIDEO_DIR", str(tmp_path / "big_disk_videos"))
    ds = load_local(d)
    assert len(ds.questions) == 36 and ds.video_file(ds.questions[0]).exists()


def test_a_shipped_link_to_the_root_reads_nothing_outside(copy_data, small_data, tmp_path):
    """``videos -> /`` with ``video_path: videos/<any path>`` used to pass validate-data and open
    the file: the link's target was taken as an allowed folder."""
    from naru_eval.core.validate import validate

    d = copy_data()
    secret = _outside_video(tmp_path, small_data)
    (d / "videos").rename(d / "real_videos")
    (d / "videos").symlink_to("/")
    rows = read_jsonl(d / "annotations.jsonl")
    for r in rows:
        r["video_path"] = f"real_videos/{r['video_id']}.mp4"
    rows[0]["video_path"] = f"videos{secret}"  # videos/tmp/.../outside/secret.mp4 -> the file outside
    write_jsonl(d / "annotations.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_local(d)
    (problem,) = err.value.problems
    assert "is a link to /, outside the data folder" in problem and "1 question(s)" in problem
    report = validate(d)
    assert len(report.problems) == 1 and len(report.videos) == 6
    assert all(Path(info.path).resolve() != Path(secret).resolve() for info in report.videos.values())


def test_control_characters_and_symlink_loops_are_messages(copy_data, monkeypatch, capsys):
    """A NUL or a newline in ``video_path`` and a symlink loop used to end in tracebacks (or, for
    the newline, a forged line in validate-data's report); the opt-in does not lift it."""
    from naru_eval.cli.main import main

    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["video_path"] = "videos/a\x00.mp4"
    rows[1]["video_path"] = "videos/x.mp4\n  - OK: forged line"
    rows[2]["video_id"] = "vid\x07"
    rows[3]["video_path"] = "loop/a.mp4"
    write_jsonl(d / "annotations.jsonl", rows)
    (d / "loop").symlink_to(d / "loop")
    for opt_in in ("0", "1"):
        monkeypatch.setenv("NARU_ALLOW_EXTERNAL_VIDEOS", opt_in)
        assert main(["validate-data", str(d), "--no-videos"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err and "\n  - OK: forged line" not in err
        assert err.count("holds control characters") == 3 and "'\\x00'" in err and "'\\n'" in err
    monkeypatch.setenv("NARU_ALLOW_EXTERNAL_VIDEOS", "0")
    with pytest.raises(DataError, match="cannot be resolved"):
        load_local(d)


def test_invalid_utf8_names_file_line_and_byte_offset(copy_data):
    d = copy_data()
    path = d / "annotations.jsonl"
    lines = path.read_bytes().split(b"\n")
    bad = lines[4].replace(b'"question": "', b'"question": "\xff\xfe', 1)
    assert bad != lines[4]
    lines[4] = bad
    offset = sum(len(line) + 1 for line in lines[:4]) + bad.index(b"\xff")
    lines[7] = lines[7].replace(b'"answer": "', b'"answer": "Z', 1)  # another problem, reported too
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataError) as err:
        load_local(d)
    problems = err.value.problems
    assert len(problems) == 2, problems
    assert f"{path}:5: not valid UTF-8 at byte offset {offset} of the file" in problems[0]
    assert "'answer' must be one of A, B, C, D, got 'Z" in problems[1]


def test_invalid_utf8_in_a_json_list_is_named(copy_data):
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    (d / "annotations.jsonl").unlink()
    data = json.dumps(rows, ensure_ascii=False, indent=1).encode()
    at = data.index(b'"question": "') + len(b'"question": "')
    (d / "annotations.json").write_bytes(data[:at] + b"\xc3" + data[at:])
    line = data[:at].count(b"\n") + 1
    with pytest.raises(DataError, match=rf"annotations.json:{line}: not valid UTF-8 at byte offset {at} "):
        load_local(d)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_durations_are_refused(copy_data, token):
    d = copy_data()
    path = d / "annotations.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[2])
    row["duration_s"] = 1.5
    lines[2] = json.dumps(row).replace("1.5", token)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_local(d)
    (problem,) = err.value.problems
    assert str(path) in problem and ("annotations.jsonl:3" in problem or row["question_id"] in problem)
    assert "non-finite" in problem or "finite number" in problem


def test_non_finite_numbers_from_parquet_or_the_hub_are_refused():
    from naru_eval.core.data import parse_rows

    base = {"question_id": "q", "video_id": "v", "category": "N.1", "question": "?", "options": list("abcd")}
    rows = [{**base, "question_id": f"q{i}", "answer": "A", "duration_s": x} for i, x in enumerate([1e400, -1e400])]
    rows.append({**base, "question_id": "q_nan", "answer": "A", "duration_s": float("nan")})
    questions, problems = parse_rows(rows, "hf:x[test]")
    assert questions == [] and len(problems) == 3
    assert all("'duration_s' must be a positive finite number" in p for p in problems)


def test_an_unreadable_parquet_file_is_named(copy_data):
    d = copy_data()
    (d / "annotations.jsonl").unlink()
    (d / "annotations.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataError, match=r"annotations.parquet: not a readable Parquet file"):
        load_local(d)


def test_a_schema_problem_after_skipped_lines_names_its_file_line(copy_data):
    """Rows after a skipped line were numbered by record, one off from the file's line."""
    d = copy_data()
    path = d / "annotations.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = "{not json"
    lines.insert(2, "")
    lines[5] = lines[5].replace('"answer": "', '"answer": "Z', 1)  # file line 6
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_local(d)
    assert any(p.startswith(f"{path}:6 (question_id=") and "'answer'" in p for p in err.value.problems), err.value


def test_four_identical_options_are_refused(copy_data):
    d = copy_data()
    rows = read_jsonl(d / "annotations.jsonl")
    rows[0]["options"] = ["Tokyo"] * 4
    rows[1]["options"] = ["Kyoto", "Osaka", " kyoto ", "Nara"]
    write_jsonl(d / "annotations.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_local(d)
    text = str(err.value)
    assert "'options' A, B, C and D are the same text" in text and "'options' A and C are the same text" in text


def test_garbage_annotations_print_a_bounded_report(copy_data, capsys):
    """50 MB of random bytes as annotations printed 37 MB of problems; every problem is still
    found and counted, the report shows the first 100 (each line cut to 1,000 characters)."""
    import random

    from naru_eval.cli.main import main
    from naru_eval.core.data import MAX_SHOWN_PROBLEMS

    d = copy_data()
    rng = random.Random(0)
    (d / "annotations.jsonl").write_bytes(bytes(rng.getrandbits(8) for _ in range(2_000_000)))
    with pytest.raises(DataError) as err:
        load_local(d)
    assert len(err.value.problems) > 1000
    shown = str(err.value).splitlines()
    assert len(shown) == 1 + MAX_SHOWN_PROBLEMS + 1 and "more problem(s)" in shown[-1]
    assert max(len(x) for x in shown) <= 1010
    assert main(["validate-data", str(d), "--no-videos"]) == 1
    out = capsys.readouterr().err.splitlines()
    assert len(out) == 1 + MAX_SHOWN_PROBLEMS + 1 and f"{len(err.value.problems)} problem(s)" in out[0]
