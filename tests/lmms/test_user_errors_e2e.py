"""A user's mistake through the real ``lmms-eval``: one clear message and exit status 2, no
traceback and no ``RetryError[<Future … raised ValueError>]`` (lmms-eval retries a failing
dataset load five times, prints a traceback for any error and then exits 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.lmms.run import run_lmms_eval
from tests.helpers.data import write_jsonl

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, env: dict[str, str], predictions: Path) -> tuple[int, str]:
    run = run_lmms_eval(
        "naru_replay",
        f"predictions={predictions}",
        ["naru_mcq"],
        tmp_path / "out",
        env={"PYTHONPATH": str(ROOT), "NARU_CACHE_DIR": str(tmp_path / "cache"), **env},
        timeout=240,
    )
    return run.returncode, run.stdout + run.stderr


def test_bad_settings_data_and_predictions_stop_lmms_eval_with_one_message(small_data, tmp_path):
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"question_id": "q00000", "response": "A"}])
    bad_settings = {"NARU_DATA_DIR": str(small_data), "NARU_SKIP_VIDEO_CHECK": "maybe", "NARU_RESPONSE_STOR": "x"}
    cases = [
        # the adapter's constructor reads the settings first: every bad one in one message
        (bad_settings, preds, "NARU_SKIP_VIDEO_CHECK='maybe'"),
        (bad_settings, preds, "did you mean NARU_RESPONSE_STORE?"),
        # the task's dataset load (the preflight)
        ({"NARU_HF_DATASET": str(tmp_path / "nowhere")}, preds, f"NARU_HF_DATASET={str(tmp_path / 'nowhere')!r}"),
    ]
    bad_utf8 = tmp_path / "bad.jsonl"
    bad_utf8.write_bytes(b'{"question_id": "q00000", "response": "A"}\n{"question_id": "q1", "response": "\xff"}\n')
    cases += [
        ({"NARU_DATA_DIR": str(small_data)}, bad_utf8, f"{bad_utf8}:2: not valid UTF-8"),
        ({"NARU_DATA_DIR": str(small_data)}, tmp_path, f"predictions {tmp_path} is a folder"),
    ]
    runs: dict[tuple[str, str], tuple[int, str]] = {}
    for env, predictions, needle in cases:
        key = (repr(sorted(env.items())), str(predictions))
        if key not in runs:
            runs[key] = _run(tmp_path, env, predictions)
        code, text = runs[key]
        assert code == 2, (env, text[-3000:])
        assert needle in text, (needle, text[-3000:])
        assert "Traceback" not in text and "RetryError" not in text, text[-3000:]
