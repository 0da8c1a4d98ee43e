"""naru-eval model adapters for lmms-eval: one small class per model family over NaruModel.

lmms-eval finds them through the ``lmms_eval.models`` entry point, which calls
:func:`manifests`; nothing is imported until a model is actually requested.
"""

from __future__ import annotations

from typing import Any

#: model id -> "module:Class" under model_adapters
ADAPTERS: dict[str, str] = {
    "naru_replay": "model_adapters.replay.NaruReplay",
}


def manifests() -> list[Any]:
    """The ``ModelManifest`` list lmms-eval's registry loads (imported lazily, no model code)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id=name, simple_class_path=path) for name, path in ADAPTERS.items()]
