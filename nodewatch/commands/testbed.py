"""``nodewatch testbed``: the real control plane testbed (the code lives in ``nodewatch.testbed``)."""

from ..testbed.command import add_arguments, run

__all__ = ["add_arguments", "run"]
