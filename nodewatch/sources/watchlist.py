"""Does this API server stream lists (``sendInitialEvents``)? Learned once, shared by its streams.

Why a memory: a server that does not offer streaming lists says so the same way on every try, and
each try costs a request (and, for a server that ignores the parameter, seconds of waiting for a
bookmark that never comes). The answers that mean "not offered here", as real servers give them:

- 422 Invalid: the WatchList gate is off (off by default in 1.27-1.31 and in 1.33; on in 1.32 and
  from 1.34), or a 1.19-1.26 server that forbids ``resourceVersionMatch`` on a watch; 400, 404 and
  405 from servers and proxies that know no such request.
- an ERROR event before the end of the initial events naming RequestWatchProgress: a current API
  server on etcd older than 3.5.13 (500 InternalError in a 200 stream, the cacher's
  ``newErrWatcher``).
- a stream that is plainly not a streaming list: an event other than ADDED, or a bookmark without
  the ``k8s.io/initial-events-end`` annotation, before that annotated bookmark; or silence with no
  such bookmark (a server that ignores the parameter: before 1.19, an aggregated API server
  forwarding its own watch; since 1.32 a real one sends nothing but the initial ADDED events and
  then the bookmark, PR #127012).

One ``StreamingOffer`` per connection (``LiveSource`` owns it; its reflectors share it): the
WatchList gate and the etcd version are properties of the server, not of one resource. A refusal
is remembered for ``RETRY_AFTER`` seconds: a cluster upgraded meanwhile streams again at the next
list after that (lists are rare: at start and after 410 Gone).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

RETRY_AFTER = 3600.0
"""Seconds a refusal is believed; the first list after that tries streaming again."""
REFUSED_STATUS = (400, 404, 405, 422)
"""HTTP answers to a streaming-list request that mean "not offered here" (client-go falls back to
a paged list on any error; these are the ones that will not change by asking again)."""


def lasting_error(code: int | None, message: str) -> bool:
    """Does an ERROR event in a streaming list's initial events say the server cannot stream
    lists at all (rather than this once)?"""
    return (code in REFUSED_STATUS) or "RequestWatchProgress" in message


class StreamingOffer:
    """What one API server answered to streaming lists; thread-safe, shared by its reflectors."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._refused_at: float | None = None
        self.reason = ""
        """Why the last refusal was taken as one (for messages and tests)."""
        self.offered = False
        """A streaming list of this server has completed (its initial-events-end bookmark came)."""
        self.refusals = 0

    @property
    def refused(self) -> bool:
        """Refused less than ``RETRY_AFTER`` seconds ago: list in pages."""
        with self._lock:
            return self._refused_at is not None and self._clock() - self._refused_at < RETRY_AFTER

    def wanted(self) -> bool:
        """Should the next list be a streaming one?"""
        return not self.refused

    def refuse(self, why: str) -> None:
        with self._lock:
            self._refused_at = self._clock()
            self.reason = why[:300]
            self.offered = False
            self.refusals += 1

    def worked(self) -> None:
        with self._lock:
            self._refused_at = None
            self.offered = True
