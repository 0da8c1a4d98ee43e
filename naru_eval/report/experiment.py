"""An experiment: one model over a grid of model-argument variants, on some tasks.

A *variant* is a name and the model args it sets (``f8``: ``num_frames=8``; ``frames_audio``:
``audio=true``); an *axis* is a list of variants of one idea (the frame budgets, the audio arms,
the transcript arms, any model arg's values) with the paired comparisons it asks for; a *cell* is
one variant of each axis, one lmms-eval run in ``OUT/<cell>/``. Everything here is data:
``scripts/frame_sweep.sh`` is the frames axis, ``scripts/audio_ablation.sh`` the ``audio``
ablation, the transcript ablation the ``transcript`` one, and a frame selector (``select=``) one
more axis of a model arg's values. The driver (``naru-eval experiment run``, locally, or a SLURM
array through ``naru-eval sweep submit``) and the checks of a cell's run live elsewhere
(naru_eval/cli/experiment.py, naru_eval/report/sweep.py); :meth:`Experiment.problems` is the one
check of a declaration, made before anything is written or submitted, by both.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from naru_eval.core.budgets import Sampling
from naru_eval.core.runfiles import parse_model_args

#: a variant's name: a folder name part (``-`` joins the parts of a cell's folder)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")
#: the frame sweep's budgets (the paper's Fig. 3) and the default task
DEFAULT_BUDGETS = (8, 16, 32, 64, 128)
DEFAULT_TASKS = ("naru_mcq_500",)
#: the placeholders of the base model args: the cell's budget, and its folder name
BUDGET_FIELD, CELL_FIELD = "{F}", "{cell}"


class _Doc(BaseModel):
    """As every result model (report/models.py ``Doc``): an unknown field is an error."""

    model_config = ConfigDict(extra="forbid")


class Variant(_Doc):
    """One variant as a manifest records it."""

    name: str = Field(description="the folder part (`f8`, `frames_audio`, `its`)")
    value: str = Field(description="as the sweep log shows it (`8` in `f=8`)")
    overrides: dict[str, str] = Field(description="the model args it sets")


class Pair(_Doc):
    """Two variants of an axis compared question by question (`naru-eval compare`)."""

    a: str
    b: str
    across_inputs: bool = Field(description="they differ in input mode: an input ablation")


class Axis(_Doc):
    """One axis of the grid: a list of variants of one idea and the comparisons it asks for."""

    name: str = Field(description="`frames`, `audio`, `transcript`, a model arg (`select`), or `variant`")
    tag: str = Field(description="the sweep log's key (`f` in `f=8`)")
    unit: str = Field(description="what a variant is called in messages (`budget`, `arm`, `variant`)")
    owns: list[str] = Field(description="the model args its variants set (the base args may not)")
    variants: list[Variant]
    pairs: list[Pair] = Field(default_factory=list)
    declared: list[str] = Field(default_factory=list, description="the options that declare it again")


class ExperimentDoc(_Doc):
    """The grid a cell belongs to, in every cell's manifest (status and compare read it back)."""

    model: str
    tasks: list[str]
    axes: list[Axis]


def frames_axis(budgets: Sequence[int]) -> Axis:
    """The frame sweep: one variant per budget, ``fF`` with ``num_frames=F`` (no comparisons:
    the budgets are a curve, the leaderboard's)."""
    return Axis(
        name="frames",
        tag="f",
        unit="budget",
        owns=["num_frames", "fps"],
        variants=[Variant(name=f"f{b}", value=str(b), overrides={"num_frames": str(b)}) for b in budgets],
    )


@dataclass(frozen=True)
class Arm:
    """One arm of an input ablation: its name, the args it sets (``{arg}``: the ablation's
    argument, e.g. the transcript source) and any other arg an adapter must take to have it."""

    name: str
    sets: tuple[tuple[str, str], ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ablation:
    """An input ablation's arms and the pairs it compares (B against A, and whether they differ
    in input mode)."""

    arms: tuple[Arm, ...]
    pairs: tuple[tuple[str, str, bool], ...]
    arg: str | None = None  # what ``--ablation NAME=ARG`` gives, when it needs one

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.arms]

    @property
    def owns(self) -> list[str]:
        return sorted({k for a in self.arms for k, _ in a.sets})

    def allowed(self, fields: set[str] | None) -> list[str]:
        """The arms an adapter whose args are ``fields`` has (None: any adapter, all of them)."""
        return [a.name for a in self.arms if fields is None or {k for k, _ in a.sets} | set(a.needs) <= fields]

    def axis(self, name: str, arg: str | None, arms: Sequence[str]) -> Axis:
        table = {a.name: a for a in self.arms}
        variants = [
            Variant(name=a, value=a, overrides={k: v.replace("{arg}", arg or "") for k, v in table[a].sets})
            for a in arms
            if a in table
        ]
        pairs = [Pair(a=a, b=b, across_inputs=x) for a, b, x in self.pairs if a in arms and b in arms]
        return Axis(name=name, tag="arm", unit="arm", owns=self.owns, variants=variants, pairs=pairs)


#: the input ablations: which arms, what each sets, and which pairs are compared (B against A)
ABLATIONS: dict[str, Ablation] = {
    # what audio is worth (docs/adapters.md, "The soundtrack"); the control hears another video. The
    # audio-only arm and the control need naru-eval to decode the soundtrack itself (audio_source):
    # Gemini, whose provider takes the soundtrack natively with the video, has frames and frames_audio
    "audio": Ablation(
        arms=(
            Arm("frames", (("audio", "false"),)),
            Arm("frames_audio", (("audio", "true"),)),
            Arm("audio", (("audio", "true"), ("video", "false")), needs=("audio_source",)),
            Arm("control", (("audio", "true"), ("audio_source", "other")), needs=("video",)),
        ),
        pairs=(
            ("frames", "frames_audio", True),
            ("control", "frames_audio", False),
            ("audio", "frames", True),
            ("audio", "frames_audio", True),
        ),
    ),
    # what the dialogue is worth (docs/transcripts.md, "The ablation"); the control reads another video's
    "transcript": Ablation(
        arms=(
            Arm("frames", (("transcript", "none"),)),
            Arm("frames_transcript", (("transcript", "{arg}"),)),
            Arm("transcript", (("transcript", "{arg}"), ("video", "false"))),
            Arm("control", (("transcript", "{arg}"), ("transcript_source", "other"))),
        ),
        pairs=(
            ("frames", "frames_transcript", True),
            ("control", "frames_transcript", False),
            ("transcript", "frames", True),
            ("transcript", "frames_transcript", True),
        ),
        arg="the transcript source (a folder, asr or embedded): --ablation transcript=/data/subs",
    ),
}


def value_axis(key: str, values: Sequence[str]) -> Axis:
    """``--axis KEY=V1,V2,...``: one variant per value of one model arg, each compared with the
    first (the baseline: ``select=uniform,random,its`` pairs uniform with each)."""
    variants = [Variant(name=v, value=v, overrides={key: v}) for v in values]
    pairs = [Pair(a=values[0], b=v, across_inputs=False) for v in values[1:]]
    return Axis(name=key, tag=key, unit="variant", owns=[key], variants=variants, pairs=pairs)


def custom_axis(specs: Sequence[str]) -> Axis:
    """``--variant NAME:k=v,k=v`` (repeatable): variants declared by hand, each compared with the first."""
    variants = []
    for spec in specs:
        name, _, args = spec.partition(":")
        variants.append(Variant(name=name, value=name, overrides=parse_model_args(args)))
    owns = sorted({k for v in variants for k in v.overrides})
    pairs = [Pair(a=variants[0].name, b=v.name, across_inputs=False) for v in variants[1:]]
    return Axis(name="variant", tag="variant", unit="variant", owns=owns, variants=variants, pairs=pairs)


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a variant of each axis."""

    name: str  # its folder under the output root: the variants' names joined by "-"
    tag: str  # as the sweep log writes it: "f=8", "arm=frames", "f=8,select=its"
    values: tuple[tuple[str, str], ...]  # axis name -> variant name
    overrides: tuple[tuple[str, str], ...]  # the model args the variants set, in axis order
    budget: int | None  # the frames axis's num_frames, when there is one

    @property
    def sampling(self) -> str | None:
        """The budget as the official table prints it ("8 Frames")."""
        return Sampling(frames=self.budget).label if self.budget else None


@dataclass(frozen=True)
class Experiment:
    """One model (its base args) over the product of its axes, on ``tasks``."""

    model: str
    model_args: str
    tasks: tuple[str, ...]
    axes: tuple[Axis, ...]

    def cells(self) -> list[Cell]:
        out = []
        for combo in itertools.product(*(a.variants for a in self.axes)):
            overrides = tuple((k, v) for var in combo for k, v in var.overrides.items())
            budget = next((int(var.value) for a, var in zip(self.axes, combo, strict=True) if a.name == "frames"), None)
            out.append(
                Cell(
                    name="-".join(v.name for v in combo),
                    tag=",".join(f"{a.tag}={v.value}" for a, v in zip(self.axes, combo, strict=True)),
                    values=tuple((a.name, v.name) for a, v in zip(self.axes, combo, strict=True)),
                    overrides=overrides,
                    budget=budget,
                )
            )
        return out

    @property
    def unit(self) -> str:
        """What one cell is called in messages: the one axis's unit ("budget"), else "cell"."""
        return self.axes[0].unit if len(self.axes) == 1 else "cell"

    def listing(self) -> str:
        """The cells as messages name them: one axis's values ("8,16"), else the cells' folders."""
        if len(self.axes) == 1:
            return ",".join(v.value for v in self.axes[0].variants)
        return ",".join(c.name for c in self.cells())

    def args_of(self, cell: Cell) -> str:
        """The cell's ``--model_args``: the base (``{F}`` its budget, ``{cell}`` its folder), then
        what its variants set."""
        base = self.model_args.replace(BUDGET_FIELD, str(cell.budget)).replace(CELL_FIELD, cell.name)
        return ",".join([p for p in base.split(",") if p.strip()] + [f"{k}={v}" for k, v in cell.overrides])

    def pairs(self) -> list[tuple[Cell, Cell, bool]]:
        """Every comparison the axes ask for, at each combination of the other axes' variants."""
        by_values = {c.values: c for c in self.cells()}
        out = []
        for i, axis in enumerate(self.axes):
            for pair in axis.pairs:
                for cell in self.cells():
                    if cell.values[i][1] != pair.a:
                        continue
                    other = tuple((nv[0], pair.b) if j == i else nv for j, nv in enumerate(cell.values))
                    if other in by_values:
                        out.append((cell, by_values[other], pair.across_inputs))
        return out

    def doc(self) -> ExperimentDoc:
        return ExperimentDoc(model=self.model, tasks=list(self.tasks), axes=list(self.axes))

    def problems(self) -> list[str]:
        """Everything wrong with the declaration, all at once (the one check before a run or a
        submission; the adapter's own args parser checks each cell's values besides)."""
        out = []
        if not self.model:
            out.append("--model is required")
        if not self.tasks or any(not re.fullmatch(r"[A-Za-z0-9_.-]+", t) for t in self.tasks):
            out.append(f"--tasks {','.join(self.tasks)!r}: give task names separated by commas (no spaces)")
        base = parse_model_args(self.model_args)
        owners: dict[str, int] = {}
        names = [a.name for a in self.axes]
        for name in sorted({n for n in names if names.count(n) > 1}):
            out.append(f"two axes are named {name!r} (an ablation and an --axis of one arg?): declare it once")
        for i, axis in enumerate(self.axes):
            if not axis.variants:
                out.append(f"the {axis.name} axis has no {axis.unit}")
            given = [v.name for v in axis.variants]
            for name in sorted({n for n in given if given.count(n) > 1}):
                out.append(f"the {axis.name} {axis.unit} {name!r} is given twice (it would run twice into one folder)")
            for v in axis.variants:
                if not NAME_RE.fullmatch(v.name):
                    out.append(
                        f"the {axis.unit} name {v.name!r} is no folder name (letters, digits, '_' and '.', starting "
                        "with a letter or digit): name it with --variant NAME:ARGS"
                    )
                for k, value in v.overrides.items():
                    if not k or not re.fullmatch(r"[A-Za-z0-9_]+", k) or not value or "," in value:
                        out.append(f"the {axis.unit} {v.name!r} sets {k}={value!r}: not a model arg k=v")
            for k in axis.owns:
                if k in base:
                    what = "the sweep sets num_frames=F itself" if axis.name == "frames" else f"the {axis.unit}s set it"
                    out.append(f"--model_args sets {k}; {what} ({axis.name}: {', '.join(axis.owns)})")
                if k in owners and owners[k] != i:
                    out.append(f"the {self.axes[owners[k]].name} and {axis.name} axes both set {k}")
                owners.setdefault(k, i)
        if BUDGET_FIELD in self.model_args and not any(a.name == "frames" for a in self.axes):
            out.append(f"--model_args holds {BUDGET_FIELD} (a budget) but the experiment has no --budgets")
        return out


def parse_budgets(text: str) -> list[int]:
    """``8,16, 32``: positive integers, each once (spaces allowed). Raises ValueError naming the
    bad part: the sweep's array tasks read the same list with this parser."""
    budgets: list[int] = []
    for part in text.split(","):
        if not re.fullmatch(r"[1-9][0-9]*", part.strip()):
            raise ValueError(f"--budgets {text}: budget {part.strip()!r} is not a positive integer")
        if int(part) in budgets:
            raise ValueError(
                f"--budgets {text}: budget {int(part)} is given twice (it would run twice into one folder)"
            )
        budgets.append(int(part))
    return budgets
