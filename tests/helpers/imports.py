"""The import rule of docs/architecture.md as data, and an ``ast`` reader of every import in
naru_eval/, model_adapters/ and tasks/naru/utils.py (used by tests/test_architecture.py and
``make lint`` through ``python -m tests.helpers.imports``)."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: layer -> the layers it may import (besides itself); the bottom first
LAYERS: dict[str, frozenset[str]] = {
    "root": frozenset(),  # naru_eval/__init__.py: __version__; the public API is imported lazily
    "data_files": frozenset(),
    "media": frozenset(),
    "core": frozenset({"media"}),
    "store": frozenset({"core"}),
    "api": frozenset({"core", "store"}),
    "adapters": frozenset({"core", "media", "store", "api", "select"}),
    "providers": frozenset({"core", "media", "store", "api", "adapters", "select"}),
    "judge": frozenset({"core", "store", "api"}),
    # naru-eval transcribe's Whisper: below the CLI only, so no evaluation run loads it
    "asr": frozenset({"core", "media"}),
    # frames chosen for the question (select=): the encoder and the candidate pools, below the adapters
    "select": frozenset({"core", "media"}),
    "model_adapters": frozenset({"core", "media", "store", "api", "adapters", "providers", "select"}),
    "lmms": frozenset({"core", "media", "store", "api", "judge"}),
    "report": frozenset({"core", "media", "store", "api", "judge"}),
    "cli": frozenset(
        {
            "core",
            "media",
            "store",
            "api",
            "adapters",
            "providers",
            "judge",
            "lmms",
            "report",
            "model_adapters",
            "asr",
            "select",
        }
    ),
    "tasks": frozenset({"lmms"}),
}
#: the public API of naru_eval/__init__.py names modules of every layer, imported on first use
LAYERS["root"] = frozenset(LAYERS) - {"root", "tasks"}
#: naru_eval/settings.py (every NARU_* variable) sits below everything: it imports nothing of ours;
#: naru_eval/redaction.py (keys out of every error text) beside it, for every layer too
LAYERS = {name: allowed | {"settings", "redaction"} for name, allowed in LAYERS.items()}
LAYERS["settings"] = frozenset()
LAYERS["redaction"] = frozenset()

_SDKS = frozenset({"lmms_eval", "openai", "google", "torch", "torchvision", "transformers", "qwen_vl_utils"})
#: third-party top-level packages a layer never imports
FORBIDDEN: dict[str, frozenset[str]] = {
    "settings": _SDKS,
    "redaction": _SDKS,
    "core": _SDKS,
    "media": frozenset({"lmms_eval", "openai", "google", "transformers"}),
    "store": _SDKS,
    "api": frozenset({"lmms_eval", "torch", "transformers"}),
    # the adapters' machinery: the API SDKs are the providers' and the api layer's
    "adapters": frozenset({"openai", "google"}),
    # the providers import the adapters' args and types, never lmms-eval itself
    "providers": frozenset({"lmms_eval"}),
    "judge": frozenset({"lmms_eval", "torch", "transformers", "google"}),
    "report": frozenset({"openai", "google", "torch", "transformers"}),
    "asr": frozenset({"lmms_eval", "openai", "google"}),
    "select": frozenset({"lmms_eval", "openai", "google"}),
}


@dataclass
class Deps:
    """One module's imports: ours (module names) and third-party top-level packages, with lines."""

    ours: dict[str, int] = field(default_factory=dict)
    third_party: dict[str, int] = field(default_factory=dict)


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _sources(root: Path) -> list[Path]:
    files = sorted((root / "naru_eval").rglob("*.py"))
    files += sorted((root / "model_adapters").rglob("*.py")) if (root / "model_adapters").is_dir() else []
    utils = root / "tasks" / "naru" / "utils.py"
    return files + ([utils] if utils.is_file() else [])


def public_api(root: Path) -> dict[str, str]:
    """``naru_eval/__init__.py``'s ``_PUBLIC`` table (public name -> defining module), read with
    ``ast``: ``from naru_eval import build_leaderboard`` inside the package is an import of
    ``naru_eval.report.leaderboard``, and is checked as one."""
    init = root / "naru_eval" / "__init__.py"
    if not init.is_file():
        return {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"), str(init))):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "_PUBLIC" and isinstance(value, ast.Dict):
            return {
                k.value: v.value
                for k, v in zip(value.keys, value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
    return {}


def import_graph(root: Path) -> dict[str, Deps]:
    """Every import (module level, inside functions, under TYPE_CHECKING) of each module; a name
    of the lazy public API (``from naru_eval import X``) counts as an import of its module."""
    modules = {_module_name(p, root): p for p in _sources(root)}
    ours = set(modules)
    public = public_api(root)
    graph: dict[str, Deps] = {}
    for name, path in modules.items():
        deps = Deps()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
                if base == "naru_eval" and name != "naru_eval":
                    # the lazy public API: resolve each name to the module that defines it
                    targets = [public.get(a.name, f"{base}.{a.name}") for a in node.names]
            for t in targets:
                top = t.split(".")[0]
                if top in ("naru_eval", "model_adapters"):
                    # the longest prefix that is one of our modules
                    parts = t.split(".")
                    for i in range(len(parts), 0, -1):
                        cand = ".".join(parts[:i])
                        if cand in ours:
                            if cand != name and not name.startswith(cand + "."):
                                deps.ours.setdefault(cand, node.lineno)
                            break
                elif top and top not in sys.stdlib_module_names and top != "__future__":
                    deps.third_party.setdefault(top, node.lineno)
        graph[name] = deps
    return graph


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "model_adapters":
        return "model_adapters"
    if parts[0] == "tasks":
        return "tasks"
    if parts == ["naru_eval"]:
        return "root"
    if parts[0] == "naru_eval" and parts[1] in LAYERS:
        return parts[1]
    return None


def violations(graph: dict[str, Deps], root: Path) -> list[str]:
    """``module:line imports X`` for each import the rule forbids."""
    out = []
    for name, deps in graph.items():
        layer = layer_of(name)
        if layer is None:
            continue
        for dep, line in deps.ours.items():
            dl = layer_of(dep)
            if dl is not None and dl != layer and dl not in LAYERS[layer] and dl != "root":
                out.append(f"{name}:{line} imports {dep} ({layer} may not import {dl})")
            if layer == dl == "model_adapters" and dep != "model_adapters":
                # a family is one module: what two families share is the library's (naru_eval.adapters)
                out.append(f"{name}:{line} imports {dep} (a family module imports no other family)")
        for top, line in deps.third_party.items():
            if top in FORBIDDEN.get(layer, frozenset()):
                out.append(f"{name}:{line} imports {top} ({layer} never imports {top})")
    return sorted(out)


def cycles(graph: dict[str, Deps]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    edges = {m: [d for d in deps.ours if d in graph] for m, deps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in edges:
        if v not in index:
            visit(v)
    return sorted(found)


def main() -> int:
    root = Path.cwd()
    graph = import_graph(root)
    problems = violations(graph, root) + [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    problems += [f"{m}: in no layer" for m in graph if layer_of(m) is None]
    for p in problems:
        print(p, file=sys.stderr)
    print(f"import rule: {len(graph)} modules, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
