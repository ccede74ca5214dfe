"""The fleet state: watch events in, per-node heartbeat views out.

Every source (live cluster, replay, simulation) feeds ``FleetState.apply`` with the same
``(resource, type, object, received_at)`` tuples; the dashboard and ``status`` read
``FleetState.evaluate(now)`` and the queries, which hand out the views of ``core/views.py``. The
state is thread-safe (one lock): sources apply from their threads, the UI reads from its own.

``FleetState`` is assembled from parts with one job each: ``fleet_data`` (its fields),
``ingest`` (events in), ``evaluation`` (the rules at ``now``, incrementally), ``queries`` (what
readers may ask) and ``keyframe`` (a copy to seek back to).
"""

from __future__ import annotations

from . import keyframe
from .ingest import Ingest
from .keyframe import Keyframe
from .queries import Queries


class FleetState(Ingest, Queries):
    """The heart of nodewatch; see the module docstring."""

    def snapshot(self, prev: Keyframe | None = None) -> Keyframe:
        """A keyframe of everything ``apply`` built (``prev``: the previous one, to share with)."""
        return keyframe.take(self, prev)

    def restore(self, kf: Keyframe | None) -> None:
        """Become exactly the keyframe (None: empty), in place."""
        keyframe.restore(self, kf)
