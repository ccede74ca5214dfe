"""Helpers of the hub's tests: a hub on the demo fleet ticked by hand, and raw protocol clients."""

from __future__ import annotations

import contextlib
import socket
from collections import Counter
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

from nodewatch.hub import protocol
from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.server import Hub
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.sources.demo import DemoSource
from support.simserver import wait_until


@contextlib.contextmanager
def demo_hub(tmp_path: Path, nodes: int = 60, **kw: Any) -> Iterator[Hub]:
    """A started hub on a demo fleet, with no ticker: the test calls ``hub.tick()`` and moves the
    demo's virtual time with ``advance(hub, seconds)``."""
    src = DemoSource(nodes=nodes, scenario=kw.pop("scenario", "incident"), seed=1, speed=0.0)
    hub = Hub(src, str(tmp_path / "hub.sock"), tick_seconds=None, **kw)
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def step_demo(*sources: DemoSource, seconds: float) -> float:
    """Move demo fleets (the first's clock decides) ``seconds`` of virtual time on, clocks included;
    returns the new time."""
    t = sources[0].clock.now() + seconds
    for src in sources:
        src.advance_to(t)
        src.clock.seek(t)  # type: ignore[attr-defined]
    return t


def advance(hub: Hub, seconds: float) -> int:
    """Move the demo fleet ``seconds`` of virtual time on, then tick; returns the frame's seq."""
    step_demo(hub.source, seconds=seconds)  # type: ignore[arg-type]
    return hub.tick()


@contextlib.contextmanager
def viewer(hub: Hub, **kw: Any) -> Iterator[ViewerSource]:
    v = ViewerSource(HubAddress(path=hub.socket_path), **kw)
    v.start()  # (returns with the snapshot's first part: the rest follows as the hub encodes it)
    wait_until(lambda: not v.state.loading)
    try:
        yield v
    finally:
        v.stop()


class RawClient:
    """A protocol client on a blocking socket (reads only when told: a stuck viewer, too)."""

    def __init__(self, path: str, rcvbuf: int | None = None, hello: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(path)
        self.sock.settimeout(10)
        if hello:  # a connection is a viewer once it has said hello
            self.send({"k": "hello", "v": protocol.VERSION})

    def send(self, msg: dict) -> None:
        self.sock.sendall(protocol.encode(msg, compress=False))

    def read(self) -> dict[str, Any] | None:
        return protocol.recv_frame(self.sock)

    def read_until(self, kind: str, seq: int | None = None) -> dict[str, Any]:
        while True:
            msg = self.read()
            assert msg is not None, "the hub closed the connection"
            if msg["k"] == kind and (seq is None or msg.get("seq") == seq):
                return msg

    def close(self) -> None:
        self.sock.close()


def hub_wire(hub: Hub, now: float) -> dict[str, list]:
    """Every node's view as the hub evaluates it at ``now``, in wire form."""
    return {v.name: view_to_wire(v) for v in hub.source.state.evaluate(now).nodes}


# --- what the simulated API server was asked --------------------------------------------------------


def api_requests(srv) -> tuple[Counter, set[str]]:
    """(GETs by (method, path, watch?, streaming list?), nodes whose pods are watched) from the
    server's request log. A streaming list (``sendInitialEvents``) is a watch of its own kind: the
    Nodes' is read by a child process, which stops after the list (the watch follows apart)."""
    count: Counter = Counter()
    scoped: set[str] = set()
    for r in list(srv.request_log):
        u = urlsplit(r.target)
        q = parse_qs(u.query)
        watch = q.get("watch", ["false"])[0] in ("1", "true")
        count[(r.method, u.path, watch, "sendInitialEvents" in q)] += 1
        for sel in q.get("fieldSelector", []):
            if u.path.endswith("/pods") and sel.startswith("spec.nodeName="):
                scoped.add(sel.split("=", 1)[1])
    return count, scoped


def cluster_wide(count: Counter) -> Counter:
    return Counter({k: n for k, n in count.items() if not k[1].endswith(("/pods", "/events")) and k[1] != "/version"})


def every_watch_logged(srv) -> bool:
    """The server logs a request when it ends: after the client stops, wait until every request
    it started has ended and been logged, the watches of the cluster-wide streams (nodes, leases,
    CSRs) among them."""
    count, _ = api_requests(srv)
    return len({k[1] for k in cluster_wide(count) if k[2]}) >= 3 and srv.requests_started == len(srv.request_log)
