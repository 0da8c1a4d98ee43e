"""``naru-eval sweep submit`` (also ``naru-eval experiment submit``): an experiment's grid on a
SLURM cluster, for one model or several.

Per model, one array job of ``scripts/frame_sweep.slurm`` whose ``--array`` is derived from the
grid (task i runs the i-th cell: the i-th budget of a frame sweep, the i-th arm of an ablation),
into ``OUT/<model label>/``; then one job that runs after every array job succeeded
(``--dependency=afterok:…``, cancelled by SLURM when a cell fails): the leaderboard over every
model, then each model's paired comparisons. Resubmitting the same command skips the finished
cells, resumes the others from their stores and chains a new final job. The grid is declared by
the options of ``naru-eval experiment run`` (``--budgets``, ``--ablation``, ``--arms``, ``--axis``,
``--variant``) and checked here by the same code the array task runs (an option the task would
refuse is refused before anything is submitted). Resources are requested here and nowhere else
(``--partition``, ``--gpus``, ``--cpus``, ``--mem``, ``--time``, …): by default none beyond one
task on one node, which every partition accepts. SLURM's logs go to
``OUT/<label>/slurm/<job>_<task>.out``; each submission is recorded in
``OUT/slurm/submissions.jsonl``. No key reaches SLURM: a secret-named model arg, or any word of
the sbatch commands that holds a key or a URL's password, is refused. docs/cluster.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from naru_eval.cli.grid import GridError, GridOptions, adapter_args, add_grid_options, build, check_cells
from naru_eval.redaction import holds_secret, redact
from naru_eval.report.experiment import Experiment
from naru_eval.settings import Settings, settings

SLURM_TEMPLATE = Path("scripts") / "frame_sweep.slurm"
#: a model's folder under the output root (never ``.`` or ``..``)
FOLDER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class SubmitError(ValueError):
    """A sweep that cannot be submitted as given (the message says why and what to do)."""


@dataclass
class ModelSpec:
    """One model of the sweep: ``--model`` and the ``--model_args``/``--label`` given after it."""

    model: str
    model_args: str = ""
    label: str | None = None

    @property
    def name(self) -> str:
        from naru_eval.core.runfiles import RunConfig

        return self.label or RunConfig(self.model, self.model_args).label()

    @property
    def slug(self) -> str:
        """The model's folder under the output root."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.name.rstrip("/").rsplit("/", 1)[-1]).strip("_") or self.model


class _ModelAction(argparse.Action):
    """``--model`` starts a model; ``--model_args``/``--label`` fill in the last one."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[str] | None,
        option_string: str | None = None,
    ) -> None:
        models: list[ModelSpec] = getattr(namespace, "models", None) or []
        if self.dest == "models":
            models.append(ModelSpec(str(values)))
        elif not models:
            parser.error(f"{option_string} must follow the --model it belongs to")
        elif self.dest == "model_args":
            models[-1].model_args = str(values)
        else:
            models[-1].label = str(values)
        namespace.models = models


@dataclass
class Plan:
    """The sbatch commands of one submission (what ``--dry-run`` prints)."""

    root: Path
    arrays: list[tuple[ModelSpec, Experiment, list[str]]] = field(default_factory=list)
    final: list[str] | None = None  # without its --dependency (the array jobs' ids)


def array_spec(exp: Experiment, array: str | None, max_parallel: int | None) -> str:
    """sbatch's ``--array``: every cell (``0-(n-1)``), or the indices ``array`` names, each one
    checked against the grid (an index past it is refused here, not failed in the job)."""
    n = len(exp.cells())
    if array is None:
        spec = f"0-{n - 1}" if n > 1 else "0"
    else:
        spec = array
        for part in array.split(","):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
            if not m:
                raise SubmitError(f"--array {array}: {part!r} is not an index or a range (e.g. 0-4 or 1,3)")
            top = int(m[2] or m[1])
            if top >= n or int(m[1]) > top:
                raise SubmitError(
                    f"--array {array}: index {top} is outside the {n} {exp.unit}(s) {exp.listing()} "
                    f"(indices 0-{n - 1}; task i runs the i-th)"
                )
    return f"{spec}%{max_parallel}" if max_parallel else spec


def find_repo(given: str | None) -> Path:
    """The naru-eval checkout holding scripts/frame_sweep.slurm: ``--repo``, ``NARU_EVAL_REPO``, or
    the current directory or one above it."""
    for cand in (given, settings().eval_repo):
        if cand:
            p = Path(cand).resolve()
            if (p / SLURM_TEMPLATE).is_file():
                return p
            raise SubmitError(f"{p}: no {SLURM_TEMPLATE} there; give the naru-eval checkout (--repo or NARU_EVAL_REPO)")
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / SLURM_TEMPLATE).is_file():
            return d
    raise SubmitError(
        f"no naru-eval checkout here ({here}): run from the checkout, or give it with --repo / NARU_EVAL_REPO "
        f"(the sweep runs its {SLURM_TEMPLATE})"
    )


def resource_args(args: argparse.Namespace, per_cell: bool) -> list[str]:
    """The sbatch resource options given (none by default: the partition's defaults); the
    final job (not ``per_cell``) takes no GPU and the partition's CPUs and memory."""
    out = ["--nodes=1", "--ntasks=1"]
    for opt, value in (
        ("--partition", args.partition),
        ("--account", args.account),
        ("--qos", args.qos),
        ("--time", args.time),
    ):
        if value:
            out.append(f"{opt}={value}")
    if per_cell:
        if args.cpus:
            out.append(f"--cpus-per-task={args.cpus}")
        if args.mem:
            out.append(f"--mem={args.mem}")
        if args.gpus:
            out.append(f"--gres=gpu:{args.gpus}")
    return out


def _model_problems(spec: ModelSpec, args: argparse.Namespace) -> tuple[Experiment | None, list[str]]:
    """The model's grid, built and checked as the array task will (and what a submission adds:
    no secret may reach SLURM's job record)."""
    from naru_eval.core.runfiles import parse_model_args
    from naru_eval.store.responses import is_secret

    who = f"--model {spec.model}"
    problems = []
    given = parse_model_args(spec.model_args)
    secrets = sorted(k for k in given if is_secret(k))
    if secrets:
        problems.append(
            f"{who}: --model_args sets {', '.join(secrets)}: a job's arguments are stored by SLURM and shown by "
            "`scontrol show job`. Export the key instead (OPENAI_API_KEY, GEMINI_API_KEY, ...): sbatch passes the "
            "environment to the job"
        )
    if not FOLDER_RE.fullmatch(spec.slug):
        problems.append(
            f"{who}: its name {spec.name!r} gives the folder {spec.slug!r}, not a folder inside --out: give a --label "
            "that starts with a letter or digit"
        )
    try:
        args_model = adapter_args(spec.model)
        exp = build(spec.model, spec.model_args, GridOptions.of(args), args_model.model_fields if args_model else None)
    except GridError as e:
        return None, problems + [f"{who}: {line}" for line in str(e).splitlines()]
    problems += [f"{who}: cells {line}" for line in check_cells(exp, args_model)]
    try:
        array_spec(exp, args.array, args.max_parallel)
    except SubmitError as e:
        problems.append(f"{who}: {e}")
    return exp, problems


def plan(args: argparse.Namespace) -> Plan:
    """Every sbatch command of the submission, checked before anything is submitted: every
    problem of every model at once."""
    from naru_eval.lmms.launch import launch_problem

    models: list[ModelSpec] = args.models or []
    if not models:
        raise SubmitError("give at least one --model (each followed by its --model_args and --label)")
    if not (settings().data_dir or settings().hf_dataset):
        raise SubmitError("set NARU_DATA_DIR (or NARU_HF_DATASET) before submitting: the jobs inherit it")
    repo = find_repo(args.repo)
    root = Path(args.out).resolve()
    problems: list[str] = []
    grids: list[tuple[ModelSpec, Experiment]] = []
    seen: dict[str, ModelSpec] = {}
    for spec in models:
        exp, found = _model_problems(spec, args)
        problems += found
        if spec.slug in seen:
            problems.append(
                f"--model {spec.model} and --model {seen[spec.slug].model} would both write {root / spec.slug}; "
                "give each a --label"
            )
        seen[spec.slug] = spec
        if exp is not None:
            grids.append((spec, exp))
    if args.launcher:
        problem = launch_problem(shlex.split(args.launcher), cuda_devices=args.gpus or 0)
        if problem:
            problems.append(f"--launcher: {problem} (each task gets --gpus {args.gpus or 0})")
    if problems:
        raise SubmitError("\n".join(dict.fromkeys(problems)))
    python = args.python or sys.executable
    out = Plan(root)
    escaped = lambda p: str(p).replace("%", "%%")  # noqa: E731 - sbatch reads %j, %A, ... in --output
    for spec, exp in grids:
        d = root / spec.slug
        task = [
            "--model", spec.model, "--model_args", spec.model_args, "--label", spec.name,
            *(w for axis in exp.axes for w in axis.declared), "--tasks", ",".join(exp.tasks), "--out", str(d),
            "--python", python, "--quiet",
        ]  # fmt: skip
        if args.launcher:
            task += ["--launcher", args.launcher]
        extra = args.lmms_eval_args[1:] if args.lmms_eval_args[:1] == ["--"] else args.lmms_eval_args
        if extra:
            task += ["--", *extra]
        cmd = [
            "sbatch", "--parsable", f"--job-name=naru-sweep-{spec.slug}",
            f"--array={array_spec(exp, args.array, args.max_parallel)}",
            f"--output={escaped(d)}/slurm/%A_%a.out", "--open-mode=append", *resource_args(args, per_cell=True),
            *args.sbatch_arg, str(repo / SLURM_TEMPLATE), *task,
        ]  # fmt: skip
        out.arrays.append((spec, exp, cmd))
    if not args.no_leaderboard:
        board = [
            python, "-m", "naru_eval.cli", "leaderboard", *(str(root / s.slug) for s, _ in grids),
            "-o", str(root / "leaderboard.json"), *args.leaderboard_arg,
        ]  # fmt: skip
        then = [
            shlex.join([python, "-m", "naru_eval.cli", "experiment", "compare", str(root / s.slug)])
            for s, exp in grids
            if exp.pairs()
        ]
        out.final = [
            "sbatch", "--parsable", "--job-name=naru-sweep-leaderboard",
            f"--output={escaped(root)}/slurm/leaderboard_%j.out", "--open-mode=append", "--kill-on-invalid-dep=yes",
            *resource_args(args, per_cell=False), *args.sbatch_arg, f"--wrap={' && '.join([shlex.join(board), *then])}",
        ]  # fmt: skip
    words = [w for _, _, cmd in out.arrays for w in cmd] + (out.final or [])
    leaked = list(dict.fromkeys(redact(w) for w in words if holds_secret(w)))
    if leaked:
        raise SubmitError(
            "a key or a password would be written to SLURM's job record, the job's log and the submission log: "
            + "; ".join(leaked)
            + ". Keep secrets in the environment (OPENAI_API_KEY, ...) and URLs without user:password@"
        )
    return out


def _sbatch(cmd: Sequence[str], env: dict[str, str]) -> str:
    """Submit; the job id (``--parsable``: ``<id>[;cluster]``). sbatch's refusal is the error."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise SubmitError(f"sbatch refused the job: {proc.stderr.strip() or proc.stdout.strip()}\n  {shlex.join(cmd)}")
    return proc.stdout.strip().split(";")[0]


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        p = plan(args)
        if args.dry_run:
            for _spec, _exp, cmd in p.arrays:
                print(shlex.join(cmd))
            if p.final is not None:
                print(shlex.join([*p.final[:2], "--dependency=afterok:<the array jobs>", *p.final[2:]]))
            return 0
        if shutil.which("sbatch") is None:
            raise SubmitError("sbatch is not on PATH: submit from a SLURM login node (or use --dry-run)")
        env = dict(os.environ)
        env[Settings.variable("eval_repo")] = str(find_repo(args.repo))  # the template finds the driver by it
        (p.root / "slurm").mkdir(parents=True, exist_ok=True)  # the record's folder, before any job
        submit(p, args, env)
        return 0
    except SubmitError as e:
        print(f"naru-eval sweep submit: {redact(str(e))}", file=sys.stderr)
        return 2


def submit(p: Plan, args: argparse.Namespace, env: dict[str, str]) -> None:
    """Submit the plan's jobs; ``OUT/slurm/submissions.jsonl`` records what was submitted, even
    when a later sbatch refuses (those jobs run: the record must say so)."""
    jobs: list[str] = []
    record: dict[str, object] = {"time": time.time(), "root": str(p.root)}
    models: list[dict[str, object]] = []
    try:
        for spec, exp, cmd in p.arrays:
            (p.root / spec.slug / "slurm").mkdir(parents=True, exist_ok=True)
            job = _sbatch(cmd, env)
            jobs.append(job)
            cells = ", ".join(c.name for c in exp.cells())
            print(f"{spec.name}: array job {job} ({spec.model}, {exp.unit}s {exp.listing()}) -> {p.root / spec.slug}")
            models.append({"label": spec.name, "model": spec.model, "job": job, "cells": cells, "sbatch": cmd})
        if p.final is not None:
            cmd = [*p.final[:2], f"--dependency=afterok:{':'.join(jobs)}", *p.final[2:]]
            job = _sbatch(cmd, env)
            print(f"leaderboard: job {job}, after {', '.join(jobs)} -> {p.root / 'leaderboard.json'}")
            record["leaderboard"] = {"job": job, "sbatch": cmd}
    finally:
        record["models"] = models
        with open(p.root / "slurm" / "submissions.jsonl", "a", encoding="utf-8") as f:
            f.write(redact(json.dumps(record)) + "\n")


def add_submit_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "submit",
        help="one SLURM array job per model (one task per cell of the grid) and a leaderboard job after them all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--model", dest="models", action=_ModelAction, required=True, help="lmms-eval --model (repeatable)")
    s.add_argument("--model_args", "--model-args", dest="model_args", action=_ModelAction, help="of the last --model")
    s.add_argument("--label", dest="label", action=_ModelAction, help="the last --model's leaderboard name")
    s.add_argument("--out", required=True, help="output root: OUT/<label>/<cell>/ per cell, OUT/leaderboard.json")
    add_grid_options(s)
    s.add_argument("--array", help="only these cell indices (e.g. 1 or 0,2-3); default: every cell")
    s.add_argument("--max-parallel", type=int, help="at most this many cells of a model at once (--array …%%K)")
    s.add_argument("--launcher", help='e.g. "accelerate launch --multi_gpu --num_processes 2 -m lmms_eval"')
    s.add_argument("--python", help="the python with naru-eval on the nodes (default: this one)")
    s.add_argument("--repo", help="the naru-eval checkout (default: NARU_EVAL_REPO, else the current one)")
    g = s.add_argument_group("resources (default: none beyond 1 task on 1 node: the partition's defaults)")
    g.add_argument("--partition")
    g.add_argument("--account")
    g.add_argument("--qos")
    g.add_argument("--time", help="per cell, e.g. 04:00:00")
    g.add_argument("--gpus", type=int, default=0, help="GPUs per cell (--gres=gpu:N); open-weight models need 1+")
    g.add_argument("--cpus", type=int, help="CPUs per cell (--cpus-per-task)")
    g.add_argument("--mem", help="memory per cell, e.g. 64G")
    g.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        help="any other sbatch option (repeatable; e.g. --sbatch-arg=--exclusive)",
    )
    s.add_argument("--no-leaderboard", action="store_true", help="submit the array jobs only")
    s.add_argument(
        "--leaderboard-arg",
        action="append",
        default=[],
        help="passed to naru-eval leaderboard (repeatable; e.g. --leaderboard-arg=--no-plots)",
    )
    s.add_argument("--dry-run", action="store_true", help="print the sbatch commands; submit nothing")
    s.add_argument("lmms_eval_args", nargs=argparse.REMAINDER, help="after --: passed to lmms-eval")
    s.set_defaults(func=cmd_submit)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="an experiment's grid on SLURM: array jobs (one per model) and the leaderboard job after them",
    )
    add_submit_parser(p.add_subparsers(dest="sweep_command", required=True))
