"""The adapter registry, derived from the family modules: no hand list.

Every module of the ``model_adapters`` package whose class declares ``family = Family(id=...)``
is an adapter. The registry reads the declarations from the modules' source (``ast``: standard
library only) instead of importing them, because importing an adapter imports lmms-eval's
``lmms`` base class, and with it torch and transformers: lmms-eval builds its model list
(:func:`manifests`) at start-up for every command, the GPU check runs on a node without the API
SDKs, and neither should pay for every family's imports. :func:`adapter_class` imports one
family's module when its class is needed, and checks that the class declares what its source
says (a test checks it for every family).

Adding a family is adding one module to ``model_adapters/`` (docs/extending.md).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the package whose modules are the families (lmms-eval's entry point is its ``manifests``)
PACKAGE = "model_adapters"


@dataclass(frozen=True)
class Registered:
    """One family as its module declares it: the id, the module and the class, and the literal
    ``checkpoints`` map (``model_type`` -> transformers class; empty for an API adapter)."""

    id: str
    module: str
    cls: str
    path: Path
    checkpoints: dict[str, str]

    @property
    def class_path(self) -> str:
        """``module.Class``, as lmms-eval's ``ModelManifest`` takes it."""
        return f"{self.module}.{self.cls}"

    @property
    def name(self) -> str:
        """The module's own name (``qwen3_vl``): the GPU check's configs are named after it."""
        return self.module.rpartition(".")[2]


def _literal(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _declared(tree: ast.Module) -> list[tuple[str, dict[str, ast.expr]]]:
    """(class name, the keywords of its ``family = Family(...)``) for each class that declares one."""
    out = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if isinstance(stmt, ast.AnnAssign):
                target = stmt.target
            value = getattr(stmt, "value", None)
            if not (isinstance(target, ast.Name) and target.id == "family" and isinstance(value, ast.Call)):
                continue
            func = value.func
            if (isinstance(func, ast.Name) and func.id == "Family") or (
                isinstance(func, ast.Attribute) and func.attr == "Family"
            ):
                out.append((node.name, {k.arg: k.value for k in value.keywords if k.arg}))
    return out


def package_dirs(package: str = PACKAGE) -> list[Path]:
    """Where the family modules are (the package's search locations; nothing is imported but the
    package's ``__init__``)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"no package {package!r}")
    return [Path(p) for p in spec.submodule_search_locations]


def registered(package: str = PACKAGE) -> dict[str, Registered]:
    """Every family of ``package``, by id, in module order; two modules declaring one id is an error."""
    out: dict[str, Registered] = {}
    for info in sorted(pkgutil.iter_modules([str(p) for p in package_dirs(package)]), key=lambda m: m.name):
        if info.ispkg or info.name.startswith("_"):
            continue
        path = Path(info.module_finder.path) / f"{info.name}.py"  # type: ignore[union-attr]
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for cls, keywords in _declared(tree):
            model_id = _literal(keywords.get("id"))
            if not isinstance(model_id, str):
                raise ValueError(f"{path}: {cls}.family's id must be a string literal (the registry reads it)")
            if model_id in out:
                raise ValueError(f"{path}: {cls} declares {model_id!r}, already declared by {out[model_id].class_path}")
            checkpoints = _literal(keywords.get("checkpoints")) or {}
            out[model_id] = Registered(model_id, f"{package}.{info.name}", cls, path, dict(checkpoints))
    return out


def id_of(name: str, package: str = PACKAGE) -> str:
    """The id the family module ``name`` (``replay``, ``qwen3_vl``) declares: for the code that
    runs one adapter by its module (the demo, the benchmarks), so the id stays written once."""
    ids = [r.id for r in registered(package).values() if r.name == name]
    if len(ids) != 1:
        raise KeyError(f"{package}.{name} declares {len(ids)} families")
    return ids[0]


def adapter_class(model_id: str, package: str = PACKAGE) -> type:
    """The adapter class of ``model_id`` (its module imported now), checked against its source."""
    families = registered(package)
    if model_id not in families:
        raise KeyError(f"no adapter {model_id!r}; registered: {', '.join(families)}")
    entry = families[model_id]
    cls: type = getattr(importlib.import_module(entry.module), entry.cls)
    declared = getattr(cls, "family", None)
    if getattr(declared, "id", None) != model_id:
        raise TypeError(
            f"{entry.class_path}.family.id is {getattr(declared, 'id', None)!r}, its source says {model_id!r}"
        )
    return cls


def manifests(package: str = PACKAGE) -> list[Any]:
    """The ``ModelManifest`` list lmms-eval's registry loads (lmms-eval's manifest class only: no
    adapter module is imported until its model is requested)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id=r.id, simple_class_path=r.class_path) for r in registered(package).values()]
