"""The layering of naru_eval (docs/architecture.md), read off the source with ``ast``: which
layer may import which, which third-party packages a layer may never import, and no import cycle
between modules, counting imports inside functions too (so none can hide one)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import FORBIDDEN, LAYERS, cycles, import_graph, layer_of, public_api, violations

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


def _plant(root: Path, files: dict[str, str]) -> None:
    """A package tree under ``root``: every folder gets an ``__init__.py``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        for folder in path.relative_to(root).parents:
            init = root / folder / "__init__.py"
            if str(folder) != "." and not init.exists():
                init.write_text("", encoding="utf-8")


def test_a_public_api_name_imported_from_the_package_is_followed(tmp_path):
    """``from naru_eval import build_leaderboard`` in core is an import of report: the lazy public
    API (``_PUBLIC`` of naru_eval/__init__.py) cannot hide a layer violation or a cycle."""
    _plant(
        tmp_path,
        {
            "naru_eval/__init__.py": '_PUBLIC: dict[str, str] = {"build_leaderboard": "naru_eval.report.lb"}\n',
            "naru_eval/core/a.py": "def f():\n    from naru_eval import build_leaderboard, __version__\n",
            "naru_eval/report/lb.py": "from naru_eval.core import a\n",
        },
    )
    graph = import_graph(tmp_path)
    assert "naru_eval.report.lb" in graph["naru_eval.core.a"].ours
    found = violations(graph, tmp_path)
    assert found == ["naru_eval.core.a:2 imports naru_eval.report.lb (core may not import report)"]
    assert cycles(graph) == [["naru_eval.core.a", "naru_eval.report.lb"]]
    # the real table is read too: every public name resolves to one of our modules
    assert public_api(ROOT) and all(m in import_graph(ROOT) for m in public_api(ROOT).values())


def test_report_may_not_import_model_adapters(tmp_path):
    """The report layer reads logs and stores; it never imports an adapter (budgets live in core)."""
    _plant(
        tmp_path,
        {
            "naru_eval/__init__.py": "",
            "naru_eval/report/x.py": "from model_adapters.budgets import default_sampling\n",
            "model_adapters/budgets.py": "",
        },
    )
    found = violations(import_graph(tmp_path), tmp_path)
    assert found == ["naru_eval.report.x:1 imports model_adapters.budgets (report may not import model_adapters)"]
    assert "model_adapters" not in LAYERS["report"]


def test_a_family_module_imports_no_other_family(tmp_path):
    """A family is one module: what two families share is the library's (naru_eval/adapters)."""
    root = tmp_path
    (root / "model_adapters").mkdir()
    (root / "model_adapters" / "__init__.py").write_text("")
    (root / "model_adapters" / "a.py").write_text("")
    (root / "model_adapters" / "b.py").write_text("from model_adapters.a import X\n")
    assert violations(import_graph(root), root) == [
        "model_adapters.b:1 imports model_adapters.a (a family module imports no other family)"
    ]


def test_the_openai_compatible_adapter_imports_no_transformers_machinery():
    """It follows the Qwen rule of the HF path (naru_eval/adapters/qwen_sampling.py), never an HF
    family or the transformers base."""
    deps = import_graph(ROOT)["model_adapters.openai_compat"].ours
    assert not [d for d in deps if d.startswith(("model_adapters.", "naru_eval.adapters.hf"))]
    assert "naru_eval.adapters.qwen_sampling" in deps


def test_the_code_budgets_hold():
    """``make lint``'s counts (tests/helpers/code_budget.py): Any per 1,000 lines, dict[str, Any],
    module sizes, one definition per class name, NARU_* read only through naru_eval.settings."""
    from tests.helpers.code_budget import count

    assert count().problems() == []
