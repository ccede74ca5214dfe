"""The replay as a Source (``ReplaySource``) and its virtual-time controls (``ReplayPlayer``).

Two objects because the ``Source`` protocol's ``start()`` is a method and ``ReplayControls``'
``start`` is the time of the first event: the player is the controls, the source owns the player.
"""

from __future__ import annotations

import threading
from typing import Callable

from ...core.clock import VirtualClock
from ...core.settings import Settings
from ...core.timeutil import parse_when
from ..heap import fix_mmap_threshold
from ..recording import RecordingError
from ..segments import recording_label
from .clusters import ReplayState, empty_like, not_recorded
from .index import NO_EVENTS, EventIndex
from .keyframes import Keyframes
from .lookahead import next_change


class ReplayPlayer:
    """``ReplayControls`` over an indexed recording: applies events to ``state`` as virtual time
    passes (a thread, from ``launch()``), and seeks exactly, backward too."""

    def __init__(self, index: EventIndex, state: ReplayState, clock: VirtualClock) -> None:
        self.index = index
        self.state = state
        self.clock = clock
        self.start = index.start
        """Virtual time of the first event."""
        self.keyframes = Keyframes(index, self.empty_state)
        self._lock = threading.RLock()  # guards the cursor and state rebuilds
        self._cursor = 0
        """Number of events applied to ``state``: events [0, cursor) are in it."""
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def end(self) -> float:
        """Virtual time of the last event (indexed so far, while the index is built in the background)."""
        return self.index.end

    @property
    def complete(self) -> bool:
        return self.index.complete

    @property
    def events(self) -> int:
        """Events in the recording (indexed so far)."""
        return len(self.index)

    @property
    def applied(self) -> int:
        """Events applied to the state so far (all of them at the end)."""
        return self._cursor

    def empty_state(self) -> ReplayState:
        """A state like the replayed one (its clusters, their settings) with nothing applied."""
        return empty_like(self.state)

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Wait until every keyframe is built (seeks are fast from then on)."""
        return self.keyframes.wait(timeout)

    # --- the thread -------------------------------------------------------------------------------

    def launch(self) -> None:
        """Start applying events as virtual time passes, and play."""
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name="replay", daemon=True)
            self._thread.start()
            self.keyframes.start()
        self.play()

    def close(self) -> None:
        """Stop the thread and release the file and the keyframes; idempotent."""
        self._stopped.set()
        self._wake.set()
        self.clock.pause()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self.keyframes.close()
            self.index.close()

    def _run(self) -> None:
        index = self.index
        while not self._stopped.is_set():
            self._wake.clear()
            with self._lock:
                now = self.clock.now()
                end = self.end
                if now >= end and not self.clock.paused and index.complete:
                    self.clock.pause()
                    self.clock.seek(end)
                    now = end
                target = index.count_until(now)
                if target > self._cursor:
                    index.apply_range(self.state, self._cursor, target)
                    self._cursor = target
                nxt = index.times[self._cursor] if self._cursor < len(index) else end
            if self.clock.paused or self.clock.speed <= 0:
                wait = 0.5
            else:
                wait = min(0.2, max(0.005, (nxt - self.clock.now()) / self.clock.speed))
            self._wake.wait(wait)

    # --- ReplayControls ---------------------------------------------------------------------------

    def position(self) -> float:
        return self.clock.now()

    def play(self) -> None:
        if self.clock.now() >= self.end:
            return
        self.clock.resume()
        self._wake.set()

    def pause(self) -> None:
        self.clock.pause()
        self._wake.set()

    @property
    def playing(self) -> bool:
        return not self.clock.paused

    @property
    def speed(self) -> float:
        return self.clock.speed

    def set_speed(self, speed: float) -> None:
        self.clock.set_speed(speed)
        self._wake.set()

    def seek(self, t: float) -> None:
        """The state becomes exactly the state at ``t``: every event with time <= t applied, none after."""
        t = float(t)
        self.index.wait_for(t)  # seek works as soon as the index has reached t
        with self._lock:
            target = self.index.count_until(t)
            kf_at, snapshot = self.keyframes.before(target)
            # forward and nearer than the keyframe: go on from here; else restore the keyframe
            if not (self._cursor <= target and target - self._cursor <= target - kf_at):
                self.state.restore(snapshot)
                self._cursor = kf_at
            self.index.apply_range(self.state, self._cursor, target)
            self._cursor = target
            self.clock.seek(t)
        self._wake.set()

    def step(self, seconds: float) -> None:
        self.pause()
        self.seek(self.position() + seconds)

    def next_change(self) -> float | None:
        """Virtual time of the next node state change after the position (None: none until the end)."""
        with self._lock:
            pos = self.position()
            scratch = self.empty_state()
            scratch.restore(self.state.snapshot())  # type: ignore[arg-type]
            first = self._cursor
        return next_change(self.index, scratch, first, pos)


class ReplaySource:
    """A recording as a Source, paused at its start (or ``start_at``); ``replay`` has the controls."""

    def __init__(self, path: str, settings: Settings | None = None, speed: float = 1.0,
                 start_at: str | None = None, background: bool = False,
                 progress: Callable[[float, float], None] | None = None) -> None:
        """``background``: index the recording in a thread and show its start at once (the
        dashboard); seeks wait for the index to reach their target, ``end``, ``events`` and
        ``problems`` grow until it is complete. False: indexed when this returns. ``progress``:
        ``EventIndex``'s (the command's progress line until the start can be shown)."""
        fix_mmap_threshold()  # the keyframes' dictionaries, let go at a thinning, go back to the system
        index = EventIndex(path, background=background, progress=progress)
        if index.complete and not len(index):  # (a dashboard at 1970-01-01 with no node, else)
            index.close()
            why = next((p for p in index.problems if p != NO_EVENTS), None)
            raise RecordingError(f"{NO_EVENTS}, nothing to replay" + (f" ({why})" if why else ""))
        self.problems = index.problems
        """What was skipped while reading the recording, and why (for the user)."""
        self.settings = index.settings(settings)
        """The header's settings (several clusters: each has its own, in ``state``)."""
        self.state = index.new_state(settings)
        self.clock = VirtualClock(index.start, speed=speed, paused=True)
        origin = f" ({index.source_name()})" if index.source_name() else ""
        self.name = f"replay {recording_label(path)}{origin}"
        start = index.start
        if start_at:
            try:
                start = parse_when(start_at, index.start)
            except ValueError as exc:
                index.close()
                raise RecordingError(str(exc)) from None
        self.replay = ReplayPlayer(index, self.state, self.clock)
        index.foreground = self.state  # never held back (``EventIndex.hold_background``)
        self.replay.seek(start)
        gap = self._unrecorded(path, start) if start_at else None
        if gap:
            self.replay.close()
            raise RecordingError(gap)

    def _unrecorded(self, path: str, start: float) -> str | None:
        """Why a hub directory's ``start`` cannot be shown: the recorder was not running then (the
        window's lines end long before it, a later segment starts after it), so every node would
        look as old as the gap is long. None: it can."""
        index = self.replay.index
        before = index.count_until(start)  # the seek waited for the index to reach ``start``
        return not_recorded(path, start, index.times[before - 1], lambda: self.state) if before else None

    def start(self) -> None:
        self.replay.launch()

    def stop(self) -> None:
        self.replay.close()

    def focus_node(self, node: str | None) -> None:
        """Everything is in the recording already."""
