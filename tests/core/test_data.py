import json
from pathlib import Path

import pytest

from naru_eval.core.data import CATEGORIES, DataError, NaruQuestion, load_dataset_from_env, load_hf, load_local
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


def test_a_videos_folder_linked_to_another_disk_is_the_users_set_up(copy_data, tmp_path):
    d = copy_data()
    (d / "videos").rename(tmp_path / "big_disk_videos")
    (d / "videos").symlink_to(tmp_path / "big_disk_videos")
    ds = load_local(d)
    assert len(ds.questions) == 36 and ds.video_file(ds.questions[0]).exists()


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
