"""What ``FleetState`` holds: the objects the sources fed it, and the caches its evaluation keeps.

One class declares every field, so a reader of ``ingest``, ``evaluation`` or ``queries`` (the
parts of ``FleetState``, one job each) finds here what ``self.nodes`` or ``self._order`` is. These
fields belong to the core: readers outside it use ``FleetState``'s methods and the views of
``core/views.py`` (tests/test_layers.py keeps it so).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import deque

from sortedcontainers import SortedKeyList

from .objects import EventRecord, NodeRecord, PodRecord
from .rules import NodeState
from .settings import Settings
from .views import CertInfo, FleetView, LeaseTrack, NodeView, Problem, WatchHealth

MAX_PROBLEMS = 200


def sort_key(v: NodeView) -> tuple:
    """The fleet order: worst state first, then the nearest deadline, then the name."""
    return (v.state.rank, v.sort_deadline, v.name)


class FleetData:
    """The fields of ``FleetState``; see the module docstring."""

    def __init__(self, settings: Settings | None = None, *, silence_seconds: float | None = None) -> None:
        self.settings = settings or Settings()
        self.lock = threading.RLock()
        # --- what the sources fed (a keyframe copies exactly these) ---
        self.nodes: dict[str, NodeRecord] = {}
        self.leases: dict[str, LeaseTrack] = {}
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self.events: dict[tuple[str, str], EventRecord] = {}
        self.events_by_node: dict[str, set[tuple[str, str]]] = {}
        self.certs: dict[str, CertInfo] = {}
        self.health: dict[str, WatchHealth] = {}
        self.problems: deque[Problem] = deque(maxlen=MAX_PROBLEMS)
        self.timelines: dict[str, deque[tuple[float, str]]] = {}
        self.synced: set[str] = set()
        self.last_received: float | None = None
        self.generation = 0
        self.lists_done = 0
        """Lists of live streams that have completed (their health turned synced, after their
        SYNCED): a dashboard draws a frame as soon as one does, rather than at its next tick.
        Counted on the health, not on SYNCED: a frame drawn between the two would still call the
        lease stream blind ("listing")."""
        self.silence_seconds = silence_seconds
        """Lease stream silent this long (no event, no bookmark) = the dashboard may be blind.
        None: 2 x the renew interval."""
        self.cluster = ""
        """The cluster every view names (``NodeView.cluster``) when several are watched ("": the only one)."""
        self._seq = 0
        self._published: FleetView | None = None
        """The latest snapshot ``evaluate`` published (``published()``); kept across a restore."""
        self._reset_caches()

    def _reset_caches(self) -> None:
        """Forget everything derived from the data above (a restored keyframe starts from here)."""
        self._views: dict[str, NodeView] = {}
        self._dirty: set[str] = set(self.nodes)
        self._order: SortedKeyList = SortedKeyList(key=sort_key)
        """Worst first. A sorted list of sublists: moving a node costs O(log n), not a memmove of
        the whole fleet (which made a 20,000-node zone outage cost seconds)."""
        self._counts: dict[NodeState, int] = {st: 0 for st in NodeState}
        self._tally: dict[str, list[int]] = {}
        """Per zone: [Ready, not Ready] nodes, as the node lifecycle controller counts them."""
        self._due: list[tuple[float, str]] = []
        """A heap of (time, node): when a view's rules could give another state with time alone."""
        self._blind_cached: bool | None = None
        self._evaluated_at = -math.inf
        """``now`` of the last ``evaluate``: an earlier ``now`` (a replay stepping back) re-judges every node."""
        self.beats: dict[str, array] = {}
        """Per node: receive times of its last ``MAX_BEATS`` observed lease renewals (``array('d')``,
        NaN = a gap). Derived from the lease events like the caches, so not in keyframes: a restored
        keyframe starts with none and the events replayed after it add theirs."""
