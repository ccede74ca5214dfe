"""``nodewatch status`` (one-shot, from lists) on a node whose clock is behind.

A listed lease tells when it was renewed only by renewTime, on the node's clock: 95 s behind, the
node looks overdue while the node lifecycle controller (which times a renewal by seeing renewTime
change) keeps it Ready. Before v1.25 the API server's write time does not help (it does not move
on renewals), so such an age rests on the node's own clock, and the one-shot answer says so. It
waits, at most one renewal interval within ``--wait``, to see such a lease renew on the watch only
where the API server vouches for the node (still Ready although its lease, by renewTime, is older
than the controller would let it be: the clock is behind, and a renewal comes), or when asked for
patience (``--wait`` given). A lease late by less (the minute an incident starts, a stopped kubelet
that never renews) is answered at once. Through real HTTP (the simulated API server).
"""

from __future__ import annotations

import json
import threading
import time

from nodewatch.cli import main
from support.simserver import TinyFleet, running_server

SKEWED = "node-001"


def _status(capsys, srv, tmp_path, *args: str) -> tuple[int, dict]:
    rc, doc, _ = _status_err(capsys, srv, tmp_path, *args)
    return rc, doc


def _status_err(capsys, srv, tmp_path, *args: str) -> tuple[int, dict, str]:
    rc = main(["status", "--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir", str(tmp_path / "c"),
               "--format", "json", *args])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def _node(doc: dict, name: str) -> dict:
    return next(n for n in doc["nodes"] if n["name"] == name)


def test_a_node_clock_behind_is_ready_once_a_renewal_is_seen(capsys, tmp_path):
    fleet = TinyFleet(nodes=3, start=time.time(), version="v1.20.2")
    fleet.renewed[SKEWED] = time.time() - 100  # renewed 5 s ago by a clock 95 s behind
    stop = threading.Event()

    def kubelet() -> None:  # renews often, so that one renewal comes after the list in any case
        while not stop.wait(0.5):
            fleet.renewed[SKEWED] = time.time() - 95
            fleet._emit("leases", "MODIFIED", fleet.lease(SKEWED))

    with running_server(tmp_path, fleet=fleet) as srv:
        renewing = threading.Thread(target=kubelet, daemon=True)
        renewing.start()
        try:
            rc, doc = _status(capsys, srv, tmp_path)  # no patience asked: the server vouches for it
        finally:
            stop.set()
            renewing.join()
    node = _node(doc, SKEWED)
    assert node["state"] == "Ready", node
    assert node["lease_age_seconds"] < 5
    assert rc == 0


def test_a_lease_not_seen_renewing_is_answered_as_the_list_says(capsys, tmp_path):
    fleet = TinyFleet(nodes=3, start=time.time(), version="v1.20.2")
    fleet.renewed[SKEWED] = time.time() - 100  # nothing renews it: the kubelet may well be gone
    with running_server(tmp_path, fleet=fleet) as srv:
        rc, doc = _status(capsys, srv, tmp_path, "--wait", "3")  # the wait stays within --wait
    node = _node(doc, SKEWED)
    assert node["state"] == "Overdue" and node["lease_age_seconds"] >= 100
    assert rc == 1


def test_a_stopped_kubelet_is_answered_at_once_with_its_age_on_the_nodes_clock(capsys, tmp_path):
    """The minute an incident starts: one kubelet stopped 25 s ago, its node still Ready. The
    answer comes at once (it waited a whole renewal interval, 12 s, for a renewal that never
    comes), and names the age that rests on the node's clock."""
    fleet = TinyFleet(nodes=3, start=time.time(), version="v1.20.2")
    fleet.renewed[SKEWED] = time.time() - 25
    with running_server(tmp_path, fleet=fleet) as srv:
        started = time.monotonic()
        rc, doc, err = _status_err(capsys, srv, tmp_path)
        took = time.monotonic() - started
    node = _node(doc, SKEWED)
    assert node["state"] == "Late" and node["lease_age_seconds"] >= 25
    assert took < 6, took  # lists in well under a second; the old wait alone was 12 s
    assert "node's own clock" in err and SKEWED in err and "--wait" in err
    assert rc == 1


def test_the_table_names_ages_on_the_nodes_clock(capsys, tmp_path):
    fleet = TinyFleet(nodes=3, start=time.time(), version="v1.20.2")
    fleet.renewed[SKEWED] = time.time() - 25
    with running_server(tmp_path, fleet=fleet) as srv:
        rc = main(["status", "--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir", str(tmp_path / "c")])
    out, _ = capsys.readouterr()
    note = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(note) == 1 and SKEWED in note[0] and "node-000" not in note[0]
    assert rc == 1


def test_the_servers_write_time_settles_the_doubt_on_1_25_and_later(capsys, tmp_path):
    """From v1.25 the API server moves the kubelet's managedFields time on every renewal: a lease
    whose renewTime says 100 s (a clock 95 s behind) was written 5 s ago on the server's clock. The
    answer says Ready at once, with no age resting on the node's clock."""
    now = time.time()
    fleet = TinyFleet(nodes=3, start=now, version="v1.33.2")
    fleet.renewed[SKEWED] = now - 100
    fleet.written[SKEWED] = now - 5
    with running_server(tmp_path, fleet=fleet) as srv:
        started = time.monotonic()
        rc, doc, err = _status_err(capsys, srv, tmp_path)
        took = time.monotonic() - started
    node = _node(doc, SKEWED)
    assert node["state"] == "Ready" and node["lease_age_seconds"] < 10, node
    assert "node's own clock" not in err and took < 6
    assert rc == 0


def test_before_1_25_the_same_write_time_leaves_the_age_on_the_nodes_clock(capsys, tmp_path):
    """Before v1.25 that time moves only when the kubelet's set of fields changes: it is no renewal's
    time, so the age rests on renewTime, and the answer says so."""
    now = time.time()
    fleet = TinyFleet(nodes=3, start=now, version="v1.20.2")
    fleet.renewed[SKEWED] = now - 30
    fleet.written[SKEWED] = now - 86400  # the lease's creation: its fields have not changed since
    with running_server(tmp_path, fleet=fleet) as srv:
        rc, doc, err = _status_err(capsys, srv, tmp_path)
    node = _node(doc, SKEWED)
    assert node["state"] == "Late" and "node's own clock" in err and SKEWED in err
    assert rc == 1
