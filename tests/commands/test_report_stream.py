"""The streamed ``status`` output is byte for byte the one-piece output it replaced."""

from __future__ import annotations

import dataclasses

import msgspec
import orjson
import pytest

from nodewatch.core import report
from nodewatch.core.fleet import FleetState
from nodewatch.core.report import fleet_json, fleet_table, fleet_table_lines, terminal_safe_json, write_fleet_json
from nodewatch.core.rules import NodeState, ZoneState
from nodewatch.core.text import duration, safe
from nodewatch.core.views import ZoneView
from nodewatch.sources.demo import DemoSource

T0 = 1_800_000_000.0


def _state(nodes: int) -> tuple[FleetState, float]:
    """A demo incident a few minutes in (as ``status --demo --at +300``): states, taints, causes."""
    demo = DemoSource(nodes=nodes, scenario="incident", seed=3)
    now = demo.clock.now() + 300
    demo.advance_to(now)
    return demo.state, now


def _streamed(state: FleetState, now: float, node: str | None) -> bytes:
    out: list[bytes] = []
    write_fleet_json(out.append, state, state.evaluate(now), node)
    return b"".join(out)


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_streamed_json_is_the_one_piece_json(monkeypatch, chunk):
    monkeypatch.setattr(report, "STREAM_CHUNK", chunk)
    state, now = _state(40)
    view = state.evaluate(now)
    name = view.nodes[3].name
    for node in (None, name, "no-such-node"):
        whole = terminal_safe_json(orjson.dumps(fleet_json(state, view, node), option=orjson.OPT_INDENT_2))
        assert _streamed(state, now, node) == whole
        assert orjson.loads(whole)["nodes"] == ([] if node == "no-such-node" else orjson.loads(whole)["nodes"])
    assert len(orjson.loads(_streamed(state, now, None))["nodes"]) == 40


def test_streamed_json_of_an_empty_fleet_and_of_steering_characters():
    state = FleetState()
    view = state.evaluate(T0)
    assert _streamed(state, T0, None) == orjson.dumps(fleet_json(state, view), option=orjson.OPT_INDENT_2)
    state.apply("leases", "ADDED", {"metadata": {"name": "n\u202e\u0085x", "namespace": "kube-node-lease"},
                                    "spec": {"renewTime": "2027-01-15T08:00:00.000000Z",
                                             "leaseDurationSeconds": 40}}, T0, False)
    state.apply("nodes", "ADDED", {"metadata": {"name": "n\u202e\u0085x"}}, T0, False)
    view = state.evaluate(T0)
    whole = terminal_safe_json(orjson.dumps(fleet_json(state, view), option=orjson.OPT_INDENT_2))
    assert _streamed(state, T0, None) == whole
    assert "\u202e".encode() not in whole and orjson.loads(whole)["nodes"][0]["name"] == "n\u202e\u0085x"


def test_table_rows_line_up_under_their_titles():
    state, now = _state(25)
    view = state.evaluate(now)
    lines = list(fleet_table_lines(state, view))
    assert "\n".join(lines) == fleet_table(state, view)
    header = next(i for i, ln in enumerate(lines) if ln.startswith("NODE  "))
    rows = lines[header + 1:header + 1 + len(view.nodes)]
    starts = [lines[header].index(t) for t in ("ZONE", "STATE", "LEASE AGE", "CAUSE")]
    assert any(v.state.word != "Ready" for v in view.nodes)
    for v, row in zip(view.nodes, rows):
        assert row[:starts[0]].rstrip() == v.name  # widths from every row, the longest name included
        assert row[starts[1]:starts[2]].strip() == f"{v.state.symbol} {v.state.word}"
        assert row[starts[3]:] == (safe(v.cause, 120) or "-")
    assert max(len(v.name) for v in view.nodes) + 2 == starts[0]


def test_the_tables_counts_have_thousands_separators():
    """A 65,000-node fleet reads "Ready 64,990" and "21,667/21,667 ready", as the dashboard's header does."""
    state, now = _state(1500)
    view = state.evaluate(now)
    big = ZoneView("eu-west-1/eu-west-1a", ZoneState.NORMAL, 21_667, 21_660, 7, 0.0)
    lines = list(fleet_table_lines(state, dataclasses.replace(view, zones=[*view.zones, big])))
    ready = view.counts[NodeState.READY]
    assert ready >= 1000 and f"Ready {ready:,}" in lines[1].split("  ")
    assert "zone eu-west-1/eu-west-1a: Normal 21,660/21,667 ready, taint rate 0/s" in lines


def test_the_tables_cert_column_says_expired_as_the_dashboard_does():
    """A certificate past its notAfter reads EXPIRED, not a negative time left ("-4m10s")."""
    state, now = _state(5)
    view = state.evaluate(now)
    first, second = view.nodes[0], view.nodes[1]
    nodes = [msgspec.structs.replace(first, cert_not_after=now - 250),
             msgspec.structs.replace(second, cert_not_after=now + 3 * 86400), *view.nodes[2:]]
    lines = list(fleet_table_lines(state, dataclasses.replace(view, nodes=nodes)))
    header = next(ln for ln in lines if ln.startswith("NODE  "))
    at = header.index("CERT")
    rows = {ln.split()[0]: ln[at:].split()[0] for ln in lines if ln.split() and ln.split()[0] in (first.name, second.name)}
    assert rows == {first.name: "EXPIRED", second.name: "3d00h"}


def test_the_tables_past_deadlines_read_ago_not_negative():
    """An evicted node's EVICTION IN and an overdue one's GRACE LEFT say how long ago ("12m ago", as
    the dashboard's "evicted 12m ago"), not a negative time ("-12m")."""
    state, now = _state(30)
    view = state.evaluate(now)
    past = [v for v in view.nodes if v.eviction_at is not None and v.eviction_at < now - 1]
    overdue = [v for v in view.nodes if (v.grace_remaining(now) or 0) < -1]
    assert past and overdue
    lines = list(fleet_table_lines(state, view))
    header = next(ln for ln in lines if ln.startswith("NODE  "))
    grace_at, evict_at, taints_at = header.index("GRACE LEFT"), header.index("EVICTION IN"), header.index("TAINTS")
    cells = {ln.split()[0]: (ln[grace_at:evict_at].strip(), ln[evict_at:taints_at].strip()) for ln in lines[4:]}
    for v in past:
        assert cells[v.name][1] == f"{duration(now - v.eviction_at)} ago"
    for v in overdue:
        assert cells[v.name][0] == f"{duration(-v.grace_remaining(now))} ago"
    assert not any(c.startswith("-") and c != "-" for pair in cells.values() for c in pair)
