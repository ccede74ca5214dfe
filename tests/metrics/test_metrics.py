"""``--metrics`` and ``--alertmanager``: what a scrape says of the fleet, against the state's own
views; /healthz and /readyz; OpenMetrics and TLS; the pusher's firing, resending and resolving."""

from __future__ import annotations

import argparse
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.views import AT_RISK_STATES
from nodewatch.metrics.alertmanager import AlertPusher
from nodewatch.metrics.sample import STALE_SECONDS, FleetSample, take_sample
from nodewatch.metrics.server import MetricsServer, parse_address
from nodewatch.sources.demo import DemoSource
from support.hub_support import advance, demo_hub, step_demo
from support.simserver import make_fleet, running_server, wait_until
from tests.sources.test_multi_live import three  # noqa: F401 - alpha works, beta is killed, gamma rejects us


def _scrape(url: str, accept: str = "text/plain", context: ssl.SSLContext | None = None) -> dict:
    req = urllib.request.Request(url + "/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30, context=context) as resp:
        text = resp.read().decode()
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _by_node(series, value_of=lambda v: v):
    return {labels["node"]: value_of(v) for labels, v in series}


def test_a_scrape_says_what_the_state_says(tmp_path):
    with demo_hub(tmp_path, nodes=60) as hub:
        advance(hub, 150.0)
        src = hub.source
        srv = MetricsServer(src, ("127.0.0.1", 0))
        srv.start()
        try:
            got = _scrape(srv.url)
            now = src.clock.now()  # the demo's clock stands still between advances
            view = src.state.evaluate(now)
        finally:
            srv.stop()
    states = {}
    for labels, v in got["nodewatch_node_state"]:
        if v == 1.0:
            assert labels["node"] not in states, "one state a node"
            states[labels["node"]] = labels["state"]
    assert states == {v.name: v.state.word for v in view.nodes}
    assert len(got["nodewatch_node_state"]) == 7 * len(view.nodes)
    ages = _by_node(got["nodewatch_node_lease_age_seconds"])
    for v in view.nodes:
        if v.lease_observed_at is not None:
            assert ages[v.name] == pytest.approx(now - v.lease_observed_at, abs=1e-6)
    assert _by_node(got["nodewatch_node_eviction_timestamp_seconds"]) == {
        v.name: pytest.approx(v.eviction_at, abs=1e-6) for v in view.nodes if v.eviction_at is not None}
    counts = {labels["state"]: v for labels, v in got["nodewatch_nodes"]}
    assert counts == {s.word: float(n) for s, n in view.counts.items()}
    risky = [v.name for v in view.nodes if v.state in AT_RISK_STATES]
    pods = src.state.pod_records_on(risky)
    expected = {n: float(sum(p.owner_kind == "StatefulSet" for p in pods[n])) for n in risky}
    assert _by_node(got["nodewatch_statefulset_pods_at_risk"]) == {n: c for n, c in expected.items() if c}
    assert any(c for c in expected.values()), "the incident puts StatefulSet pods at risk"
    zones = {(l["zone"], l["state"]) for l, v in got["nodewatch_zone_state"] if v == 1.0}
    assert zones == {(z.name, z.state.value) for z in view.zones}
    assert got["nodewatch_clock_timestamp_seconds"][0][1] == pytest.approx(now, abs=1e-6)
    assert got["nodewatch_build_info"][0][0]["version"]
    # the toleration evictions are counted with: what the demo's pods carry (its admission default)
    assert view.settings.origin("toleration_seconds") == "pods"
    assert got["nodewatch_default_toleration_seconds"][0][1] == view.settings.toleration == 300.0


def test_a_scrape_reads_the_published_frame_and_judges_nothing():
    """The sample is the last frame's (its time, its views); a scrape publishes nothing, so it
    neither costs a judgement under the lock nor moves the evaluation's clock. On the old adapter
    (evaluate at the source's clock) the published snapshot changed at every scrape."""
    src = DemoSource(nodes=40, scenario="incident", seed=2, speed=0.0)
    src.advance_to(src.clock.now() + 90.0)
    frame = src.state.evaluate(src.clock.now())
    src.advance_to(src.clock.now() + STALE_SECONDS / 2)  # the fleet moves on; the next frame is not due yet
    sample = take_sample(src)
    assert src.state.published() is frame, "a scrape published a snapshot of its own"
    assert sample.at == frame.at
    assert [(n.name, n.state) for n in sample.nodes] == [(v.name, v.state) for v in frame.nodes]
    assert {n.name: n.lease_age for n in sample.nodes} == {
        v.name: (None if v.lease_observed_at is None else frame.at - v.lease_observed_at) for v in frame.nodes}


def test_a_scrape_before_the_first_frame_judges_once():
    src = DemoSource(nodes=20, scenario="steady", seed=2, speed=0.0)
    src.advance_to(src.clock.now() + 5.0)
    assert src.state.published() is None
    sample = take_sample(src)
    assert src.state.published() is not None and sample.at == src.clock.now()
    assert len(sample.nodes) == 20


def test_a_scrape_with_no_frame_coming_judges_the_fleet_itself():
    """A snapshot older than STALE_SECONDS (a headless source, a stopped screen) is not served."""
    src = DemoSource(nodes=20, scenario="kubelet-stop", seed=2, speed=0.0)
    frame = src.state.evaluate(src.clock.now())
    src.advance_to(src.clock.now() + STALE_SECONDS + 1.0)
    sample = take_sample(src)
    assert src.state.published() is not frame and sample.at == src.clock.now()


def test_not_ready_mode_keeps_the_aggregates_and_the_nodes_not_ready(tmp_path):
    with demo_hub(tmp_path, nodes=60) as hub:
        advance(hub, 150.0)
        srv = MetricsServer(hub.source, ("127.0.0.1", 0), nodes="not-ready")
        srv.start()
        try:
            got = _scrape(srv.url)
            view = hub.source.state.evaluate(hub.source.clock.now())
        finally:
            srv.stop()
    bad = {v.name for v in view.nodes if v.state is not NodeState.READY}
    assert bad and len(bad) < len(view.nodes)
    assert {l["node"] for l, _ in got["nodewatch_node_state"]} == bad
    assert sum(v for _, v in got["nodewatch_nodes"]) == len(view.nodes)


def test_openmetrics_by_accept_and_gzip(tmp_path):
    with demo_hub(tmp_path, nodes=20) as hub:
        srv = MetricsServer(hub.source, ("127.0.0.1", 0))
        srv.start()
        try:
            req = urllib.request.Request(srv.url + "/metrics", headers={
                "Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8", "Accept-Encoding": "gzip"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
                assert resp.headers["Content-Encoding"] == "gzip"
                import gzip

                text = gzip.decompress(resp.read()).decode()
        finally:
            srv.stop()
    assert text.endswith("# EOF\n")
    assert "# TYPE nodewatch_api_requests counter" in text or "nodewatch_blind_seconds_total" in text


def test_tls_with_the_hubs_own_certificate(tmp_path):
    from nodewatch.hub.tls import load_or_create

    ctx, _ = load_or_create(tmp_path / "hubdir", "127.0.0.1", 0)
    with demo_hub(tmp_path, nodes=10) as hub:
        srv = MetricsServer(hub.source, ("127.0.0.1", 0), ssl_context=ctx)
        srv.start()
        try:
            client = ssl.create_default_context(cafile=str(tmp_path / "hubdir" / "tls" / "ca.pem"))
            got = _scrape(srv.url, context=client)
            with pytest.raises(urllib.error.URLError):  # no CA: not trusted
                urllib.request.urlopen(srv.url + "/healthz", timeout=10, context=ssl.create_default_context())
        finally:
            srv.stop()
    assert srv.url.startswith("https://")
    assert "nodewatch_node_state" in got


def test_readyz_waits_for_every_stream_and_healthz_does_not(tmp_path):
    from nodewatch.sources.live import LiveSource

    with running_server(tmp_path, fleet=make_fleet(nodes=5)) as api:
        src = LiveSource(Settings(), kubeconfig=str(api.kubeconfig_path), cert_cache_dir=str(tmp_path / "c"))
        srv = MetricsServer(src, ("127.0.0.1", 0))
        srv.start()
        try:
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(srv.url + "/readyz", timeout=10)
            assert err.value.code == 503
            assert urllib.request.urlopen(srv.url + "/healthz", timeout=10).status == 200
            src.start()
            assert src.wait_synced(20)
            wait_until(src.watching)
            src.state.evaluate(src.clock.now())  # the frame the screen publishes each second: a scrape reads it
            wait_until(lambda: urllib.request.urlopen(srv.url + "/readyz", timeout=10).status == 200)
            got = _scrape(srv.url)
            reqs = got["nodewatch_api_requests_total"][0]
            assert reqs[1] >= 3 and got["nodewatch_api_received_bytes_total"][0][1] > 1000
            assert {l["resource"]: v for l, v in got["nodewatch_stream_up"]}["leases"] == 1.0
            api.go_down(timeout=10)
            wait_until(lambda: _ready_code(srv.url) == 503, timeout=30)
        finally:
            srv.stop()
            src.stop()


def _ready_code(url: str) -> int:
    try:
        return urllib.request.urlopen(url + "/readyz", timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_parse_address():
    assert parse_address("127.0.0.1:9910") == ("127.0.0.1", 9910)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("9910", "host:", "host:99999", ":80"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_a_bad_metrics_address_is_one_line_without_traceback(tmp_path):
    out = subprocess.run([sys.executable, "-m", "nodewatch", "hub", "--demo", "--dir", str(tmp_path / "h"),
                          "--no-record", "--metrics", "nohost"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "HOST:PORT" in out.stderr and "Traceback" not in out.stderr


# --- the Alertmanager pusher -----------------------------------------------------------------------------


def _samples(tmp_path, times):
    """Samples of the demo incident at these virtual times (seconds after its start)."""
    out = []
    with demo_hub(tmp_path, nodes=60) as hub:
        t0 = hub.source.clock.now()
        for t in times:
            advance(hub, t0 + t - hub.source.clock.now())
            out.append(take_sample(hub.source, nodes="not-ready"))
    return out


def test_the_pusher_fires_resends_and_resolves_on_the_sources_clock(tmp_path):
    posts: list[list[dict]] = []
    pusher = AlertPusher("http://127.0.0.1:1", lambda: None, post=posts.append, resend=30.0)  # type: ignore[arg-type]
    s0, s1, s2 = _samples(tmp_path, [150.0, 155.0, 190.0])
    first = pusher.evaluate(s0)
    names = {a["labels"]["alertname"] for a in first}
    assert "NodewatchNodeEvicting" in names and "NodewatchStatefulSetPodsAtRisk" in names
    from nodewatch.metrics.alertmanager import rfc3339

    assert all(a["startsAt"] == rfc3339(s0.at) for a in first)
    ev = next(a for a in first if a["labels"]["alertname"] == "NodewatchNodeEvicting")
    assert "evicted at" in ev["annotations"]["description"] and ev["annotations"]["eviction_time"]
    ss = next(a for a in first if a["labels"]["alertname"] == "NodewatchStatefulSetPodsAtRisk")
    assert "fence" in ss["annotations"]["fencing"]
    assert pusher.evaluate(s1) == [] or all(a["endsAt"] == rfc3339(s1.at) for a in posts[-1]
                                             if a["labels"]["alertname"] not in names)
    later = pusher.evaluate(s2)  # 40 s on: a resend of every alert still firing
    assert later and len(posts) >= 2
    still = {json.dumps(a["labels"], sort_keys=True) for a in later if a["endsAt"] > rfc3339(s2.at)}
    assert still
    # Everything resolved: an empty fleet fires nothing; each firing alert ends at the sample's time.
    empty = FleetSample(s2.at + 1, (), (), (), ())
    gone = pusher.evaluate(empty)
    assert {json.dumps(a["labels"], sort_keys=True) for a in gone} == still
    assert all(a["endsAt"] == rfc3339(empty.at) for a in gone)
    assert pusher.evaluate(FleetSample(s2.at + 2, (), (), (), ())) == []


def _blind(at: float, on: bool = True) -> FleetSample:
    """A sample of a 3-node cluster whose lease stream is down (``on``) or back."""
    from nodewatch.metrics.sample import ClusterSample

    c = ClusterSample("prod", 3, ((NodeState.READY, 3),), "", on, "lease stream down", False, False, 50.0, True)
    return FleetSample(at, (), (), (), (c,))


class _Alertmanager:
    """What a pusher POSTs to (``posts``), refusing while ``down``."""

    def __init__(self) -> None:
        self.posts: list[list[dict]] = []
        self.down = False

    def __call__(self, alerts: list[dict]) -> None:
        if self.down:
            raise OSError("refused")
        self.posts.append(alerts)


def test_a_rule_with_for_waits_and_a_failed_post_keeps_the_resolution(tmp_path):
    from nodewatch.metrics.alertmanager import RETRY

    am = _Alertmanager()
    pusher = AlertPusher("http://x:1", lambda: None, post=am)  # type: ignore[arg-type]
    assert pusher.evaluate(_blind(1000.0)) == []
    assert pusher.evaluate(_blind(1059.0)) == []
    fired = pusher.evaluate(_blind(1060.0))
    assert [a["labels"]["alertname"] for a in fired] == ["NodewatchBlind"]
    am.down = True
    pusher.evaluate(_blind(1070.0, False))
    assert pusher.errors == 1
    am.down = False
    assert pusher.evaluate(_blind(1071.0, False)) == []  # tried again RETRY seconds after the failure
    again = pusher.evaluate(_blind(1070.0 + RETRY, False))
    assert [a["labels"]["alertname"] for a in again] == ["NodewatchBlind"]
    assert again[0]["endsAt"].startswith("1970-01-01T00:17:50")


def test_a_page_whose_post_failed_is_tried_again_in_seconds_not_at_the_next_resend(caplog):
    """An Alertmanager blip at the moment a node starts to fire: the alert waited for the next
    resend (30 s) before. It goes again ``RETRY`` seconds later, the failures are counted (for
    /metrics) and logged once, not at every try."""
    from nodewatch.metrics.alertmanager import RETRY

    am = _Alertmanager()
    pusher = AlertPusher("http://x:1", lambda: None, post=am, resend=30.0)  # type: ignore[arg-type]
    pusher.evaluate(_blind(1000.0))  # pending: NodewatchBlind fires after 60 s
    am.down = True
    with caplog.at_level("WARNING", logger="nodewatch.alertmanager"):
        for t in (1060.0, 1061.0, 1062.0, 1065.0):
            pusher.evaluate(_blind(t))
    assert am.posts == [] and pusher.errors == 2  # at 1060, and RETRY later (1065): not every second
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    am.down = False
    pusher.evaluate(_blind(1065.0 + RETRY))
    assert [a["labels"]["alertname"] for a in am.posts[-1]] == ["NodewatchBlind"]  # 10 s after it fired, not 30
    assert pusher.sent == 1 and pusher.evaluate(_blind(1071.0 + RETRY)) == []  # then the resends as before


def test_the_alertmanager_pushers_deliveries_and_failures_are_in_the_scrape(tmp_path):
    """``hub --alertmanager URL --metrics ADDR``: what got through and what failed, as counters (a
    refused Alertmanager was only a log line on the hub's stderr)."""
    from nodewatch.commands.metrics_options import MetricsServices

    src = DemoSource(nodes=20, scenario="incident", seed=3, speed=0.0)
    step_demo(src, seconds=120)
    args = argparse.Namespace(metrics="127.0.0.1:0", alertmanager="http://127.0.0.1:1", metrics_nodes="all")
    services = MetricsServices(src, args, tmp_path).start()
    try:
        pusher = services.pusher
        assert pusher is not None and services.server is not None
        pusher.stop()  # the step by hand
        pusher.evaluate(take_sample(src, nodes="not-ready"))  # fires, and the POST is refused
        got = _scrape(services.server.url)
    finally:
        services.stop()
    assert pusher.errors >= 1
    assert got["nodewatch_alertmanager_post_errors_total"] == [({}, float(pusher.errors))]
    assert got["nodewatch_alertmanager_alerts_sent_total"] == [({}, 0.0)]


def test_the_pusher_takes_only_http_urls():
    with pytest.raises(ValueError):
        AlertPusher("alertmanager:9093", lambda: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["hub", "watch", "demo"])
def test_the_flags_are_on_hub_watch_and_demo(command):
    from nodewatch.cli import build_parser

    args = build_parser().parse_args([command, "--metrics", "127.0.0.1:9910", "--metrics-nodes", "not-ready",
                                      "--alertmanager", "http://am:9093"])
    assert (args.metrics, args.metrics_nodes, args.alertmanager) == ("127.0.0.1:9910", "not-ready", "http://am:9093")
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--metrics-nodes", "some"])


def test_the_expected_taint_time_is_the_outlooks_on_the_whole_fleet(tmp_path):
    """The sample works the zone queues out on the nodes not Ready only: the same earliest times as
    ``outlook.window_in`` on the whole fleet's view, at every step of the incident."""
    from nodewatch.core.outlook import window_in

    seen = 0
    with demo_hub(tmp_path, nodes=60) as hub:
        for _ in range(12):
            advance(hub, 10.0)
            sample = take_sample(hub.source)
            view = hub.source.state.evaluate(hub.source.clock.now())
            want = {v.name: w.earliest for v in view.nodes if (w := window_in(view, v)) is not None}
            got = {n.name: n.taint_expected_at for n in sample.nodes if n.taint_expected_at is not None}
            assert got == want
            seen += len(got)
    assert seen, "the incident has nodes waiting for their taint"


def _published_since(state, t: float) -> bool:
    view = state.published()
    return view is not None and view.at >= t


def test_a_hub_over_several_clusters_labels_each_and_readyz_names_the_broken_one(three, tmp_path):
    """``nodewatch hub --context alpha --context beta --context gamma --metrics``: alpha works,
    gamma rejects the hub's token. Each cluster's series carry its name; readyz says gamma."""
    from nodewatch.cli import build_parser
    from nodewatch.commands.common import settings_from_args
    from nodewatch.commands.hub_runner import HubRunner
    from nodewatch.hub import paths

    kc, fleets, servers = three
    directory = paths.ensure_private_dir(tmp_path / "hub")
    args = build_parser().parse_args(["hub", "--dir", str(directory), "--kubeconfig", str(kc), "--context", "alpha",
                                      "--context", "beta", "--context", "gamma", "--no-record",
                                      "--cert-cache-dir", str(tmp_path / "cache"), "--metrics", "127.0.0.1:0"])
    runner = HubRunner(args, directory, settings_from_args(args))
    runner.start()
    try:
        assert any("metrics: http://127.0.0.1:" in line for line in runner.banner())
        url = runner.metrics.server.url
        runner.source.wait_settled(15)
        settled = runner.source.clock.now()
        # a scrape reads the hub's last frame: the one after the lists are in (a tick a second)
        wait_until(lambda: _published_since(runner.source.state, settled))
        got = _scrape(url)
        code = _ready_code(url)
        why = _ready_body(url)
    finally:
        runner.stop()
    nodes = {(l["cluster"], l["state"]): v for l, v in got["nodewatch_nodes"]}
    assert nodes[("alpha", "Ready")] + nodes[("alpha", "Late")] + nodes[("alpha", "Overdue")] >= 2
    assert {l["cluster"] for l, _ in got["nodewatch_node_state"]} >= {"alpha", "beta"}
    readable = {l["cluster"]: v for l, v in got["nodewatch_cluster_readable"]}
    assert readable["alpha"] == 1.0 and readable["gamma"] == 0.0
    assert code == 503 and why.startswith("gamma: ")
    assert {l["cluster"] for l, _ in got["nodewatch_api_requests_total"]} == {"alpha", "beta", "gamma"}


def _ready_body(url: str) -> str:
    try:
        return urllib.request.urlopen(url + "/readyz", timeout=10).read().decode()
    except urllib.error.HTTPError as exc:
        return exc.read().decode()


def _demo_runner(tmp_path, *options: str):
    from nodewatch.cli import build_parser
    from nodewatch.commands.common import settings_from_args
    from nodewatch.commands.hub_runner import HubRunner
    from nodewatch.hub import paths

    directory = paths.ensure_private_dir(tmp_path / "hub")
    args = build_parser().parse_args(["hub", "--demo", "--demo-nodes", "20", "--dir", str(directory), "--no-record",
                                      *options])
    return HubRunner(args, directory, settings_from_args(args)), directory


def test_hub_metrics_tls_reuses_the_hubs_certificate(tmp_path):
    runner, directory = _demo_runner(tmp_path, "--metrics", "127.0.0.1:0", "--metrics-tls")
    runner.start()
    try:
        url = runner.metrics.server.url
        assert url.startswith("https://127.0.0.1:")
        got = _scrape(url, context=ssl.create_default_context(cafile=str(directory / "tls" / "ca.pem")))
    finally:
        runner.stop()
    assert got["nodewatch_nodes"]


def test_a_certificate_without_its_key_is_refused_in_one_line(tmp_path):
    from nodewatch.commands.common import CommandError

    runner, _ = _demo_runner(tmp_path, "--metrics", "127.0.0.1:0", "--metrics-tls-cert", str(tmp_path / "x.pem"))
    with pytest.raises(CommandError, match="go together"):
        runner.start()
    runner.stop()


def test_a_hub_says_how_long_its_flight_recorders_cap_holds(tmp_path):
    """Issue "Flight recorder II": the hub says in /metrics how long its size cap holds at the rate it
    writes: absent in the first minute (the initial lists are written at once), then the cap over the
    bytes its segments hold a second, beside --keep, so `cap_holds < keep` is one PromQL comparison."""
    from nodewatch.hub.flight_recorder import RATE_WARMUP, SegmentedRecorder

    src = DemoSource(nodes=40, scenario="steady", seed=3, speed=0.0)
    rec = SegmentedRecorder(tmp_path / "recordings", {"kind": "demo"}, src.state.settings, segment_seconds=60,
                            clock=src.clock, records=src.state.node_records, keep_seconds=86_400.0,
                            keep_bytes=1_000_000)
    src.recorder = rec
    srv = MetricsServer(src, ("127.0.0.1", 0))
    srv.start()
    try:
        step_demo(src, seconds=5)
        early = _scrape(srv.url)
        for _ in range(int(RATE_WARMUP // 10) + 3):
            step_demo(src, seconds=10)
        rec.flush()
        got = _scrape(srv.url)
        rate = rec.bytes_per_second()
    finally:
        srv.stop()
        rec.close()
    assert early["nodewatch_flight_recorder_keep_bytes"] == [({}, 1_000_000.0)]
    assert early["nodewatch_flight_recorder_keep_seconds"] == [({}, 86_400.0)]
    assert "nodewatch_flight_recorder_cap_holds_seconds" not in early  # no rate in the first minute
    assert "nodewatch_flight_recorder_write_bytes_per_second" not in early
    assert rate is not None and rate > 0
    ((_, written),) = got["nodewatch_flight_recorder_write_bytes_per_second"]
    ((_, holds),) = got["nodewatch_flight_recorder_cap_holds_seconds"]
    assert written == pytest.approx(rate, rel=0.05)  # the same segments a moment apart
    assert holds == pytest.approx(1_000_000 / written, rel=1e-9)
    # ... and the built-in pusher's NodewatchRecordingShort judges the same sample as Prometheus would
    from nodewatch.metrics.alerts import RULES

    rule = next(r for r in RULES if r.name == "NodewatchRecordingShort")
    sample = take_sample(src)
    assert sample.recorder is not None and sample.recorder.cap_holds_seconds is not None
    fired = list(rule.fire(sample))
    assert (sample.recorder.cap_holds_seconds < 86_400.0) == bool(fired)
    assert fired and "of the 24.0 h asked" in fired[0][1]["description"]


def test_no_flight_recorder_room_without_a_rotating_recorder(tmp_path):
    """A dashboard without a hub's recorder (or with ``watch --record``'s single file) has no cap to
    say: the room's series are absent, not zero."""
    src = DemoSource(nodes=10, scenario="steady", seed=3, speed=0.0)
    srv = MetricsServer(src, ("127.0.0.1", 0))
    srv.start()
    try:
        got = _scrape(srv.url)
    finally:
        srv.stop()
    assert not [name for name in got if name.startswith("nodewatch_flight_recorder_")]


def test_a_node_the_controller_skips_is_a_series_and_its_page_says_no_eviction_comes():
    """1.37: a kubelet stops, then its Lease is annotated; the controller skips the node at every pass
    (``evaluation.controller_skips``). The Overdue page still fires on the lease age, and says so."""
    from types import SimpleNamespace

    from nodewatch.core.clock import ManualClock
    from nodewatch.core.fleet import FleetState
    from nodewatch.metrics import alerts
    from nodewatch.metrics.collector import families
    from support.factories import T0, lease, node

    st = FleetState(Settings().with_server_version("v1.37.2"))
    for name in ("a", "b"):
        st.apply("nodes", "ADDED", node(name), T0, listing=True)
        st.apply("leases", "ADDED", lease(name, T0), T0, listing=True)
    for r in ("nodes", "leases"):
        st.apply(r, "SYNCED", None, T0)
    annotated = lease("a", T0)
    annotated["metadata"]["annotations"] = {"example.com/note": "looked at it"}
    st.apply("leases", "MODIFIED", annotated, T0 + 6)
    st.apply("leases", "MODIFIED", lease("b", T0 + 115), T0 + 115)
    st.evaluate(T0 + 120)
    sample = take_sample(SimpleNamespace(state=st, clock=ManualClock(T0 + 120)))
    skips = {s.name: [(m.labels["node"], m.value) for m in s.samples]
             for s in families(sample, {}, []) if s.name == "nodewatch_node_controller_skips"}
    assert skips == {"nodewatch_node_controller_skips": [("a", 1.0)]}
    (fired,) = list(alerts._overdue(sample))
    assert fired[0]["node"] == "a" and fired[1]["description"].endswith(alerts.SKIPPED)
