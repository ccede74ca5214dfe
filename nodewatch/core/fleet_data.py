"""The store: what the sources fed ``FleetState``, written by ``Ingest`` alone.

``FleetState`` is composed of parts that each own their fields (docs/snapshots.md): this ``Store``
(the objects fed, written only by ``ingest.Ingest``; copied by ``keyframe.take``, replaced by
``keyframe.restore``), the ``evaluation.Evaluator`` (its caches and the published snapshot,
written only by itself) and ``queries.Queries`` (no fields: it reads both under the lock). Until
this session the four were mixins of one object over 26 shared fields, and which part wrote which
field could only be found by reading all five files. Readers outside the core use ``FleetState``'s
methods and the published views, never these fields (tests/project/test_layers.py keeps it so).
"""

from __future__ import annotations

import threading
from array import array
from collections import deque

from . import pod_tolerations
from .evidence import StreamFrontier
from .objects import EventRecord, NodeRecord, PodRecord
from .settings import Settings
from .views import CertInfo, LeaseTrack, NodeView, Problem, WatchHealth

MAX_PROBLEMS = 200


def sort_key(v: NodeView) -> tuple[int, float, str]:
    """The fleet order: worst state first, then the nearest deadline, then the name."""
    return (v.state.rank, v.sort_deadline, v.name)


class Store:
    """The objects the sources fed; see the module docstring. Every write happens under ``lock``
    in ``ingest.Ingest`` (and ``keyframe.restore``); the evaluator and the queries read under it."""

    def __init__(self, settings: Settings | None = None, *, silence_seconds: float | None = None) -> None:
        self.settings = settings or Settings()
        self.lock = threading.RLock()
        """The state's one lock: ingest writes, the evaluator judges and publishes, queries copy out."""
        # --- what the sources fed (a keyframe copies exactly these) ---
        self.nodes: dict[str, NodeRecord] = {}
        self.not_ready: set[str] = set()
        """Derived, kept with ``nodes`` (``Ingest._on_node``, ``keyframe.restore``): the nodes whose
        Ready condition is not True. The live source asks for them every second (their pods and
        events are watched): a scan of 130,000 records under the lock each time cost more than the
        13,000 renewals a second it held up."""
        self.leases: dict[str, LeaseTrack] = {}
        self.pods: dict[tuple[str, str], PodRecord] = {}
        self.pod_schedules: dict[tuple[str, str], tuple[float, float]] = {}
        """Pods whose tolerations changed while their eviction was scheduled: (that eviction, when
        the change was seen). The taint-eviction controller keeps it (``rules.process_pod_on_node``)."""
        self.pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self.tolerations = pod_tolerations.Tally()
        """Kept with ``pods`` (``Ingest._on_pod``; a keyframe keeps what it learned): how many pods
        tolerate each eviction taint for how long, and the default they show, which
        ``settings.learned_tolerations`` holds."""
        self.events: dict[tuple[str, str], EventRecord] = {}
        self.events_by_node: dict[str, set[tuple[str, str]]] = {}
        self.certs: dict[str, CertInfo] = {}
        self.registered: dict[str, float] = {}
        """Per node: when the node controller last registered it (its ``RegisteredNode`` event, on
        nodewatch's clock: ``Ingest._on_event``). A controller manager that starts (a restart, a new
        leader) registers every node at its first pass and starts counting each one's grace from
        there (``tryUpdateNodeHealth``: "Missing timestamp for Node. Assuming now as a timestamp"):
        the probe time of a node that stopped renewing before that is the registration."""
        self.health: dict[str, WatchHealth] = {}
        self.problems: deque[Problem] = deque(maxlen=MAX_PROBLEMS)
        self.timelines: dict[str, deque[tuple[float, str]]] = {}
        self.synced: set[str] = set()
        self.relisted: dict[str, set[str]] = {}
        """Per resource (nodes, leases): the names its list in progress has given so far. At the
        list's SYNCED, what the state holds of that resource and the list did not give is deleted, as
        an informer's Replace does: a Node deleted while nobody watched (a hub restarted after a
        stop, read across in a replay) does not stay as a stale node judged by its old Lease."""
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
        self.listed_at: dict[str, float] = {}
        """Per resource: receive time of its last list's SYNCED. Until one renewal interval after
        the leases', a lease the server did not date is not evidence yet (``core/evidence.py``).
        Not in keyframes: a restored one starts without (judged as listed)."""
        self.lease_frontier: StreamFrontier | None = None
        """How far the live lease stream has been read (``core/evidence.py``), fed by the source
        that reads it (``FleetState.track_lease_stream``); None: judged by ``now`` alone.
        Not in keyframes."""
        self.await_evidence = True
        """False: judge listed leases by their list at once (a one-shot answer that names its
        doubts in words; ``FleetState.judge_lists_at_once``)."""
        self.beats: dict[str, array[float]] = {}
        """Per node: receive times of its last ``MAX_BEATS`` observed lease renewals (``array('d')``,
        NaN = a gap). Derived from the lease events, so not in keyframes: a restored keyframe
        starts with none and the events replayed after it add theirs."""
