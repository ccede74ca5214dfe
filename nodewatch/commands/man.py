"""``nodewatch man``: the manual page in roff, generated from the parser by argparse-manpage.

One source for ``--help``, completion and the man page: the argparse definitions. Every command's
options are included (the full parser is built here, unlike a normal run that imports one command).
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "Install: `nodewatch man > ~/.local/share/man/man1/nodewatch.1`, then `man nodewatch`."


def run(args: argparse.Namespace) -> int:
    from argparse_manpage.manpage import Manpage

    from .. import __version__

    parser = args._build_parser()  # the command line's own (cli.py hands it over: no import back)
    page = Manpage(parser, _data={"version": __version__, "project_name": "nodewatch",
                                  "description": "is every node of a Kubernetes fleet still alive?"})
    sys.stdout.write(str(page))
    return 0
