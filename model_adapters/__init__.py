"""naru-eval's model adapters for lmms-eval: one module per model family.

Each module declares its family once (``family = Family(...)`` on its class,
``naru_eval.adapters.family``); the registry is derived from those declarations
(``naru_eval.adapters.registry``), and lmms-eval finds the adapters through the
``lmms_eval.models`` entry point, which calls :func:`manifests`: nothing is imported until a
model is actually requested. docs/extending.md says how to add a family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lmms_eval.models.registry_v2 import ModelManifest


def manifests() -> list[ModelManifest]:
    """The ``ModelManifest`` list lmms-eval's registry loads (derived from the family modules)."""
    from naru_eval.adapters.registry import manifests as derived

    return derived(__name__)
