"""Recording several live clusters over real HTTP, and replaying what was recorded.

``nodewatch record`` watches three simulated API servers: alpha works (one node's kubelet stopped),
beta (an older Kubernetes) is killed midway, gamma rejects nodewatch's token. One file comes out;
its replay shows the cluster strip and column as the live dashboard did, ``status --replay``
answers per cluster, ``report`` groups per cluster.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import orjson
import pytest

from nodewatch.cli import main
from nodewatch.core.multi import MultiFleet
from nodewatch.core.rules import NodeState
from nodewatch.core.views import HEALTH_BAD, HEALTH_OK
from support.simserver import TinyFleet, running_server, wait_until
from tests.sources.test_multi_live import static_text, write_kubeconfig


def _lines(path) -> list[dict]:
    try:
        with open(path, "rb") as f:
            return [orjson.loads(line) for line in f.read().splitlines() if line.endswith(b"}")]
    except FileNotFoundError:
        return []


def _listed(lines: list[dict], cluster: str) -> bool:
    """The cluster's Nodes and Leases were listed and its server version is known. (Any one stream
    synced was not enough: the Node list waits for the Lease list, and on a busy machine beta was
    stopped between the two, its Nodes never recorded.)"""
    synced = {d["health"].get("resource") for d in lines[1:]
              if d.get("cluster") == cluster and d.get("health", {}).get("synced")}
    return synced >= {"nodes", "leases"} and any(d.get("cluster") == cluster and "settings" in d for d in lines[1:])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Record the three clusters with ``nodewatch record`` until beta has been seen going down."""
    tmp = tmp_path_factory.mktemp("rec")
    fleets = {"alpha": TinyFleet(nodes=3, start=time.time()),
              "beta": TinyFleet(nodes=3, start=time.time(), version="v1.31.4"),
              "gamma": TinyFleet(nodes=3, start=time.time())}
    fleets["alpha"].stop_kubelet("node-001")
    path = tmp / "three.jsonl"
    with running_server(tmp / "a", fleet=fleets["alpha"]) as a, \
            running_server(tmp / "b", fleet=fleets["beta"]) as b, \
            running_server(tmp / "g", fleet=fleets["gamma"]) as g:
        kc = write_kubeconfig(tmp / "three.kubeconfig",
                              {"alpha": (a, a.token), "beta": (b, b.token), "gamma": (g, "not-the-token")})

        def director() -> None:
            """Kill beta once both live clusters were listed and gamma's refusal is in the file (on a
            busy machine it can come after them); stop the recording once beta's outage is in the
            file (SIGTERM: what ends ``record`` in a pod; the file is flushed every second)."""
            try:
                wait_until(lambda: _listed(_lines(path), "alpha") and _listed(_lines(path), "beta"), 30)
                wait_until(lambda: any(d.get("cluster") == "gamma" and "credentials rejected"
                                       in (d.get("health", {}).get("last_error") or "") for d in _lines(path)), 30)
                b.stop()
                # both streams the cluster's health depends on (one down stream, CSRs, is not enough)
                wait_until(lambda: {d["health"].get("resource") for d in _lines(path) if d.get("cluster") == "beta"
                                    and d.get("health", {}).get("connected") is False} >= {"nodes", "leases"}, 30)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # record's handler (installed before any line) ends it

        stopper = threading.Thread(target=director, daemon=True)
        stopper.start()
        code = main(["record", str(path), "--kubeconfig", kc, "--context", "alpha", "--context", "beta",
                     "--context", "gamma", "--duration", "90"])
        stopper.join(30)
    return path, code


def test_record_writes_every_cluster_into_one_file(recorded, capfd):
    path, code = recorded
    assert code == 0  # gamma could not be read, the other two were recorded
    lines = _lines(path)
    header = lines[0]
    assert [(c["name"], c["context"]) for c in header["clusters"]] == [("alpha", "alpha"), ("beta", "beta"),
                                                                      ("gamma", "gamma")]
    assert header["source"]["kind"] == "multi"
    assert all(d.get("cluster") in ("alpha", "beta", "gamma") for d in lines[1:])
    versions = {d["cluster"]: d["settings"]["server_version"] for d in lines[1:] if "settings" in d}
    assert versions == {"alpha": "v1.33.2", "beta": "v1.31.4"}
    gamma = [d["health"] for d in lines[1:] if d["cluster"] == "gamma" and "health" in d]
    assert gamma and "credentials rejected" in gamma[-1]["last_error"]
    nodes = {(d["cluster"], d["object"]["metadata"]["name"]) for d in lines[1:] if d.get("resource") == "nodes"
             and d.get("object")}
    assert nodes == {(c, f"node-00{i}") for c in ("alpha", "beta") for i in range(3)}


async def test_the_replay_shows_the_cluster_strip_and_column_as_live_did(recorded, open_replay):
    from nodewatch.ui.app import NodewatchApp
    from nodewatch.ui.fleet_table import FleetTable

    path, _ = recorded
    src = open_replay(path)
    assert isinstance(src.state, MultiFleet)
    end = src.replay.end
    src.replay.seek(end)
    view = src.state.evaluate(end)
    clusters = {c.name: c for c in view.clusters}
    assert clusters["alpha"].health == HEALTH_OK and clusters["alpha"].settings.grace == 50
    assert clusters["beta"].health == HEALTH_BAD and clusters["beta"].settings.grace == 40
    assert clusters["beta"].nodes == 3  # what was seen is kept, and said stale
    assert clusters["gamma"].health == HEALTH_BAD and "credentials rejected" in clusters["gamma"].health_text
    assert view.nodes[0].key == "alpha/node-001" and view.nodes[0].state is not NodeState.READY
    app = NodewatchApp(src, refresh_seconds=3600)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        strip = static_text(app.query_one("#clusters"))
        assert "alpha ✖ 1/3" in strip and "beta ✖" in strip and "gamma ✖" in strip
        table = app.query_one("#table", FleetTable)
        assert any(c.key == "cluster" for c, _ in table._columns(table.size.width))
        assert sorted(v.key for v in table.rows) == sorted(f"{c}/node-00{i}" for c in ("alpha", "beta")
                                                           for i in range(3))


def test_status_and_report_answer_per_recorded_cluster(recorded, capsys):
    path, _ = recorded
    code = main(["status", "--replay", str(path), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2  # gamma was never read: an error, not a blank
    by = {c["context"]: c for c in out["clusters"]}
    assert "credentials rejected" in by["gamma"]["error"]
    assert {n["name"]: n["state"] for n in by["alpha"]["nodes"]}["node-000"] == "Ready"
    assert {n["name"] for n in by["beta"]["nodes"]} == {"node-000", "node-001", "node-002"}
    assert main(["report", str(path)]) == 0
    md = capsys.readouterr().out
    assert "### Cluster `alpha`" in md and "### Cluster `beta`" in md and "### Cluster `gamma`" in md
