"""Several clusters over real HTTP: three simulated API servers, one nodewatch.

One cluster keeps working, one is killed midway, one rejects nodewatch's token. The dead and the
rejected clusters are shown as such (red cells that say why), the third keeps being watched, and
``status`` over all three answers with the right exit code.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from nodewatch.cli import main
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.views import HEALTH_BAD
from nodewatch.sim.kubeconfig import kubeconfig_dict
from nodewatch.sources.multi import MultiSource
from nodewatch.sources.multi_config import specs_from_contexts
from support.simserver import TinyFleet, running_server, wait_until


def write_kubeconfig(path: Path, servers: dict[str, tuple[object, str]]) -> str:
    """One kubeconfig with a context per server: name -> (server, token)."""
    cfg: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": [],
                 "current-context": next(iter(servers)), "preferences": {}}
    for name, (srv, token) in servers.items():
        one = kubeconfig_dict(srv.url, srv.ca_cert_pem, token)
        cfg["clusters"].append({"name": name, "cluster": one["clusters"][0]["cluster"]})
        cfg["users"].append({"name": name, "user": {"token": token}})
        cfg["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
def three(tmp_path):
    """alpha (works), beta (killed by the test), gamma (nodewatch's token is wrong)."""
    fleets = {n: TinyFleet(nodes=3, start=time.time()) for n in ("alpha", "beta", "gamma")}
    with running_server(tmp_path / "a", fleet=fleets["alpha"]) as a, \
            running_server(tmp_path / "b", fleet=fleets["beta"]) as b, \
            running_server(tmp_path / "g", fleet=fleets["gamma"]) as g:
        kc = write_kubeconfig(tmp_path / "three.kubeconfig",
                              {"alpha": (a, a.token), "beta": (b, b.token), "gamma": (g, "not-the-token")})
        yield kc, fleets, {"alpha": a, "beta": b, "gamma": g}


def _status(capsys, *args: str) -> tuple[int, dict]:
    code = main(["status", "--format", "json", "--wait", "15", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


def static_text(widget) -> str:
    from textual.geometry import Region

    w, h = widget.outer_size
    return "\n".join(s.text.rstrip() for s in widget.render_lines(Region(0, 0, w, h)))


def _cluster(view, name):
    return next(c for c in view.clusters if c.name == name)


async def test_dead_and_rejected_clusters_are_shown_and_the_third_keeps_working(three, tmp_path, capsys):
    from nodewatch.ui.app import NodewatchApp

    kc, fleets, servers = three
    source = MultiSource(specs_from_contexts(["alpha", "beta", "gamma"], kc), Settings(),
                         cert_cache_dir=str(tmp_path / "cache"))
    source.start()
    try:
        listed = source.wait_settled(15)
        assert listed == {"alpha": True, "beta": True, "gamma": False}
        app = NodewatchApp(source, refresh_seconds=3600)
        async with app.run_test(size=(160, 40)) as pilot:
            view = app.view
            assert len(view.nodes) == 6 and {v.cluster for v in view.nodes} == {"alpha", "beta"}
            gamma = _cluster(view, "gamma")
            assert gamma.health == HEALTH_BAD and "credentials rejected" in gamma.error
            strip = static_text(app.query_one("#clusters"))
            assert "gamma ✖ credentials rejected" in strip and "alpha ● 0/3" in strip

            servers["beta"].stop()  # killed midway
            wait_until(lambda: _cluster(source.state.evaluate(time.time()), "beta").health == HEALTH_BAD, 20)
            fleets["alpha"].stop_kubelet("node-001")  # alpha goes on: a node stops there
            wait_until(lambda: source.state.node_details("alpha/node-001", time.time()).view.ready == "Unknown", 15)
            app.tick()
            await pilot.pause()
            view = app.view
            beta = _cluster(view, "beta")
            assert beta.health == HEALTH_BAD and beta.nodes == 3  # what was seen is kept, and said stale
            strip = static_text(app.query_one("#clusters"))
            assert "beta ✖" in strip and "alpha ✖ 1/3" in strip and "gamma ✖ credentials rejected" in strip
            assert view.nodes[0].key == "alpha/node-001" and view.nodes[0].state is NodeState.UNKNOWN
            await pilot.press("enter")  # the drill-down of the worst node says its cluster
            await pilot.pause()
            assert "cluster alpha" in static_text(app.screen.query_one("#dd-summary"))
    finally:
        source.stop()
    assert source.threads_alive() == 0

    code, out = _status(capsys, "--kubeconfig", kc, "--context", "alpha", "--context", "beta", "--context", "gamma")
    assert code == 2
    by = {c["context"]: c for c in out["clusters"]}
    assert [c["context"] for c in out["clusters"]] == ["alpha", "beta", "gamma"]
    assert "credentials rejected" in by["gamma"]["error"] and by["beta"]["error"]
    states = {n["name"]: n["state"] for n in by["alpha"]["nodes"]}
    assert states["node-001"] != "Ready" and states["node-000"] == "Ready"


def test_status_over_clusters_that_answer_exits_1_when_a_node_anywhere_is_not_ready(three, tmp_path, capsys):
    kc, fleets, _ = three
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump({"clusters": [
        {"context": "alpha", "kubeconfig": kc, "grace": 20},
        {"context": "beta", "kubeconfig": kc},
    ]}))
    code, out = _status(capsys, "--fleet", str(fleet_file))
    assert code == 0, out
    alpha, beta = out["clusters"]
    assert alpha["settings"]["grace_seconds"] == 20 and beta["settings"]["grace_seconds"] == 50  # v1.33: 50s
    fleets["beta"].stop_kubelet("node-002")
    code, out = _status(capsys, "--fleet", str(fleet_file), "--node", "beta/node-002")
    assert code == 1
    assert out["clusters"][1]["nodes"][0]["name"] == "node-002" and out["clusters"][0]["nodes"] == []
    assert main(["status", "--fleet", str(fleet_file), "--node", "node-002"]) == 2  # which cluster?
    capsys.readouterr()


def test_status_of_several_clusters_counts_each_with_its_own_pods_toleration(tmp_path, capsys):
    """Two API servers whose admission plugins give pods 60 s and 240 s; in each a kubelet stopped
    200 s ago, its node tainted ~125 s ago. ``status --all-contexts`` waits for each tainted node's
    pod list (the first comes a backoff late) and counts each cluster with its pods' toleration:
    Evicted in the 60 s one, Evicting in the 240 s one."""
    from nodewatch.core.settings import Settings
    from nodewatch.sim.fleet import SimFleet

    now = time.time()
    fleets = {name: SimFleet(nodes=6, scenario="kubelet-stop", seed=2, start=now - 200,
                             settings=Settings(toleration_seconds=seconds), pods_per_node=3)
              for name, seconds in (("sixty", 60.0), ("slow", 240.0))}
    for f in fleets.values():
        f.step_to(now)
    with running_server(tmp_path / "a", fleet=fleets["sixty"]) as a, \
            running_server(tmp_path / "b", fleet=fleets["slow"]) as b:
        a.faults.fail_next(1, 500, resource="pods")
        kc = write_kubeconfig(tmp_path / "two.kubeconfig", {"sixty": (a, a.token), "slow": (b, b.token)})
        code, out = _status(capsys, "--kubeconfig", str(kc), "--all-contexts",
                            "--cert-cache-dir", str(tmp_path / "c"))
    by = {c["context"]: c for c in out["clusters"]}
    assert {name: c["settings"]["toleration_seconds"] for name, c in by.items()} == {"sixty": 60.0, "slow": 240.0}
    states = {name: sorted(n["state"] for n in c["nodes"] if n["state"] != "Ready") for name, c in by.items()}
    assert states == {"sixty": ["Evicted"], "slow": ["Evicting"]}
