"""The fleet table without a screen: columns, row selection, row drawing, untrusted text."""

from __future__ import annotations

import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from factories import T0, event, lease, node, taint
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState
from nodewatch.core.settings import Settings
from nodewatch.ui.fleet_table import (
    COLUMNS,
    NOT_READY,
    WALL_COLUMNS,
    LabelMatcher,
    RowContext,
    RowQuery,
    layout_columns,
    render_header,
    render_row,
    select_rows,
)
from ui_support import big_state, feed, incident_state

BAD = {"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"}


def strip_is_inert(strip) -> None:
    for seg in strip:
        if seg.control:
            raise AssertionError(f"control segment {seg!r}")
        for ch in seg.text:
            assert unicodedata.category(ch) not in BAD, (seg.text, hex(ord(ch)))


@pytest.mark.parametrize("width", [40, 80, 120, 160, 200, 300])
def test_columns_fit_every_width(width):
    cols = layout_columns(width)
    used = sum(w for _, w in cols) + len(cols) - 1
    keys = [c.key for c, _ in cols]
    assert {"state", "name", "grace", "cause"} <= set(keys)
    if width >= 120:
        assert used == width
    assert keys == [c.key for c in COLUMNS if c.key in keys]  # display order kept


def test_narrow_screens_drop_least_important_columns_first():
    wide = [c.key for c, _ in layout_columns(300)]
    narrow = [c.key for c, _ in layout_columns(120)]
    assert len(wide) == len(COLUMNS)
    assert "kubelet" not in narrow and "state" in narrow
    wall = [c.key for c, _ in layout_columns(80, WALL_COLUMNS)]
    assert set(wall) <= set(WALL_COLUMNS)


def test_state_filters_are_slices_of_the_fleet_order():
    state = incident_state()
    view = state.evaluate(T0)
    for f in [NOT_READY, *NodeState]:
        got = select_rows(view, RowQuery(states=f))
        if f == NOT_READY:
            want = [v for v in view.nodes if v.state is not NodeState.READY]
        else:
            want = [v for v in view.nodes if v.state is f]
        assert [v.name for v in got] == [v.name for v in want], f


def test_zone_filter_search_and_sort():
    state = incident_state()
    view = state.evaluate(T0)
    rows = select_rows(view, RowQuery(zone="eu-1/eu-1b"))
    assert {v.name for v in rows} == {"worker-b-0", "worker-b-1", "worker-b-2"}
    rows = select_rows(view, RowQuery(search="CORDON"), state, LabelMatcher())
    assert [v.name for v in rows] == ["worker-c-cordoned"]
    # labels too: key=value
    rows = select_rows(view, RowQuery(search="zone=eu-1/eu-1a"), state, LabelMatcher())
    assert rows == []  # the label value is "eu-1a", the region is a separate label
    rows = select_rows(view, RowQuery(search="zone=eu-1a"), state, LabelMatcher())
    assert {v.name for v in rows} == {"worker-a-0", "worker-a-1", "worker-a-2", "worker-a-late"}
    by_name = select_rows(view, RowQuery(sort="name"))
    assert [v.name for v in by_name] == sorted(v.name for v in view.nodes)
    rev = select_rows(view, RowQuery(sort="name", reverse=True))
    assert [v.name for v in rev] == sorted((v.name for v in view.nodes), reverse=True)
    by_evict = select_rows(view, RowQuery(sort="evict"))
    assert by_evict[0].name == "worker-c-runtime"  # the earliest deadline (already passed)
    by_cert = select_rows(view, RowQuery(sort="cert"))
    assert by_cert[0].name == "worker-c-cert"
    for col in COLUMNS:  # every column sorts without error
        assert len(select_rows(view, RowQuery(sort=col.key))) == len(view.nodes)


def test_label_matcher_notices_changed_labels():
    state = incident_state()
    m = LabelMatcher()
    view = state.evaluate(T0)
    assert select_rows(view, RowQuery(search="team=storage"), state, m) == []
    state.apply("nodes", "MODIFIED", node("worker-a-0", zone="eu-1a", region="eu-1", labels={"team": "storage"}), T0)
    view = state.evaluate(T0)
    assert [v.name for v in select_rows(view, RowQuery(search="team=storage"), state, m)] == ["worker-a-0"]


def test_rows_read_like_the_issue_says():
    state = incident_state()
    view = state.evaluate(T0)
    cols = layout_columns(300)
    ctx = RowContext(T0)
    texts = {v.name: render_row(v, ctx, cols, 300).text for v in view.nodes}
    assert "» Evicting" in texts["worker-b-0"]
    assert "Unknown for 2m00s" in texts["worker-b-0"]
    assert "evict in 3m00s" in texts["worker-b-0"]
    assert "unreachable:NoExec 2m +1" in texts["worker-b-0"]
    assert "NotReady in 47s" in texts["worker-a-0"]
    assert "200d" in texts["worker-a-0"] and "5d" in texts["worker-c-cert"]
    assert "grace over 20s" in texts["worker-c-overdue"]
    assert "R M · · ·" in texts["worker-c-mem"]
    assert "container runtime is down" in texts["worker-c-runtime"]
    header = render_header(cols, ctx, 300, "state", False).text
    assert "STATE ▼" in header and "LIKELY CAUSE" in header


def test_blind_rows_say_since_when():
    state = incident_state()
    state.update_health("leases", connected=False, down_since=T0 - 30, last_error="connection reset")
    view = state.evaluate(T0)
    assert view.leases_blind
    cols = layout_columns(300)
    ctx = RowContext(T0, blind_since=T0 - 30)
    text = render_row(view.node("worker-a-0"), ctx, cols, 300).text
    assert "? since 07:59:30" in text and "lease age unknown" in text
    assert "Overdue" not in text and "Late" not in text


@pytest.mark.parametrize("width", [30, 80, 133, 250])
def test_every_row_is_exactly_the_width(width):
    state = incident_state()
    view = state.evaluate(T0)
    cols = layout_columns(width)
    for v in view.nodes:
        for sel in (False, True):
            strip = render_row(v, RowContext(T0), cols, width, sel)
            assert strip.cell_length == width


NASTY = st.one_of(
    st.text(min_size=1, max_size=300),
    st.sampled_from([
        "[red]x[/red]", "[bold][link=http://x]y", "\x1b[2J\x1b[H", "\x1b]52;c;ZXZpbA==\x07", "\u202edlrow",
        "a\u200b\u200c\u200db", "\x00\x07\x08", "ｗｉｄｅ漢字" * 20, "e" + "\u0301" * 40, "\ud800", "\t\n\r",
    ]),
)


@given(name=NASTY, label=NASTY, taint_value=NASTY, reason=NASTY, message=NASTY, zone=NASTY,
       version=NASTY, width=st.integers(min_value=20, max_value=260))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzz_untrusted_text_through_the_rendering_path(name, label, taint_value, reason, message, zone,
                                                        version, width):
    """Cluster strings of any kind go through FleetState into rows: inert, and the layout holds."""
    state = FleetState(Settings())
    n = node(name, "False", zone=zone, reason=reason, message=message, labels={label[:60] or "k": label},
             taints=[{**taint(TAINT_UNREACHABLE, "NoExecute", T0 - 10), "value": taint_value},
                     {"key": label or "k", "effect": "NoSchedule", "value": taint_value}])
    n["status"]["nodeInfo"]["kubeletVersion"] = version
    feed(state, [("nodes", n), ("leases", lease(name, T0 - 100)),
                 ("events", event("e1", name, reason, message, T0 - 5))])
    view = state.evaluate(T0)
    assert len(view.nodes) == 1
    cols = layout_columns(width)
    for blind in (None, T0 - 5):
        ctx = RowContext(T0, blind_since=blind)
        for sel in (False, True):
            strip = render_row(view.nodes[0], ctx, cols, width, sel)
            assert strip.cell_length == width
            strip_is_inert(strip)
            assert sum(cell_len(s.text) for s in strip) == width


def test_frame_cost_does_not_grow_with_the_fleet():
    """Drawing the visible lines costs the same at 2,000 and 20,000 nodes (O(visible), not O(n))."""
    timings = {}
    for n in (2_000, 20_000):
        state = big_state(n)
        view = state.evaluate(T0)
        rows = select_rows(view, RowQuery())
        cols = layout_columns(200)
        ctx = RowContext(T0)
        started = time.perf_counter()
        for frame in range(5):
            c = RowContext(T0 + frame, ctx.palette)
            top = (frame * 997) % (len(rows) - 60)
            for i in range(top, top + 60):
                render_row(rows[i], c, cols, 200)
        timings[n] = (time.perf_counter() - started) / 5
    assert timings[20_000] < 0.05  # one frame of 60 lines, generously
    assert timings[20_000] < 4 * timings[2_000] + 0.005
