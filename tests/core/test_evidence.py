"""No frame calls a node Late on evidence it has not received (issue 29, ``core/evidence.py``).

The shape seen at 65,000 nodes against the simulated server: Leases listed with a renewTime 25 s
old on the node's clock (the server writes no managedFields, so nothing dates the renewal), their
kubelets alive and renewing on the watch a few seconds later. On the old code the first frame after
the list called every one of them Late."""

from __future__ import annotations

import pytest

from nodewatch.core.evidence import IN_FLIGHT
from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from support.factories import T0, lease, node

BEHIND = 25.0
"""How far behind our clock the nodes' clocks are (renewTime, heartbeats)."""
LISTED = T0 + 1.0
"""Receive time of the lease list's SYNCED."""


def live_start(names: list[str], settings: Settings | None = None, written: float | None = None) -> FleetState:
    """A state as a live start leaves it: both streams listed, Nodes Ready, their Leases listed with
    renewTime (and heartbeat) ``BEHIND`` seconds ago on the node's clock (``written``: a server
    write time on every Lease, ``managedFields``)."""
    s = FleetState(settings or Settings())
    for res in ("nodes", "leases"):
        s.update_health(res, connected=True, synced=False, down_since=None, last_error="")
    for n in names:
        s.apply("nodes", "ADDED", node(n, heartbeat=T0 - BEHIND), T0 + 0.5, True)
        s.apply("leases", "ADDED", lease(n, T0 - BEHIND, written=written), T0 + 0.5, True)
    s.apply("nodes", "SYNCED", None, T0 + 0.6, True)
    s.update_health("nodes", synced=True, last_activity=T0 + 0.6)
    s.apply("leases", "SYNCED", None, LISTED, True)
    s.update_health("leases", synced=True, last_activity=LISTED)
    return s


def states(s: FleetState, now: float) -> dict[str, NodeState]:
    return {v.name: v.state for v in s.evaluate(now).nodes}


def test_a_listed_age_on_the_nodes_clock_is_not_late_before_a_renewal_could_come():
    s = live_start(["a", "b"])
    first = s.evaluate(LISTED + 0.2)
    # The old code: both Late (26 s > two renew intervals) in the first frame after the list.
    assert [v.state for v in first.nodes] == [NodeState.READY, NodeState.READY]
    assert all(v.lease_age(LISTED + 0.2) is None for v in first.nodes)  # "lease age unknown"
    assert first.awaiting_renewals == 2  # the header says what is still arriving
    # "a" renews on the watch: timed by its receipt, judged at once
    s.apply("leases", "MODIFIED", lease("a", T0 - BEHIND + 10), LISTED + 3.0)
    view = s.evaluate(LISTED + 3.1)
    assert view.node("a").lease_age(LISTED + 3.1) == pytest.approx(0.1, abs=1e-6)
    assert view.awaiting_renewals == 1
    # one renewal interval (10 s) + margin after the list, "b" never renewed: the list's age stands
    assert states(s, LISTED + 11.9) == {"a": NodeState.READY, "b": NodeState.READY}
    after = s.evaluate(LISTED + 12.0)
    assert after.node("b").state is NodeState.LATE and after.awaiting_renewals == 0
    assert after.node("b").lease_age(LISTED + 12.0) == BEHIND + 13.0


def test_a_renewed_node_leaves_the_awaited_count_and_is_not_judged_again_when_the_frontier_passes(monkeypatch):
    s = live_start(["a", "b", "c"])
    assert s.evaluate(LISTED + 0.2).awaiting_renewals == 3
    # a drill-down's fresh judgement of an awaited node is not the fleet's bookkeeping
    assert s.evaluator.judge("a", LISTED + 0.3) is not None
    assert s.evaluate(LISTED + 0.4).awaiting_renewals == 3
    s.apply("leases", "MODIFIED", lease("a", T0 - BEHIND + 10), LISTED + 3.0)
    assert s.evaluate(LISTED + 3.1).awaiting_renewals == 2
    judged: list[str] = []
    refresh = s.evaluator._refresh
    monkeypatch.setattr(s.evaluator, "_refresh", lambda name, *a: (judged.append(name), refresh(name, *a)))
    after = s.evaluate(LISTED + 12.0)  # the frontier passes every listed age
    assert after.awaiting_renewals == 0
    assert sorted(judged) == ["b", "c"]  # "a"'s evidence came at 3.0: nothing to judge again
    assert after.node("a").state is NodeState.READY and after.node("b").state is NodeState.LATE


def test_the_api_servers_own_verdict_still_counts_while_a_lease_is_awaited():
    s = live_start(["a"])
    s.apply("nodes", "MODIFIED", node("a", "Unknown", heartbeat=T0 - BEHIND), LISTED + 0.1)
    assert states(s, LISTED + 0.2) == {"a": NodeState.UNKNOWN}


def test_a_lease_the_server_dates_is_evidence_at_once():
    # v1.25 on, managedFields' time follows renewals: the server's clock says 26 s
    s = live_start(["a"], Settings(server_version="v1.33.2"), written=T0 - BEHIND)
    assert states(s, LISTED + 0.2) == {"a": NodeState.LATE}


def test_a_one_shot_answer_judges_by_the_list_at_once():
    s = live_start(["a"])
    s.judge_lists_at_once()  # status: answers now and names the doubt (node_clock_note)
    assert states(s, LISTED + 0.2) == {"a": NodeState.LATE}


def test_a_relist_of_a_lease_seen_renewing_keeps_its_receipt_time():
    s = live_start(["a"])
    s.apply("leases", "MODIFIED", lease("a", T0 - BEHIND + 10), LISTED + 3.0)
    # the watch breaks; the relist brings the same renewal back, then SYNCED again
    s.apply("leases", "ADDED", lease("a", T0 - BEHIND + 10), LISTED + 40.0, True)
    s.apply("leases", "SYNCED", None, LISTED + 40.0, True)
    view = s.evaluate(LISTED + 40.1)
    assert view.node("a").state is NodeState.LATE  # 37 s of silence on our clock: no wait for it
    assert view.awaiting_renewals == 0



def test_the_header_says_how_many_leases_are_awaited():
    from nodewatch.ui.header import header_text
    from nodewatch.ui.theme import DEFAULT_PALETTE as palette

    s = live_start(["a", "b", "c"])
    first = header_text("x", s.evaluate(LISTED + 0.2), LISTED + 0.2, palette, virtual=False).plain
    assert "leases:3 awaiting a renewal" in first and "leases:ok" not in first
    later = header_text("x", s.evaluate(LISTED + 12.0), LISTED + 12.0, palette, virtual=False).plain
    assert "leases:ok" in later and "awaiting" not in later


# --- renewals not read yet: a dated listed age waits for the lease stream's frontier ---------------

DATED = Settings(server_version="v1.33.2")
"""v1.25 on: managedFields' time follows renewals, every listed Lease is dated by the server."""
RENEWED = T0 - 5.0
"""Both Leases' last renewal before the list (renewTime and the server's write time): Late from T0 + 15."""


def dated_start() -> tuple[FleetState, object]:
    """A live start on a dated server with the lease stream's frontier tracked: "a" renews on, "b"
    stopped; the reader found the stream empty just after the list's SYNCED."""
    s = FleetState(DATED)
    frontier = s.track_lease_stream()
    for res in ("nodes", "leases"):
        s.update_health(res, connected=True, synced=False, down_since=None, last_error="")
    for n in ("a", "b"):
        s.apply("nodes", "ADDED", node(n, heartbeat=RENEWED), T0 + 0.5, True)
        s.apply("leases", "ADDED", lease(n, RENEWED, written=RENEWED), T0 + 0.5, True)
    s.apply("nodes", "SYNCED", None, T0 + 0.6, True)
    s.update_health("nodes", synced=True, last_activity=T0 + 0.6)
    s.apply("leases", "SYNCED", None, LISTED, True)
    s.update_health("leases", synced=True, last_activity=LISTED)
    frontier.written(RENEWED)  # the newest write the list carried (as the reader tells it)
    frontier.caught_up(LISTED)  # and nothing left to read after it
    return s, frontier


def test_a_dated_listed_age_is_not_late_while_its_renewals_are_unread():
    s, frontier = dated_start()
    assert states(s, T0 + 14.0) == {"a": NodeState.READY, "b": NodeState.READY}  # not late yet: evidence
    assert s.evaluate(T0 + 14.0).awaiting_renewals == 0
    # T0 + 16: both past their late time by the clock, but the stream is read only up to the list
    # (the reader is busy: the Node list). The old code: both Late, "a" wrongly.
    early = s.evaluate(T0 + 16.0)
    assert [v.state for v in early.nodes] == [NodeState.READY, NodeState.READY]
    assert early.awaiting_renewals == 2
    # the reader gets to the backlog: "a"'s renewal, written at T0 + 5, applied at T0 + 16.5
    s.apply("leases", "MODIFIED", lease("a", T0 + 5.0, written=T0 + 5.0), T0 + 16.5)
    frontier.written(T0 + 5.0)
    view = s.evaluate(T0 + 16.6)
    assert view.node("a").state is NodeState.READY and view.node("a").lease_age(T0 + 16.6) is not None
    assert view.node("b").state is NodeState.READY and view.awaiting_renewals == 1  # T0 + 5 < T0 + 15
    # read to its end at T0 + 17, but the server may not have sent all it wrote: still awaited
    frontier.caught_up(T0 + 17.0)
    assert states(s, T0 + 17.0)["b"] is NodeState.READY
    # "a"'s next renewal, written at T0 + 15: the stream has carried every write before "b"'s late time
    s.apply("leases", "MODIFIED", lease("a", T0 + 15.0, written=T0 + 15.0), T0 + 17.2)
    frontier.written(T0 + 15.0)
    after = s.evaluate(T0 + 17.3)
    assert after.node("b").state is NodeState.LATE and after.awaiting_renewals == 0
    assert after.node("b").lease_age(T0 + 17.3) == pytest.approx(22.3, abs=1e-6)


def test_an_age_timed_by_its_receipt_is_not_late_while_the_next_renewal_may_be_unread():
    """The third early-Late cause (issue 29): a renewal seen on the watch times its node by its
    receipt; if the reader then falls behind (the lease watch starved while 65,000 Nodes are
    applied), the next renewal sits unread and the clock alone would call the node Late. The old
    code: both Late at T0 + 41."""
    s, frontier = dated_start()
    for n in ("a", "b"):
        s.apply("leases", "MODIFIED", lease(n, T0 + 20.0, written=T0 + 20.0), T0 + 20.1)
    frontier.caught_up(T0 + 20.5)  # the reader found the stream empty then, and is busy since
    s.update_health("leases", last_activity=T0 + 40.0)  # the stream is not silent: it is read
    assert states(s, T0 + 39.9) == {"a": NodeState.READY, "b": NodeState.READY}
    # T0 + 41: both 20.9 s since their receipt (late at T0 + 40.1), the stream read to T0 + 20.5
    held = s.evaluate(T0 + 41.0)
    assert [v.state for v in held.nodes] == [NodeState.READY, NodeState.READY]
    assert held.node("b").lease_age(T0 + 41.0) == pytest.approx(20.9, abs=1e-6)  # its age is shown as it is
    assert held.awaiting_renewals == 0  # not the start's "awaiting a renewal": a moment's wait
    # the reader gets to the backlog: "a"'s renewal written at T0 + 30, the stream read to T0 + 39
    s.apply("leases", "MODIFIED", lease("a", T0 + 30.0, written=T0 + 30.0), T0 + 41.5)
    frontier.caught_up(T0 + 39.0 - IN_FLIGHT)  # (``caught_up`` keeps its moment less IN_FLIGHT)
    assert states(s, T0 + 41.6) == {"a": NodeState.READY, "b": NodeState.READY}  # 39 < b's late time
    frontier.caught_up(T0 + 41.6)  # read past it, and "b" did not renew: now that is evidence
    after = s.evaluate(T0 + 41.7)
    assert after.node("b").state is NodeState.LATE and after.node("a").state is NodeState.READY


def test_a_reader_that_keeps_up_calls_a_receipt_age_late_when_the_clock_says():
    """A reader waiting on the stream has read all it was sent: Late (and Overdue, where the grace
    is two renew intervals, as the testbed's 20 s) at the late time itself, not a moment later
    (a wait for what the server has not sent would skip the testbed's short Overdue window)."""
    s = live_start(["a"])
    frontier = s.track_lease_stream()
    s.apply("leases", "MODIFIED", lease("a", T0 + 20.0), LISTED + 1.0)
    s.update_health("leases", last_activity=LISTED + 20.0)  # the stream is not silent: it is read
    late = LISTED + 1.0 + 20.0
    frontier.caught_up(LISTED + 1.5)
    assert states(s, late + 0.5)["a"] is NodeState.READY  # busy since LISTED + 1.5: held
    frontier.idle(late + 0.4)  # waiting on an empty stream since: read to now
    assert states(s, late + 0.6)["a"] is NodeState.LATE
    s2 = live_start(["a"])
    s2.track_lease_stream().idle(LISTED + 0.5)
    s2.apply("leases", "MODIFIED", lease("a", T0 + 20.0), LISTED + 1.0)
    s2.update_health("leases", last_activity=LISTED + 20.0)
    assert states(s2, late)["a"] is NodeState.READY
    assert states(s2, late + 0.01)["a"] is NodeState.LATE


def test_a_stream_silent_while_its_reader_waits_is_the_frontier():
    s, frontier = dated_start()
    assert states(s, T0 + 16.0)["b"] is NodeState.READY
    frontier.idle(T0 + 2.0)  # nothing to read since T0 + 2 (QUIET 5 s): current up to now - IN_FLIGHT
    assert states(s, T0 + 15.9)["b"] is NodeState.READY  # read to T0 + 14.9: short of the late time
    assert states(s, T0 + 16.0) == {"a": NodeState.LATE, "b": NodeState.LATE}


def test_the_frontier_is_never_ahead_of_now():
    from nodewatch.core.evidence import StreamFrontier

    f = StreamFrontier()
    assert f.at(T0, True) == f.at(T0, False) == float("-inf")
    f.written(T0 + 30.0)  # a server clock ahead of ours: what is applied cannot be in the future
    assert f.at(T0, True) == T0 and f.at(T0, False) == float("-inf")
    f.caught_up(T0 + 3.0)
    assert f.at(T0 + 3.0, False) == T0 + 2.0  # IN_FLIGHT: a write just made may be on its way
    f.idle(T0 + 3.0)
    assert f.at(T0 + 4.0, False) == T0 + 3.0
    assert f.at(T0 + 4.0, True) == T0 + 4.0  # the server's write times, clamped to now
    f.untracked()  # a body the reader cannot look into: judged by the clock
    assert f.at(T0 + 50.0, True) == f.at(T0 + 50.0, False) == T0 + 50.0


def test_an_undated_listed_age_waits_for_the_stream_to_be_read_a_renewal_interval_past_the_list():
    s = live_start(["a", "b"])
    frontier = s.track_lease_stream()
    frontier.caught_up(LISTED)
    # past the old window (LISTED + 12) by the clock, the stream read only to the list
    assert states(s, LISTED + 12.5) == {"a": NodeState.READY, "b": NodeState.READY}
    assert s.evaluate(LISTED + 12.5).awaiting_renewals == 2
    frontier.caught_up(LISTED + 13.0)  # read to its end: every write before LISTED + 12 is in
    assert states(s, LISTED + 13.0) == {"a": NodeState.LATE, "b": NodeState.LATE}


def test_a_one_shot_answer_does_not_wait_for_the_frontier():
    s, _ = dated_start()
    s.judge_lists_at_once()
    assert states(s, T0 + 16.0) == {"a": NodeState.LATE, "b": NodeState.LATE}


def test_no_lease_is_not_claimed_while_the_lease_stream_cannot_say():
    """A node the controller marked Unknown, its Lease not seen because the lease stream is still
    listing (or down, or, in a kubectl log, not recorded yet): its cause is the API server's
    (NodeStatusUnknown), not "no Lease in kube-node-lease", which only a synced stream can say."""
    from nodewatch.core.causes import CauseKind

    s = FleetState(Settings())
    s.update_health("nodes", connected=True, synced=True, down_since=None, last_error="")
    s.update_health("leases", connected=True, synced=False, down_since=None, last_error="")
    s.apply("nodes", "ADDED", node("x", "Unknown", reason="NodeStatusUnknown", transition=T0 - 30), T0, True)
    s.apply("nodes", "SYNCED", None, T0, True)
    kinds = {c.kind for c in s.evaluate(T0 + 1).node("x").causes}
    assert CauseKind.NO_LEASE not in kinds and kinds
    s.apply("leases", "SYNCED", None, T0 + 2, True)
    s.update_health("leases", synced=True, last_activity=T0 + 2)
    assert CauseKind.NO_LEASE in {c.kind for c in s.evaluate(T0 + 3).node("x").causes}
