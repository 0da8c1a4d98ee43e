"""naru_eval/lmms/launch.py: an ``accelerate launch`` that would run, or ran, fewer processes
than its ``--num_processes`` is refused with the fix; the tasks' payloads record the world size."""

from __future__ import annotations

import pytest

from naru_eval.core.data import NaruQuestion
from naru_eval.core.doc import to_doc
from naru_eval.lmms import tasks
from naru_eval.lmms.launch import LaunchError, check_launch, launch_problem, parse_accelerate

ACC = "/venv/bin/accelerate launch"


@pytest.fixture(autouse=True)
def _no_accelerate_config(monkeypatch, tmp_path):
    """accelerate's default config file (none here) would change how the count is decided."""
    import accelerate.commands.config as config

    monkeypatch.setattr(config, "default_config_file", str(tmp_path / "none.yaml"))


@pytest.mark.parametrize(
    "launcher, gpus, silent",
    [
        (f"{ACC} --num_processes 2 -m lmms_eval", 0, True),  # CPU node: one process
        (f"{ACC} --num_processes 4 -m lmms_eval", 1, True),  # one GPU: one process
        (f"{ACC} --num-processes=4 --mixed_precision bf16 -m lmms_eval", 1, True),
        (f"{ACC} --cpu --num_processes 2 -m lmms_eval", 8, True),  # --cpu: always one
        (f"{ACC} --num_processes 4 -m lmms_eval", 4, False),  # accelerate enables multi-GPU itself
        (f"{ACC} --multi_gpu --num_processes 2 -m lmms_eval", 0, False),
        (f"{ACC} --num_processes 1 -m lmms_eval", 0, False),
        ("lmms-eval --model naru_replay", 0, False),
        ("python -m accelerate.commands.launch --num_processes 2 -m lmms_eval", 0, True),
    ],
)
def test_launch_problem(launcher, gpus, silent):
    problem = launch_problem(launcher.split(), gpus)
    assert (problem is not None) == silent, problem
    if silent:
        assert "--multi_gpu --num_processes" in problem


def test_the_options_after_the_program_are_the_programs():
    launch = parse_accelerate(f"{ACC} --multi_gpu -m lmms_eval --num_processes 9".split())
    assert launch is not None and launch.num_processes is None and launch.multi


def test_a_process_started_by_a_short_launch_refuses_to_run():
    parent = f"/venv/bin/python {ACC} --num_processes 2 -m lmms_eval --model naru_replay".split()
    with pytest.raises(LaunchError, match=r"asked for --num_processes 2 but started 1 process\(es\)") as e:
        check_launch(parent, world_size=1)
    assert "accelerate launch --multi_gpu --num_processes 2" in str(e.value)
    check_launch(parent, world_size=2)  # the launch got what it asked for
    check_launch("/venv/bin/python /venv/bin/lmms-eval --model x".split(), world_size=1)  # no accelerate
    check_launch([], world_size=1)  # no parent command line to read


def test_payloads_record_the_world_size(monkeypatch):
    q = NaruQuestion(
        question_id="q1", video_id="v1", category="N.1", question="?", options=("a", "b", "c", "d"), answer="A"
    )
    doc = to_doc(q, video=None, data_fingerprint="fp")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert {p["world_size"] for p in tasks.process_results(doc, ["A"]).values()} == {1}
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert {p["world_size"] for p in tasks.process_results(doc, ["A"]).values()} == {4}
