"""An experiment's bookkeeping (naru_eval/report/experiment.py): whether a cell's run directory
holds a finished run of its configuration (complete and recomputing, by the one check of
:mod:`naru_eval.core.runfiles` that ``naru-eval verify-run`` runs), and the cell's
``manifest.json``, the one manifest format of the frame sweep, the ablations and any grid.

The driver (naru_eval/cli/experiment.py) hands every value in: nothing here reads the
environment but SLURM's job ids. Secrets never reach a manifest: secret-named args are dropped,
and every value passes the one redaction (:mod:`naru_eval.redaction`). By hand, ``naru-eval
experiment status OUT`` (or ``sweep-status``) reads each cell's configuration from its manifest.
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import JsonValue

from naru_eval.core.runfiles import RunConfig, parse_model_args
from naru_eval.redaction import redact as redact_text
from naru_eval.report.experiment import Cell, Experiment, Variant
from naru_eval.report.models import ManifestData, SweepManifest, dump_json, validate_doc
from naru_eval.report.runs import (
    MANIFEST_NAME,
    discover,
    read_manifest,
    redact_args_string,
    run_problems,
    same_model_args,
)
from naru_eval.store.responses import is_secret, redact

MANIFEST_VERSION = 2
TOOL = "naru-eval experiment run"
VERSION_PACKAGES = ("naru-eval", "lmms-eval", "torch", "transformers")
Status = Literal["running", "done", "failed", "cancelled"]


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Command-line words with any secret-named ``k=v`` piece masked (``api_key=***``) and any
    key-shaped value or URL password redacted (the one redaction)."""
    out = []
    for word in argv:
        parts = []
        for piece in word.split(","):
            k, sep, _v = piece.partition("=")
            parts.append(f"{k}=***" if sep and is_secret(k.lstrip("-")) else piece)
        out.append(redact_text(",".join(parts)))
    return out


def safe_args(model_args: str) -> str:
    """``k=v,…`` as it may be written: secret-named entries dropped, every value redacted."""
    return redact_text(redact_args_string(model_args))


def package_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def run_status(
    directory: str | Path,
    adapter: str,
    model_args: str,
    tasks: Sequence[str],
    since: float | None = None,
    without_secrets: bool = False,
) -> tuple[int, str, Path | None]:
    """Whether ``directory`` holds a finished run of this configuration: every task of it, every
    question (no ``--limit``), sample logs that parse with one line per question, and metrics that
    recompute from them (the one check, ``naru-eval verify-run``'s too).

    Returns (0, msg, results file) when complete; (3, msg, None) when there is no finished run
    (nothing yet, or a crashed/partial one); (4, msg, file) when it holds results of a different
    adapter or model_args (refuse to mix). ``since``: ignore results files older than this time.
    ``without_secrets``: ``model_args`` is a manifest's (secret entries dropped, values redacted),
    so the logged args are compared the same way.
    """
    d = Path(directory)
    if not d.is_dir():
        return 3, f"{d}: not started", None
    other: Path | None = None
    reasons = []
    found = discover([d]).results  # the one run discovery
    for rf in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
        if since is not None and rf.stat().st_mtime < since:
            continue
        res = found[rf][0]
        if res is None:
            reasons.append(f"{rf}: unreadable")
            continue
        cfg = res.config
        logged = safe_args(cfg.model_args or "") if without_secrets else cfg.model_args
        if cfg.adapter != adapter or not same_model_args(logged, model_args):
            other = other or rf
            continue
        problems = run_problems(res, tasks, full=True)
        if not problems:
            return 0, f"{rf}: complete", rf
        reasons.append(f"{rf}: {'; '.join(problems)}")
    if other is not None:
        return 4, f"{other} holds results of a different model/model_args; use another output directory", other
    return 3, "; ".join(reasons) or f"{d}: no results file", None


def git_revision(path: str | Path) -> str | None:
    """``<sha>`` (``-dirty`` when the work tree has changes) of the checkout holding ``path``."""
    try:
        sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def data_info() -> ManifestData:
    """The data the cell runs on, as the loader sees it now (recorded, never fatal)."""
    try:
        from naru_eval.core.hub import load_dataset_from_env

        ds = load_dataset_from_env(strict=False)
        return ManifestData(fingerprint=ds.fingerprint, source=ds.source, questions=len(ds.questions))
    except Exception as e:  # noqa: BLE001 - recorded, never fatal: lmms-eval's preflight reports data problems
        return ManifestData(fingerprint=None, error=redact_text(f"{type(e).__name__}: {e}"))


def write_manifest(directory: str | Path, updates: Mapping[str, object]) -> Path:
    """Merge ``updates`` into ``directory/manifest.json`` (atomic replace); return its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / MANIFEST_NAME
    current = read_manifest(path).model_dump(mode="json", exclude_unset=True) if path.exists() else {}
    current.update(updates)
    manifest = validate_doc(SweepManifest, current, path)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(dump_json(manifest), encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class CellConfig:
    """What a cell's run must be: the adapter, its args, the tasks (and the budget, if any)."""

    adapter: str
    model_args: str
    tasks: list[str]
    budget: int | None = None

    @classmethod
    def from_manifest(cls, path: Path) -> CellConfig:
        """The configuration a cell's ``manifest.json`` records (secret args dropped)."""
        m = read_manifest(path)
        if not m.model or not m.tasks:
            raise ValueError(f"{path}: the manifest names no model or tasks; it was not written by the sweep")
        frames = (m.budget or {}).get("num_frames")
        return cls(m.model, m.model_args_string or "", list(m.tasks), int(frames) if frames is not None else None)


def slurm_job() -> str | None:
    """``<array job>_<task>`` (or the job id) when running inside a SLURM job."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def experiment_status(root: str | Path, since: float | None = None) -> tuple[int, str]:
    """``naru-eval experiment status DIR``: (0 finished | 3 to run | 4 a different configuration |
    2 not an experiment, message). DIR is a cell's directory or an experiment's root (its cells'
    manifests), each cell checked against its own manifest, one line per cell."""
    d = Path(root)
    manifests = [d / MANIFEST_NAME] if (d / MANIFEST_NAME).is_file() else sorted(d.glob(f"*/{MANIFEST_NAME}"))
    if not manifests:
        return 2, (
            f"{d}: no {MANIFEST_NAME} here or in its cell folders (f8/, frames_audio/, ...): not a frame-sweep or "
            "experiment directory (naru-eval experiment run writes one per cell)"
        )
    rows: list[tuple[int, str, int, str]] = []
    for path in manifests:
        try:
            cfg = CellConfig.from_manifest(path)
        except ValueError as e:
            rows.append((-1, path.parent.name, 3, f"{path.parent.name}: {e}"))
            continue
        code, msg, _ = run_status(path.parent, cfg.adapter, cfg.model_args, cfg.tasks, since, without_secrets=True)
        state = read_manifest(path).status
        shown = "complete" if code == 0 else "not complete" if code == 3 else "different configuration"
        what = f" ({cfg.budget} frames)" if cfg.budget is not None else ""
        rows.append((cfg.budget or 0, path.parent.name, code, f"{path.parent.name}{what}: {state}, {shown}: {msg}"))
    rows.sort()
    return max(code for _, _, code, _ in rows), "\n".join(line for *_, line in rows)


def running_manifest(
    exp: Experiment,
    cell: Cell,
    model_args: str,
    label: str | None,
    launcher: Sequence[str],
    extra: Sequence[str],
    env: Mapping[str, str],
    repo: Path,
    previous: SweepManifest | None,
    started: float,
) -> SweepManifest:
    """The fields a cell's manifest gets when its run starts (every other field stays)."""
    return SweepManifest(
        status="running",
        updated_at=now(),
        manifest_version=MANIFEST_VERSION,
        tool=TOOL,
        label=redact_text(label or RunConfig(exp.model, model_args).label()),
        model=exp.model,
        experiment=exp.doc().model_copy(
            update={"axes": [a.model_copy(update={"variants": _safe_variants(a.variants)}) for a in exp.axes]}
        ),
        cell=cell.name,
        variants=dict(cell.values),
        model_args={k: redact_text(v) for k, v in redact(parse_model_args(model_args)).items()},
        model_args_string=safe_args(model_args),
        budget={"num_frames": cell.budget} if cell.budget is not None else None,
        sampling=cell.sampling,
        tasks=list(exp.tasks),
        launcher=" ".join(redact_argv(launcher)),
        lmms_eval_extra_args=redact_argv(extra),
        versions={k: package_version(k) for k in VERSION_PACKAGES},
        python=sys.version.split()[0],
        git_revision=git_revision(repo),
        data=data_info(),
        env={k: redact_text(v) for k, v in env.items()},
        invocations=int((previous.invocations if previous else None) or 0) + 1,
        slurm_job=slurm_job(),
        started_at=now(),
        started_unix=started,
        results_file=None,
        usage=previous.usage if previous else None,
        run_keys=previous.run_keys if previous else None,
    )


def _safe_variants(variants: Sequence[Variant]) -> list[Variant]:
    """Variants as a manifest may hold them: secret-named overrides dropped, values redacted."""
    return [
        v.model_copy(update={"overrides": {k: redact_text(x) for k, x in redact(v.overrides).items()}})
        for v in variants
    ]


def finished_manifest(
    run_dir: Path,
    cfg: CellConfig,
    status: Status,
    seconds: float | None = None,
    message: str | None = None,
    usage: Mapping[str, JsonValue] | None = None,
    run_keys: Sequence[str] | None = None,
) -> SweepManifest:
    """The fields a cell's manifest gets when its run ends (done, failed or cancelled)."""
    code, _msg, rf = run_status(run_dir, cfg.adapter, cfg.model_args, cfg.tasks)
    updates = SweepManifest(status=status, updated_at=now(), finished_at=now())
    if rf is not None and code == 0:
        updates.results_file = str(rf.relative_to(run_dir.resolve()))
    if seconds is not None:
        updates.seconds = seconds
    if message:
        updates.message = redact_text(message)
    if usage:
        updates.usage = dict(usage)
    if run_keys:
        updates.run_keys = sorted(run_keys)
    return updates
