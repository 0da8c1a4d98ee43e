"""``naru-eval store …``: check a store, move a corrupt one aside (the only command that does), and
merge per-rank or per-task response stores into one (naru_eval.store.merge).

The stores (responses, judge cache, upload registry) are never deleted, truncated or rewritten
by a run: a corrupt one stops the run with an error naming it, and stays as it was until the
user moves it aside here (after saving what it holds, e.g. with ``sqlite3 PATH .recover``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_check(args: argparse.Namespace) -> int:
    from naru_eval.store.db import check

    bad = 0
    for p in args.paths:
        problem = check(Path(p))
        if problem:
            bad += 1
            print(problem, file=sys.stderr)
        else:
            print(f"{p}: OK (SQLite integrity check passed)")
    return 1 if bad else 0


def cmd_move_aside(args: argparse.Namespace) -> int:
    from naru_eval.store.db import StoreError, move_aside

    try:
        target = move_aside(Path(args.path), force=args.force)
    except StoreError as e:
        print(f"naru-eval store move-aside: {e}", file=sys.stderr)
        return 1
    print(f"moved {args.path} to {target}; the next run starts a new, empty store")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from naru_eval.store.merge import merge_stores

    report = merge_stores([Path(p) for p in args.sources], Path(args.into))
    print(report.summary())
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("store", help="check a response store / judge cache, or move a corrupt one aside")
    sub = p.add_subparsers(dest="store_command", required=True)
    c = sub.add_parser("check", help="SQLite's integrity check of each store; exit 1 if any is unusable")
    c.add_argument("paths", nargs="+", help="store files (e.g. ~/.cache/naru-eval/responses.sqlite)")
    c.set_defaults(func=cmd_check)
    m = sub.add_parser(
        "move-aside",
        help="rename a corrupt store (and its -wal/-shm) to PATH.corrupt-<time>; the next run starts a new one",
    )
    m.add_argument("path")
    m.add_argument("--force", action="store_true", help="move it even when it passes the integrity check")
    m.set_defaults(func=cmd_move_aside)
    g = sub.add_parser(
        "merge",
        help="join response stores (one per rank or array task) into one; refuses two different ok answers "
        "to one request, and then writes nothing",
    )
    g.add_argument("sources", nargs="+", help="response stores to read (never changed)")
    g.add_argument("--into", required=True, help="the store to write (created when missing; its rows take part)")
    g.set_defaults(func=cmd_merge)
