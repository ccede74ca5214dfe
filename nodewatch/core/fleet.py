"""The fleet state: watch events in, per-node heartbeat views out.

Every source (live cluster, replay, simulation) feeds ``FleetState.apply`` with the same
``(resource, type, object, received_at)`` tuples; the dashboard and ``status`` read
``FleetState.evaluate(now)``, which publishes a frozen ``FleetView`` (``published()``: the latest),
and the queries, which hand out copies and frozen records. The state is thread-safe (one lock):
sources apply from their threads, the UI reads from its own.

``FleetState`` is composed of parts, each the only writer of its own fields (docs/snapshots.md):

- ``store`` (``fleet_data.Store``): the objects fed. Written by ``ingest`` alone.
- ``evaluator`` (``evaluation.Evaluator``): the rules at ``now``, incrementally; its caches and the
  published snapshot. Written by itself alone; ``ingest`` only tells it which nodes changed.
- ``ingest`` (``ingest.Ingest``): events in.
- ``queries`` (``queries.Queries``): what readers may ask; no fields.

and ``keyframe`` (a copy of the store to seek back to). Its methods are the parts' own, one door:
readers outside the core use these and the views, never the parts.
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from . import keyframe
from .evaluation import Evaluator
from .evidence import StreamFrontier
from .fleet_data import Store
from .ingest import Ingest
from .keyframe import Keyframe
from .objects import CSRRecord, EventRecord, NodeRecord, PodRecord
from .queries import Queries
from .settings import Settings
from .views import PROBLEM_ERROR, CertInfo, FleetView, LeaseTrack, NodeDetails, NodeView, PodView, Problem, WatchHealth


class FleetState:
    """The heart of nodewatch; see the module docstring. Each method below is one part's own
    (its docstring says what it does): this class only holds the parts together."""

    def __init__(self, settings: Settings | None = None, *, silence_seconds: float | None = None,
                 cluster: str = "") -> None:
        self.store = Store(settings, silence_seconds=silence_seconds)
        self.evaluator = Evaluator(self.store, cluster)
        self.ingest = Ingest(self.store, self.evaluator)
        self.queries = Queries(self.store, self.evaluator)

    @property
    def settings(self) -> Settings:
        """The settings the rules run with (``set_settings`` changes them)."""
        return self.store.settings

    @property
    def silence_seconds(self) -> float | None:
        return self.store.silence_seconds

    def snapshot(self, prev: Keyframe | None = None) -> Keyframe:
        """A keyframe of everything ``apply`` built (``prev``: the previous one, to share with)."""
        return keyframe.take(self.store, prev)

    def restore(self, kf: Keyframe | None) -> None:
        """Become exactly the keyframe (None: empty), in place."""
        with self.store.lock:
            keyframe.restore(self.store, kf)
            self.evaluator.reset()

    # --- ingest ---
    def apply(self, resource: str, etype: str, obj: Any, received_at: float | None = None, listing: bool=False) -> bool:
        return self.ingest.apply(resource, etype, obj, received_at, listing)

    def listed(self, resource: str, name: str) -> None:
        return self.ingest.listed(resource, name)

    def registration(self, obj: Any, received_at: float | None) -> None:
        """A ``RegisteredNode`` event from the fleet-wide stream: when the node controller registered
        the node (``Store.registered``), without keeping the event."""
        self.ingest.registration(obj, received_at)

    def apply_lease_watch(self, events: list[Any], received_at: float) -> None:
        self.ingest.apply_lease_watch(events, received_at)

    def set_settings(self, settings: Settings) -> None:
        return self.ingest.set_settings(settings)

    def learn_tolerations(self, learned: Any) -> None:
        return self.ingest.learn_tolerations(learned)

    def problem(self, at: float | None, where: str, message: str, kind: str=PROBLEM_ERROR) -> None:
        return self.ingest.problem(at, where, message, kind)

    def notice(self, at: float | None, where: str, message: str) -> None:
        return self.ingest.notice(at, where, message)

    def update_health(self, resource: str, **changes: Any) -> WatchHealth:
        return self.ingest.update_health(resource, **changes)

    def learn_cert(self, rec: CSRRecord, source: str | None = None) -> None:
        return self.ingest.learn_cert(rec, source)

    def remember_cert(self, node: str, not_after: float, source: str) -> None:
        return self.ingest.remember_cert(node, not_after, source)

    def track_lease_stream(self) -> StreamFrontier:
        """The frontier of the live lease stream, for its reader to feed (``core/evidence.py``):
        from now on a listed lease's age waits for it."""
        with self.store.lock:
            if self.store.lease_frontier is None:
                self.store.lease_frontier = StreamFrontier()
            return self.store.lease_frontier

    def judge_lists_at_once(self) -> None:
        return self.ingest.judge_lists_at_once()

    def ages_in_doubt(self, now: float, names: Iterable[str] | None = None) -> dict[str, float]:
        return self.ingest.ages_in_doubt(now, names)

    # --- evaluator ---
    def evaluate(self, now: float) -> FleetView:
        return self.evaluator.evaluate(now)

    def published(self) -> FleetView | None:
        return self.evaluator.published()

    def refresh(self, now: float) -> bool:
        return self.evaluator.refresh(now)

    def leases_blind(self, now: float) -> tuple[bool, str]:
        return self.evaluator.leases_blind(now)

    # --- queries ---
    def node_view(self, name: str, now: float) -> NodeView | None:
        return self.queries.node_view(name, now)

    def pods_on(self, node: str, now: float) -> list[PodView]:
        return self.queries.pods_on(node, now)

    def events_for(self, node: str) -> list[EventRecord]:
        return self.queries.events_for(node)

    def timeline_for(self, node: str, now: float) -> list[tuple[float, str]]:
        return self.queries.timeline_for(node, now)

    def node_details(self, name: str, now: float, *, max_pods: int | None = None,
                     max_events: int | None = None) -> NodeDetails:
        return self.queries.node_details(name, now, max_pods=max_pods, max_events=max_events)

    def node_count(self) -> int:
        return self.queries.node_count()

    def has_node(self, name: str) -> bool:
        return self.queries.has_node(name)

    def node_records(self) -> dict[str, NodeRecord]:
        return self.queries.node_records()

    def not_ready_nodes(self) -> list[str]:
        return self.queries.not_ready_nodes()

    def eviction_tainted_nodes(self) -> list[str]:
        return self.queries.eviction_tainted_nodes()

    def cert_dates(self) -> dict[str, CertInfo]:
        return self.queries.cert_dates()

    def is_synced(self, *resources: str) -> bool:
        return self.queries.is_synced(*resources)

    def first_lease_list(self) -> int | None:
        return self.queries.first_lease_list()

    def stream_health(self, resource: str) -> WatchHealth | None:
        return self.queries.stream_health(resource)

    def problem_count(self) -> int:
        return self.queries.problem_count()

    def problem_counts(self) -> tuple[int, int]:
        return self.queries.problem_counts()

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        return self.queries.node_labels(name)

    def details_not_watched(self, name: str) -> str | None:
        return self.queries.details_not_watched(name)

    def pod_records_on(self, nodes: list[str]) -> dict[str, list[PodRecord]]:
        return self.queries.pod_records_on(nodes)

    def recent_problems(self, n: int) -> list[Problem]:
        return self.queries.recent_problems(n)

    def lists_completed(self) -> int:
        return self.queries.lists_completed()

    def batch(self) -> AbstractContextManager[bool]:
        return self.queries.batch()

    # --- the store's fields, read-only: for the core's own tools, tests and benchmarks. Readers
    # outside the core ask the methods above (tests/project/test_layers.py); nothing writes through here.
    @property
    def lock(self) -> threading.RLock:
        return self.store.lock

    @property
    def nodes(self) -> dict[str, NodeRecord]:
        return self.store.nodes

    @property
    def leases(self) -> dict[str, LeaseTrack]:
        return self.store.leases

    @property
    def pods(self) -> dict[tuple[str, str], PodRecord]:
        return self.store.pods

    @property
    def pods_by_node(self) -> dict[str, set[tuple[str, str]]]:
        return self.store.pods_by_node

    @property
    def events(self) -> dict[tuple[str, str], EventRecord]:
        return self.store.events

    @property
    def events_by_node(self) -> dict[str, set[tuple[str, str]]]:
        return self.store.events_by_node

    @property
    def certs(self) -> dict[str, CertInfo]:
        return self.store.certs

    @property
    def health(self) -> dict[str, WatchHealth]:
        return self.store.health

    @property
    def problems(self) -> deque[Problem]:
        return self.store.problems

    @property
    def timelines(self) -> dict[str, deque[tuple[float, str]]]:
        return self.store.timelines

    @property
    def synced(self) -> set[str]:
        return self.store.synced

    @property
    def last_received(self) -> float | None:
        return self.store.last_received

    @property
    def generation(self) -> int:
        return self.store.generation

    @property
    def beats(self) -> dict[str, array[float]]:
        return self.store.beats
