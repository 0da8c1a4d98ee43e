"""The frame sweep's bookkeeping (``scripts/frame_sweep.sh``): whether a budget's run directory
holds a finished run of its configuration (``naru-eval sweep-status``: complete and recomputing,
by the one check of :mod:`naru_eval.core.runfiles` that ``naru-eval verify-run`` runs), and its
``manifest.json`` (``naru-eval sweep-manifest``).

Inside the sweep the configuration comes from the environment (``SWEEP_MODEL``,
``SWEEP_MODEL_ARGS``, ``SWEEP_TASKS``, ``SWEEP_BUDGET``; also ``SWEEP_LAUNCHER``, ``SWEEP_LABEL``,
``SWEEP_EXTRA``, ``SWEEP_REPO``), not from arguments: the model args may hold an API key, and a
process's arguments are visible to every user of the machine (``ps``); scripts/frame_sweep.sh
exports them to its own children only. Secrets are dropped before anything is written. By hand
(no ``SWEEP_MODEL``), ``naru-eval sweep-status`` reads each budget's configuration from its
``manifest.json`` instead, for one budget's directory or a whole sweep root.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import JsonValue

from naru_eval.core.budgets import Sampling
from naru_eval.core.runfiles import RunConfig, parse_model_args
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

MANIFEST_VERSION = 1
VERSION_PACKAGES = ("naru-eval", "lmms-eval", "torch", "transformers")


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Command-line words with any secret ``k=v`` piece masked (``api_key=***``)."""
    out = []
    for word in argv:
        parts = []
        for piece in word.split(","):
            k, sep, _v = piece.partition("=")
            parts.append(f"{k}=***" if sep and is_secret(k.lstrip("-")) else piece)
        out.append(",".join(parts))
    return out


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
    ``without_secrets``: ``model_args`` had its secret entries dropped (a manifest's), so the
    logged args are compared without theirs.
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
        logged = redact_args_string(cfg.model_args) if without_secrets else cfg.model_args
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


def _data_info() -> ManifestData:
    try:
        from naru_eval.core.hub import load_dataset_from_env

        ds = load_dataset_from_env(strict=False)
        return ManifestData(fingerprint=ds.fingerprint, source=ds.source, questions=len(ds.questions))
    except Exception as e:  # noqa: BLE001 - recorded, never fatal: lmms-eval's preflight reports data problems
        return ManifestData(fingerprint=None, error=f"{type(e).__name__}: {e}")


def write_manifest(directory: str | Path, updates: Mapping[str, Any]) -> Path:
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
class SweepConfig:
    """One budget of the sweep, as scripts/frame_sweep.sh exports it."""

    adapter: str
    model_args: str
    tasks: list[str]
    budget: int

    @classmethod
    def from_env(cls) -> SweepConfig:
        missing = [k for k in ("SWEEP_MODEL", "SWEEP_TASKS", "SWEEP_BUDGET") if not os.environ.get(k)]
        if missing:
            raise ValueError(
                f"{', '.join(missing)} not set: scripts/frame_sweep.sh sets them for its own checks; by hand, "
                "`naru-eval sweep-status DIR` reads DIR's manifest.json instead"
            )
        return cls(
            adapter=os.environ["SWEEP_MODEL"],
            model_args=os.environ.get("SWEEP_MODEL_ARGS", ""),
            tasks=[t for t in os.environ["SWEEP_TASKS"].split(",") if t],
            budget=int(os.environ["SWEEP_BUDGET"]),
        )

    @classmethod
    def from_manifest(cls, path: Path) -> SweepConfig:
        """The configuration a budget's ``manifest.json`` records (secret args dropped)."""
        m = read_manifest(path)
        frames = (m.budget or {}).get("num_frames")
        if not m.model or not m.tasks or frames is None:
            raise ValueError(f"{path}: the manifest names no model, tasks or budget; it was not written by the sweep")
        return cls(adapter=m.model, model_args=m.model_args_string or "", tasks=list(m.tasks), budget=int(frames))


def _slurm_job() -> str | None:
    """``<array job>_<task>`` (or the job id) when running inside a SLURM job."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID") or None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def sweep_status(run_dir: str | Path, since: float | None = None) -> tuple[int, str]:
    """``naru-eval sweep-status DIR``: (0 finished | 3 to run | 4 holds a different configuration
    | 2 not a sweep directory, message). Inside the sweep (``SWEEP_MODEL`` set) DIR is the budget
    being checked; by hand DIR is a budget's directory or a sweep root (its ``f*/`` budgets),
    each checked against its own manifest, one line per budget."""
    if os.environ.get("SWEEP_MODEL"):
        cfg = SweepConfig.from_env()
        code, msg, _ = run_status(run_dir, cfg.adapter, cfg.model_args, cfg.tasks, since)
        return code, msg
    d = Path(run_dir)
    manifests = [d / MANIFEST_NAME] if (d / MANIFEST_NAME).is_file() else sorted(d.glob(f"*/{MANIFEST_NAME}"))
    if not manifests:
        return 2, (
            f"{d}: no {MANIFEST_NAME} here or in its budget folders (f8/, f16/, ...): not a frame-sweep directory "
            "(scripts/frame_sweep.sh writes one per budget)"
        )
    rows: list[tuple[int, int, str]] = []
    for path in manifests:
        try:
            cfg = SweepConfig.from_manifest(path)
        except ValueError as e:
            rows.append((-1, 3, f"{path.parent.name}: {e}"))
            continue
        code, msg, _ = run_status(path.parent, cfg.adapter, cfg.model_args, cfg.tasks, since, without_secrets=True)
        state = read_manifest(path).status
        shown = "complete" if code == 0 else "not complete" if code == 3 else "different configuration"
        rows.append((cfg.budget, code, f"{path.parent.name} ({cfg.budget} frames): {state}, {shown}: {msg}"))
    rows.sort()
    return max(code for _, code, _ in rows), "\n".join(line for _, _, line in rows)


#: the NARU_* data/store/cache variables a manifest records (when set)
ENV_RECORDED = ("NARU_DATA_DIR", "NARU_HF_DATASET", "NARU_RESPONSE_STORE", "NARU_FRAME_CACHE")


def sweep_manifest(
    run_dir: str | Path,
    status: Literal["running", "done", "failed", "cancelled"],
    seconds: float | None = None,
    message: str | None = None,
    if_not_done: bool = False,
    usage: Mapping[str, JsonValue] | None = None,
) -> None:
    """``naru-eval sweep-manifest DIR --status S``: write or update DIR/manifest.json. ``usage``:
    the response store's summed usage of this budget (the CLI reads it; see cli/results.py)."""
    cfg = SweepConfig.from_env()
    mpath = Path(run_dir) / MANIFEST_NAME
    if if_not_done and (not mpath.exists() or read_manifest(mpath).status == "done"):
        return
    # the fields set here replace the manifest's (``exclude_unset``); every other field stays
    if status == "running":
        prev = read_manifest(mpath) if mpath.exists() else None
        env = {k: os.environ[k] for k in ENV_RECORDED if os.environ.get(k)}
        updates = SweepManifest(
            status=status,
            updated_at=_now(),
            manifest_version=MANIFEST_VERSION,
            tool="scripts/frame_sweep.sh",
            label=os.environ.get("SWEEP_LABEL") or RunConfig(cfg.adapter, cfg.model_args).label(),
            model=cfg.adapter,
            model_args=redact(parse_model_args(cfg.model_args)),
            model_args_string=redact_args_string(cfg.model_args),
            budget={"num_frames": cfg.budget},
            sampling=Sampling(frames=cfg.budget).label,
            tasks=cfg.tasks,
            launcher=" ".join(redact_argv(os.environ.get("SWEEP_LAUNCHER", "").split())),
            lmms_eval_extra_args=redact_argv(json.loads(os.environ.get("SWEEP_EXTRA") or "[]")),
            versions={k: package_version(k) for k in VERSION_PACKAGES},
            python=sys.version.split()[0],
            git_revision=git_revision(os.environ.get("SWEEP_REPO") or Path(__file__).resolve().parent),
            data=_data_info(),
            env=env,
            invocations=int((prev.invocations if prev else None) or 0) + 1,
            slurm_job=_slurm_job(),
            started_at=_now(),
            results_file=None,
            usage=prev.usage if prev else None,
        )
    else:
        code, _msg, rf = run_status(run_dir, cfg.adapter, cfg.model_args, cfg.tasks)
        updates = SweepManifest(status=status, updated_at=_now(), finished_at=_now())
        if rf is not None and code == 0:
            updates.results_file = str(rf.relative_to(Path(run_dir).resolve()))
        if seconds is not None:
            updates.seconds = seconds
        if message:
            updates.message = message
        if usage:
            updates.usage = dict(usage)
    write_manifest(run_dir, updates.model_dump(mode="json", exclude_unset=True))
