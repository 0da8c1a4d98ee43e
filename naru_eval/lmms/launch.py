"""Whether ``accelerate launch`` starts the processes it was asked for, before any compute.

accelerate 1.15 starts several processes only with ``--multi_gpu`` (or ``--use_deepspeed``,
``--use_fsdp``, ``--use_megatron_lm``, ``--tpu``), or when it sees more than one CUDA device;
otherwise ``--num_processes 4`` silently runs *one* process (its "simple launcher"), and
``--cpu`` always runs one. lmms-eval then evaluates everything on that one process and nothing
says the run was not sharded. Two checks refuse that launch with the fix:

* :func:`launch_problem` reads a launcher command line (the sweep's ``--launcher``, before it
  starts anything; ``naru-eval sweep submit``, with the GPUs the job will get);
* :func:`check_launch`, in every NARU task's preflight, compares the ``--num_processes`` of the
  ``accelerate launch`` that started this process (its parent's command line) with the
  ``WORLD_SIZE`` it got, so a direct ``accelerate launch`` is caught too.

The options are read by accelerate's own parser (``launch_command_parser``), so every spelling it
takes (``--num-processes=2``, ``--num_processes 2``) is read the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from naru_eval.core.sharding import world_size_from_env

#: the accelerate options that start several processes whatever devices it sees
MULTI_FLAGS: tuple[str, ...] = ("multi_gpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "tpu")


class LaunchError(RuntimeError):
    """A launch that runs fewer processes than it asks for (the message says the fix)."""


@dataclass(frozen=True)
class AccelerateLaunch:
    """The options of one ``accelerate launch`` command line that decide how many processes run."""

    num_processes: int | None
    multi: bool  # one of MULTI_FLAGS
    cpu: bool
    config_file: str | None  # --config_file, or accelerate's default config when it exists


def accelerate_args(argv: Sequence[str]) -> list[str] | None:
    """The words after ``accelerate launch`` (``accelerate-launch``, ``python -m
    accelerate.commands.launch``) in ``argv``; None when ``argv`` is no accelerate launch."""
    words = list(argv)
    for i, word in enumerate(words):
        name = Path(word).name
        if name == "accelerate" and words[i + 1 : i + 2] == ["launch"]:
            return words[i + 2 :]
        if name == "accelerate-launch":
            return words[i + 1 :]
        if word in ("-m", "--module") and words[i + 1 : i + 2] == ["accelerate.commands.launch"]:
            return words[i + 2 :]
    return None


def parse_accelerate(argv: Sequence[str]) -> AccelerateLaunch | None:
    """The process-count options of an ``accelerate launch`` command line (None: not one)."""
    rest = accelerate_args(argv)
    if rest is None:
        return None
    from accelerate.commands.config import default_config_file
    from accelerate.commands.launch import launch_command_parser

    args, _unknown = launch_command_parser().parse_known_args(rest)
    config = args.config_file or (default_config_file if os.path.isfile(default_config_file) else None)
    return AccelerateLaunch(
        num_processes=args.num_processes,
        multi=any(bool(getattr(args, flag, False)) for flag in MULTI_FLAGS),
        cpu=bool(args.cpu),
        config_file=config,
    )


def _fix(asked: int) -> str:
    return (
        f"use `accelerate launch --multi_gpu --num_processes {asked} -m lmms_eval ...` (on CPU-only nodes too: "
        "accelerate then runs the processes over gloo); see docs/cluster.md"
    )


def launch_problem(argv: Sequence[str], cuda_devices: int) -> str | None:
    """Why the launcher ``argv`` would run fewer processes than its ``--num_processes`` on a node
    where accelerate sees ``cuda_devices`` CUDA devices; None when it runs them all (or is not an
    accelerate launch, or leaves the count to a config file: :func:`check_launch` sees those)."""
    launch = parse_accelerate(argv)
    if launch is None or launch.num_processes is None or launch.num_processes <= 1:
        return None
    asked = launch.num_processes
    if launch.cpu:
        return f"`accelerate launch --cpu --num_processes {asked}` starts one process, not {asked}: {_fix(asked)}"
    if launch.multi or launch.config_file is not None:
        return None
    if cuda_devices > 1:
        return None  # accelerate turns --multi_gpu on itself
    return (
        f"`accelerate launch --num_processes {asked}` without --multi_gpu starts one process, not {asked}, where "
        f"accelerate sees fewer than two CUDA devices (here {cuda_devices}): {_fix(asked)}"
    )


def parent_command(pid: int | None = None) -> list[str] | None:
    """The command line of this process's parent (Linux ``/proc``); None where it cannot be read."""
    ppid = os.getppid() if pid is None else pid
    try:
        raw = Path(f"/proc/{ppid}/cmdline").read_bytes()
    except OSError:
        return None
    return [w.decode(errors="replace") for w in raw.split(b"\0") if w]


def check_launch(parent: Sequence[str] | None = None, world_size: int | None = None) -> None:
    """Raise :class:`LaunchError` when the ``accelerate launch`` that started this process asked
    for more processes than ``WORLD_SIZE`` says were started (``parent``: its command line,
    default read from ``/proc``)."""
    argv = parent_command() if parent is None else list(parent)
    if not argv:
        return
    launch = parse_accelerate(argv)
    if launch is None or launch.num_processes is None:
        return
    got = world_size_from_env() if world_size is None else world_size
    if launch.num_processes > got:
        raise LaunchError(
            f"accelerate launch was asked for --num_processes {launch.num_processes} but started {got} process(es) "
            f"(WORLD_SIZE={got}): accelerate runs several processes only with --multi_gpu or when it sees more than "
            f"one CUDA device, and --cpu always runs one. Nothing was evaluated; {_fix(launch.num_processes)}."
        )
