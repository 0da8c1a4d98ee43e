"""The adapter registry, derived from the family modules: no hand list.

Every module of the ``model_adapters`` package whose class declares ``family = Family(id=...)``
is an adapter. The registry reads the declarations from the modules' source (``ast``: standard
library only) instead of importing them, because importing an adapter imports lmms-eval's
``lmms`` base class, and with it torch and transformers: lmms-eval builds its model list
(:func:`manifests`) at start-up for every command, the GPU check runs on a node without the API
SDKs, and neither should pay for every family's imports. :func:`adapter_class` imports one
family's module when its class is needed, and checks that the class declares what its source
says (a test checks it for every family).

Adding a family is adding one module to ``model_adapters/`` (docs/extending.md). A module that
cannot be read (a syntax error, a half-written declaration) or two modules declaring one id are
:class:`Problem` s named by file and line (:func:`problems`); every other family stays available,
to lmms-eval (its model list warns and goes on) and to ``naru-eval adapters`` (which lists the
problems and exits 1).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lmms_eval.models.registry_v2 import ModelManifest

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


@dataclass(frozen=True)
class Problem:
    """A family module the registry cannot take: where and why, with what to do."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class RegistryError(ValueError):
    """Asked for a family the registry could not take (its module's problem is the message)."""


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _declared(tree: ast.Module) -> list[tuple[str, dict[str, ast.expr], int]]:
    """(class name, the keywords of its ``family = Family(...)``, its line) for each class that declares one."""
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
                out.append((node.name, {k.arg: k.value for k in value.keywords if k.arg}, stmt.lineno))
    return out


def package_dirs(package: str = PACKAGE) -> list[Path]:
    """Where the family modules are (the package's search locations; nothing is imported but the
    package's ``__init__``)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"no package {package!r}")
    return [Path(p) for p in spec.submodule_search_locations]


def _scan(package: str = PACKAGE) -> tuple[dict[str, Registered], list[Problem]]:
    """Every family of ``package`` by id, in module order, and the modules it cannot take: one that
    does not parse, a declaration whose id is not a string literal, and an id two modules declare
    (neither is taken: which one is meant is the user's to say)."""
    found: list[tuple[Registered, int]] = []
    problems: list[Problem] = []
    for info in sorted(pkgutil.iter_modules([str(p) for p in package_dirs(package)]), key=lambda m: m.name):
        if info.ispkg or info.name.startswith("_"):
            continue
        path = Path(info.module_finder.path) / f"{info.name}.py"  # type: ignore[union-attr]
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError) as e:
            line = getattr(e, "lineno", None) or 1
            what = getattr(e, "msg", None) or str(e)
            problems.append(Problem(path, int(line), f"cannot be read ({type(e).__name__}: {what}): fix or remove it"))
            continue
        for cls, keywords, line in _declared(tree):
            model_id = _literal(keywords.get("id"))
            if not isinstance(model_id, str):
                problems.append(
                    Problem(path, line, f"{cls}.family's id must be a string literal (the registry reads it)")
                )
                continue
            checkpoints = _literal(keywords.get("checkpoints"))
            checkpoints = dict(checkpoints) if isinstance(checkpoints, dict) else {}
            found.append((Registered(model_id, f"{package}.{info.name}", cls, path, checkpoints), line))
    by_id: dict[str, list[tuple[Registered, int]]] = {}
    for entry, line in found:
        by_id.setdefault(entry.id, []).append((entry, line))
    out: dict[str, Registered] = {}
    for model_id, entries in by_id.items():
        if len(entries) == 1:
            out[model_id] = entries[0][0]
            continue
        where = ", ".join(f"{r.path.name}:{line}" for r, line in entries)
        for r, line in entries:
            problems.append(
                Problem(
                    r.path,
                    line,
                    f"{r.cls} declares id={model_id!r}, as do {where}: give each family its own id "
                    "(a copied family file keeps its original's until you change it)",
                )
            )
    return out, problems


def registered(package: str = PACKAGE) -> dict[str, Registered]:
    """Every family of ``package`` the registry can take, by id, in module order (the others are
    :func:`problems`)."""
    return _scan(package)[0]


def problems(package: str = PACKAGE) -> list[Problem]:
    """The family modules of ``package`` the registry cannot take, each named by file and line."""
    return _scan(package)[1]


def id_of(name: str, package: str = PACKAGE) -> str:
    """The id the family module ``name`` (``replay``, ``qwen3_vl``) declares: for the code that
    runs one adapter by its module (the demo, the benchmarks), so the id stays written once."""
    ids = [r.id for r in registered(package).values() if r.name == name]
    if len(ids) != 1:
        raise KeyError(f"{package}.{name} declares {len(ids)} families")
    return ids[0]


def adapter_class(model_id: str, package: str = PACKAGE) -> type:
    """The adapter class of ``model_id`` (its module imported now), checked against its source."""
    families, bad = _scan(package)
    if model_id not in families:
        mine = [str(p) for p in bad if f"{model_id!r}" in p.message]
        if mine:
            raise RegistryError(f"adapter {model_id!r} cannot be used: " + "; ".join(mine))
        raise KeyError(f"no adapter {model_id!r}; registered: {', '.join(families)}")
    entry = families[model_id]
    cls: type = getattr(importlib.import_module(entry.module), entry.cls)
    declared = getattr(cls, "family", None)
    if getattr(declared, "id", None) != model_id:
        raise TypeError(
            f"{entry.class_path}.family.id is {getattr(declared, 'id', None)!r}, its source says {model_id!r}"
        )
    return cls


def manifests(package: str = PACKAGE) -> list[ModelManifest]:
    """The ``ModelManifest`` list lmms-eval's registry loads (lmms-eval's manifest class only: no
    adapter module is imported until its model is requested)."""
    from lmms_eval.models.registry_v2 import ModelManifest
    from loguru import logger

    families, bad = _scan(package)
    for p in bad:  # lmms-eval keeps every other family; the broken module is named, not hidden
        logger.warning(f"naru-eval: a model family module was skipped: {p}")
    return [ModelManifest(model_id=r.id, simple_class_path=r.class_path) for r in families.values()]
