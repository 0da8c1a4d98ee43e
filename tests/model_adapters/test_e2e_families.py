"""Each family through the real ``lmms-eval`` console script on a tiny checkpoint.

``lmms-eval --model naru_<family> --model_args pretrained=<tiny dir>,num_frames=4,device=cpu,
max_new_tokens=8 --tasks naru_mcq`` on 9 generated questions (one per category) over 2 videos. The answers are
nonsense (random weights; the Nemotron one is scripted, see tests/tiny_models.py); what is
tested is the path: the entry point finds the adapter, the
checkpoint loads through from_pretrained, every question is answered from 4 sampled frames, the
results file carries every metric and the sample log has 9 rows. lmms-eval imports the
*installed* package: run ``pip install --no-deps --no-build-isolation --force-reinstall .`` (or
``make test``) after changing an adapter.
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from naru_eval.adapters.request import FAILED_MARKER
from naru_eval.core.data import CATEGORIES
from naru_eval.core.scoring import METRICS
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from tests.helpers.data import read_jsonl
from tests.helpers.families import adapter_class
from tests.helpers.tiny_models import BUILDERS, SCRIPTED_ANSWERS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nine_questions(tmp_path_factory):
    # with a soundtrack: the omni families run with their defaults (Qwen-Omni: audio on)
    spec = SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=2, audio=True)
    return make_dataset(tmp_path_factory.mktemp("nine"), spec)


@pytest.mark.parametrize("model_id", sorted(BUILDERS))
def test_family_end_to_end(model_id, nine_questions, tmp_path):
    ckpt = BUILDERS[model_id](tmp_path / "ckpt")
    store = tmp_path / "responses.sqlite"
    run = run_lmms_eval(
        model_id,
        f"pretrained={ckpt},num_frames=4,device=cpu,max_new_tokens=8",
        ["naru_mcq"],
        tmp_path / "out",
        env={
            "NARU_DATA_DIR": str(nine_questions),
            "NARU_RESPONSE_STORE": str(store),
            "HF_MODULES_CACHE": str(tmp_path / "hf_modules"),  # the MiniCPM-o stand-in's remote code
        },
        timeout=300,
    )
    assert run.ok, (run.stdout + run.stderr)[-6000:]
    res = run.results()["results"]["naru_mcq"]
    for m in METRICS:
        assert isinstance(res[f"{m},none"], float), m
    samples = read_jsonl(run.sample_files["naru_mcq"])
    assert len(samples) == 9
    assert {s["overall"]["category"] for s in samples} == set(CATEGORIES)
    answers = [s["filtered_resps"] for s in samples]
    answers = [a[0] if isinstance(a, list) else a for a in answers]
    assert all(isinstance(a, str) and FAILED_MARKER not in a for a in answers), answers
    scripted = next(
        (SCRIPTED_ANSWERS[t] for t in adapter_class(model_id).family.checkpoints if t in SCRIPTED_ANSWERS), None
    )
    if scripted is not None:  # a known completion: the raw response, and the letter read from it
        pattern, letter = scripted
        raw = [s.get("resps", s["filtered_resps"]) for s in samples]
        while any(isinstance(r, list) for r in raw):
            raw = [r[0] if isinstance(r, list) else r for r in raw]
        assert all(re.fullmatch(pattern, r, flags=re.S) for r in raw), raw
        if letter is not None:  # read after the reasoning (lmms-eval's reasoning tags and our extractor agree)
            assert all((s["overall"]["pred"], s["overall"]["method"]) == (letter, "bare") for s in samples)
    # every answer went through the write-through store, with 4 frames each
    rows = sqlite3.connect(store).execute("SELECT status, usage FROM responses").fetchall()
    assert len(rows) == 9 and all(status == "ok" and '"frames": 4' in usage for status, usage in rows)
