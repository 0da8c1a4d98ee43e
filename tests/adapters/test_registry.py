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


def test_two_modules_declaring_one_id_is_an_error(tmp_path, monkeypatch):
    pkg = tmp_path / "dup_adapters"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("a", "b"):
        (pkg / f"{name}.py").write_text(f'class {name.upper()}:\n    family = Family(id="naru_same", args=None)\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="naru_same.*already declared by dup_adapters.a.A"):
        registered("dup_adapters")
    (pkg / "b.py").write_text("ID = 'naru_x'\nclass B:\n    family = Family(id=ID, args=None)\n")
    with pytest.raises(ValueError, match="must be a string literal"):
        registered("dup_adapters")
