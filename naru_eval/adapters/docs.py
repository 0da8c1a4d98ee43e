"""docs/adapters.md's tables, generated from the family declarations (``naru-eval adapters``).

Each table sits in the doc between its markers (``<!-- adapters:NAME:begin ... -->`` and
``<!-- adapters:NAME:end -->``); :func:`with_tables` replaces every table a doc has and
``naru-eval adapters --write docs/adapters.md`` writes them (a test keeps the committed doc
current). The tables:

- ``families``: every adapter, its module and class, the checkpoints it loads, its inputs and
  position layout;
- ``sampling``: the default sampling, the official rows it reproduces, the context-maximal
  budget and how to run it;
- ``budgets``: each budget's arithmetic and source;
- ``family-args``: the transformers families' own args (a field an ``Args`` subclass adds to
  ``HFArgs``, or whose default it changes);
- ``hooks``: every hook of the transformers families' input builder
  (``naru_eval.adapters.hf.builder.HOOKS``), for docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.family import Family, Official
from naru_eval.adapters.registry import PACKAGE, adapter_class, registered


def _cell(text: str) -> str:
    """A table cell: pipes escaped, one line, reST literals as Markdown ones."""
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ")


def _families(package: str = PACKAGE) -> Iterator[tuple[str, type, Family]]:
    """(class path, class, declaration) of every registered family, in registry order."""
    for model_id, entry in registered(package).items():
        cls = adapter_class(model_id, package)
        yield entry.class_path, cls, cls.family  # type: ignore[attr-defined]


def _is_hf(cls: type) -> bool:
    from naru_eval.adapters.hf.base import HFVideoModel

    return issubclass(cls, HFVideoModel)


def families_markdown(package: str = PACKAGE) -> str:
    """Every adapter: its class, what it loads, its inputs, how its frames are sized, how its model
    is told their times, and its position layout."""
    out = [
        "| `--model` | class | loads (`model_type`: class) | inputs | frames | times | positions |",
        "|---|---|---|---|---|---|---|",
    ]
    for path, cls, fam in _families(package):
        loads = ", ".join(f"`{t}`: `{c}`" for t, c in fam.checkpoints.items()) or "—"
        about = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        inputs = ", ".join(fam.inputs) or "none (answers made elsewhere)"
        cls_cell = f"`{path}`" + (f": {_cell(about)}" if about else "")
        out.append(
            f"| `{fam.id}` | {cls_cell} | {loads} | {inputs} | {fam.frames or '—'} | {fam.times or '—'} "
            f"| {fam.positions or '—'} |"
        )
    return "\n".join(out) + "\n"


def hooks_markdown(package: str = PACKAGE) -> str:
    """The input builder's hooks (``InputBuilder``) and what each gives, and which families override it."""
    from naru_eval.adapters.hf.builder import HOOKS, InputBuilder

    users: dict[str, list[str]] = {}
    for _, cls, fam in _families(package):
        builder = getattr(cls, "Inputs", None)
        if not _is_hf(cls) or builder is None:
            continue
        for hook in HOOKS:
            name = hook.name.partition("(")[0]
            if getattr(builder, name, None) is not getattr(InputBuilder, name, None):
                users.setdefault(name, []).append(f"`{fam.id}`")
    out = ["| hook | what it gives | overridden by |", "|---|---|---|"]
    for hook in HOOKS:
        name = hook.name.partition("(")[0]
        out.append(f"| `{hook.name}` | {_cell(hook.gives)} | {', '.join(users.get(name, [])) or '—'} |")
    return "\n".join(out) + "\n"


def _run_budget(default: Official, fam: Family) -> str:
    if fam.budget is None:
        return "—"
    if default.sampling.frames == fam.budget.frames:
        return "the default"
    return f"`num_frames={fam.budget.frames}`"


def sampling_markdown(package: str = PACKAGE) -> str:
    """Each adapter's default sampling and where it comes from, beside its context-maximal budget."""
    out = [
        "| `--model` | default sampling | official row(s) (or why none) | context-maximal frames | "
        "to run the context-maximal setting |",
        "|---|---|---|---|---|",
    ]
    for _, _, fam in _families(package):
        budget = str(fam.budget.frames) if fam.budget else "—"
        rows: list[tuple[str, Official, str]] = []
        if fam.default is not None:
            rows.append((f"`{fam.id}`", fam.default, _run_budget(fam.default, fam)))
        # a checkpoint's own row: the family's budget is its reference checkpoint's
        rows += [(f"`{fam.id}`, `pretrained=…/{name}`", d, "—") for name, d in fam.by_checkpoint.items()]
        for who, d, run in rows:
            source = ", ".join(d.rows) if d.rows else _cell(d.note)
            out.append(f"| {who} | {d.sampling.label} | {source} | {budget} | {run} |")
        if not rows:
            out.append(f"| `{fam.id}` | the args' (none: no frames) | — | — | — |")
    return "\n".join(out) + "\n"


def budgets_markdown(package: str = PACKAGE) -> str:
    """The context-maximal budgets with their arithmetic and source."""
    out = [
        "| `--model` | context-maximal frames | reference checkpoint | context (tokens) | tokens per 448² frame | source |",
        "|---|---|---|---|---|---|",
    ]
    for _, _, fam in _families(package):
        b = fam.budget
        if b is not None:
            out.append(
                f"| `{fam.id}` | {b.frames} | {b.checkpoint} | {b.context_tokens:,} | {b.tokens_per_frame} | {_cell(b.source)} |"
            )
    return "\n".join(out) + "\n"


def family_args_markdown(package: str = PACKAGE) -> str:
    """The HF families' own args as a Markdown table: each field an ``Args`` subclass adds to
    :class:`HFArgs` or whose default it changes, with the adapters that take it (one row per
    field, default and description)."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    for _, cls, fam in _families(package):
        args = fam.args
        if not _is_hf(cls) or not issubclass(args, HFArgs) or args is HFArgs:
            continue
        for field, info in args.model_fields.items():
            base = HFArgs.model_fields.get(field)
            if base is not None and base.default == info.default and base.description == info.description:
                continue
            default = "required" if info.is_required() else f"`{info.default}`"
            rows.setdefault((field, default, info.description or ""), []).append(f"`{fam.id}`")
    out = ["| arg | adapters | default | meaning |", "|---|---|---|---|"]
    for (field, default, meaning), ids in rows.items():
        out.append(f"| `{field}` | {', '.join(ids)} | {default} | {_cell(meaning)} |")
    return "\n".join(out) + "\n"


#: table name -> its generator (the doc's markers name it)
TABLES: dict[str, Callable[[str], str]] = {
    "families": families_markdown,
    "sampling": sampling_markdown,
    "budgets": budgets_markdown,
    "family-args": family_args_markdown,
    "hooks": hooks_markdown,
}


def begin(name: str) -> str:
    return f"<!-- adapters:{name}:begin (generated by `naru-eval adapters --write`; do not edit) -->"


def end(name: str) -> str:
    return f"<!-- adapters:{name}:end -->"


def markdown(package: str = PACKAGE) -> str:
    """Every table, each under a heading (``naru-eval adapters`` prints it)."""
    return "\n".join(f"### {name}\n\n{make(package)}" for name, make in TABLES.items())


def with_tables(doc_text: str, package: str = PACKAGE) -> str:
    """``doc_text`` with every table between its markers replaced by the generated one; a doc
    with none of the markers is an error."""
    found = False
    for name, make in TABLES.items():
        head, sep, rest = doc_text.partition(begin(name))
        if not sep:
            continue
        _, sep2, tail = rest.partition(end(name))
        if not sep2:
            raise ValueError(f"the document has {begin(name)!r} but no {end(name)!r}")
        doc_text = f"{head}{begin(name)}\n\n{make(package)}\n{end(name)}{tail}"
        found = True
    if not found:
        raise ValueError(f"the document has none of the tables' markers ({', '.join(map(begin, TABLES))})")
    return doc_text
