"""What every source offers the dashboard and the ``status`` command: the core's interface to its feeds.

The protocols live in the core, beside the state they feed, so that the UI depends on the core only
and the sources implement an interface they do not own."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .clock import Clock
from .fleet import FleetState


@runtime_checkable
class ReplayControls(Protocol):
    """Virtual-time controls; only sources that replay something have them."""

    start: float
    """Virtual time of the first event."""
    end: float
    """Virtual time of the last event."""

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
    state: FleetState
    clock: Clock
    replay: ReplayControls | None

    def start(self) -> None:
        """Begin feeding (background threads); returns at once."""

    def stop(self) -> None:
        """Stop feeding and release connections; idempotent."""

    def focus_node(self, node: str | None) -> None:
        """Ask for pods and events of this node (the drill-down), or none. Live sources watch them
        with field selectors; replay and demo already have everything."""
