"""The code's budgets, counted by ``make lint`` (``python -m tests.helpers.code_budget``) and a test.

Over the product code (``naru_eval/``, ``model_adapters/``, ``tasks/naru/utils.py``):

- ``Any``: at most :data:`MAX_ANY_PER_1000` per 1,000 lines, by a plain word count (imports
  included: a module that needs no ``Any`` imports none);
- ``dict[str, Any]``: fewer than :data:`MAX_DICT_STR_ANY`, each at a true JSON boundary;
- no module over :data:`MAX_MODULE_LINES` lines;
- no class name defined twice (a Protocol that restates a concrete type is that type);
- ``NARU_*`` environment variables read only through ``naru_eval.settings`` (the redaction of key
  variables aside: ``naru_eval/redaction.py`` reads the key variables' values to hide them).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("naru_eval", "model_adapters", "tasks/naru/utils.py")
MAX_ANY_PER_1000 = 10.0
MAX_DICT_STR_ANY = 40
MAX_MODULE_LINES = 600
#: the modules that may read ``NARU_*`` variables themselves
ENVIRONMENT_READERS = ("naru_eval/settings.py", "naru_eval/redaction.py")


@dataclass(frozen=True)
class Budget:
    lines: int
    any_words: int
    dict_str_any: int
    big_modules: tuple[tuple[str, int], ...]
    twice: dict[str, tuple[str, ...]]
    environment: tuple[str, ...]

    @property
    def any_per_1000(self) -> float:
        return 1000.0 * self.any_words / max(1, self.lines)

    def problems(self) -> list[str]:
        out = []
        if self.any_per_1000 > MAX_ANY_PER_1000:
            out.append(f"Any: {self.any_per_1000:.1f} per 1,000 lines (limit {MAX_ANY_PER_1000:g})")
        if self.dict_str_any >= MAX_DICT_STR_ANY:
            out.append(f"dict[str, Any]: {self.dict_str_any} (limit: under {MAX_DICT_STR_ANY})")
        out += [f"{p}: {n} lines (limit {MAX_MODULE_LINES})" for p, n in self.big_modules]
        out += [f"class {name} is defined in {', '.join(where)}" for name, where in self.twice.items()]
        out += [
            f"{where}: reads a NARU_* variable itself (read it through naru_eval.settings)"
            for where in self.environment
        ]
        return out


def product_files(root: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for name in PRODUCT:
        p = root / name
        out += [p] if p.is_file() else sorted(q for q in p.rglob("*.py") if "__pycache__" not in q.parts)
    return out


def environment_reads(tree: ast.Module) -> list[int]:
    """Lines that read the environment (``os.environ[...]``, ``.get``, ``os.getenv``) where the
    module names a ``NARU_*`` variable (a string constant ``NARU_...``, docstrings aside)."""
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    names = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
        and re.fullmatch(r"NARU_[A-Z0-9_]+", n.value)
    ]  # fmt: skip
    if not names:
        return []
    reads = []
    for n in ast.walk(tree):
        environ = isinstance(n, ast.Attribute) and n.attr == "environ"
        getenv = isinstance(n, ast.Attribute) and n.attr == "getenv"
        if (environ or getenv) and isinstance(n.ctx, ast.Load):
            reads.append(n.lineno)
    return sorted(set(reads))


def count(root: Path = ROOT) -> Budget:
    lines = any_words = dict_any = 0
    big: list[tuple[str, int]] = []
    classes: dict[str, list[str]] = defaultdict(list)
    env: list[str] = []
    for path in product_files(root):
        rel = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        lines += n
        if n > MAX_MODULE_LINES:
            big.append((rel, n))
        any_words += len(re.findall(r"\bAny\b", text))
        dict_any += len(re.findall(r"\bdict\[str, Any\]", text))
        tree = ast.parse(text, rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes[node.name].append(rel)
        if rel not in ENVIRONMENT_READERS:
            env += [f"{rel}:{line}" for line in environment_reads(tree)]
    twice = {k: tuple(v) for k, v in sorted(classes.items()) if len(v) > 1}
    return Budget(lines, any_words, dict_any, tuple(big), twice, tuple(env))


def main() -> int:
    b = count()
    print(
        f"code budget: {b.lines} lines, Any {b.any_words} ({b.any_per_1000:.1f} per 1,000; limit "
        f"{MAX_ANY_PER_1000:g}), dict[str, Any] {b.dict_str_any} (limit under {MAX_DICT_STR_ANY}), "
        f"largest module limit {MAX_MODULE_LINES} lines"
    )
    problems = b.problems()
    for p in problems:
        print(f"  {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
