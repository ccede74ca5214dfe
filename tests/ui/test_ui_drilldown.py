"""The drill-down through the real widget: bounded whatever the node carries, its first screen, and
the heartbeat history (the core keeps the renewals' receive times; the chart draws their intervals).
"""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console

from nodewatch.core.clock import ManualClock
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_UNREACHABLE
from nodewatch.core.settings import Settings
from nodewatch.core.views import MAX_BEATS, RESOURCES
from nodewatch.sim import objects
from nodewatch.ui import drilldown as dd
from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.drilldown import DrillDown
from nodewatch.ui.heartbeat import HeartbeatChart, intervals
from nodewatch.ui.theme import DEFAULT_PALETTE
from support.factories import T0, event, lease, node, pod, taint
from support.ui_support import FakeSource, incident_source
from tests.ui.test_ui_app import static_text

BIG = "X" * 100_000
"""A 100 KB string."""
WHY = "Why" + BIG
SAID = "m " + BIG
"""A condition's 100 KB reason and message, one string each for all of them: 10,000 conditions of
their own strings held 2 GB (a test worker's memory grew to 4.4 GB with the next test's)."""


def hostile_node(name: str, n: int) -> dict:
    """A node with ``n`` conditions, labels, taints and addresses, and 100 KB strings everywhere."""
    obj = node(name, "Unknown", reason="R" + BIG, message="M" + BIG, transition=T0 - 100,
               labels={f"label-{i:05d}": f"v{i}" + BIG[:i % 3 * 1000] for i in range(n)},
               taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 100)]
               + [taint(f"example.com/t{i}-" + BIG[:200], "NoSchedule", T0 - 50) for i in range(n)])
    obj["status"]["conditions"] += [
        objects.condition(f"Custom{i:05d}", "True", reason=WHY, message=SAID,
                          heartbeat=T0 - 10, transition=T0 - 10)
        for i in range(n)
    ]
    obj["status"]["addresses"] = [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"} for i in range(n)]
    obj["status"]["capacity"] = {f"example.com/r{i}": str(i) for i in range(n)}
    obj["status"]["nodeInfo"] = {"kubeletVersion": "v1.33.2" + BIG, "osImage": BIG, "kernelVersion": BIG,
                                 "containerRuntimeVersion": BIG}
    return obj


def hostile_source(n: int) -> FakeSource:
    state = FleetState(Settings(server_version="v1.33.2"))
    name = "hostile-node"
    assert state.apply("nodes", "ADDED", hostile_node(name, n), T0, listing=True)
    assert state.apply("leases", "ADDED", lease(name, T0 - 200), T0, listing=True)
    for i in range(300):
        assert state.apply("pods", "ADDED", pod(f"p{i}-" + BIG[:500], name, owner_kind="StatefulSet",
                                                namespace="ns" + BIG[:300]), T0, listing=True)
    for i in range(300):
        assert state.apply("events", "ADDED", event(f"ev{i}", name, f"Reason{i}", f"message {i} " + BIG,
                                                    T0 - 1000 + i), T0, listing=True)
    for r in RESOURCES:
        state.apply(r, "SYNCED", None, T0)
    return FakeSource(state, ManualClock(T0))


@pytest.mark.parametrize("n", [10_000])
async def test_a_hostile_node_draws_within_bounds_and_escape_answers(n):
    """10,000 conditions, labels, taints, addresses and resources, 300 pods and events, 100 KB
    strings: every section is capped with "+N more", the whole drill-down stays a few screens tall,
    and Escape closes it."""
    src = hostile_source(n)
    app = NodewatchApp(src, focus="hostile-node", refresh_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DrillDown)
        # The sections are filled on the first refresh after mount; on a loaded machine that is
        # later than one pause, so wait for it (bounded) rather than read the empty boxes.
        for _ in range(200):
            text = {key: static_text(screen.query_one(f"#dd-{key}")) for key, _, _ in dd.SECTIONS}
            if "more conditions" in text["conditions"]:
                break
            await pilot.pause(0.05)
        assert f"+{n - dd.MAX_CONDITIONS + 1:,} more conditions" in text["conditions"]  # + Ready
        assert f"+{n + 1 - dd.MAX_TAINTS:,} more taints" in text["taints"]
        assert f"+{n - dd.MAX_LABELS + 3:,} more labels" in text["node"]  # + hostname, zone, region
        assert f"+{n - dd.MAX_ADDRESSES:,} more addresses" in text["node"]
        assert f"+{n - dd.MAX_RESOURCES:,} more resources" in text["node"]
        assert f"+{dd.MAX_PODS - dd.MAX_PODS_SHOWN:,} more pods" in text["pods"]
        assert f"+{dd.MAX_EVENTS - dd.MAX_EVENTS_SHOWN:,} more older events" in text["events"]
        # the newest events are all there, one line each (a long message does not push them out)
        for i in range(299, 299 - dd.MAX_EVENTS_SHOWN, -1):
            assert f"Reason{i}" in text["events"], i
        # bounded: each box and the whole scroll, whatever n was
        for key, body in text.items():
            assert body.count("\n") < 80, (key, body.count("\n"))
        scroll = screen.query_one("#dd-scroll")
        assert scroll.virtual_size.height < 400, scroll.virtual_size.height
        title = static_text(screen.query_one("#dd-summary"))
        assert title.count("\n") <= 2
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DrillDown)


def test_section_caps_do_not_depend_on_the_size_of_the_data():
    """The same number of lines for 2,000 and for 8,000 of everything: only "+N more" changes."""
    console = Console(width=120, record=False)

    def heights(n: int) -> dict[str, int]:
        src = hostile_source(n)
        d = src.state.node_details("hostile-node", T0, max_pods=dd.MAX_PODS, max_events=dd.MAX_EVENTS)
        return {key: len(console.render_lines(fn(d, DEFAULT_PALETTE), pad=False)) for key, _, fn in dd.SECTIONS}

    assert heights(2_000) == heights(8_000)


async def test_first_screen_answers_why_since_when_and_what_is_at_risk():
    """At 120x40 the drill-down of an unreachable node shows, without scrolling: the state and how
    long, the cause and since when, every countdown, the newest events, the pods at risk with the
    fencing advice, and the heartbeat history's top."""
    src = incident_source()
    app = NodewatchApp(src, focus="worker-b-0", refresh_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DrillDown)
        visible = {w.id for w in screen.query(".section") if w.region.y < 39}
        assert {"dd-cause", "dd-events", "dd-pods", "dd-heartbeat"} <= visible, visible
        pods = screen.query_one("#dd-pods")
        assert pods.region.bottom <= 39  # the at-risk box whole
        title = static_text(screen.query_one("#dd-summary"))
        assert "» Evicting │ Unknown for 2m00s │ evict in 3m00s" in title  # not "EvictingUnknown"
        why = static_text(screen.query_one("#dd-cause"))
        assert "since 07:58:00Z (2 minutes ago): Evicting" in why
        assert "evicted in 3 minutes (08:03:00Z)" in why  # humanize's prose, with the clock time
        # full-width boxes stacked: each starts where the one above ends (no blank gap)
        boxes = sorted(screen.query(".section"), key=lambda w: w.region.y)
        for above, below in zip(boxes, boxes[1:]):
            assert below.region.y == above.region.bottom, (above.id, below.id)


# --- heartbeat history --------------------------------------------------------------------------


def renewing_state(name: str = "n1") -> FleetState:
    state = FleetState(Settings(server_version="v1.33.2"))
    state.apply("nodes", "ADDED", node(name), T0 - 1000, listing=True)
    state.apply("leases", "ADDED", lease(name, T0 - 1000), T0 - 1000, listing=True)
    for r in RESOURCES:
        state.apply(r, "SYNCED", None, T0 - 1000)
    return state


def test_the_core_keeps_the_last_renewal_receive_times_bounded():
    state = renewing_state()
    t = T0 - 990
    for i in range(100):
        # the node's clock is 2 s behind: renewTime < receive time
        assert state.apply("leases", "MODIFIED", lease("n1", t - 2), t)
        t += 10 if i % 10 else 35  # every tenth renewal is late
    beats = state.node_details("n1", t).beats
    assert len(beats) == MAX_BEATS
    assert beats[-1] == t - (35 if 99 % 10 == 0 else 10)
    got = intervals(beats)
    assert len(got) == MAX_BEATS - 1 and sorted(set(got)) == [10.0, 35.0]
    # a relist: renewals in between were not seen, so the next interval is not made up
    assert state.apply("leases", "MODIFIED", lease("n1", t + 100), t + 105, listing=True)
    assert state.apply("leases", "MODIFIED", lease("n1", t + 110), t + 110)
    tail = state.node_details("n1", t + 110).beats[-3:]
    assert math.isnan(tail[1]) and tail[2] == t + 110
    assert intervals(tail)[-1] is None
    # a deleted lease forgets its history
    assert state.apply("leases", "DELETED", lease("n1", t + 110), t + 111)
    assert state.node_details("n1", t + 111).beats == []


def test_the_chart_shows_a_slow_node_a_stopped_node_and_the_skew():
    beats = [T0 + 10 * i for i in range(10)] + [T0 + 90 + 30, T0 + 90 + 60]  # two late renewals
    chart = HeartbeatChart(beats, now=T0 + 150 + 55, grace=50, lease_duration=40, skew=+12.0,
                           palette=DEFAULT_PALETTE)
    lines = [t.plain for t in chart.lines(60)]
    assert len(lines) == 5
    assert lines[0].lstrip().startswith("grace 50s ┤") and "renew 10s ┤" in lines[3]
    assert lines[0].rstrip().endswith("▲")  # the open interval (55 s) passed the grace
    bottom = lines[3].split("┤", 1)[1]
    # 10 s fills 6/8 of the bottom row (a quarter of the grace is one row); 30 s and 55 s fill it
    assert bottom.endswith("·" + "▆" * 9 + "███"), bottom
    assert lines[2].rstrip().endswith("·" + "███"), lines[2]  # 30 s and 55 s fill the second row
    assert lines[1].rstrip().endswith(" ▃▃█"), lines[1]  # 30 s reaches 3/8 into the third
    figures = lines[4]
    assert "11 intervals: min 10s · median 10s · max 30s · 2 late" in figures
    assert "now 55s since the last" in figures and "skew +12.0s (clock or delay off)" in figures


async def test_the_drilldown_draws_the_heartbeat_history():
    state = renewing_state("n1")
    t = T0 - 990
    for _ in range(20):
        state.apply("leases", "MODIFIED", lease("n1", t), t)
        t += 10
    src = FakeSource(state, ManualClock(t + 5))
    app = NodewatchApp(src, focus="n1", refresh_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = static_text(app.screen.query_one("#dd-heartbeat"))
        assert "19 intervals: min 10s · median 10s · max 10s" in text
        assert "now 15s since the last" in text


async def test_between_the_flip_and_the_taint_the_countdowns_say_what_the_zone_rules_will_do():
    """An Unknown node not yet tainted: not "nothing due" but when the NoExecute taint comes; in a
    small zone in PartialDisruption, that it does not come at all."""
    state = FleetState(Settings(server_version="v1.33.2"))
    objs = [node("alone", "Unknown", zone="a")] + [node(f"ok{i}", "True", zone="a") for i in range(5)]
    objs += [node(f"b-down{i}", "Unknown", zone="b") for i in range(3)] + [node("b-ok", "True", zone="b")]
    for obj in objs:
        assert state.apply("nodes", "ADDED", obj, T0, listing=True)
    for r in RESOURCES:
        state.apply(r, "SYNCED", None, T0)
    for name, expected in (("alone", "NoExecute taint not before 07:00:05Z (due): 1 of 1 in the zone's queue"),
                           ("b-down0", "no NoExecute taint while zone r1/b is in PartialDisruption")):
        app = NodewatchApp(FakeSource(state, ManualClock(T0)), focus=name, refresh_seconds=3600)
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            why = static_text(app.screen.query_one("#dd-cause"))
            assert expected in " ".join(why.split()), why
            assert "nothing due" not in why


@pytest.mark.parametrize("version, skipped", [("v1.37.2", True), ("v1.36.4", False)])
def test_the_countdown_of_a_node_the_controller_skips_promises_no_notready(version, skipped):
    """A dead kubelet's Lease annotated after its last renewal: from 1.37 the controller skips the
    node; the countdown said "NotReady in 30 seconds unless it renews" / "grace ran out"."""
    st = FleetState(Settings().with_server_version(version))
    st.apply("nodes", "ADDED", node("a"), T0, listing=True)
    st.apply("leases", "ADDED", lease("a", T0), T0, listing=True)
    for r in ("nodes", "leases"):
        st.apply(r, "SYNCED", None, T0)
    annotated = lease("a", T0)
    annotated["metadata"]["annotations"] = {"example.com/note": "looked at it"}
    st.apply("leases", "MODIFIED", annotated, T0 + 6)
    for now, plain in ((T0 + 20, "NotReady in 30 seconds unless it renews"), (T0 + 80, "grace ran out 30 seconds ago")):
        console = Console(width=300, record=True, file=io.StringIO())
        console.print(dd.cause_section(st.node_details("a", now), DEFAULT_PALETTE))
        (line,) = [ln for ln in console.export_text().splitlines() if "countdowns" in ln]
        assert ("no NotReady and no eviction will come of it" in line) is skipped, line
        assert (line.strip() == f"countdowns {plain}") is not skipped, line
