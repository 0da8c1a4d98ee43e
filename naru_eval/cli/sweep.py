"""``naru-eval sweep submit``: the frame sweep on a SLURM cluster, for one model or several.

Per model, one array job of ``scripts/frame_sweep.slurm`` whose ``--array`` is derived from the
budgets (task i runs the i-th budget), into ``OUT/<model label>/``; then one leaderboard job
that runs after every array job succeeded (``--dependency=afterok:…``, cancelled by SLURM when a
budget fails: resubmitting the same command skips the finished budgets, resumes the others from
their stores and chains a new leaderboard job). Resources are requested here and nowhere else
(``--partition``, ``--gpus``, ``--cpus``, ``--mem``, ``--time``, …): by default none beyond one
task on one node, which every partition accepts; the template's ``#SBATCH`` header asks for
nothing else. SLURM's logs go to ``OUT/<label>/slurm/<job>_<task>.out``. docs/cluster.md.

``naru-eval sweep check-launcher -- CMD…`` is the sweep's check of its ``--launcher`` (a launch
that would silently start fewer processes than asked is refused, naru_eval/lmms/launch.py).
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
from typing import Any

from naru_eval.settings import Settings, settings

#: the sweep's default budgets and task (scripts/frame_sweep.sh's defaults, the paper's Fig. 3)
DEFAULT_BUDGETS = "8,16,32,64,128"
DEFAULT_TASKS = "naru_mcq_500"
SLURM_TEMPLATE = Path("scripts") / "frame_sweep.slurm"


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

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
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
    arrays: list[tuple[ModelSpec, list[str]]] = field(default_factory=list)
    leaderboard: list[str] | None = None  # without its --dependency (the array jobs' ids)


def parse_budgets(text: str) -> list[int]:
    budgets = []
    for part in text.split(","):
        if not re.fullmatch(r"[1-9][0-9]*", part.strip()):
            raise SubmitError(f"--budgets {text}: {part!r} is not a positive integer")
        budgets.append(int(part))
    return budgets


def array_spec(budgets: Sequence[int], array: str | None, max_parallel: int | None) -> str:
    """sbatch's ``--array``: every budget (``0-(n-1)``), or the indices ``array`` names, each one
    checked against the budgets (an index past them is refused here, not failed in the job)."""
    n = len(budgets)
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
                    f"--array {array}: index {top} is outside the {n} budget(s) {','.join(map(str, budgets))} "
                    f"(indices 0-{n - 1}; task i runs the i-th budget)"
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


def resource_args(args: argparse.Namespace, per_budget: bool) -> list[str]:
    """The sbatch resource options given (none by default: the partition's defaults); the
    leaderboard job (not ``per_budget``) takes no GPU and the partition's CPUs and memory."""
    out = ["--nodes=1", "--ntasks=1"]
    for opt, value in (
        ("--partition", args.partition),
        ("--account", args.account),
        ("--qos", args.qos),
        ("--time", args.time),
    ):
        if value:
            out.append(f"{opt}={value}")
    if per_budget:
        if args.cpus:
            out.append(f"--cpus-per-task={args.cpus}")
        if args.mem:
            out.append(f"--mem={args.mem}")
        if args.gpus:
            out.append(f"--gres=gpu:{args.gpus}")
    return out


def _check_model(spec: ModelSpec) -> None:
    from naru_eval.core.runfiles import parse_model_args
    from naru_eval.store.responses import is_secret

    args = parse_model_args(spec.model_args)
    secrets = sorted(k for k in args if is_secret(k))
    if secrets:
        raise SubmitError(
            f"--model {spec.model}: --model_args sets {', '.join(secrets)}: a job's arguments are stored by SLURM "
            "and shown by `scontrol show job`. Export the key instead (OPENAI_API_KEY, GEMINI_API_KEY, ...): sbatch "
            "passes the environment to the job"
        )
    for k in args:
        if k.strip().lower() in ("num_frames", "fps"):
            raise SubmitError(f"--model {spec.model}: --model_args sets {k}; the sweep sets num_frames=F itself")


def plan(args: argparse.Namespace) -> Plan:
    """Every sbatch command of the submission, checked before anything is submitted."""
    from naru_eval.lmms.launch import launch_problem

    models: list[ModelSpec] = args.models or []
    if not models:
        raise SubmitError("give at least one --model (each followed by its --model_args and --label)")
    if not (settings().data_dir or settings().hf_dataset):
        raise SubmitError("set NARU_DATA_DIR (or NARU_HF_DATASET) before submitting: the jobs inherit it")
    budgets = parse_budgets(args.budgets)
    array = array_spec(budgets, args.array, args.max_parallel)
    repo = find_repo(args.repo)
    root = Path(args.out).resolve()
    seen: dict[str, ModelSpec] = {}
    for spec in models:
        _check_model(spec)
        if spec.slug in seen:
            raise SubmitError(
                f"--model {spec.model} and --model {seen[spec.slug].model} would both write {root / spec.slug}; "
                "give each a --label"
            )
        seen[spec.slug] = spec
    if args.launcher:
        problem = launch_problem(shlex.split(args.launcher), cuda_devices=args.gpus or 0)
        if problem:
            raise SubmitError(f"--launcher: {problem} (each task gets --gpus {args.gpus or 0})")
    python = args.python or sys.executable
    out = Plan(root)
    for spec in models:
        d = root / spec.slug
        sweep = [
            "--model", spec.model, "--model_args", spec.model_args, "--label", spec.name, "--budgets", args.budgets,
            "--tasks", args.tasks, "--out", str(d), "--python", python, "--quiet",
        ]  # fmt: skip
        if args.open:
            sweep.append("--open")
        if args.launcher:
            sweep += ["--launcher", args.launcher]
        extra = args.lmms_eval_args[1:] if args.lmms_eval_args[:1] == ["--"] else args.lmms_eval_args
        if extra:
            sweep += ["--", *extra]
        cmd = [
            "sbatch", "--parsable", f"--job-name=naru-sweep-{spec.slug}", f"--array={array}",
            f"--output={d}/slurm/%A_%a.out", "--open-mode=append", *resource_args(args, per_budget=True),
            *args.sbatch_arg, str(repo / SLURM_TEMPLATE), *sweep,
        ]  # fmt: skip
        out.arrays.append((spec, cmd))
    if not args.no_leaderboard:
        board = [
            python, "-m", "naru_eval.cli", "leaderboard", *(str(root / s.slug) for s in models),
            "-o", str(root / "leaderboard.json"), *args.leaderboard_arg,
        ]  # fmt: skip
        out.leaderboard = [
            "sbatch", "--parsable", "--job-name=naru-sweep-leaderboard", f"--output={root}/slurm/leaderboard_%j.out",
            "--open-mode=append", "--kill-on-invalid-dep=yes", *resource_args(args, per_budget=False), *args.sbatch_arg,
            f"--wrap={shlex.join(board)}",
        ]  # fmt: skip
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
            for _spec, cmd in p.arrays:
                print(shlex.join(cmd))
            if p.leaderboard is not None:
                print(shlex.join([*p.leaderboard[:2], "--dependency=afterok:<the array jobs>", *p.leaderboard[2:]]))
            return 0
        if shutil.which("sbatch") is None:
            raise SubmitError("sbatch is not on PATH: submit from a SLURM login node (or use --dry-run)")
        env = dict(os.environ)
        env[Settings.variable("eval_repo")] = str(find_repo(args.repo))  # the template finds the sweep by it
        jobs: list[str] = []
        record: dict[str, Any] = {"time": time.time(), "root": str(p.root), "models": []}
        for spec, cmd in p.arrays:
            (p.root / spec.slug / "slurm").mkdir(parents=True, exist_ok=True)
            job = _sbatch(cmd, env)
            jobs.append(job)
            print(f"{spec.name}: array job {job} ({spec.model}, budgets {args.budgets}) -> {p.root / spec.slug}")
            record["models"].append({"label": spec.name, "model": spec.model, "job": job, "sbatch": cmd})
        if p.leaderboard is not None:
            (p.root / "slurm").mkdir(parents=True, exist_ok=True)
            cmd = [*p.leaderboard[:2], f"--dependency=afterok:{':'.join(jobs)}", *p.leaderboard[2:]]
            job = _sbatch(cmd, env)
            print(f"leaderboard: job {job}, after {', '.join(jobs)} -> {p.root / 'leaderboard.json'}")
            record["leaderboard"] = {"job": job, "sbatch": cmd}
        with open(p.root / "slurm" / "submissions.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return 0
    except SubmitError as e:
        print(f"naru-eval sweep submit: {e}", file=sys.stderr)
        return 2


def cmd_check_launcher(args: argparse.Namespace) -> int:
    """Exit 2, saying the fix, when the launcher would start fewer processes than it asks for."""
    from naru_eval.lmms.launch import launch_problem, parse_accelerate

    words = [w for w in args.launcher if w != "--"]
    launch = parse_accelerate(words)
    if launch is None or not launch.num_processes or launch.num_processes <= 1:
        return 0
    import torch  # only when it matters: the CUDA devices accelerate will see on this node

    problem = launch_problem(words, torch.cuda.device_count())
    if problem:
        print(f"frame_sweep: error: --launcher: {problem}", file=sys.stderr)
        return 2
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="the frame sweep on SLURM: submit array jobs (one per model) and the leaderboard job after them",
    )
    sub = p.add_subparsers(dest="sweep_command", required=True)
    s = sub.add_parser(
        "submit",
        help="one SLURM array job per model (one task per budget) and a leaderboard job after them all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--model", dest="models", action=_ModelAction, required=True, help="lmms-eval --model (repeatable)")
    s.add_argument("--model_args", "--model-args", dest="model_args", action=_ModelAction, help="of the last --model")
    s.add_argument("--label", dest="label", action=_ModelAction, help="the last --model's leaderboard name")
    s.add_argument("--out", required=True, help="output root: OUT/<label>/fF/ per budget, OUT/leaderboard.json")
    s.add_argument("--budgets", default=DEFAULT_BUDGETS, help=f"frame budgets (default {DEFAULT_BUDGETS})")
    s.add_argument("--array", help="only these budget indices (e.g. 1 or 0,2-3); default: every budget")
    s.add_argument("--max-parallel", type=int, help="at most this many budgets of a model at once (--array …%%K)")
    s.add_argument("--tasks", default=DEFAULT_TASKS, help=f"lmms-eval tasks (default {DEFAULT_TASKS})")
    s.add_argument("--open", action="store_true", help="also run naru_open")
    s.add_argument("--launcher", help='e.g. "accelerate launch --multi_gpu --num_processes 2 -m lmms_eval"')
    s.add_argument("--python", help="the python with naru-eval on the nodes (default: this one)")
    s.add_argument("--repo", help="the naru-eval checkout (default: NARU_EVAL_REPO, else the current one)")
    g = s.add_argument_group("resources (default: none beyond 1 task on 1 node: the partition's defaults)")
    g.add_argument("--partition")
    g.add_argument("--account")
    g.add_argument("--qos")
    g.add_argument("--time", help="per budget, e.g. 04:00:00")
    g.add_argument("--gpus", type=int, default=0, help="GPUs per budget (--gres=gpu:N); open-weight models need 1+")
    g.add_argument("--cpus", type=int, help="CPUs per budget (--cpus-per-task)")
    g.add_argument("--mem", help="memory per budget, e.g. 64G")
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
    c = sub.add_parser(
        "check-launcher", help="(scripts/frame_sweep.sh) refuse a launcher that starts too few processes"
    )
    c.add_argument("launcher", nargs=argparse.REMAINDER)
    c.set_defaults(func=cmd_check_launcher)
