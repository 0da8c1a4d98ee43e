"""Frames chosen for the question, in every transformers family, with an encoder that means
something (tests/helpers/colour_encoder.py: a hand-set SigLIP whose embeddings follow colour) on
a video that shows the question's colour only in three short segments.

``its`` and ``aks`` put frames in every segment; ``uniform`` (the official protocol) puts none
there and ``random`` (the control) fewer; the frames each family's processor gets are the chosen
ones, and the times its model is told are their true times (tests/helpers/times.py, by the
family's declared encoding). The pools are paid once and resumed; a question's frames are the same
in another process; another encoder or pool rate is another pool and another run key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from naru_eval.core import provenance
from tests.helpers.colour_encoder import TARGET_SEGMENTS, build_colour_encoder, colour_of, write_colour_video
from tests.helpers.families import ALL_FAMILIES, Spy, adapter_class, make, reasoning_off, request
from tests.helpers.times import assert_told_truly

N = 8
QUESTION = "When does the screen turn blue?"


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return build_colour_encoder(tmp_path_factory.mktemp("enc") / "colour-siglip")


@pytest.fixture(scope="module")
def colour_video(tmp_path_factory):
    return write_colour_video(tmp_path_factory.mktemp("colvid") / "v.mp4")


@pytest.fixture(autouse=True)
def _pool_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NARU_SELECT_CACHE", str(tmp_path / "pools"))


def ask(video, qid: str = "q1"):
    doc = {"question_id": qid, "video_id": "v", "question": QUESTION, "options": ["at 5 s", "b", "c", "d"]}
    return request(video, qid=qid)._replace(doc=doc)


def in_target(times) -> int:
    return sum(any(a <= float(t) < b for a, b in TARGET_SEGMENTS) for t in times)


def selecting(model_id, ckpt, encoder, select: str, **args):
    extra = {"select": select}
    if select in ("its", "aks"):
        extra["select_encoder"] = str(encoder)
    return make(model_id, ckpt, num_frames=N, **reasoning_off(model_id), **extra, **args)


@pytest.mark.parametrize("model_id", ALL_FAMILIES)
def test_the_colour_the_question_names_is_found_in_every_family(model_id, tiny_checkpoint, encoder, colour_video):
    """its and aks find the three blue segments, uniform and random do not; the processor gets
    exactly the chosen frames and the model is told their true times."""
    from naru_eval.adapters.hf.loading import REMOTE_CODE_CLASS

    remote = REMOTE_CODE_CLASS in adapter_class(model_id).family.checkpoints.values()
    ckpt = tiny_checkpoint(model_id)
    hits = {}
    for select in ("uniform", "random", "its", "aks"):
        a = (
            selecting(model_id, ckpt, encoder, select, shared_prefix="false")
            if select != "uniform"
            else make(model_id, ckpt, num_frames=N, **reasoning_off(model_id), shared_prefix="false")
        )
        r = ask(colour_video)
        sampled = a.frames(r)
        hits[select] = in_target(sampled.timestamps)
        if select not in ("its", "aks"):
            continue
        assert {next(k for k, (s, e) in enumerate(TARGET_SEGMENTS) if s <= t < e) for t in sampled.timestamps
                if in_target([t])} == {0, 1, 2}, (select, sampled.timestamps)  # fmt: skip
        assert [colour_of(f) for f in sampled.frames].count("blue") == hits[select]
        a.ensure_loaded()
        if remote:  # its own chat() gets the chosen frames, in order
            a.model.chat = chat = Spy(a.model.chat)
            a.respond(r)
            pil = [np.asarray(p) for p in chat.calls[0][1]["msgs"][0]["content"][:-1]]
            assert np.array_equal(np.stack(pil), sampled.frames)
            continue
        a.processor = Spy(a.processor)
        a.respond(r)
        (video,) = a.processor.calls[0][1]["videos"]
        assert np.array_equal(np.asarray(video), sampled.frames)  # exactly the chosen frames
        a.processor = a.processor._target
        given = a.builder.build_inputs(r, a.sampled(r))
        assert_told_truly(a, given, sampled.timestamps, fps=4.0)  # their true times, as the family tells them
    assert hits["uniform"] == 0 and hits["random"] < min(hits["its"], hits["aks"]), hits
    assert hits["its"] >= 6 and hits["aks"] >= 3, hits


def test_the_payloads_and_the_run_key_record_the_selection(tiny_checkpoint, encoder, colour_video):
    m = "naru_qwen3_vl"
    uniform = make(m, tiny_checkpoint(m), num_frames=N)
    its = selecting(m, tiny_checkpoint(m), encoder, "its")
    aks = selecting(m, tiny_checkpoint(m), encoder, "aks")
    r = ask(colour_video)
    assert "selection" not in uniform.describe() and "selection" not in uniform.provenance()
    assert its.describe()["selection"]["encoder_fingerprint"] == its.selector.encoder.fingerprint()
    keys = {a.request_key(r)[0] for a in (uniform, its, aks)}
    assert len(keys) == 3  # never served one another's answers
    fp = its.selector.encoder.fingerprint()
    assert its.provenance()["selection"] == f"its(pool_fps=1, encoder=colour-siglip@{fp[:8]}, query=question, alpha=3)"
    provenance.clear()
    chosen = its.frames(r)
    assert provenance.current("v", "q1")["frame_times"] == ",".join(f"{t:.3f}" for t in chosen.timestamps)
    other = selecting(m, tiny_checkpoint(m), encoder, "its", select_pool_fps="2")
    assert other.request_key(r)[0] != its.request_key(r)[0]  # another pool rate: another run


def test_a_pool_is_paid_once_and_resumed_after_a_kill(encoder, colour_video, tmp_path, monkeypatch):
    from naru_eval.select import pool as pool_mod
    from naru_eval.select.encoder import Encoder

    enc = Encoder(str(encoder), "cpu")
    calls = []
    real = enc.images
    monkeypatch.setattr(enc, "images", lambda frames: calls.append(len(frames)) or real(frames))
    monkeypatch.setattr(pool_mod, "CHUNK", 32)
    monkeypatch.setattr(pool_mod, "SAVE_EVERY", 1)
    root = tmp_path / "pools"

    class Killed(Exception):
        pass

    def kill_after_two(done, total):
        if done == 64:
            raise Killed

    with pytest.raises(Killed):
        pool_mod.build_pool(colour_video, enc, 1.0, root, progress=kill_after_two)
    assert calls == [32, 32]
    resumed = pool_mod.build_pool(colour_video, enc, 1.0, root)
    assert calls == [32, 32, 32, 24]  # only the frames not yet embedded
    again = pool_mod.build_pool(colour_video, enc, 1.0, root)
    assert calls == [32, 32, 32, 24] and again.build_s == 0.0  # read, not built
    fresh = pool_mod.build_pool(colour_video, Encoder(str(encoder), "cpu"), 1.0, tmp_path / "other")
    assert np.allclose(resumed.embeddings, fresh.embeddings) and np.array_equal(resumed.indices, fresh.indices)
    assert len(resumed.indices) == 120 and np.allclose(np.diff(resumed.times), 1.0)


def test_a_pool_entry_copied_beside_another_video_is_not_served(encoder, colour_video, tmp_path):
    import shutil

    from naru_eval.media.entries import NpzFolder
    from naru_eval.media.fingerprint import content_fingerprint
    from naru_eval.select import pool as pool_mod
    from naru_eval.select.encoder import Encoder

    enc = Encoder(str(encoder), "cpu")
    other = write_colour_video(tmp_path / "other.mp4", target="red")
    root = tmp_path / "pools"
    pool_mod.build_pool(colour_video, enc, 1.0, root)
    (entry,) = root.rglob("*.npz")
    target = NpzFolder(root).path(pool_mod.pool_key(content_fingerprint(other), enc.describe(), 1.0))
    assert target is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(entry, target)  # the first video's embeddings under the other's key
    got = pool_mod.build_pool(other, enc, 1.0, root)
    assert got.build_s > 0  # built for this video, not the copy served
    scores = got.embeddings @ enc.texts(["red"])[0]
    assert scores.max() > 0.99


def test_a_questions_frames_are_the_same_in_another_process(tiny_checkpoint, encoder, colour_video, tmp_path):
    """The same question's frames in this process and in a fresh one, its pools built apart: no
    global random state, no order of arrival (what accelerate's ranks rely on)."""
    ckpt = str(tiny_checkpoint("naru_qwen3_vl"))
    code = (
        "import json\n"
        "from tests.helpers.families import make\n"
        "from tests.select.test_selection import ask\n"
        f"its = make('naru_qwen3_vl', {ckpt!r}, num_frames=8, select='its', select_encoder={str(encoder)!r})\n"
        f"rnd = make('naru_qwen3_vl', {ckpt!r}, num_frames=8, select='random')\n"
        f"print(json.dumps([[int(i) for i in a.frames(ask({str(colour_video)!r})).indices] for a in (its, rnd)]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**os.environ, "NARU_SELECT_CACHE": str(tmp_path / "elsewhere")},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    there = json.loads(run.stdout.strip().splitlines()[-1])
    here = [
        [int(i) for i in selecting("naru_qwen3_vl", ckpt, encoder, s).frames(ask(colour_video)).indices]
        for s in ("its", "random")
    ]
    assert here == there and all(len(x) == N for x in here)


def test_a_pool_smaller_than_the_budget_stops_the_run_before_any_answer(tiny_checkpoint, encoder, colour_video):
    from naru_eval.select.selector import PoolTooSmall

    a = selecting("naru_qwen3_vl", tiny_checkpoint("naru_qwen3_vl"), encoder, "its", select_pool_fps="0.05")
    with pytest.raises(SystemExit):  # the user-error guard: the message, exit 2, no traceback
        a.prepare_selection([ask(colour_video)])
    with pytest.raises(PoolTooSmall, match=r"6 pool frames at 0.05 fps < 8"):
        a.selector.prepare({str(colour_video): 8})


def test_dialogue_takes_the_frames_where_the_lines_speak_of_the_question(
    tiny_checkpoint, encoder, colour_video, tmp_path
):
    """select=dialogue: the transcript's lines scored against the question by the encoder's text
    tower; the frames at the lines that name blue (said while blue is shown), the rest uniform."""
    subs = tmp_path / "subs"
    subs.mkdir()
    lines = [(10.0, 12.0, "the red one"), (26.0, 28.0, "now blue"), (61.0, 63.0, "blue again"), (89.0, 91.0, "blue")]
    srt = "".join(
        f"{k}\n00:{int(a // 60):02d}:{a % 60:06.3f} --> 00:{int(b // 60):02d}:{b % 60:06.3f}\n{t}\n\n".replace(".", ",")
        for k, (a, b, t) in enumerate(lines, 1)
    )
    (subs / "v.srt").write_text(srt, encoding="utf-8")
    m = "naru_qwen3_vl"
    a = make(m, tiny_checkpoint(m), num_frames=N, select="dialogue", select_encoder=str(encoder), transcript=str(subs))
    r = ask(colour_video)
    a.transcripts.check([r])
    times = [float(t) for t in a.frames(r).timestamps]
    for a_s, b_s, text in lines[1:]:  # a frame at each blue line
        assert any(a_s - 1 <= t <= b_s + 1 for t in times), (text, times)
    assert in_target(times) >= 3 and len(times) == N


def test_a_resumed_run_reuses_its_pools_and_its_answers(tiny_checkpoint, encoder, colour_video, tmp_path):
    """A second run of the same question: the pool read from the cache (no frame embedded again),
    the answer from the response store (no model call), the payload's frame times recalled."""
    from naru_eval.core import provenance
    from tests.helpers.data import lmms_instances

    m = "naru_qwen3_vl"
    store = tmp_path / "store.sqlite"
    doc = {"question_id": "q1", "video_id": "v", "question": QUESTION, "options": ["a", "b", "c", "d"]}
    doc |= {"video": str(colour_video)}

    def run() -> tuple[object, list[str]]:
        a = selecting(m, tiny_checkpoint(m), encoder, "its", store="true", response_store=str(store))
        a.task_dict = {"naru_mcq": {"test": [doc]}}
        reqs = lmms_instances([doc], "naru_mcq", "test")
        return a, a.generate_until(reqs)

    first, out1 = run()
    assert first.selector.pool(str(colour_video)).build_s > 0
    provenance.clear()
    again, out2 = run()
    assert out1 == out2 and again.reused == 1 and again.model is None  # answered from the store, nothing loaded
    assert first.generator.stats["questions"] == 1
    assert again.selector.pool(str(colour_video)).build_s == 0.0  # the pool read back, not embedded again
    times = provenance.current("v", "q1")["frame_times"]
    assert times == first.chosen_frames(first.to_naru_requests(lmms_instances([doc], "naru_mcq", "test"))[0]).record()


def test_another_encoders_weights_are_another_pool_and_another_run(encoder, tmp_path, colour_video):
    """The same architecture with one weight changed: another fingerprint, so another pool key
    and another run key (answers given with other frames are never reused)."""
    import shutil

    from safetensors.torch import load_file, save_file

    from naru_eval.select.encoder import Encoder
    from naru_eval.select.pool import pool_key

    other = tmp_path / "other-siglip"
    shutil.copytree(encoder, other)
    weights = load_file(str(other / "model.safetensors"))
    name = next(k for k in weights if k.endswith("probe"))
    weights[name] = weights[name] + 1.0
    save_file(weights, str(other / "model.safetensors"), metadata={"format": "pt"})
    a, b = Encoder(str(encoder), "cpu"), Encoder(str(other), "cpu")
    assert a.fingerprint() != b.fingerprint()
    assert pool_key("fp", a.describe(), 1.0) != pool_key("fp", b.describe(), 1.0)
