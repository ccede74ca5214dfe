"""DemoSource: list then watch, delivery order, recorder, threads, settings."""

from __future__ import annotations

from nodewatch.core.settings import Settings
from nodewatch.core.views import RESOURCES
from nodewatch.sources.demo import DemoSource
from support.simserver import wait_until


class FakeRecorder:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

        self.certs: dict[str, float] = {}

    def write(self, resource, etype, obj, t, listing=False) -> None:
        self.rows.append((resource, etype, obj, t, listing))

    def write_cert(self, node, not_after, source, t) -> None:
        self.certs[node] = not_after


def test_lists_then_streams_in_order_and_records_everything() -> None:
    rec = FakeRecorder()
    demo = DemoSource(nodes=12, scenario="kubelet-stop", seed=3, recorder=rec)
    assert demo.name == "demo: kubelet-stop, 12 nodes, x1"
    assert demo.replay is None
    start = demo.fleet.start
    applied: list[tuple] = []
    orig = demo.state.apply
    demo.state.apply = lambda r, e, o, received_at=None, listing=False: (  # type: ignore[method-assign]
        applied.append((r, e, received_at, listing)), orig(r, e, o, received_at, listing))[1]
    demo.advance_to(start + 90)
    synced = [a for a in applied if a[1] == "SYNCED"]
    assert [a[0] for a in synced] == list(RESOURCES)
    first_watch = next(i for i, a in enumerate(applied) if not a[3])
    assert all(a[3] for a in applied[:first_watch]) and not any(a[3] for a in applied[first_watch:])
    recv = [a[2] for a in applied[first_watch:]]
    assert recv == sorted(recv) and recv[-1] <= start + 90
    assert len(rec.rows) == len(applied)
    assert rec.certs == demo.fleet.cert_cache() and len(rec.certs) == 12
    assert [r for r in rec.rows if r[1] == "SYNCED"][0][2] is None
    assert set(demo.state.nodes) == set(demo.fleet.node_order)
    assert demo.state.nodes[next(n for n, x in demo.fleet.nodes.items() if not x.kubelet_up)].ready == "Unknown"
    assert abs(demo.clock.now() - (start + 90)) < 5


def test_grace_follows_the_server_version_unless_overridden() -> None:
    demo = DemoSource(nodes=3, scenario="steady")
    assert demo.state.settings.grace == 50.0
    own = DemoSource(nodes=3, scenario="steady", settings=Settings().override(grace_seconds=40.0))
    assert own.state.settings.grace == 40.0
    assert own.fleet.settings.grace == 40.0
    assert own.state.settings.origin("grace_seconds") == "flag"


def test_start_and_stop_feed_from_a_thread() -> None:
    demo = DemoSource(nodes=5, scenario="steady", speed=50.0)
    start_gen = demo.state.generation
    demo.start()
    try:
        wait_until(lambda: demo.fleet.now > demo.fleet.start + 15 and demo.state.generation > start_gen)
        demo.focus_node(demo.fleet.node_order[0])
    finally:
        demo.stop()
    assert demo._thread is None
    demo.stop()  # idempotent
