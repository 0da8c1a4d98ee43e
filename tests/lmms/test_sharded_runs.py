"""``accelerate launch --multi_gpu --num_processes 2 -m lmms_eval`` on CPU, for each adapter kind:
the replay adapter, ``naru_openai_compat`` against the loopback stub, and a tiny Qwen2.5-VL.
Each gives, answer by answer, what one process gives; every question is answered once; the run
records its world size. A launch that would silently run one process is refused.

accelerate 1.15 runs several processes on a machine without two CUDA devices only with
``--multi_gpu`` (then over gloo); naru_eval/lmms/launch.py refuses the launch without it.
"""

from __future__ import annotations

import json
import socket
import sys
from collections import Counter
from pathlib import Path

import pytest

from naru_eval.core.synthetic import PAPER_COUNTS, SyntheticSpec, make_dataset
from naru_eval.lmms.run import LmmsRun, run_lmms_eval
from naru_eval.store.merge import merge_stores
from tests.helpers.data import read_jsonl
from tests.helpers.expected import make_predictions
from tests.helpers.stubs.openai_server import OpenAIStub, StubRequest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TASK = "naru_mcq"
FAKE_KEY = "sk-naru-sharded-SECRET"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accelerate(processes: int = 2, multi_gpu: bool = True) -> list[str]:
    """The launcher; its own rendezvous port, so parallel test runs on one machine do not meet."""
    return [
        str(BIN / "accelerate"), "launch", *(["--multi_gpu"] if multi_gpu else []),
        "--num_processes", str(processes), "--main_process_port", str(free_port()), "-m", "lmms_eval",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """18 questions over 5 videos (an odd split: one video's questions land on both ranks)."""
    return make_dataset(
        tmp_path_factory.mktemp("sharded"), SyntheticSpec(counts={c: 2 for c in PAPER_COUNTS}, n_videos=5, seed=11)
    )


def env_for(data: Path, store: Path | None = None, **extra: str) -> dict[str, str]:
    # one thread per process in both runs: the same float reductions, so the same greedy tokens
    env = {"NARU_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}
    if store is not None:
        env["NARU_RESPONSE_STORE"] = str(store)
    return env


def answers(run: LmmsRun) -> dict[str, str]:
    """question_id -> the model's raw answer, from the sample log; every question once."""
    assert run.ok, run.failure()
    rows = read_jsonl(run.sample_files[TASK])
    ids = Counter(r["overall"]["question_id"] for r in rows)
    assert ids and max(ids.values()) == 1, [q for q, n in ids.items() if n > 1]
    return {r["overall"]["question_id"]: json.dumps(r["filtered_resps"]) for r in rows}


def world_sizes(run: LmmsRun) -> set[int | None]:
    return {r["overall"].get("world_size") for r in read_jsonl(run.sample_files[TASK])}


def single_and_sharded(model: str, model_args: str, data: Path, tmp: Path, **env: dict[str, str]) -> tuple:
    one = run_lmms_eval(model, model_args, [TASK], tmp / "one", env=env["one"], timeout=600)
    two = run_lmms_eval(model, model_args, [TASK], tmp / "two", env=env["two"], timeout=600, launcher=accelerate())
    a, b = answers(one), answers(two)
    n = len(read_jsonl(data / "annotations.jsonl"))
    assert len(a) == len(b) == n
    assert b == a  # answer by answer
    assert world_sizes(one) == {1} and world_sizes(two) == {2}
    return one, two


def test_replay_sharded_over_two_processes(data, tmp_path):
    preds = tmp_path / "preds.jsonl"
    make_predictions(data / "annotations.jsonl", preds, seed=4)
    env = env_for(data)
    _, two = single_and_sharded("naru_replay", f"predictions={preds}", data, tmp_path, one=env, two=env)
    # the run's metadata: verify-run reads the world size from the payloads
    from naru_eval.cli.main import main

    assert main(["verify-run", str(two.results_file)]) == 0


def letter(req: StubRequest) -> str:
    return f"The answer is {'ABCD'[sum(req.text.encode()) % 4]}."


def test_openai_compat_sharded_over_two_processes_with_a_store_per_rank(data, tmp_path):
    with OpenAIStub(responder=letter) as stub:
        args = f"model=stub,base_url={stub.base_url},num_frames=4"
        one_env = env_for(data, tmp_path / "one.sqlite", OPENAI_API_KEY=FAKE_KEY)
        two_env = env_for(data, tmp_path / "two" / "responses.{rank}.sqlite", OPENAI_API_KEY=FAKE_KEY)
        single_and_sharded("naru_openai_compat", args, data, tmp_path, one=one_env, two=two_env)
        asked = Counter(r.text for r in stub.chat_requests())
    n = len(read_jsonl(data / "annotations.jsonl"))
    assert len(asked) == n and set(asked.values()) == {2}  # once per run, never by both ranks
    ranks = sorted((tmp_path / "two").glob("responses.*.sqlite"))
    assert [p.name for p in ranks] == ["responses.0.sqlite", "responses.1.sqlite"]
    report = merge_stores(ranks, tmp_path / "merged.sqlite")
    assert report.total == n and sum(report.read.values()) == n  # nothing lost, nothing twice


def test_tiny_hf_model_sharded_over_two_processes_on_cpu(data, tmp_path):
    from tests.helpers.tiny_models import build_qwen2_5_vl

    ckpt = build_qwen2_5_vl(tmp_path / "ckpt")
    args = f"pretrained={ckpt},device=cpu,num_frames=2,max_new_tokens=4"
    single_and_sharded(
        "naru_qwen2_5_vl", args, data, tmp_path,
        one=env_for(data, tmp_path / "one.sqlite"), two=env_for(data, tmp_path / "two.sqlite"),
    )  # fmt: skip


def test_a_launch_that_would_run_one_process_is_refused(data, tmp_path):
    """Without --multi_gpu, accelerate runs one process here: nothing is evaluated, and the error
    says the fix (lmms-eval exits 0 anyway, so the files tell)."""
    preds = tmp_path / "preds.jsonl"
    make_predictions(data / "annotations.jsonl", preds)
    run = run_lmms_eval(
        "naru_replay", f"predictions={preds}", [TASK], tmp_path / "out", env=env_for(data), timeout=600,
        launcher=accelerate(multi_gpu=False),
    )  # fmt: skip
    assert run.results_file is None
    text = run.stdout + run.stderr
    assert "asked for --num_processes 2 but started 1 process(es)" in text
    assert "accelerate launch --multi_gpu --num_processes 2" in text
