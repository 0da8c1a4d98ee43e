"""The docs name only modules that exist: every ``naru_eval/….py`` and ``model_adapters/….py`` path
in docs/*.md and README.md, and every layer-relative one (``core/runfiles.py`` means
``naru_eval/core/runfiles.py``), is a file of the checkout. A module moved or split without its
docs fails here, naming the doc and the path."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "media", "store", "api", "providers", "judge", "asr", "lmms", "report", "cli")
#: a path not inside a longer one (``tests/report/x.py`` is not ``report/x.py``)
_PATH = re.compile(r"(?<![\w/.-])((?:naru_eval|model_adapters|" + "|".join(LAYERS) + r")/[\w/]+\.py)\b")


def docs() -> list[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def missing_modules(text: str, root: Path = ROOT) -> list[str]:
    """The module paths ``text`` names that are not files below ``root``."""
    out = []
    for path in dict.fromkeys(m[1] for m in _PATH.finditer(text)):
        rel = path if path.startswith(("naru_eval/", "model_adapters/")) else f"naru_eval/{path}"
        if not (root / rel).is_file():
            out.append(path)
    return out


def test_every_module_path_in_the_docs_exists():
    stale = [f"{doc.relative_to(ROOT)}: {path}" for doc in docs() for path in missing_modules(doc.read_text("utf-8"))]
    assert stale == []


def test_the_check_catches_a_stale_path(tmp_path):
    (tmp_path / "naru_eval" / "core").mkdir(parents=True)
    (tmp_path / "naru_eval" / "core" / "runfiles.py").write_text("")
    text = (
        "`naru_eval/core/runfiles.py`, `core/runfiles.py run_problems`, `tests/core/test_gone.py`, "
        "`naru_eval/sharding.py`, `report/gone.py`, `model_adapters/gone.py`"
    )
    assert missing_modules(text, tmp_path) == ["naru_eval/sharding.py", "report/gone.py", "model_adapters/gone.py"]
