"""Long-lived replay data kept out of the cyclic collector's way (``gc.freeze``), undone on close.

A replay holds large, unchanging, acyclic data: its keyframes (a one-hour 5,000-node recording has
about 90, millions of container objects) and the parsed opening of its index (tens of thousands of
records). Left in the collector's oldest generation, each full collection walks all of it: measured
1.4 s inside whichever seek (or frame) happened to trigger it, which was the slowest seek (1.7 s,
against a median of 0.2 s). Frozen, it is skipped by full collections. The young generations are
collected first so that cyclic garbage of the moment is not frozen with it. The live source freezes
its synced state the same way (``reflector.gc_paused``).

Frozen objects are never collected as cycles, and a replay (its threads point back at it) is a
cycle: so each holder ``thaw``s when it closes, and the last one unfreezes.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_holders = 0
"""Holders that froze; the last one to thaw unfreezes."""


class FreezeHold:
    """One holder's share of the freeze (a replay's keyframes, its index)."""

    def __init__(self) -> None:
        self._held = False

    def freeze(self) -> None:
        """Freeze every object alive now (this holder's new data among them)."""
        global _holders
        with _lock:
            if not self._held:
                self._held = True
                _holders += 1
            gc.collect(1)
            gc.freeze()

    def thaw(self) -> None:
        """This holder is done; the last one unfreezes."""
        global _holders
        with _lock:
            if self._held:
                self._held = False
                _holders -= 1
                if _holders == 0:
                    gc.unfreeze()
