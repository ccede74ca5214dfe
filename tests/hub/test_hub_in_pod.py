"""The hub as the shipped Deployment runs it, against the simulated API server: in-cluster
configuration only (``tests/support/in_pod.py``), the fleet read whole, and a token rotated by the kubelet
while it runs (every watch stream reset at once, so each comes back with a new request): no request
goes out with the token the server stopped accepting.

The same hub on a token the real API server minted for the shipped ServiceAccount is
``tests/testbed/test_deploy_on_testbed.py`` (the simulated server does not mint tokens)."""

from __future__ import annotations

from support.in_pod import FLEET_STREAMS, hub_in_pod, kubelet_rotates
from support.simserver import free_port, make_fleet, running_server, wait_until

NODES = 20


def test_a_hub_in_a_pod_watches_the_fleet_through_a_rotated_token(tmp_path):
    with running_server(tmp_path / "srv", fleet=make_fleet(nodes=NODES), run_fleet=True) as srv:
        with hub_in_pod(tmp_path, "127.0.0.1", srv.port, srv.ca_cert_pem, srv.token, free_port(),
                        "--no-record") as hub:
            hub.wait_ready(60)
            assert sum(hub.samples("nodewatch_nodes").values()) == NODES

            # the way the testbed's test makes new requests (its watches stay open for minutes)
            kubelet_rotates(srv, hub.service_account)  # the old token is refused from now on
            relists = sum(hub.samples("nodewatch_stream_relists_total").values())
            hub.open_node(wait_until(hub.ready_nodes, timeout=30)[0], tmp_path / "hub")
            assert not refused(srv), "a request went with the old token"
            up = hub.samples("nodewatch_stream_up")
            assert all(up.get(k) == 1 for k in FLEET_STREAMS), up
            assert sum(hub.samples("nodewatch_stream_relists_total").values()) == relists

            # every cluster-wide stream made to open again
            started = srv.requests_started
            kubelet_rotates(srv, hub.service_account)
            srv.faults.reset_now()
            wait_until(lambda: srv.requests_started >= started + 3, timeout=30)  # nodes, leases, CSRs again
            wait_until(lambda: all(hub.samples("nodewatch_stream_up").get(k) == 1 for k in FLEET_STREAMS),
                       timeout=60)
            assert not refused(srv), "a request went with the old token"
            assert "credentials rejected" not in hub.stderr().lower()
        assert hub.process.returncode == 0, hub.stderr()  # SIGTERM, as a pod is stopped: a clean exit


def refused(srv) -> list:
    return [r.target for r in srv.request_log if r.status == 401]
