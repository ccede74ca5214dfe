"""What every source offers the dashboard and the ``status`` command: the core's interface to its feeds.

The protocols live in the core, beside the state they feed, so that the UI depends on the core only
and the sources implement an interface they do not own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from .clock import Clock
from .objects import PodRecord
from .views import FleetView, NodeDetails, Problem


class FleetReader(Protocol):
    """Every question a reader (the dashboard, the fleet history, the label search) may ask of the
    fleet. ``FleetState`` answers them from watch events; a hub viewer's ``ViewerState`` answers
    them from the hub's frames. tests/project/test_layers.py checks that both implement all of it, and that
    the UI asks nothing else."""

    def evaluate(self, now: float) -> FleetView:
        """Every node's view at ``now``, worst first, with zones, counts and stream health:
        a frozen snapshot, published (docs/snapshots.md)."""
    def published(self) -> FleetView | None:
        """The latest snapshot ``evaluate`` returned (None before the first), without evaluating."""
    def node_count(self) -> int: ...
    def lists_completed(self) -> int:
        """Lists completed so far (the dashboard draws a frame as soon as one more is)."""
    def first_lease_list(self) -> int | None:
        """While the lease stream's first list comes in (watched, connected, not in yet), the leases
        received so far (every view would be judged blind now, and every node again once it is in);
        None otherwise."""
    def has_node(self, name: str) -> bool: ...
    def problem_count(self) -> int: ...
    def problem_counts(self) -> tuple[int, int]:
        """(errors, notices)."""
    def recent_problems(self, n: int) -> list[Problem]:
        """The last ``n`` problems, oldest first."""
    def node_details(self, name: str, now: float, *, max_pods: int | None = None,
                     max_events: int | None = None) -> NodeDetails:
        """The drill-down of one node."""
    def node_labels(self, name: str) -> Mapping[str, str] | None:
        """The node's labels (the same object until they change: readers may memoise by identity),
        or None for an unknown node."""
    def pod_records_on(self, nodes: list[str]) -> dict[str, list[PodRecord]]:
        """The pod records on these nodes (what the fleet history needs of nodes at risk)."""
    def details_not_watched(self, name: str) -> str | None:
        """Why the pods and events of ``name`` are not watched (a hub's cap on scoped watches),
        for the drill-down to say; None when they are, or when the reader cannot tell."""


@runtime_checkable
class ReplayControls(Protocol):
    """Virtual-time controls; only sources that replay something have them."""

    start: float
    """Virtual time of the first event."""
    end: float
    """Virtual time of the last event (read so far, until ``complete``)."""
    complete: bool
    """The whole recording has been read: ``end`` is its end (a long one is read in the
    background while it plays, and its end grows until then)."""

    def position(self) -> float: ...
    def play(self) -> None: ...
    def pause(self) -> None: ...
    @property
    def playing(self) -> bool: ...
    @property
    def speed(self) -> float: ...
    def set_speed(self, speed: float) -> None: ...
    def seek(self, t: float) -> None:
        """Jump to virtual time ``t`` (backward too): the state becomes exactly what it was at ``t``."""
    def step(self, seconds: float) -> None:
        """Move by ``seconds`` (negative: back) and stay paused."""
    def next_change(self) -> float | None:
        """Virtual time of the next node state change after the position, or None."""


class Source(Protocol):
    """A feed of watch events into ``state``, with the clock that says what "now" is."""

    name: str
    """For the header: ``context prod @ https://...``, ``demo: incident, 30 nodes``, ``replay FILE``."""
    state: FleetReader
    clock: Clock
    replay: ReplayControls | None

    def start(self) -> None:
        """Begin feeding (background threads); returns at once."""

    def stop(self) -> None:
        """Stop feeding and release connections; idempotent."""

    def focus_node(self, node: str | None) -> None:
        """Ask for pods and events of this node (the drill-down), or none. Live sources watch them
        with field selectors; replay and demo already have everything."""
