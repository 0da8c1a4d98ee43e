"""``naru-eval adapters``: the adapters' tables of docs/adapters.md, generated from the family
declarations (``naru_eval.adapters.docs``), printed or written into a doc between its markers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_adapters(args: argparse.Namespace) -> int:
    """Print the tables, or write them into a doc between its markers (``--check``: only compare)."""
    from naru_eval.adapters.docs import markdown, with_tables
    from naru_eval.adapters.registry import problems

    bad = problems()
    if bad:  # every other family is listed; the broken modules are named first, and the exit is 1
        print(f"naru-eval adapters: {len(bad)} family module problem(s); those families are left out:", file=sys.stderr)
        for p in bad:
            print(f"  {p}", file=sys.stderr)
    if not args.write:
        print(markdown(), end="")
        return 1 if bad else 0
    doc = Path(args.write)
    old = doc.read_text(encoding="utf-8")
    new = with_tables(old)
    if args.check:
        if new != old:
            print(f"{doc}: the adapters' tables are out of date; run naru-eval adapters --write {doc}")
            return 1
        return 0
    doc.write_text(new, encoding="utf-8")
    print(f"wrote the adapters' tables into {doc}")
    return 1 if bad else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``adapters`` to the ``naru-eval`` subparsers object."""
    p = subparsers.add_parser(
        "adapters",
        help="the adapters' tables (families, default sampling, budgets, family args), generated from the families",
    )
    p.add_argument("--write", metavar="DOC", help="replace the tables of DOC between their markers (docs/adapters.md)")
    p.add_argument("--check", action="store_true", help="with --write: exit 1 if DOC's tables are out of date")
    p.set_defaults(func=cmd_adapters)
