"""Running the dashboard on a source, with an optional recording of what it receives."""

from __future__ import annotations

import argparse
import os
import sys

from .common import fail


def add_dashboard_arguments(parser: argparse.ArgumentParser, *, record: bool = True) -> None:
    g = parser.add_argument_group("dashboard")
    g.add_argument("--wall", action="store_true", help="wall-screen mode: big counts, only nodes that are not Ready")
    g.add_argument("--node", metavar="NAME", help="open on this node's drill-down (CLUSTER/NAME when several "
                   "clusters are watched); escape goes back to the fleet")
    add_ascii_argument(g)
    if record:
        g.add_argument("--record", metavar="FILE", help="also record the watch streams (JSON Lines; .gz compresses)")


def add_ascii_argument(group) -> None:
    group.add_argument("--ascii", action="store_true", help="draw with ASCII characters and 16 colours only "
                       "(automatic on TERM=linux or vt100 and in a locale that is not UTF-8; also NODEWATCH_ASCII=1 "
                       "or ascii = true in the config file)")


def run_app(source, args: argparse.Namespace, problems: list[str] | None = None) -> int:
    if not sys.stdout.isatty() and not os.environ.get("NODEWATCH_FORCE_TTY"):
        return fail("the dashboard needs a terminal; for scripts use `nodewatch status`")
    # The source first: its lists stream in while Textual is imported and the app is built (at
    # 130,000 nodes the Lease list is the first useful frame's wait). ``run_dashboard`` stops it.
    source.start()
    try:
        from ..config import load_config
        from ..ui.app import run_dashboard
        from ..ui.rows import COLUMN_KEYS
        from ..ui.terminal import detect_terminal

        config = load_config(known_columns=COLUMN_KEYS)
    except BaseException:
        source.stop()
        raise
    return run_dashboard(source, wall=args.wall, problems=problems, focus=getattr(args, "node", None),
                         config=config, terminal=detect_terminal(flag=args.ascii, config=config.ascii), started=True)
