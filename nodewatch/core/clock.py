"""Clocks. Every rule takes ``now`` from one of these, never from ``time.time()`` directly.

The live source uses the wall clock; replay, tests and the simulator use a virtual clock that
runs at a chosen speed, can pause, and can jump. Tests advance a ``ManualClock`` by hand, so no
test sleeps to wait for a timer.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch, in this clock's time."""
        ...


def is_virtual(clock: object) -> bool:
    """Whether ``clock`` tells another time than the wall's (a replay, the simulator, a demo hub): the
    header says so. A clock that knows says it itself (``virtual``: a hub's clock as its viewer hears
    it, which is the hub's own kind); any other is virtual unless it is the wall clock."""
    said = getattr(clock, "virtual", None)
    return not isinstance(clock, SystemClock) if said is None else bool(said)


class SystemClock:
    """Wall-clock time: the live source, to the microsecond.

    Why not ``time.time()`` as it is: its last bits (below a microsecond) are noise no rule reads
    (Kubernetes' own finest time, ``MicroTime``, stops at the microsecond), but a recording keeps
    every receive time exactly, so the flight recorder paid for them: ~0.4 of its ~9.4 bytes a
    renewal at 65,000 nodes (the columnar format's residual column, docs/recording-format.md). A
    whole number of microseconds, as the float nearest to it, is what both formats store in full
    with nothing left over."""

    def now(self) -> float:
        return time.time_ns() // 1000 / 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests, headless evaluation)."""

    def __init__(self, t: float = 0.0) -> None:
        self._t = float(t)

    def now(self) -> float:
        return self._t

    def set(self, t: float) -> None:
        self._t = float(t)

    def advance(self, seconds: float) -> float:
        self._t += seconds
        return self._t


class VirtualClock:
    """Virtual time that follows the wall clock at ``speed``, and can pause and seek.

    ``now()`` is ``anchor_virtual + (wall - anchor_wall) * speed`` while playing; changing the speed
    or pausing re-anchors so virtual time never jumps by itself.
    """

    def __init__(self, start: float, speed: float = 1.0, wall: Clock | None = None, paused: bool = False) -> None:
        self._wall = wall or SystemClock()
        self._lock = threading.Lock()
        self._anchor_virtual = float(start)
        self._anchor_wall = self._wall.now()
        self._speed = float(speed)
        self._paused = paused

    def now(self) -> float:
        with self._lock:
            if self._paused:
                return self._anchor_virtual
            return self._anchor_virtual + (self._wall.now() - self._anchor_wall) * self._speed

    def _reanchor(self) -> None:
        w = self._wall.now()
        if not self._paused:
            self._anchor_virtual += (w - self._anchor_wall) * self._speed
        self._anchor_wall = w

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def paused(self) -> bool:
        return self._paused

    def set_speed(self, speed: float) -> None:
        with self._lock:
            self._reanchor()
            self._speed = max(0.0, float(speed))

    def pause(self) -> None:
        with self._lock:
            self._reanchor()
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._reanchor()
            self._paused = False

    def seek(self, t: float) -> None:
        with self._lock:
            self._anchor_wall = self._wall.now()
            self._anchor_virtual = float(t)
