"""A new family is one new module: copying a family file (InternVL3.5's) under a new class name and
id, with nothing else edited, registers it (lmms-eval finds it through its entry point), lists it
in the generated docs tables and passes every parametrized family test (``pytest tests/model_adapters
-k <new id>``: a tiny checkpoint of its ``model_type``, a real generate on a synthetic video, the
times its model is told): whatever a test knows of a family comes from its declaration. And each
family id is written in one product file only: its own module."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from naru_eval.adapters.registry import registered

ROOT = Path(__file__).resolve().parents[2]


#: the family module the test copies (the done-when of the structure issue names it)
COPIED = "internvl3_5"


def copied_family() -> tuple[str, Path]:
    """(id, file) of the family module the test copies."""
    (entry,) = [r for r in registered().values() if r.name == COPIED]
    return entry.id, entry.path


def copy_package(tmp_path: Path) -> tuple[str, Path]:
    """A copy of ``model_adapters/`` with one family copied under a new class and id."""
    model_id, path = copied_family()
    pkg = tmp_path / "model_adapters"
    shutil.copytree(ROOT / "model_adapters", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    entry = registered()[model_id]
    source = path.read_text(encoding="utf-8")
    new_id = f"{model_id}_copy"
    copied = re.sub(rf"\bclass {entry.cls}\b", f"class {entry.cls}Copy", source)
    copied = copied.replace(f'id="{model_id}"', f'id="{new_id}"')
    assert copied != source and f'id="{new_id}"' in copied
    (pkg / f"{path.stem}_copy.py").write_text(copied, encoding="utf-8")
    return new_id, pkg


def run(code: str, pkg_parent: Path, timeout: int = 300) -> str:
    """``code`` in a fresh interpreter that imports ``model_adapters`` from the copy."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pkg_parent), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd=pkg_parent
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


@pytest.mark.slow
def test_a_copied_family_module_is_a_registered_documented_tested_family(tmp_path):
    new_id, pkg = copy_package(tmp_path)
    # registered, and lmms-eval's registry (the installed entry point, model_adapters:manifests) finds it
    out = run(
        "import json\n"
        "from naru_eval.adapters.registry import registered, adapter_class\n"
        "from naru_eval.adapters.docs import markdown\n"
        "from lmms_eval.models import get_model\n"
        f"cls = get_model({new_id!r})\n"
        "print(json.dumps({'ids': list(registered()), 'lmms': cls.__module__ + '.' + cls.__name__,\n"
        f"  'own': adapter_class({new_id!r}).family.id, 'docs': markdown()}}))\n",
        tmp_path,
    )
    got = json.loads(out.strip().splitlines()[-1])
    assert new_id in got["ids"] and got["own"] == new_id
    assert got["lmms"].startswith("model_adapters.") and got["lmms"].endswith("Copy")
    assert got["lmms"].rpartition(".")[0] == f"model_adapters.{copied_family()[1].stem}_copy"
    assert f"`{new_id}`" in got["docs"]
    # every parametrized family test runs it, on a tiny checkpoint of its model_type, with a real
    # generate on a synthetic video (``append``: the copy, first on the path, is model_adapters)
    tests = [str(ROOT / "tests" / "model_adapters")]
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
            "-c", str(ROOT / "pyproject.toml"), "--import-mode=append", "-o", "pythonpath=", *tests,
            "-k", new_id, "-rA",
        ],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])},
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    passed = re.findall(rf"PASSED \S+::(\w+)\[{re.escape(new_id)}\]", log)
    assert not re.search(r"\b(FAILED|ERROR)\b", log), log[-3000:]
    assert {
        "test_processor_gets_exactly_the_sampled_frames",  # exactly the sampled frames reach its processor
        "test_blind_request_is_text_only",
        "test_frame_budgets",
        "test_shared_prefix_equals_per_question",  # greedy ids equal in both paths
        "test_first_step_logits_equal_at_long_video_geometry",
        "test_layout_in_provenance_and_run_key",
        "test_the_processor_gets_its_reference_pixels",
        "test_unreadable_video_fails_the_request_without_loading",
    } <= set(passed), log[-3000:]


#: the product tree: the library, the family modules, the task bridge and the scripts
PRODUCT = ["naru_eval", "model_adapters", "scripts", "tasks/naru/utils.py"]


def literals(path: Path) -> list[str]:
    """Every string literal of a Python file (docstrings and messages included), or every
    quoted or bare word of a data file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".sh", ".slurm", ".toml"):  # code, not the comments' usage examples
        text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if path.suffix != ".py":
        return re.findall(r"[\w.-]+", text)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING:
            out.append(tok.string.strip("\"'rbfRBF"))
    return out


def test_each_family_id_is_written_in_one_product_file():
    """The id is declared once (``family = Family(id=...)``); nothing else lists it: the registry,
    lmms-eval's manifest, the docs tables, the GPU check and the tests derive it."""
    files = [p for name in PRODUCT for p in ((ROOT / name).rglob("*") if (ROOT / name).is_dir() else [ROOT / name])]
    files = [
        p
        for p in files
        if p.is_file() and p.suffix in (".py", ".json", ".sh", ".slurm", ".toml") and "__pycache__" not in p.parts
    ]
    files.append(ROOT / "pyproject.toml")
    for model_id, entry in registered().items():
        holding = sorted(str(p.relative_to(ROOT)) for p in files if model_id in literals(p))
        assert holding == [str(entry.path.relative_to(ROOT))], (model_id, holding)
