"""Quiet watch streams are kept open between bookmarks: reconnects counted over 5 minutes of quiet.

Seen on the v1.20.2 testbed (audit log, ``nodewatch record`` on 3 quiet nodes): the Node and CSR
watches were opened again 61 s after they opened, from the same resourceVersion, because the
client's read timeout (60 s) was shorter than the gap between a real server's bookmarks (59-61 s,
measured) and 1.20 sends none at all on a resource unchanged since the API server started.

The 5 minutes run in virtual time: ``QuietServer`` plays what a real API server sends on a quiet
watch (a bookmark every 59-61 s, or nothing; the stream ended by the server at the request's
``timeoutSeconds``) and honours the read timeout the reflector asks for as a socket would: when
the next byte is further away than the timeout, the read fails at the timeout. No test sleeps.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
import urllib3

from nodewatch.sources.kubeconfig import ApiError
from nodewatch.sources.reflector import CSRS, NODES, Reflector

QUIET = 300.0
"""The 5 minutes of quiet the reconnects are counted over."""


class VirtualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class QuietStream:
    """One watch response of a quiet resource, read as urllib3's ``read1`` reads a socket."""

    def __init__(self, server: "QuietServer", timeout_seconds: int, read_timeout: float) -> None:
        self.server = server
        self.clock = server.clock
        self.opened = self.clock.t
        # the server ends every watch at its timeoutSeconds (unless it is a dead one that never does)
        self.end = self.opened + (10 * QUIET if server.never_ends else timeout_seconds)
        self.read_timeout = read_timeout
        self.last_byte = self.opened
        self.next_bookmark = self.opened + server.gap() if server.bookmarks else None
        self.ended_by = ""

    def read1(self, size: int) -> bytes:
        due, what = self.end, b""
        if self.next_bookmark is not None and self.next_bookmark < self.end:
            due = self.next_bookmark
            what = orjson.dumps({"type": "BOOKMARK", "object": {
                "kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "100"}}}) + b"\n"
        if due - self.last_byte > self.read_timeout:  # the socket's timeout passes first
            self.clock.t = self.last_byte + self.read_timeout
            self.ended_by = "client read timeout"
            raise urllib3.exceptions.ReadTimeoutError(None, "", "read timed out")  # type: ignore[arg-type]
        self.clock.t = due
        self.last_byte = due
        if what:
            self.next_bookmark = due + self.server.gap()
        else:
            self.ended_by = "server timeoutSeconds"
        return what

    def shutdown(self) -> None:
        pass

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class QuietServer:
    """A real API server's answers to a reflector of a resource that does not change."""

    def __init__(self, bookmarks: bool, rng: random.Random, horizon: float = QUIET,
                 never_ends: bool = False) -> None:
        self.clock = VirtualClock()
        self.bookmarks = bookmarks
        self.horizon = horizon
        self.never_ends = never_ends
        self._rng = rng
        self.watches: list[tuple[float, dict[str, Any], float]] = []
        """(virtual time it opened, its query, its read timeout) of every watch request."""
        self.streams: list[QuietStream] = []
        self.reflector: Reflector | None = None

    def gap(self) -> float:
        return 59.0 + 2.0 * self._rng.random()  # measured on v1.20.2: 59-61 s

    def get(self, path: str, query: dict[str, Any] | None = None, *, timeout: Any = None, stream: bool = False) -> Any:
        query = dict(query or {})
        if self.clock.t >= self.horizon:  # the 5 minutes are over
            assert self.reflector is not None
            self.reflector.stop(join=False)
            raise ApiError(0, "the test is over")
        if query.get("watch") != "true":  # a paged list: one empty page
            return _Page({"kind": "NodeList", "apiVersion": "v1", "items": [],
                          "metadata": {"resourceVersion": "100"}})
        read_timeout = timeout[1]
        self.watches.append((self.clock.t, query, read_timeout))
        stream = QuietStream(self, int(query["timeoutSeconds"]), read_timeout)
        self.streams.append(stream)
        return stream

    def reload_credentials(self) -> bool:
        return False


class _Page:
    def __init__(self, obj: dict) -> None:
        self._data = orjson.dumps(obj)

    def read(self) -> bytes:
        return self._data

    def release_conn(self) -> None:
        pass


def run_quiet(spec, bookmarks: bool, seed: int, **kw: Any) -> tuple[QuietServer, list[dict]]:
    server = QuietServer(bookmarks, random.Random(seed), **kw)
    health: list[dict] = []
    r = Reflector(server, spec, lambda batch: None, lambda _r, **ch: health.append(ch),  # type: ignore[arg-type]
                  lambda *_: None, wall=server.clock, rng=random.Random(seed), watch_list=False)
    r.backoff._clock = server.clock
    server.reflector = r

    def sleep(seconds: float) -> None:  # a backoff passes in virtual time
        server.clock.t += seconds

    r._sleep = sleep  # type: ignore[method-assign]
    r.run()  # on this thread, until the server stops it after the 5 minutes
    return server, health


@pytest.mark.parametrize("spec,bookmarks", [(NODES, False), (CSRS, False), (NODES, True)],
                         ids=["nodes-1.20-no-bookmarks", "csrs-1.20-no-bookmarks", "nodes-bookmarks-every-59-61s"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_quiet_stream_is_reopened_within_five_minutes(spec, bookmarks, seed):
    server, health = run_quiet(spec, bookmarks, seed)
    opened = [t for t, _, _ in server.watches]
    assert opened[0] == 0.0
    reconnects = len(opened) - 1
    assert reconnects == 0, (f"{reconnects} reconnects in {QUIET:g}s of quiet, at "
                             f"{[round(t) for t in opened[1:]]} s; ended by "
                             f"{[s.ended_by for s in server.streams]}")
    assert not any(ch.get("connected") is False for ch in health)  # and no "disconnected" on screen


def test_each_watch_asks_the_server_to_end_it_between_5_and_10_minutes_and_waits_longer():
    server, _ = run_quiet(NODES, False, 7)
    for _, query, read_timeout in server.watches:
        timeout_seconds = int(query["timeoutSeconds"])
        assert 300 <= timeout_seconds < 600  # client-go's [minWatchTimeout, 2*minWatchTimeout)
        assert read_timeout > timeout_seconds  # the server ends it: the client does not cut it
        assert query["allowWatchBookmarks"] == "true"


def test_a_stream_the_server_does_not_end_is_cut_after_its_timeout_and_watched_again():
    """The other side of a long read timeout: a stream that stays silent past the end the server
    promised (a dead peer that sent no FIN) is cut then, and watched again from its resourceVersion."""
    server, health = run_quiet(NODES, False, 5, horizon=3 * QUIET, never_ends=True)
    (t0, q0, read0), (t1, q1, _) = server.watches[:2]
    assert server.streams[0].ended_by == "client read timeout"
    assert t1 >= t0 + read0 > t0 + int(q0["timeoutSeconds"])
    assert q1["resourceVersion"] == "100"  # resumed, not relisted
    assert any(ch.get("connected") is False for ch in health)  # and this one is said
