"""The options that declare an experiment's grid, and their one check: ``naru-eval experiment
run`` and ``naru-eval sweep submit`` build and check a grid with the same code, so a submission
refuses what its array tasks would (naru_eval/report/experiment.py holds the grid itself)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from naru_eval.report.experiment import (
    ABLATIONS,
    DEFAULT_BUDGETS,
    DEFAULT_TASKS,
    Axis,
    Experiment,
    custom_axis,
    frames_axis,
    parse_budgets,
    value_axis,
)

if TYPE_CHECKING:
    from naru_eval.adapters.args import AdapterArgs


class GridError(ValueError):
    """A grid that cannot run as declared: every problem, one per line."""


@dataclass(frozen=True)
class GridOptions:
    """The options that declare a grid (the same for ``run`` and ``submit``)."""

    budgets: str | None
    ablation: str | None
    arms: str | None
    axes: tuple[str, ...]
    variants: tuple[str, ...]
    tasks: str
    open: bool

    @classmethod
    def of(cls, args: argparse.Namespace) -> GridOptions:
        return cls(args.budgets, args.ablation, args.arms, tuple(args.axis), tuple(args.variant), args.tasks, args.open)


def add_grid_options(p: argparse.ArgumentParser) -> None:
    """The grid's options, on ``experiment run`` and ``sweep submit`` alike."""
    g = p.add_argument_group("the grid (default: the frame sweep, --budgets 8,16,32,64,128)")
    g.add_argument("--budgets", help="frame budgets, one cell each: OUT/fF/ with num_frames=F (e.g. 8,16,32)")
    g.add_argument(
        "--ablation",
        help=f"an input ablation: {', '.join(ABLATIONS)} (transcript=SOURCE: a folder, asr or embedded); "
        "OUT/<arm>/ per arm, compared in pairs",
    )
    g.add_argument("--arms", help="only these arms of --ablation (default: every arm the adapter's args allow)")
    g.add_argument(
        "--axis",
        action="append",
        default=[],
        help="KEY=V1,V2,...: one cell per value of a model arg, each compared with the first (repeatable)",
    )
    g.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:k=v,k=v: a variant declared by hand (repeatable; one axis, each compared with the first)",
    )
    g.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="lmms-eval tasks (default: naru_mcq_500)")
    g.add_argument("--open", action="store_true", help="also run the open-ended task naru_open")


def adapter_args(model: str) -> type[AdapterArgs] | None:
    """The args model of a naru-eval adapter (its module imported now); None for another model.
    A family module that cannot be read or imported is a GridError naming it, not a traceback."""
    from naru_eval.adapters.registry import adapter_class, registered

    try:
        if model not in registered():
            return None
        cls = adapter_class(model)
    except (ImportError, SyntaxError, ValueError, TypeError) as e:
        raise GridError(f"cannot read the model args of {model}: {type(e).__name__}: {e}") from None
    args: type[AdapterArgs] = getattr(cls, "Args")  # noqa: B009 - a class attribute every adapter declares
    return args


def build(model: str, model_args: str, grid: GridOptions, fields: Iterable[str] | None) -> Experiment:
    """The experiment the options declare, checked (:meth:`Experiment.problems` and, for a
    naru-eval adapter, which arms its ``fields`` allow). GridError lists every problem."""
    problems: list[str] = []
    axes: list[Axis] = []
    known = set(fields) if fields is not None else None
    if grid.budgets is not None or not (grid.ablation or grid.axes or grid.variants):
        text = grid.budgets if grid.budgets is not None else ",".join(map(str, DEFAULT_BUDGETS))
        try:
            axis = frames_axis(parse_budgets(text))
            axes.append(axis.model_copy(update={"declared": ["--budgets", text.replace(" ", "")]}))
        except ValueError as e:
            problems.append(str(e))
    if grid.ablation:
        name, sep, arg = grid.ablation.partition("=")
        ablation = ABLATIONS.get(name)
        if ablation is None:
            problems.append(f"--ablation {grid.ablation}: not one of {', '.join(ABLATIONS)}")
        elif ablation.arg and not arg:
            problems.append(f"--ablation {name} needs {ablation.arg}")
        elif sep and not ablation.arg:
            problems.append(f"--ablation {name} takes no argument (got {grid.ablation!r})")
        else:
            allowed = ablation.allowed(known)
            if not allowed:
                problems.append(
                    f"--ablation {name}: {model}'s args allow none of its arms ({', '.join(ablation.names)} set "
                    f"{', '.join(ablation.owns)}; `naru-eval adapters` lists each adapter's inputs)"
                )
            chosen = allowed if grid.arms is None else [a.strip() for a in grid.arms.split(",") if a.strip()]
            for arm in chosen:
                if arm not in ablation.names:
                    problems.append(f"unknown arm {arm} of --ablation {name} ({', '.join(ablation.names)})")
                elif arm not in allowed:
                    problems.append(f"{model} has no arm {arm} (its args allow: {', '.join(allowed)})")
            axis = ablation.axis(name, arg or None, chosen)
            if allowed:
                declared = ["--ablation", grid.ablation, "--arms", ",".join(chosen)]
                axes.append(axis.model_copy(update={"declared": declared}))
    elif grid.arms is not None:
        problems.append("--arms needs --ablation (the arms are an ablation's)")
    for spec in grid.axes:
        key, sep, values = spec.partition("=")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not vals:
            problems.append(f"--axis {spec!r}: give KEY=V1,V2 (e.g. --axis select=uniform,random,its)")
            continue
        axes.append(value_axis(key.strip(), vals).model_copy(update={"declared": ["--axis", spec]}))
    if grid.variants:
        bad = [v for v in grid.variants if ":" not in v]
        problems += [f"--variant {v!r}: give NAME:k=v,k=v" for v in bad]
        axis = custom_axis([v for v in grid.variants if ":" in v])
        axes.append(axis.model_copy(update={"declared": [w for v in grid.variants for w in ("--variant", v)]}))
    tasks = [t.strip() for t in grid.tasks.split(",") if t.strip()]
    if grid.open and "naru_open" not in tasks:
        tasks.append("naru_open")
    exp = Experiment(model=model, model_args=model_args, tasks=tuple(tasks), axes=tuple(axes))
    problems += exp.problems()
    if known is not None:
        for k in sorted({k for a in axes for v in a.variants for k in v.overrides} - known):
            problems.append(f"{model} takes no model arg {k} (a variant sets it)")
    if problems:
        raise GridError("\n".join(dict.fromkeys(problems)))
    return exp


def check_cells(exp: Experiment, args_model: type[AdapterArgs] | None) -> list[str]:
    """Each cell's ``--model_args`` through the adapter's own parser (all problems, before any
    run): a bad value in the last cell is named before the first one runs. Secret-named args are
    left to the caller (a local run masks them, a submission refuses them)."""
    if args_model is None:
        return []
    from naru_eval.adapters.args import parse_model_args as parse_typed
    from naru_eval.core.runfiles import parse_model_args
    from naru_eval.store.responses import is_secret

    found: dict[str, list[str]] = {}
    for cell in exp.cells():
        kv = {k: v for k, v in parse_model_args(exp.args_of(cell)).items() if not is_secret(k)}
        try:
            parse_typed(args_model, kv, exp.model)
        except ValueError as e:
            found.setdefault(str(e), []).append(cell.name)
    return [f"{', '.join(cells)}: {msg}" for msg, cells in found.items()]


def launcher_problem(words: Sequence[str]) -> str | None:
    """Why the launcher would start fewer processes than it asks for on this node (accelerate
    without --multi_gpu runs one, silently: naru_eval/lmms/launch.py)."""
    from naru_eval.lmms.launch import launch_problem, parse_accelerate

    launch = parse_accelerate(list(words))
    if launch is None or not launch.num_processes or launch.num_processes <= 1:
        return None
    import torch  # only when it matters: the CUDA devices accelerate will see on this node

    return launch_problem(list(words), torch.cuda.device_count())
