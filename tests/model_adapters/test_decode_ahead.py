"""Decode-ahead through the adapter's own loop: ``decode_workers=2`` gives the same
answers as decoding inline, every video's frames come from the worker pool through the frame
cache, and the shared prefix is built once per video. Issue 17: the processor of every video but
the first runs ahead, in the processor thread, so the model waits for neither."""

from __future__ import annotations

import contextlib
import threading

import pytest

from naru_eval.core.data import CATEGORIES
from naru_eval.core.synthetic import SyntheticSpec, make_dataset
from naru_eval.media import frame_cache
from tests.helpers.data import lmms_instances
from tests.helpers.families import make


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """9 questions over 3 short videos (the ``docs`` fixture of conftest.py reads them)."""
    return make_dataset(tmp_path_factory.mktemp("ahead"), SyntheticSpec(counts={c: 1 for c in CATEGORIES}, n_videos=3))


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
    ahead.ensure_loaded()
    threads: list[str] = []
    run_processor = ahead.builder.processor_inputs

    def record(*args, **kw):
        threads.append(threading.current_thread().name)
        return run_processor(*args, **kw)

    ahead.builder.processor_inputs = record
    got = answers(ahead, docs)
    stats = frame_cache.default_cache().stats
    videos = {d["video"] for d in docs}
    assert got == inline and len(got) == len(docs)
    assert stats.prefetched == len(videos) - 1 and stats.decodes == 1  # only the first decoded inline
    assert ahead.generator.stats["prefix_prefills"] == len(videos)
    assert ahead.generator.prefix is None and ahead.generator.ahead is None  # released after the loop
    # the first video's processor ran in the model's thread, every other one ahead in the processor's
    assert ahead.generator.stats["processor_ahead"] == len(videos) - 1
    assert threads[0] == threading.current_thread().name and len(threads) == len(videos)
    assert all(t.startswith(f"{model_id}-processor") for t in threads[1:])


def test_processor_ahead_off_runs_it_inline(tiny_checkpoint, docs, fresh_cache):
    a = make("naru_qwen2_5_vl", tiny_checkpoint("naru_qwen2_5_vl"), num_frames=4, decode_workers=2)
    a.generator.processor_ahead = False
    answers(a, docs)
    assert a.generator.stats["processor_ahead"] == 0 and a.generator.stats["prefix_prefills"] == len(
        {d["video"] for d in docs}
    )


def test_decode_workers_default_is_inline(tiny_checkpoint):
    a = make("naru_qwen2_5_vl", "x")
    assert a.decode_workers == 0
    assert isinstance(a.decode_ahead(["v.mp4"]), contextlib.nullcontext)
