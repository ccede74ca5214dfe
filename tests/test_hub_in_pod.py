"""The hub as the shipped Deployment runs it, against the simulated API server: in-cluster
configuration only (``tests/in_pod.py``), the fleet read whole, and a token rotated by the kubelet
while it runs (every watch stream reset at once, so each comes back with a new request): no request
goes out with the token the server stopped accepting.

The same hub on a token the real API server minted for the shipped ServiceAccount is
``tests/testbed/test_deploy_on_testbed.py`` (the simulated server does not mint tokens)."""

from __future__ import annotations

from in_pod import FLEET_STREAMS, hub_in_pod, kubelet_writes
from simserver import free_port, make_fleet, running_server, wait_until

NODES = 20


def test_a_hub_in_a_pod_watches_the_fleet_through_a_rotated_token(tmp_path):
    with running_server(tmp_path / "srv", fleet=make_fleet(nodes=NODES), run_fleet=True) as srv:
        with hub_in_pod(tmp_path, "127.0.0.1", srv.port, srv.ca_cert_pem, srv.token, free_port(),
                        "--no-record") as hub:
            hub.wait_ready(60)
            assert sum(hub.samples("nodewatch_nodes").values()) == NODES
            started = srv.requests_started
            new = srv.rotate_token(old_valid_for=0)  # the old token is refused from now on
            kubelet_writes(hub.service_account, new)
            srv.faults.reset_now()  # every stream must open again: with which token?
            wait_until(lambda: srv.requests_started >= started + 2, timeout=30)  # nodes and leases again
            wait_until(lambda: (up := hub.samples("nodewatch_stream_up")) and all(v == 1 for v in up.values()),
                       timeout=60)
            wait_until(lambda: srv.requests_started >= started + 3, timeout=30)  # CSRs too
            assert not [r for r in srv.request_log if r.status == 401], "a request went with the old token"

            # the way the testbed's test makes new requests (its watches stay open for minutes)
            newer = srv.rotate_token(old_valid_for=0)
            kubelet_writes(hub.service_account, newer)
            relists = sum(hub.samples("nodewatch_stream_relists_total").values())
            hub.open_node(sorted(srv.fleet.nodes)[0], tmp_path / "hub")
            assert not [r for r in srv.request_log if r.status == 401], "a request went with the old token"
            up = hub.samples("nodewatch_stream_up")
            assert all(up.get(k) == 1 for k in FLEET_STREAMS), up
            assert sum(hub.samples("nodewatch_stream_relists_total").values()) == relists
            assert "credentials rejected" not in hub.stderr().lower()
        assert hub.process.returncode == 0, hub.stderr()  # SIGTERM, as a pod is stopped: a clean exit
