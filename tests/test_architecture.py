"""The layering of naru_eval (docs/architecture.md), read off the source with ``ast``: which
layer may import which, which third-party packages a layer may never import, and no import cycle
between modules, counting imports inside functions too (so none can hide one)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import FORBIDDEN, LAYERS, cycles, import_graph, layer_of, violations

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_is_in_a_layer():
    graph = import_graph(ROOT)
    assert graph, "no modules found"
    assert [m for m in graph if layer_of(m) is None] == []


def test_layers_import_only_what_they_may():
    assert violations(import_graph(ROOT), ROOT) == []


def test_core_never_imports_lmms_eval_sdks_or_torch():
    graph = import_graph(ROOT)
    core = {m: deps for m, deps in graph.items() if layer_of(m) == "core"}
    assert core and all(not FORBIDDEN["core"] & {d.split(".")[0] for d in deps.third_party} for deps in core.values())


def test_no_import_cycle_between_modules():
    assert cycles(import_graph(ROOT)) == []


def test_the_rule_catches_what_it_forbids(tmp_path):
    """The checker itself: a core module importing torch, and a cycle, are both reported."""
    pkg = tmp_path / "naru_eval"
    (pkg / "core").mkdir(parents=True)
    (pkg / "report").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("import torch\n\ndef f():\n    from naru_eval.report import b\n")
    (pkg / "report" / "b.py").write_text("from naru_eval.core import a\n")
    graph = import_graph(tmp_path)
    found = violations(graph, tmp_path)
    assert any("torch" in v for v in found) and any("naru_eval.report" in v for v in found)
    assert cycles(graph) == [["naru_eval.core.a", "naru_eval.report.b"]]
    assert set(LAYERS) >= {"core", "media", "store", "api", "providers", "judge", "lmms", "report", "cli"}


def _imported_test_modules(path: Path) -> list[str]:
    """The ``tests.….test_*`` modules ``path`` imports (anywhere in the file)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found += [n for n in names if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")]
    return found


def test_no_test_imports_another_test_module(tmp_path):
    """Shared test code lives in tests/helpers/; a test file never imports another one."""
    bad = {str(p.relative_to(ROOT)): m for p in (ROOT / "tests").rglob("*.py") if (m := _imported_test_modules(p))}
    assert bad == {}
    probe = tmp_path / "test_probe.py"
    probe.write_text("def f():\n    from tests.model_adapters.test_families import make\n")
    assert _imported_test_modules(probe) == ["tests.model_adapters.test_families"]
