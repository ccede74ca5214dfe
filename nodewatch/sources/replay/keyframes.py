"""Keyframes: copies of the replayed state every ``KEYFRAME_EVENTS`` events, built in the background.

A seek restores the nearest keyframe before its target and applies at most ``KEYFRAME_EVENTS``
events from there, so seeking costs the same anywhere in an hour-long recording.

The keyframes keep to ``MAX_BYTES`` (``keyframe.added_bytes``; an eighth of the machine's memory,
768 MiB to 4 GiB): past it every other one is let go
and the ones after come twice as far apart, so a seek costs more (up to twice the events to apply,
each time it happens) where memory would have run out. Why: at 65,000 nodes a keyframe holds ~4-10 MB
and comes every three seconds of the recording; a replay of a hub's 15-minute segment grew by ~7 MB
a second of reading, past 2.7 GB at its seventh minute, and an hour would not have fitted in most
machines. A replay of 5,000 nodes for an hour (~1 MB a keyframe, 90 of them) never reaches it.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable
from typing import Any

from ...core.keyframe import added_bytes
from .clusters import ReplayState
from .frozen import FreezeHold
from .index import EventIndex

KEYFRAME_EVENTS = 20_000
"""A keyframe every so many events (until ``MAX_BYTES``): seek applies at most this many (about
0.2 s at 5,000 nodes, 0.2-0.3 s at 65,000: bench/README.md, session 45)."""


def _budget() -> int:
    """An eighth of the machine's memory, at least 768 MiB and at most 4 GiB."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 0
    return min(max(physical // 8, 768 << 20), 4 << 30)


MAX_BYTES = _budget()
"""What the keyframes may hold together (estimated): past it, every other one is let go. Relative to
the machine: at 65,000 nodes a 15-minute segment's keyframes (306 of them, ~2.0 GiB estimated) fit in
an eighth of 23 GB and seek in 0.2-0.3 s; in 768 MiB they thinned to 38 and a seek took up to 1.7 s."""


class Keyframes:
    """Built by a background thread once started (``start``); usable (partly) at once."""

    def __init__(self, index: EventIndex, empty_state: Callable[[], ReplayState]) -> None:
        """``empty_state``: a state like the replayed one with nothing applied (its clusters, with
        their settings), to build the keyframes on."""
        self._index = index
        self._empty_state = empty_state
        self._frames: tuple[list[int], list[Any]] = ([], [])
        """The event number of each keyframe (the state before that event), and the keyframes.
        One attribute: a thinning replaces both lists at once under a reader (``before``)."""
        self.bytes = 0
        """What the keyframes hold, estimated: the sum of each one's ``added_bytes``."""
        self.every = KEYFRAME_EVENTS
        """Events between two keyframes: doubled at each thinning."""
        self._frozen = FreezeHold()
        self._stopped = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._build, name="replay-keyframes", daemon=True)
        self._started = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start building (once). Not at construction: on a 2-core machine the build would take the
        GIL from the first frame of a replay, which needs none of it."""
        with self._start_lock:
            if not self._started and not self._stopped.is_set():
                self._started = True
                self._thread.start()

    def __len__(self) -> int:
        return len(self._frames[0])

    def before(self, target: int) -> tuple[int, Any]:
        """The last keyframe at or before event ``target``: (its event number, its snapshot); (0, None)
        when there is none (start from an empty state)."""
        at, states = self._frames
        k = bisect.bisect_right(at, target) - 1
        if k < 0:
            return 0, None
        return at[k], states[k]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every keyframe is built (seeks are fast from then on); starts the build."""
        self.start()
        return self._done.wait(timeout)

    def close(self) -> None:
        self._stopped.set()
        with self._start_lock:
            if self._started:
                self._thread.join(timeout=5)
        self._frames = ([], [])
        self.bytes = 0
        self._thaw()

    def _build(self) -> None:
        scratch = self._empty_state()
        index = self._index
        prev: Any = None
        a = 0
        try:
            while not self._stopped.is_set():
                complete = index.complete  # read before the length: then the length is final
                n = len(index)
                if n - a < self.every and not complete:
                    index.wait_more(a + self.every - 1, timeout=0.5)  # the index is still growing
                    continue
                if a >= n:
                    return
                if a:
                    kf = scratch.snapshot(prev)
                    self._keep(a, kf, added(kf, prev))
                    prev = kf
                    self._freeze()
                b = min(n, a + self.every)
                index.apply_range(scratch, a, b)
                a = b
        except (OSError, ValueError):
            return  # the replay was closed and its file with it
        finally:
            self._done.set()

    def _keep(self, a: int, kf: Any, size: int) -> None:
        """Keep keyframe ``kf`` of event ``a``; past ``MAX_BYTES``, let every other one go."""
        at, states = self._frames
        states.append(kf)  # before ``at``: a reader that finds ``a`` finds its keyframe
        at.append(a)
        self.bytes += size
        while self.bytes > MAX_BYTES and len(at) > 1:
            keep = range(len(at) - 1, -1, -2)[::-1]  # the newest stays: the next one shares with it
            at, states = [at[i] for i in keep], [states[i] for i in keep]
            self.bytes = sum(added(kf, states[j - 1] if j else None) for j, kf in enumerate(states))
            self._frames = (at, states)
            self.every *= 2

    def _freeze(self) -> None:
        """Keep the keyframes out of the cyclic collector's full passes (``frozen.py``)."""
        if not self._stopped.is_set():
            self._frozen.freeze()

    def _thaw(self) -> None:
        """Undo ``_freeze`` (a closed replay must not stay in memory with all its keyframes)."""
        self._frozen.thaw()


def added(kf: Any, prev: Any) -> int:
    """``keyframe.added_bytes`` of a replay's keyframe: one ``Keyframe``, or a tuple of them (one a
    cluster, ``MultiFleet.snapshot``)."""
    if isinstance(kf, tuple):
        return sum(added_bytes(k, prev[i] if prev else None) for i, k in enumerate(kf))
    return added_bytes(kf, prev)
