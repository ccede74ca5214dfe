"""When a not-Ready node's NoExecute taint comes, by its zone (``core.outlook``): the stretch
between the Ready flip and the taint, where the zone rules decide whether pods are evicted at all,
and the zone's queue says when."""

from __future__ import annotations

from nodewatch.core.format import clock_time
from nodewatch.core.outlook import TaintWindow, outlook_in, settings_of, taint_window, zone_of
from nodewatch.core.rules import TAINT_UNREACHABLE
from nodewatch.core.settings import Settings
from support.factories import T0, node, taint
from tests.core.test_fleet_state import fleet

UP_TO_1_33 = Settings().with_server_version("v1.33.1")
"""A release whose controller queues the Unknown it writes one pass later (before PR #120816)."""
FROM_1_34 = Settings().with_server_version("v1.37.2")
"""A release whose controller queues it in the pass that writes it (PR #120816, 1.34)."""


def judged(objs, settings: Settings | None = None):
    return fleet(*objs, settings=settings or UP_TO_1_33).evaluate(T0)


def outlook(objs, name: str, settings: Settings | None = None) -> str | None:
    view = judged(objs, settings)
    v = view.node(name)
    assert v is not None
    return outlook_in(view, v)


def window(objs, name: str, settings: Settings | None = None) -> TaintWindow | None:
    view = judged(objs, settings)
    v = view.node(name)
    return taint_window(view, v, zone_of(view, v), settings_of(view, v))


def nodes(zone: str, ready: int, down: int, ready_status: str = "Unknown", flipped: float = T0 - 2) -> list:
    return ([("nodes", node(f"{zone}-ok{i}", "True", zone=zone)) for i in range(ready)]
            + [("nodes", node(f"{zone}-down{i}", ready_status, zone=zone, transition=flipped)) for i in range(down)])


def test_a_node_down_in_a_normal_zone_is_tainted_at_the_next_pass_up_to_1_33():
    objs = nodes("a", 9, 1)  # flipped 2 s ago: queued at the next pass, 3 s from now
    assert window(objs, "a-down0", UP_TO_1_33) == TaintWindow(T0 + 3, T0 + 3, 1, 1, 1)
    text = outlook(objs, "a-down0", UP_TO_1_33)
    assert text == (f"NoExecute taint not before {clock_time(T0 + 3)} (in 3s): 1 of 1 in the zone's queue at "
                    f"0.1 nodes/s (later if many nodes flip at once); then pods evicted as their tolerations run "
                    f"out, not before {clock_time(T0 + 303)} with the default 300s")


def test_from_1_34_the_pass_that_writes_unknown_queues_the_taint():
    """PR #120816 (1.34): processTaintBaseEviction is handed the Ready condition after the pass's
    update, so the node flipped 2 s ago was queued by that pass: its taint is due now, not in 3 s
    (v1.37.2 tainted 2-3 s after the flip in the testbed, the flip pass's own writes)."""
    objs = nodes("a", 9, 1)
    for version in ("v1.34.0", "v1.37.2"):
        s = Settings().with_server_version(version)
        assert window(objs, "a-down0", s) == TaintWindow(T0 - 2, T0 - 2, 1, 1, 1), version
        assert f"not before {clock_time(T0 - 2)} (due): 1 of 1" in outlook(objs, "a-down0", s)
    assert window(objs, "a-down0", Settings()) == TaintWindow(T0 + 3, T0 + 3, 1, 1, 1)  # unknown: as up to 1.33
    # a zone wholly down (others up): the pass queues all three, one token every 10 s from the flip
    assert window(nodes("a", 0, 3) + nodes("b", 3, 0), "a-down1", FROM_1_34) == TaintWindow(T0 - 2, T0 + 18, 1, 3, 3)


def test_a_ready_false_the_kubelet_posted_is_queued_by_the_pass_that_sees_it():
    """processTaintBaseEviction gets the condition the pass observed: the kubelet's Ready=False is
    seen (and queued) by the first pass after it, so the taint can land within a second of the
    transition, not a monitor period after it as for the Unknown the controller writes itself."""
    assert window(nodes("a", 9, 1, "False"), "a-down0") == TaintWindow(T0 - 2, T0 - 2, 1, 1, 1)
    assert "not before " + clock_time(T0 - 2) + " (due)" in outlook(nodes("a", 9, 1, "False"), "a-down0")


def test_the_extra_queue_entries_are_said_only_for_the_versions_that_leave_them():
    """v1.19 to v1.20.4 re-queue a waiting node without taking out its first entry; PR #96876
    (1.21, 1.20.5) fixed it (settings.taint_queue_keeps_duplicates)."""
    caveat = "behind nodes the controller queues again while they wait"
    for version, said in (("v1.20.2", True), ("v1.19.7", True), ("v1.20.5", False), ("v1.21.0", False),
                          ("v1.33.1", False), (None, False)):
        text = outlook(nodes("a", 9, 1), "a-down0", Settings().with_server_version(version))
        assert (caveat in text) is said, version


def test_nodes_that_flip_in_one_pass_leave_the_queue_in_an_order_the_controller_picks():
    objs = nodes("a", 0, 3) + nodes("b", 3, 0)  # zone a wholly down while b is up: the normal rate
    assert window(objs, "a-down1") == TaintWindow(T0 + 3, T0 + 23, 1, 3, 3)
    assert (f"not before {clock_time(T0 + 3)} (in 3s): 1-3 of 3, in an order the controller picks"
            in outlook(objs, "a-down1"))


def test_the_queue_waits_for_the_zones_last_taint_and_for_earlier_passes():
    tainted = ("nodes", node("a-t", "Unknown", zone="a", transition=T0 - 30,
                             taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 4)]))
    # one node tainted 4 s ago: the bucket's next token comes 6 s from now, not at the next pass
    assert window([*nodes("a", 9, 1), tainted], "a-down0") == TaintWindow(T0 + 6, T0 + 6, 1, 1, 1)
    # two passes: two nodes flipped 12 s ago (queued 7 s ago: one tainted, one in 3 s), one 2 s ago
    first = [("nodes", node(f"early{i}", "Unknown", zone="a", transition=T0 - 12)) for i in range(2)]
    objs = [*nodes("a", 9, 1), *first]
    assert window(objs, "early0") == TaintWindow(T0 - 7, T0 + 3, 1, 2, 3)
    assert window(objs, "a-down0") == TaintWindow(T0 + 13, T0 + 13, 3, 3, 3)
    assert f"not before {clock_time(T0 - 7)} (due): 1-2 of 3" in outlook(objs, "early0")


def test_the_settings_in_force_are_the_ones_said():
    s = UP_TO_1_33.override(monitor_period_seconds=3.0, toleration_seconds=60.0, eviction_rate=0.5)
    objs = nodes("a", 9, 2)
    assert window(objs, "a-down0", s) == TaintWindow(T0 + 1, T0 + 3, 1, 2, 2)
    text = outlook(objs, "a-down0", s)
    assert "0.5 nodes/s" in text and f"not before {clock_time(T0 + 61)} with the default 60s" in text


def test_a_small_zone_in_partial_disruption_is_not_tainted():
    text = outlook(nodes("a", 1, 3) + nodes("b", 3, 0), "a-down0")
    assert text == ("no NoExecute taint while zone r1/a is in PartialDisruption: a zone of 4 nodes "
                    "(at most 50) is not tainted at all")


def test_from_1_34_the_pass_that_makes_a_small_zone_partial_may_still_taint_one_node():
    """The pass queues the nodes it flips, and decides the zone's state only at its end: until
    then its zone had the normal rate (v1.37.2 tainted one of three in the testbed)."""
    caveat = "the monitor pass that flipped it may still taint one of the zone's nodes before it decides the zone"
    objs = nodes("a", 1, 3) + nodes("b", 3, 0)  # flipped 2 s ago
    assert outlook(objs, "a-down0", FROM_1_34).endswith(caveat)
    assert caveat not in outlook(objs, "a-down0", UP_TO_1_33)
    older = nodes("a", 1, 3, flipped=T0 - 30) + nodes("b", 3, 0)  # that pass is long over
    assert caveat not in outlook(older, "a-down0", FROM_1_34)


def test_a_large_zone_in_partial_disruption_is_tainted_at_the_secondary_rate():
    objs = nodes("a", 20, 40) + nodes("b", 3, 0)
    assert window(objs, "a-down0") == TaintWindow(T0 + 3, T0 + 3 + 39 * 100, 1, 40, 40)
    text = outlook(objs, "a-down0")
    assert text.startswith("zone r1/a is in PartialDisruption: NoExecute taint not before")
    assert "1-40 of 40, in an order the controller picks in the zone's queue at 0.01 nodes/s" in text


def test_every_zone_down_stops_the_taints():
    text = outlook(nodes("a", 0, 2) + nodes("b", 0, 1), "b-down0")
    assert text.startswith("no NoExecute taint, no eviction: every zone is down")


def test_no_outlook_where_the_question_does_not_arise():
    tainted = ("nodes", node("t", "Unknown", zone="a", taints=[taint(TAINT_UNREACHABLE, "NoExecute", T0 - 10)]))
    never = ("nodes", node("n", None, zone="a"))
    objs = [*nodes("a", 5, 0), tainted, never]
    assert outlook(objs, "a-ok0") is None  # Ready
    assert outlook(objs, "t") is None  # tainted already: the eviction countdown says the rest
    assert outlook(objs, "n") is None  # never posted status: the controller's startup grace first
    assert window(objs, "n") is None


def test_several_clusters_each_node_is_judged_by_its_own_cluster():
    from tests.ui.test_multi_ui import multi_source

    view = multi_source().state.evaluate(T0)
    for key, zone, grace in (("prod-eu/worker-b-0", "prod-eu/eu-1/eu-1b", 50.0),
                             ("prod-us/worker-b-0", "prod-us/eu-1/eu-1b", 40.0)):
        v = next(v for v in view.nodes if v.key == key)
        assert zone_of(view, v).name == zone and settings_of(view, v).grace == grace


def test_a_hostile_zone_label_is_said_as_inert_text():
    evil = "z\x1b]52;c;aGk=\x07\u202e"
    objs = [("nodes", node(f"d{i}", "Unknown", zone=evil)) for i in range(3)] + [("nodes", node("ok", "True", zone=evil))]
    objs += [("nodes", node("b", "True", zone="b"))]
    text = outlook(objs, "d0")
    assert "PartialDisruption" in text and "\x1b" not in text and "\u202e" not in text and "\\x1b" in text
