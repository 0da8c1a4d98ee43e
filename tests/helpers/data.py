"""Test data helpers: JSONL files, lmms-eval docs and generate_until instances of a data directory."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: the 500-question subset's category counts (the authors' allocation)
EXPECTED_500 = {"N.1": 63, "N.2": 63, "N.3": 63, "N.4": 63, "C.1": 48, "C.2": 50, "C.3": 50, "C.4": 50, "C.5": 50}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def docs_of(data_dir: Path) -> list[dict]:
    """lmms-eval docs of a data directory as the tasks build them (question fields + video path)."""
    from naru_eval.core.data import load_local

    ds = load_local(data_dir)
    return [{**q.to_doc(), "video": str(ds.video_file(q))} for q in ds.questions]


def lmms_instances(
    docs: Sequence[Mapping[str, Any]],
    task: str = "naru_mcq",
    split: str = "test",
    *,
    visual: Callable[..., Any] | None = None,
    gen_kwargs: Mapping[str, Any] | None = None,
    order: Sequence[int] | None = None,
) -> list[Any]:
    """The ``generate_until`` requests lmms-eval hands an adapter for ``docs`` of ``task``
    (``visual``: the task's ``doc_to_visual``, the video one by default)."""
    from lmms_eval.api.instance import Instance

    from naru_eval.lmms.tasks import doc_to_text, doc_to_visual

    gk = {"max_new_tokens": 32, "temperature": 0} if gen_kwargs is None else gen_kwargs
    return [
        Instance(
            "generate_until",
            (doc_to_text(docs[i]), dict(gk), visual or doc_to_visual, i, task, split),
            idx=0,
            metadata={"task": task, "doc_id": i, "repeats": 1},
        )
        for i in (order if order is not None else range(len(docs)))
    ]
