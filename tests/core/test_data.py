import json

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
    assert len(ds.fingerprint) == 16


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
