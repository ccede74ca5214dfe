"""Server-side fault injection for the simulated API server, switchable at runtime from tests.

A ``FaultPlan`` is a small declarative object: tests call its setters from any thread ("the next 3
requests get 500", "stall every stream for 60s"), and the server consults it on each request and on
each write. ``fired`` counts what actually happened, so a test (or a report) can show that each
fault was really injected. ``TokenAuth`` holds the accepted bearer tokens and their expiry, so a test
can expire a token and rotate to a new one.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Trickle:
    """Dribble response bytes: ``chunk`` bytes every ``delay`` seconds."""

    until: float
    chunk: int
    delay: float


@dataclass(frozen=True)
class RequestFailure:
    code: int
    retry_after: int | None = None


class FaultPlan:
    """What the server should do wrong, and how often it did. All setters are thread-safe.

    Times are wall-clock (``time.monotonic``): faults are about the network and the server, not the
    simulated fleet.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fired: Counter[str] = Counter()
        self.clear()

    def clear(self) -> None:
        """Switch every fault off (counters in ``fired`` are kept)."""
        with self._lock:
            self._failures: list[tuple[RequestFailure, str | None]] = []
            self._gone_watches = 0
            self._gone_resources: tuple[str, ...] | None = None
            self._close_after: int | None = None
            self._reset_after: int | None = None
            self._reset_generation = getattr(self, "_reset_generation", 0)
            self._stalled_until = 0.0
            self._trickle: Trickle | None = None
            self._truncate = 0
            self._oversize: list[int] = []
            self._forbidden: set[str] = set()
            self._down_until = 0.0

    # ---- setters (tests) --------------------------------------------------------------------------

    def fail_next(self, count: int, code: int = 500, resource: str | None = None, retry_after: int | None = None) -> None:
        """The next ``count`` requests (for ``resource``, or any) get ``code`` (a Status body)."""
        with self._lock:
            self._failures.extend([(RequestFailure(code, retry_after), resource)] * count)

    def throttle_next(self, count: int, retry_after: int = 1, resource: str | None = None) -> None:
        """The next ``count`` requests get 429 Too Many Requests with ``Retry-After``."""
        self.fail_next(count, 429, resource, retry_after)

    def gone_next_watches(self, count: int, resources: tuple[str, ...] | None = None) -> None:
        """The next ``count`` watch requests (of ``resources``, or any) get 410 Gone (an ERROR event,
        as the real API does)."""
        with self._lock:
            self._gone_watches += count
            self._gone_resources = resources

    def close_streams_after(self, events: int | None) -> None:
        """Every watch stream ends cleanly after ``events`` events (None: off)."""
        with self._lock:
            self._close_after = events

    def reset_streams_after(self, events: int | None) -> None:
        """Every watch stream is reset (TCP RST) after ``events`` events (None: off)."""
        with self._lock:
            self._reset_after = events

    def reset_now(self) -> None:
        """Reset (TCP RST) every open watch stream now; new ones are not affected."""
        with self._lock:
            self._reset_generation += 1

    def stall(self, seconds: float) -> None:
        """Stop sending bytes on every connection for ``seconds`` (sockets stay open)."""
        with self._lock:
            self._stalled_until = time.monotonic() + seconds

    def trickle(self, seconds: float, chunk: int = 8, delay: float = 0.05) -> None:
        """For ``seconds``, dribble responses ``chunk`` bytes every ``delay`` seconds."""
        with self._lock:
            self._trickle = Trickle(time.monotonic() + seconds, max(1, chunk), delay)

    def truncate_next(self, count: int = 1) -> None:
        """The next ``count`` watch events are cut in the middle of their JSON line, then the
        connection is closed."""
        with self._lock:
            self._truncate += count

    def oversize_next(self, count: int = 1, size: int = 4 * 1024 * 1024) -> None:
        """The next ``count`` watch events carry an extra annotation of ``size`` bytes."""
        with self._lock:
            self._oversize.extend([size] * count)

    def forbid(self, resource: str) -> None:
        """Requests for ``resource`` get 403 Forbidden (RBAC says no)."""
        with self._lock:
            self._forbidden.add(resource)

    def allow(self, resource: str) -> None:
        with self._lock:
            self._forbidden.discard(resource)

    def down(self, seconds: float | None = None) -> None:
        """Stop listening and drop every connection (connections are refused) for ``seconds``
        (None: until ``up()``), then listen again on the same port."""
        with self._lock:
            self._down_until = math.inf if seconds is None else time.monotonic() + seconds

    def up(self) -> None:
        with self._lock:
            self._down_until = 0.0

    # ---- queries (server) -------------------------------------------------------------------------

    def take_request_failure(self, resource: str | None) -> RequestFailure | None:
        with self._lock:
            for i, (failure, only) in enumerate(self._failures):
                if only is None or only == resource:
                    del self._failures[i]
                    self.fired[f"http_{failure.code}"] += 1
                    return failure
            return None

    def is_forbidden(self, resource: str | None) -> bool:
        with self._lock:
            hit = resource in self._forbidden
            if hit:
                self.fired["forbidden"] += 1
            return hit

    def take_gone(self, resource: str | None = None) -> bool:
        with self._lock:
            if self._gone_watches > 0 and (self._gone_resources is None or resource in self._gone_resources):
                self._gone_watches -= 1
                self.fired["gone"] += 1
                return True
            return False

    def stream_limits(self) -> tuple[int | None, int | None]:
        """(close after N events, reset after N events) for a stream."""
        with self._lock:
            return self._close_after, self._reset_after

    @property
    def reset_generation(self) -> int:
        return self._reset_generation

    @property
    def events_tampered(self) -> bool:
        """Is a truncate or oversize fault pending? A lock-free hint for the per-event hot path:
        only when it is true does the server ask ``take_truncate`` / ``take_oversize``."""
        return bool(self._truncate or self._oversize)

    def take_truncate(self) -> bool:
        with self._lock:
            if self._truncate > 0:
                self._truncate -= 1
                self.fired["truncated"] += 1
                return True
            return False

    def take_oversize(self) -> int | None:
        with self._lock:
            if self._oversize:
                self.fired["oversized"] += 1
                return self._oversize.pop(0)
            return None

    def stalled_for(self) -> float:
        """Seconds left in a stall (0 when none)."""
        return max(0.0, self._stalled_until - time.monotonic())

    def current_trickle(self) -> Trickle | None:
        t = self._trickle
        if t is not None and t.until > time.monotonic():
            return t
        return None

    def should_be_down(self) -> bool:
        return self._down_until > time.monotonic()

    def note(self, what: str) -> None:
        with self._lock:
            self.fired[what] += 1


class TokenAuth:
    """Accepted bearer tokens, each valid until a wall-clock time (``time.time()``) or forever."""

    def __init__(self, tokens: dict[str, float | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, float | None] = dict(tokens or {})

    def set_tokens(self, tokens: dict[str, float | None]) -> None:
        """Replace the accepted tokens: {token: expires_at (time.time()) or None for never}."""
        with self._lock:
            self._tokens = dict(tokens)

    def accept(self, token: str, expires_at: float | None = None) -> None:
        with self._lock:
            self._tokens[token] = expires_at

    def expire(self, token: str, at: float | None = None) -> None:
        """The token stops working at ``at`` (default: now)."""
        with self._lock:
            if token in self._tokens:
                self._tokens[token] = time.time() if at is None else at

    def tokens(self) -> dict[str, float | None]:
        with self._lock:
            return dict(self._tokens)

    def check(self, token: str | None) -> bool:
        if not token:
            return False
        with self._lock:
            if token not in self._tokens:
                return False
            expires = self._tokens[token]
        return expires is None or time.time() < expires
