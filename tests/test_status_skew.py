"""``nodewatch status`` (one-shot, from lists) on a node whose clock is behind.

A listed lease tells when it was renewed only by renewTime, on the node's clock: 95 s behind, the
node looks overdue while the node lifecycle controller (which times a renewal by seeing renewTime
change) keeps it Ready. Before v1.25 the API server's write time does not help (it does not move
on renewals), so the one-shot answer waits, at most one renewal interval within ``--wait``, for
such a lease to be seen renewing on the watch. Through real HTTP (the simulated API server).
"""

from __future__ import annotations

import json
import threading
import time

from simserver import TinyFleet, running_server

from nodewatch.cli import main

SKEWED = "node-001"


def _status(capsys, srv, tmp_path, *args: str) -> tuple[int, dict]:
    rc = main(["status", "--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir", str(tmp_path / "c"),
               "--format", "json", *args])
    out, _ = capsys.readouterr()
    return rc, json.loads(out)


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
            rc, doc = _status(capsys, srv, tmp_path)
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
