"""A hub over several clusters, over real HTTP: three simulated API servers, one hub, its viewers.

``nodewatch hub --context alpha --context beta --context gamma`` (built from the command line as
the ``hub`` command builds it, ticked by the test): alpha works, beta is killed midway, gamma
rejects the hub's token. A protocol viewer (``attach``'s source, and the dashboard on it) sees
every node with its cluster, in the hub's order, and the cluster strip: gamma a red cell that says
why, beta red once it is gone, alpha still updating. A drill-down into a node of beta is answered
by beta's API server (its pods), not alpha's. The flight recorder writes a recording of several
clusters; a segment replays on its own, with its clusters, and ``status --replay`` answers per
cluster.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
import yaml

from nodewatch.cli import build_parser, main
from nodewatch.commands.common import CommandError, settings_from_args
from nodewatch.commands.hub_runner import HubRunner, _source
from nodewatch.core.multi import MultiFleet
from nodewatch.core.rules import NodeState
from nodewatch.core.views import HEALTH_BAD, HEALTH_OK
from nodewatch.hub import paths
from nodewatch.hub.codec import to_wire, view_to_wire
from nodewatch.hub.multi import HubMultiSource
from nodewatch.hub.viewer_source import HubAddress, ViewerSource
from nodewatch.sources.replay import ReplaySource
from nodewatch.sources.segments import list_segments
from support.hub_support import api_requests
from support.simserver import wait_until
from tests.sources.test_multi_live import static_text, three  # noqa: F401 - alpha works, beta is killed, gamma rejects us

CLUSTERS = ("alpha", "beta", "gamma")


def _hub_args(directory: Path, *options: str):
    args = build_parser().parse_args(["hub", "--dir", str(directory), *options])
    args.tick_seconds = None  # the test ticks the hub
    return args


@contextlib.contextmanager
def _runner(directory: Path, *options: str):
    paths.ensure_private_dir(directory)
    args = _hub_args(directory, *options)
    runner = HubRunner(args, directory, settings_from_args(args))
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()


def _cluster(view, name):
    return next(c for c in view.clusters if c.name == name)


def _sent(hub, viewer: ViewerSource) -> None:
    """Tick the hub and wait until the viewer has that frame."""
    seq = hub.tick()
    wait_until(lambda: viewer.state.seq == seq, 15)


def _same_as_hub(hub, viewer: ViewerSource, timeout: float = 15.0) -> None:
    """The viewer's fleet is the hub's: every view (with its cluster), in the hub's order, and the
    cluster strip. The hub's state may move on between a tick and the comparison (a cluster whose
    server just died turns blind a moment later), so the hub ticks again until its state holds
    still long enough for one frame to match it."""
    deadline = time.monotonic() + timeout
    while True:
        _sent(hub, viewer)
        want = hub.source.state.evaluate(hub.source.clock.now())
        got = viewer.state.evaluate(viewer.clock.now())
        pairs = [([view_to_wire(v) for v in got.nodes], [view_to_wire(v) for v in want.nodes]),
                 (to_wire(got.clusters), to_wire(want.clusters)), (to_wire(got.zones), to_wire(want.zones)),
                 (got.counts, want.counts)]
        if all(a == b for a, b in pairs) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for a, b in pairs:
        assert a == b


async def test_viewers_of_a_hub_over_three_clusters_see_each_cluster_as_it_is(three, tmp_path):
    from nodewatch.ui.app import NodewatchApp

    kc, fleets, servers = three
    directory = tmp_path / "hub"
    with _runner(directory, "--kubeconfig", kc, "--context", "alpha", "--context", "beta", "--context", "gamma",
                 "--cert-cache-dir", str(tmp_path / "cache")) as runner:
        hub, source = runner.hub, runner.source
        assert isinstance(source, HubMultiSource) and source.state.cluster_names == list(CLUSTERS)
        assert source.wait_settled(15) == {"alpha": True, "beta": True, "gamma": False}
        viewer = ViewerSource(HubAddress(path=hub.socket_path))
        viewer.start()
        try:
            _sent(hub, viewer)
            _same_as_hub(hub, viewer)
            view = viewer.state.evaluate(viewer.clock.now())
            assert sorted(v.key for v in view.nodes) == sorted(f"{c}/node-00{i}" for c in ("alpha", "beta")
                                                               for i in range(3))
            gamma = _cluster(view, "gamma")
            assert gamma.health == HEALTH_BAD and "credentials rejected" in gamma.error
            assert _cluster(view, "alpha").health == HEALTH_OK and _cluster(view, "beta").health == HEALTH_OK
            assert viewer.state.has_node("beta/node-002") and not viewer.state.has_node("node-002")
            assert viewer.state.node_labels("beta/node-002")["kubernetes.io/hostname"] == "node-002"

            # the drill-down of a node of beta reaches beta's API server, and shows beta's pods
            viewer.focus_node("beta/node-002")
            wait_until(lambda: "beta/node-002" in source.scoped_nodes(), 15)
            wait_until(lambda: source.state.node_details("beta/node-002", source.clock.now()).pods, 15)
            _sent(hub, viewer)
            wait_until(lambda: viewer.state.node_details("beta/node-002", viewer.clock.now()).pods, 15)
            d = viewer.state.node_details("beta/node-002", viewer.clock.now())
            assert d.cluster == "beta" and d.name == "node-002"
            assert {p.name for p in d.pods} == {f"web-node-002-{k}" for k in range(2)}
            assert viewer.state.details_not_watched("beta/node-002") is None
            assert "node-002" not in source.feeds[0].live.scoped_nodes()  # alpha was not asked
            assert not source.state.node_details("alpha/node-002", source.clock.now()).pods

            rotated = source.clock.now()
            runner.recorder.rotate(rotated)  # a segment that begins with a keyframe of every cluster

            servers["beta"].stop()  # killed midway
            wait_until(lambda: _cluster(source.state.evaluate(time.time()), "beta").health == HEALTH_BAD, 20)
            fleets["alpha"].stop_kubelet("node-001")  # alpha goes on: a node stops there
            wait_until(lambda: source.state.node_details("alpha/node-001", time.time()).view.ready == "Unknown", 15)
            viewer.focus_node(None)
            _sent(hub, viewer)
            _same_as_hub(hub, viewer)
            view = viewer.state.evaluate(viewer.clock.now())
            beta = _cluster(view, "beta")
            assert beta.health == HEALTH_BAD and beta.nodes == 3  # what was seen is kept, and said stale
            assert view.nodes[0].key == "alpha/node-001" and view.nodes[0].state is NodeState.UNKNOWN

            app = NodewatchApp(viewer, refresh_seconds=3600)  # ``nodewatch attach``'s screen
            async with app.run_test(size=(160, 40)) as pilot:
                await pilot.pause()
                strip = static_text(app.query_one("#clusters"))
                assert "gamma ✖ credentials rejected" in strip and "alpha ✖ 1/3" in strip and "beta ✖" in strip
                await pilot.press("enter")  # the drill-down of the worst node says its cluster
                await pilot.pause()
                assert "cluster alpha" in static_text(app.screen.query_one("#dd-summary"))
            history = viewer.open_history()  # the viewer's way back: the hub's recordings, per cluster
            try:
                assert isinstance(history.state, MultiFleet) and history.state.cluster_names == list(CLUSTERS)
            finally:
                history.stop()
        finally:
            viewer.stop()
    assert source.threads_alive() == 0
    wait_until(lambda: "node-002" in api_requests(servers["beta"])[1], 15)  # (logged when the watch ended)
    assert "node-002" not in api_requests(servers["alpha"])[1]  # beta's drill-down asked beta only

    # the flight recorder: a recording of several clusters, each segment replayable on its own
    segments = list_segments(directory / paths.RECORDINGS)
    assert len(segments) == 2
    second = ReplaySource(str(segments[1].path))
    try:
        assert isinstance(second.state, MultiFleet) and second.state.cluster_names == list(CLUSTERS)
        second.replay.seek(rotated)  # the keyframe alone: both clusters' nodes, gamma's error, beta's pods
        view = second.state.evaluate(rotated)
        assert sorted(v.key for v in view.nodes) == sorted(f"{c}/node-00{i}" for c in ("alpha", "beta")
                                                           for i in range(3))
        assert "credentials rejected" in _cluster(view, "gamma").health_text
        assert len(second.state.node_details("beta/node-002", rotated).pods) == 2
        assert not second.state.node_details("alpha/node-002", rotated).pods
    finally:
        second.stop()
    whole = ReplaySource(str(directory / paths.RECORDINGS))
    try:
        whole.replay.seek(whole.replay.end)
        view = whole.state.evaluate(whole.replay.end)
        assert _cluster(view, "beta").health == HEALTH_BAD and _cluster(view, "alpha").health == HEALTH_OK
        assert view.nodes[0].key == "alpha/node-001" and view.nodes[0].state is not NodeState.READY
    finally:
        whole.stop()


def test_status_replays_the_hubs_recordings_per_cluster(three, tmp_path, capsys):
    kc, fleets, _ = three
    fleets["beta"].stop_kubelet("node-000")
    directory = tmp_path / "hub"
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump({"clusters": [
        {"context": "alpha", "kubeconfig": kc, "grace": 20},
        {"context": "beta", "kubeconfig": kc, "name": "beta-old"},
        {"context": "gamma", "kubeconfig": kc},
    ]}))
    with _runner(directory, "--fleet", str(fleet_file), "--cert-cache-dir", str(tmp_path / "cache")) as runner:
        source = runner.source
        assert source.state.cluster_names == ["alpha", "beta-old", "gamma"]
        assert source.wait_settled(15) == {"alpha": True, "beta-old": True, "gamma": False}
        wait_until(lambda: all(f.state.settings.server_version for f in source.feeds[:2]), 15)
        # gamma's rejection is known (settled) before its streams' health says so, and the health
        # lines are what the recording keeps: wait for them before the hub stops. The Node and
        # Lease streams' own (the answer's error is theirs): any stream's, as until session 51, let
        # the hub stop while the Node stream was still "connecting" (its first request later than
        # the CSR stream's), and the answer said "no nodes recorded" (2 CI runs of 3 that session)
        gamma = source.state.state_of("gamma")

        def rejected() -> bool:
            health = gamma.evaluate(time.time()).health
            return all(r in health and "credentials rejected" in health[r].last_error for r in ("nodes", "leases"))

        assert wait_until(rejected, 15)
    code = main(["status", "--replay", str(directory / paths.RECORDINGS), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2  # gamma was never read: an error, not a blank
    by = {c["context"]: c for c in out["clusters"]}
    assert set(by) == set(CLUSTERS)
    assert "credentials rejected" in by["gamma"]["error"]
    assert by["alpha"]["settings"]["grace_seconds"] == 20  # the fleet file's override, recorded
    assert {n["name"]: n["state"] for n in by["beta"]["nodes"]}["node-000"] != "Ready"
    assert {n["name"]: n["state"] for n in by["alpha"]["nodes"]} == {f"node-00{i}": "Ready" for i in range(3)}


def test_the_hub_takes_the_dashboards_cluster_options(tmp_path):
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a", "preferences": {},
        "clusters": [{"name": n, "cluster": {"server": f"https://127.0.0.1:{6440 + i}"}} for i, n in enumerate("abc")],
        "users": [{"name": n, "user": {"token": "t"}} for n in "abc"],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in "abc"]}))
    every = _hub_args(tmp_path, "--kubeconfig", str(kc), "--all-contexts")
    source = _source(every, settings_from_args(every))
    assert isinstance(source, HubMultiSource) and source.state.cluster_names == ["a", "b", "c"]
    one = _hub_args(tmp_path, "--kubeconfig", str(kc), "--context", "b")
    assert not isinstance(_source(one, settings_from_args(one)), HubMultiSource)  # one cluster: as before
    with pytest.raises(CommandError, match="choose one of"):
        _source(_hub_args(tmp_path, "--all-contexts", "--context", "a", "--context", "b"), settings_from_args(one))
    with pytest.raises(CommandError, match="--demo"):
        _source(_hub_args(tmp_path, "--demo", "--context", "a", "--context", "b"), settings_from_args(one))


def test_a_views_cluster_travels_only_when_it_has_one():
    from msgspec.structs import replace

    from nodewatch.hub.codec import WireError, view_from_wire
    from nodewatch.sources.demo import DemoSource

    src = DemoSource(nodes=3, seed=1)
    t = src.clock.now() + 60
    src.advance_to(t)
    v = src.state.evaluate(t).nodes[0]
    assert v.cluster == "" and len(view_to_wire(v)) == 20  # a one-cluster hub sends what it always sent
    w = view_to_wire(replace(v, cluster="prod-eu"))
    assert w[-1] == "prod-eu" and view_from_wire(w) == replace(v, cluster="prod-eu")
    assert view_from_wire(w).key == f"prod-eu/{v.name}"
    for bad in (w + ["x"], w[:-1] + [7]):
        with pytest.raises(WireError):
            view_from_wire(bad)
