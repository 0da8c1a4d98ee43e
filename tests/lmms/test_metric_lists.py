"""The task YAMLs' metric_list and docs/metrics.md's table are generated from the metric tables
(naru_eval/lmms/metric_lists.py), and every task reads exactly its table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tasks.naru.utils as utils
from naru_eval.cli.main import main
from naru_eval.lmms.metric_lists import HOOKS, stale, tables, task_yamls

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks" / "naru"
DOC = ROOT / "docs" / "metrics.md"


def test_the_committed_yamls_and_doc_are_generated_from_the_tables():
    """A metric added to, renamed in or removed from a table without regenerating fails here
    (``naru-eval metric-table --write tasks/naru --write docs/metrics.md``)."""
    assert stale([TASKS, DOC]) == []


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("naru_mcq", "mcq"),
        ("naru_mcq_500", "mcq"),
        ("naru_mcq_blind", "mcq"),
        ("naru_mcq_500_blind", "mcq"),
        ("naru_mcq_500_circular", "circular"),
        ("naru_open", "open"),
    ],
)
def test_every_task_reads_its_table_through_hooks_that_exist(task, kind):
    """lmms-eval's own loader (includes resolved) sees the table's metrics, in order, each with the
    hook its aggregation names, which tasks/naru/utils.py exports; and the task's version is the
    one that records the sampling and variant."""
    from lmms_eval.utils import load_yaml_config

    table = next(t for t in tables() if t.kind == kind)
    config = load_yaml_config(str(TASKS / f"{task}.yaml"), mode="simple")
    got = [(m["metric"], m["aggregation"].value, m["higher_is_better"]) for m in config["metric_list"]]
    want = [(m.name, f"utils.{HOOKS[(kind, m.aggregation)]}", m.higher_is_better) for m in table]
    assert got == want
    assert all(callable(getattr(utils, hook.removeprefix("utils."))) for _, hook, _ in got)
    assert config["metadata"]["version"] >= 3.0


def test_check_and_write(tmp_path, capsys):
    """``--check`` names a stale file and exits 1; ``--write`` regenerates it; a folder without the
    markers is an error naming the file."""
    folder = tmp_path / "naru"
    shutil.copytree(TASKS, folder)
    doc = tmp_path / "metrics.md"
    shutil.copy(DOC, doc)
    yaml = folder / "naru_open.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8").replace("metric: recall_with_partial", "metric: recall_2"))
    doc.write_text(doc.read_text(encoding="utf-8").replace("`circular`", "`circ`"))
    assert main(["metric-table", "--write", str(folder), "--write", str(doc), "--check"]) == 1
    out = capsys.readouterr().out
    assert str(yaml) in out and str(doc) in out and "_default_template_yaml" not in out
    assert main(["metric-table", "--write", str(folder), "--write", str(doc)]) == 0
    assert main(["metric-table", "--write", str(folder), "--write", str(doc), "--check"]) == 0
    assert yaml.read_text(encoding="utf-8") == (TASKS / "naru_open.yaml").read_text(encoding="utf-8")
    (folder / "_default_template_yaml").write_text("metric_list: []\n")
    assert main(["metric-table", "--write", str(folder)]) == 2
    assert "_default_template_yaml: no" in capsys.readouterr().err


def test_each_table_is_declared_in_one_yaml():
    assert sorted(t.kind for t in task_yamls().values()) == sorted(t.kind for t in tables())


def test_aggregation_stops_a_run_whose_every_question_failed(capsys):
    """The guard before lmms-eval writes results (issue 33): all failed, exit 1 and why; one
    answer, or an open-ended run with one judged answer, aggregates as before."""
    from naru_eval.lmms import tasks

    failed = {"method": "invalid:failed", "score": 0.0, "category": "N.1"}
    with pytest.raises(SystemExit) as stop:
        tasks.aggregate([failed, failed])
    assert stop.value.code == 1 and "every one of the run's 2 questions failed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tasks.aggregate_open_sum([{"status": "failed", "score": 0.0}])
    assert tasks.aggregate([failed, {"method": "explicit", "score": 100.0, "category": "N.1"}]) == 50.0
    assert tasks.aggregate_open_sum([{"status": "failed", "score": 0.0}, {"status": "scored", "score": 1.0}]) == 1.0
