"""Streaming lists and quiet streams against the real kube-apiserver v1.20.2.

What the simulated server's ``watch_list`` modes and ``bookmarks_when_unchanged=False`` imitate,
checked against the real thing: 1.20 refuses ``resourceVersionMatch`` on a watch (so a streaming
list is refused, once per connection, without a disconnect); it does not know
``sendInitialEvents`` (alone, it is ignored: a plain watch, synthetic ADDED and no end bookmark);
and a quiet watch is not reopened between bookmarks (the testbed's audit log had shown the Node
and CSR watches reopened 61 s after they opened, with the old 60 s read timeout).

How the same checks would run on a current control plane (``nodewatch testbed up --version
latest``, being added on the testbed branch): the streaming list answered 200 and followed by
the watch (the apiserver's audit log: one ``sendInitialEvents=true`` request per stream, no paged
list), and with ``--feature-gates=WatchList=false`` the 422 and the paged list, as
``test_watchlist.py`` does against the simulator's ``gate-off`` mode.
"""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from nodewatch.core.settings import Settings
from nodewatch.sources.kubeconfig import ApiError, Connection
from nodewatch.sources.live import LiveSource
from nodewatch.sources.reflector import CSRS, INITIAL_EVENTS_END, Reflector
from nodewatch.testbed.kubelets import TestbedFleet
from support.simserver import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900)]

STREAMING = {"watch": "true", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
             "allowWatchBookmarks": "true", "timeoutSeconds": "5"}


@pytest.fixture(scope="module")
def fleet(testbed):
    """Two renewing nodes of their own zone: objects for the synthetic ADDED events."""
    f = TestbedFleet(testbed.admin(), layout=[("eu-west-3", "eu-west-3a")] * 2, seed=9, pods_per_node=1)
    f.setup()
    yield f
    f.stop()


def _events(resp) -> list[dict]:
    """Every event of a watch the server ends (its timeoutSeconds)."""
    data = b""
    try:
        while chunk := resp.read1(65536):
            data += chunk
    finally:
        resp.release_conn()
    return [orjson.loads(line) for line in data.split(b"\n") if line.strip()]


def _only_1_20(testbed) -> None:
    """What v1.20 answers a streaming list with; a current release streams it
    (``test_streaming_current.py``)."""
    if testbed.minor != 20:
        pytest.skip(f"v1.20's answer to a streaming list; {testbed.version} streams (test_streaming_current.py)")


def test_1_20_refuses_a_streaming_list_with_the_simulators_words(testbed):
    _only_1_20(testbed)
    conn = Connection(str(testbed.viewer_kubeconfig))
    try:
        with pytest.raises(ApiError) as refused:
            conn.get("/api/v1/nodes", STREAMING, timeout=(10.0, 30.0))
    finally:
        conn.close()
    assert refused.value.status == 422
    assert "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch" in str(refused.value)


def test_1_20_ignores_send_initial_events_alone(testbed, fleet):
    _only_1_20(testbed)
    """What the simulator's ``ignored`` mode sends: a plain watch from "now", every object as a
    synthetic ADDED, and never the bookmark that would end a streaming list."""
    conn = Connection(str(testbed.viewer_kubeconfig))
    admin = testbed.admin()
    try:
        names = sorted(o["metadata"]["name"] for o in admin.get("/api/v1/nodes")["items"])
        query = {k: v for k, v in STREAMING.items() if k != "resourceVersionMatch"}
        events = _events(conn.get("/api/v1/nodes", query, timeout=(10.0, 30.0)))
    finally:
        conn.close()
        admin.close()
    added = sorted({e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"})
    assert added == names and len(names) > 0
    assert {e["type"] for e in events} <= {"ADDED", "MODIFIED", "BOOKMARK"}
    assert not any((e["object"]["metadata"].get("annotations") or {}).get(INITIAL_EVENTS_END) for e in events)


def test_a_live_source_lists_1_20_in_pages_asking_once_and_never_disconnected(testbed, monkeypatch):
    _only_1_20(testbed)
    health: list[tuple[str, dict]] = []
    original = LiveSource._on_health

    def recording(self, reflector, **changes):
        health.append((reflector.spec.resource, dict(changes)))
        return original(self, reflector, **changes)

    monkeypatch.setattr(LiveSource, "_on_health", recording)
    src = LiveSource(Settings(), kubeconfig=str(testbed.viewer_kubeconfig),
                     cert_cache_dir=str(testbed.dir / "certcache-streaming"))
    src.start()
    try:
        assert src.wait_synced(30)
        assert src.streaming.refused and "422" in src.streaming.reason
        assert all(src.reflector(r).watch_list is False for r in ("nodes", "leases"))
        assert not [c for _, c in health if c.get("connected") is False]
    finally:
        src.stop()


def test_a_quiet_watch_is_not_reopened_between_bookmarks(testbed):
    """130 s on a quiet stream (the CSRs): with the old 60 s read timeout it was reopened at ~61 s
    and ~122 s; now the server ends it (timeoutSeconds 5-10 min) and nothing else does."""
    conn = Connection(str(testbed.viewer_kubeconfig))
    opened: list[float] = []
    lock = threading.Lock()
    real_get = conn.get

    def counting_get(path, query=None, **kw):
        if (query or {}).get("watch") == "true":
            with lock:
                opened.append(time.monotonic())
        return real_get(path, query, **kw)

    conn.get = counting_get  # type: ignore[method-assign]
    health: list[dict] = []
    r = Reflector(conn, CSRS, lambda b: None, lambda _r, **ch: health.append(ch), lambda *_: None)
    r.start()
    try:
        assert wait_until(lambda: r.listed and r.watching, timeout=30)
        start = time.monotonic()
        time.sleep(130)  # real seconds on a real server: the point of this test
        assert r.watching
    finally:
        r.stop()
        conn.close()
    with lock:
        later = [t for t in opened if t > start]
    assert later == [], f"watch reopened {len(later)} times in 130 s of quiet"
    assert not any(ch.get("connected") is False for ch in health)
