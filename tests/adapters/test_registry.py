"""The adapter registry is derived from the family modules (naru_eval/adapters/registry.py): what
it reads off their source is what their classes declare, lmms-eval's manifest lists every family
without importing one (nor torch), and two modules cannot declare one id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from naru_eval.adapters.base import NaruModel
from naru_eval.adapters.family import Family
from naru_eval.adapters.registry import adapter_class, id_of, registered

ROOT = Path(__file__).resolve().parents[2]


def test_the_source_reading_is_what_the_classes_declare():
    families = registered()
    assert families, "no family found"
    for model_id, entry in families.items():
        cls = adapter_class(model_id)
        assert issubclass(cls, NaruModel) and isinstance(cls.family, Family)
        assert cls.model_id == cls.family.id == model_id and cls.Args is cls.family.args
        assert dict(cls.family.checkpoints) == entry.checkpoints
        assert entry.path.samefile(str(sys.modules[entry.module].__file__))
        assert id_of(entry.name) == model_id


def test_every_module_of_the_package_declares_one_family():
    """A module in model_adapters/ that declares no family would be a hand-listed helper: the
    library (naru_eval/adapters, naru_eval/providers) holds those."""
    modules = sorted(p.stem for p in (ROOT / "model_adapters").glob("*.py") if p.stem != "__init__")
    assert sorted(r.name for r in registered().values()) == modules


def test_the_manifest_lists_every_family_and_imports_none():
    code = (
        "import sys\n"
        "from model_adapters import manifests\n"
        "ids = [m.model_id for m in manifests()]\n"
        "heavy = [m for m in ('torch', 'transformers', 'openai', 'google.genai') if m in sys.modules]\n"
        "ours = [m for m in sys.modules if m.startswith('model_adapters.')]\n"
        "print(ids, heavy, ours)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    ids, heavy, ours = out.stdout.strip().split("] [")
    for model_id in registered():
        assert repr(model_id) in ids
    assert heavy == "" and ours.strip("[]") == ""


def test_lmms_eval_finds_every_family_through_its_entry_point():
    from lmms_eval.models import get_model

    for model_id in registered():
        assert get_model(model_id) is adapter_class(model_id)


def test_a_broken_or_duplicate_family_module_is_named_and_the_others_stay(tmp_path, monkeypatch):
    """A syntax error, an id that is not a literal, or two modules declaring one id: each named by
    file and line, neither duplicate taken (which one is meant is the user's to say), the rest kept."""
    from naru_eval.adapters.registry import RegistryError, problems

    pkg = tmp_path / "dup_adapters"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("a", "b"):
        (pkg / f"{name}.py").write_text(f'class {name.upper()}:\n    family = Family(id="naru_same", args=None)\n')
    (pkg / "c.py").write_text('class C:\n    family = Family(id="naru_fine", args=None)\n')
    (pkg / "d.py").write_text('class D:\n    family = Family(id="naru_half", args=None\n')  # half-written
    (pkg / "e.py").write_text("ID = 'naru_x'\nclass E:\n    family = Family(id=ID, args=None)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(registered("dup_adapters")) == ["naru_fine"]
    got = {(p.path.name, p.line): p.message for p in problems("dup_adapters")}
    assert set(got) == {("a.py", 2), ("b.py", 2), ("d.py", 2), ("e.py", 3)}, got
    assert "id='naru_same', as do a.py:2, b.py:2" in got[("a.py", 2)]
    assert "SyntaxError" in got[("d.py", 2)] and "must be a string literal" in got[("e.py", 3)]
    with pytest.raises(RegistryError, match=r"a\.py:2: A declares id='naru_same'"):
        adapter_class("naru_same", "dup_adapters")


@pytest.mark.slow
def test_lmms_eval_and_the_cli_keep_every_other_family_beside_a_broken_module(tmp_path):
    """A copy of the family modules with a half-written one and a copy that keeps its original's
    id: lmms-eval still runs every other NARU adapter (it used to lose all of them, exit 0), and
    ``naru-eval adapters`` names both problems by file and line and exits 1, with no traceback."""
    import os
    import shutil

    pkg = tmp_path / "model_adapters"
    shutil.copytree(ROOT / "model_adapters", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "half_written.py").write_text("class Half(HFVideoModel):\n    family = Family(\n        id='naru_half',\n")
    shutil.copy(ROOT / "model_adapters" / "internvl3_5.py", pkg / "internvl3_5_mine.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = (
        "from lmms_eval.models import get_model\n"
        "print(get_model('naru_qwen3_vl').__name__, get_model('naru_replay').__name__)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    said = run.stdout + run.stderr  # lmms-eval's logger writes where it is configured to
    assert run.returncode == 0 and run.stdout.splitlines()[-1].split() == ["Qwen3_VL", "NaruReplay"], said[-3000:]
    assert "half_written.py:2" in said and "internvl3_5_mine.py" in said
    cli = subprocess.run(
        [sys.executable, "-m", "naru_eval.cli", "adapters"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr[-3000:]
    assert "half_written.py:2: cannot be read (SyntaxError" in cli.stderr
    assert "internvl3_5.py:" in cli.stderr and "internvl3_5_mine.py:" in cli.stderr
    assert "`naru_qwen3_vl`" in cli.stdout and "`naru_internvl3_5`" not in cli.stdout


def test_the_input_builders_hooks_are_complete_and_families_override_only_them():
    """docs/extending.md's hook table (``HOOKS``) and the machinery are every public name of the
    input builder; a family's builder overrides hooks only."""
    from naru_eval.adapters.hf.builder import HOOKS, MACHINERY, InputBuilder

    hooks = {h.name.partition("(")[0] for h in HOOKS}
    public = {n for n in dir(InputBuilder) if not n.startswith("_")} | {"adapter", "checkpoint", "args"}
    public |= {"template_kwargs", "reasoning_max_new_tokens"}  # set per run in __init__
    assert hooks | set(MACHINERY) == public and not hooks & set(MACHINERY), sorted(public ^ (hooks | set(MACHINERY)))
    for model_id in registered():
        builder = getattr(adapter_class(model_id), "Inputs", None)
        if builder is None:
            continue
        for name in MACHINERY:
            own = getattr(InputBuilder, name, None)
            assert own is None or getattr(builder, name) is own, f"{model_id} overrides {name}, the builder's machinery"
