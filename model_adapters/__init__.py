"""naru-eval model adapters for lmms-eval: one small class per model family over NaruModel.

lmms-eval finds them through the ``lmms_eval.models`` entry point, which calls
:func:`manifests`; nothing is imported until a model is actually requested.
"""

from __future__ import annotations

from typing import Any

#: model id -> "module:Class" under model_adapters
ADAPTERS: dict[str, str] = {
    "naru_replay": "model_adapters.replay.NaruReplay",
    "naru_qwen2_5_vl": "model_adapters.qwen.Qwen2_5_VL",
    "naru_qwen3_vl": "model_adapters.qwen.Qwen3_VL",
    "naru_qwen3_5": "model_adapters.qwen.Qwen3_5",
    "naru_internvl3_5": "model_adapters.internvl.InternVL3_5",
    "naru_minicpm_o": "model_adapters.minicpm.MiniCPM_O",
    "naru_nemotron_omni": "model_adapters.nemotron.NemotronOmni",
    "naru_openai_compat": "model_adapters.openai_compat.OpenAICompat",
    "naru_gemini": "model_adapters.gemini.Gemini",
}


def manifests() -> list[Any]:
    """The ``ModelManifest`` list lmms-eval's registry loads (imported lazily, no model code)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id=name, simple_class_path=path) for name, path in ADAPTERS.items()]
