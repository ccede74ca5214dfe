"""``nodewatch testbed``: the real control plane testbed (the code lives in ``nodewatch.testbed``).

The testbed is developer tooling that writes to clusters, so it is left out of the wheel
(pyproject.toml) and runs from a clone (``pip install -e .``, as ``make`` does). An installed
nodewatch still lists the command and says in one line where it is."""

from __future__ import annotations

import argparse

try:
    from ..testbed.command import add_arguments, run
except ModuleNotFoundError as exc:
    if not (exc.name or "").startswith("nodewatch.testbed"):
        raise
    from .common import CommandError

    NOT_INSTALLED = ("the testbed is developer tooling and not in the installed package: "
                     "run `nodewatch testbed` from a clone of nodewatch (pip install -e .)")

    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(args: argparse.Namespace) -> int:
        raise CommandError(NOT_INSTALLED)

__all__ = ["add_arguments", "run"]
