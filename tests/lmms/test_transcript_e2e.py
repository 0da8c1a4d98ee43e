"""The done-when run: ``lmms-eval --model naru_qwen2_5_vl --model_args pretrained=DIR,transcript=SUBS
--tasks naru_mcq`` on a tiny checkpoint and synthetic dialogue subtitles (``dialogue_srt``). The run
completes with every sample's input mode ``video+transcript`` and its transcript record; the very
adapter, given the same docs, builds prompts in which every cue sits between the frames by its
time (checked line by line against the sampled frames' timestamps)."""

from __future__ import annotations

import json

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, dialogue_srt, make_dataset
from naru_eval.lmms.run import run_lmms_eval
from naru_eval.media.subtitles import read_subtitle_file
from tests.helpers.data import docs_of, read_jsonl
from tests.helpers.families import make
from tests.helpers.tiny_models import build_qwen2_5_vl
from tests.helpers.transcripts import check_interleaved

pytestmark = pytest.mark.slow


def test_qwen2_5_vl_with_subtitles_end_to_end(tmp_path):
    data = make_dataset(tmp_path / "data", SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=2, seconds=12.0))
    docs = docs_of(data)
    subs = tmp_path / "subs"
    subs.mkdir()
    for i, vid in enumerate(sorted({d["video_id"] for d in docs})):
        (subs / f"{vid}.srt").write_text(dialogue_srt(12.0, chars_per_s=6.0, seed=i), encoding="utf-8")
    ckpt = build_qwen2_5_vl(tmp_path / "ckpt")
    args = f"pretrained={ckpt},transcript={subs},num_frames=6,device=cpu,max_new_tokens=4"
    run = run_lmms_eval(
        "naru_qwen2_5_vl",
        args,
        ["naru_mcq"],
        tmp_path / "out",
        env={"NARU_DATA_DIR": str(data), "NARU_RESPONSE_STORE": str(tmp_path / "store.sqlite")},
        timeout=600,
    )
    assert run.ok, (run.stdout + run.stderr)[-6000:]
    samples = read_jsonl(run.sample_files["naru_mcq"])
    assert len(samples) == 9
    for s in samples:
        flat = json.dumps(s, ensure_ascii=False)
        assert '"input_mode": "video+transcript"' in flat and "file:" in flat and "interleaved" in flat

    # what the model received: the adapter of that run, on the same docs
    a = make("naru_qwen2_5_vl", ckpt, transcript=str(subs), num_frames=6)
    a.ensure_loaded()
    a.task_dict = {"naru_mcq": {"test": docs}}
    from tests.helpers.data import lmms_instances

    reqs = a.to_naru_requests(lmms_instances(docs, "naru_mcq", "test"))
    a.transcripts.check(reqs)
    tok = a.processor.tokenizer
    for r in reqs:
        sampled = a.sampled(r)
        inputs = a.builder.build_inputs(r, sampled)
        text = tok.decode(inputs["input_ids"][0])
        grid = inputs["video_grid_thw"]
        cues = read_subtitle_file(subs / f"{r.doc['video_id']}.srt").cues
        assert len(cues) >= 3
        slots = check_interleaved(
            text, cues, list(sampled.timestamps), 2, "<|video_pad|>", int(grid[0][1] * grid[0][2]) // 4
        )
        assert len(set(slots)) > 1  # the lines are spread between the frames, not lumped together
        assert text.index(r.prompt) > text.rindex("<|video_pad|>")
