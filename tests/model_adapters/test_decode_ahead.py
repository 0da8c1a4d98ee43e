"""Decode-ahead through the adapter's own loop (issue 14): ``decode_workers=2`` gives the same
answers as decoding inline, every video's frames come from the worker pool through the frame
cache, and the shared prefix is built once per video."""

from __future__ import annotations

import contextlib

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.media import frame_cache
from tests.helpers.data import docs_of, lmms_instances
from tests.helpers.families import make


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    data = make_dataset(tmp_path_factory.mktemp("ahead"), SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=3))
    return docs_of(data)


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.delenv("NARU_FRAME_CACHE", raising=False)
    monkeypatch.setattr(frame_cache, "_DEFAULT", None)


def answers(model, docs):
    model.task_dict = {"naru_mcq": {"test": docs}}
    return model.generate_until(lmms_instances(docs, gen_kwargs={"max_new_tokens": 6, "temperature": 0}))


@pytest.mark.parametrize(
    "model_id,sampling",
    [("naru_qwen2_5_vl", {"num_frames": 4}), ("naru_qwen3_vl", {"fps": 1})],  # fps: qwen-vl-utils' plan
)
def test_decode_ahead_equals_inline(model_id, sampling, tiny_checkpoint, docs, fresh_cache):
    ckpt = tiny_checkpoint(model_id)
    inline = answers(make(model_id, ckpt, **sampling), docs)
    frame_cache._DEFAULT = None
    ahead = make(model_id, ckpt, **sampling, decode_workers=2, decode_budget_mb=64)
    got = answers(ahead, docs)
    stats = frame_cache.default_cache().stats
    videos = {d["video"] for d in docs}
    assert got == inline and len(got) == len(docs)
    assert stats.prefetched == len(videos) - 1 and stats.decodes == 1  # only the first decoded inline
    assert ahead.prefill_stats["prefix_prefills"] == len(videos)
    assert ahead._prefix is None  # released after the loop


def test_decode_workers_default_is_inline(tiny_checkpoint):
    a = make("naru_qwen2_5_vl", "x")
    assert a.decode_workers == 0
    assert isinstance(a.decode_ahead(["v.mp4"]), contextlib.nullcontext)
