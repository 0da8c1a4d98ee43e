"""Every adapter declares its ``--model_args`` as a typed model (``cls.Args``, its family's
``args``, extra="forbid"): each field is described, an unknown arg is refused listing that
adapter's own fields, and docs/adapters.md's tables are the ones generated from the families."""

from __future__ import annotations

from pathlib import Path

import pytest

from naru_eval.adapters.args import AdapterArgs
from naru_eval.adapters.docs import with_tables
from naru_eval.adapters.registry import adapter_class as _adapter
from naru_eval.adapters.registry import registered

ADAPTER_IDS = list(registered())


@pytest.mark.parametrize("model_id", ADAPTER_IDS)
def test_every_adapter_has_a_typed_args_model_with_described_fields(model_id):
    args = _adapter(model_id).Args
    assert issubclass(args, AdapterArgs) and args.model_config.get("extra") == "forbid"
    undocumented = [n for n, f in args.model_fields.items() if not f.description]
    assert undocumented == []


@pytest.mark.parametrize("model_id", ADAPTER_IDS)
def test_an_unknown_arg_is_refused_listing_the_adapters_own_fields(model_id):
    cls = _adapter(model_id)
    with pytest.raises(ValueError) as e:
        cls(bogus_arg="1")
    msg = str(e.value)
    assert msg.startswith(f"{model_id}: unknown model_args ['bogus_arg']")
    missing = [n for n in cls.Args.model_fields if n not in msg]
    assert missing == []


@pytest.mark.parametrize(
    "model_id,field",
    [
        ("naru_qwen3_vl", "min_frames"),
        ("naru_minicpm_o", "max_slice_nums"),
        ("naru_nemotron_omni", "video_pruning_rate"),
        ("naru_qwen3_5", "enable_thinking"),
    ],
)
def test_a_familys_own_arg_is_a_field_of_its_args_not_of_another_family(model_id, field):
    """The family's args are its own: Qwen's ``min_frames`` is refused by InternVL."""
    assert field in _adapter(model_id).Args.model_fields
    with pytest.raises(ValueError, match=rf"naru_internvl3_5: unknown model_args \['{field}'\]"):
        _adapter("naru_internvl3_5")(pretrained="x", **{field: "1"})


def test_family_args_are_typed_with_the_old_defaults():
    qwen = _adapter("naru_qwen3_5")(pretrained="x", store="false", min_frames="8")
    assert (qwen.min_frames, qwen.builder.template_kwargs) == (8, {"enable_thinking": False})
    cpm = _adapter("naru_minicpm_o")(pretrained="x", store="false", use_image_id="yes").args
    assert (cpm.max_slice_nums, cpm.use_image_id, cpm.native_decoding, cpm.trust_remote_code) == (2, True, False, True)
    nem = _adapter("naru_nemotron_omni")(pretrained="x", store="false", video_pruning_rate="0.25")
    assert (nem.builder.thinking, nem.args.video_pruning_rate, nem.max_pixels) == (True, 0.25, 512 * 512)
    with pytest.raises(ValueError, match=r"naru_nemotron_omni: video_pruning_rate='1\.5': must be in \[0, 1\)"):
        _adapter("naru_nemotron_omni")(pretrained="x", video_pruning_rate="1.5")
    with pytest.raises(ValueError, match=r"naru_minicpm_o: max_slice_nums='two'"):
        _adapter("naru_minicpm_o")(pretrained="x", max_slice_nums="two")


@pytest.mark.parametrize("name", ["adapters.md", "extending.md"])
def test_the_docs_tables_are_the_generated_ones(name):
    doc = Path(__file__).resolve().parents[2] / "docs" / name
    text = doc.read_text(encoding="utf-8")
    assert with_tables(text) == text, f"refresh docs/{name}: naru-eval adapters --write docs/{name}"
