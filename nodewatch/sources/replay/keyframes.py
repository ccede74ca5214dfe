"""Keyframes: copies of the replayed state every ``KEYFRAME_EVENTS`` events, built in the background.

A seek restores the nearest keyframe before its target and applies at most ``KEYFRAME_EVENTS``
events from there, so seeking costs the same anywhere in an hour-long recording.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from typing import Any

from .clusters import ReplayState
from .frozen import FreezeHold
from .index import EventIndex

KEYFRAME_EVENTS = 20_000
"""A keyframe every so many events: seek applies at most this many (about 0.2s)."""


class Keyframes:
    """Built by a background thread once started (``start``); usable (partly) at once."""

    def __init__(self, index: EventIndex, empty_state: Callable[[], ReplayState]) -> None:
        """``empty_state``: a state like the replayed one with nothing applied (its clusters, with
        their settings), to build the keyframes on."""
        self._index = index
        self._empty_state = empty_state
        self._at: list[int] = []
        """Event number of each keyframe: the state before that event."""
        self._states: list[Any] = []
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
        return len(self._at)

    def before(self, target: int) -> tuple[int, Any]:
        """The last keyframe at or before event ``target``: (its event number, its snapshot); (0, None)
        when there is none (start from an empty state)."""
        k = bisect.bisect_right(self._at, target) - 1
        if k < 0:
            return 0, None
        return self._at[k], self._states[k]

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every keyframe is built (seeks are fast from then on); starts the build."""
        self.start()
        return self._done.wait(timeout)

    def close(self) -> None:
        self._stopped.set()
        with self._start_lock:
            if self._started:
                self._thread.join(timeout=5)
        self._at, self._states = [], []
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
                if n - a < KEYFRAME_EVENTS and not complete:
                    index.wait_more(a + KEYFRAME_EVENTS - 1, timeout=0.5)  # the index is still growing
                    continue
                if a >= n:
                    return
                if a:
                    prev = scratch.snapshot(prev)
                    self._states.append(prev)  # before _at: a reader that finds ``a`` finds its state
                    self._at.append(a)
                    self._freeze()
                b = min(n, a + KEYFRAME_EVENTS)
                index.apply_range(scratch, a, b)
                a = b
        except (OSError, ValueError):
            return  # the replay was closed and its file with it
        finally:
            self._done.set()

    def _freeze(self) -> None:
        """Keep the keyframes out of the cyclic collector's full passes (``frozen.py``)."""
        if not self._stopped.is_set():
            self._frozen.freeze()

    def _thaw(self) -> None:
        """Undo ``_freeze`` (a closed replay must not stay in memory with all its keyframes)."""
        self._frozen.thaw()
