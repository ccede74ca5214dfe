"""When a not-Ready node's NoExecute taint comes, by its zone (``core.outlook``): the stretch
between the Ready flip and the taint, where the zone rules decide whether pods are evicted at all."""

from __future__ import annotations

from factories import T0, node, taint
from test_fleet_state import fleet

from nodewatch.core.outlook import outlook_in, settings_of, zone_of
from nodewatch.core.rules import TAINT_UNREACHABLE
from nodewatch.core.settings import Settings


def outlook(objs, name: str, settings: Settings | None = None) -> str | None:
    view = fleet(*objs, settings=settings).evaluate(T0)
    v = view.node(name)
    assert v is not None
    return outlook_in(view, v)


def nodes(zone: str, ready: int, down: int, ready_status: str = "Unknown") -> list:
    return ([("nodes", node(f"{zone}-ok{i}", "True", zone=zone)) for i in range(ready)]
            + [("nodes", node(f"{zone}-down{i}", ready_status, zone=zone)) for i in range(down)])


def test_a_node_down_in_a_normal_zone_is_tainted_at_the_next_pass():
    text = outlook(nodes("a", 9, 1), "a-down0")
    assert text.startswith("NoExecute taint at the controller's next monitor pass (every 5s;")
    assert "0.1 nodes/s" in text and "300s by default" in text
    # Ready=False (the kubelet reports a problem) goes through the same queue
    assert outlook(nodes("a", 9, 1, "False"), "a-down0").startswith("NoExecute taint at the controller's next")


def test_the_settings_in_force_are_the_ones_said():
    s = Settings().override(monitor_period_seconds=3.0, toleration_seconds=60.0, eviction_rate=0.5)
    text = outlook(nodes("a", 9, 1), "a-down0", s)
    assert "every 3s" in text and "0.5 nodes/s" in text and "60s by default" in text


def test_a_small_zone_in_partial_disruption_is_not_tainted():
    text = outlook(nodes("a", 1, 3) + nodes("b", 3, 0), "a-down0")
    assert text == ("no NoExecute taint while zone r1/a is in PartialDisruption: a zone of 4 nodes "
                    "(at most 50) is not tainted at all")


def test_a_large_zone_in_partial_disruption_is_tainted_at_the_secondary_rate():
    text = outlook(nodes("a", 20, 40) + nodes("b", 3, 0), "a-down0")
    assert text.startswith("NoExecute taint queued: zone r1/a is in PartialDisruption and tainted at "
                           "0.01 nodes/s (one every 100s)")


def test_a_zone_wholly_down_while_another_is_up_is_tainted_at_the_normal_rate():
    text = outlook(nodes("a", 0, 3) + nodes("b", 3, 0), "a-down0")
    assert text.startswith("NoExecute taint at the controller's next monitor pass") and "0.1 nodes/s" in text


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


def test_several_clusters_each_node_is_judged_by_its_own_cluster():
    from test_multi_ui import multi_source

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
