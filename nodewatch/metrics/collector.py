"""The fleet as Prometheus metrics: a custom ``prometheus_client`` collector that takes one
``FleetSample`` per scrape and builds its metric families from it.

Why a collector and not ``Gauge.labels()``: 65,000 nodes would be 650,000 long-lived children kept
up to date on every tick whether anyone scrapes or not, and nodes that left would linger until
removed by hand. A collector builds exactly what the fleet is at the scrape, and nothing between.

Names follow Prometheus' conventions: ``nodewatch_`` prefix, base units (seconds), ``_timestamp_seconds``
for moments (Unix time on nodewatch's clock), ``_total`` for counters, ``_info`` for build
information. Per node state, one 0/1 series per state, as kube-state-metrics does for conditions.

Series cost (per node, ``--metrics-nodes all``): lease age, grace remaining, certificate expiry
(when known) and 7 state series: 10 a Ready node, 11-13 a node being evicted. ``--metrics-nodes
not-ready`` keeps every aggregate (counts per state, zones, streams) and the per-node series of
the nodes whose state is not Ready (Late, Overdue, Unknown, NotReady, Evicting, Evicted), plus the
certificate series of nodes whose certificate nears expiry. Measured in bench/metrics.py.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import __version__
from ..core.rules import NodeState, ZoneState
from .sample import ClusterSample, FleetSample, NodeSample, RecorderSample

STATES = tuple(s.word for s in sorted(NodeState, key=lambda s: s.rank))
ZONE_STATES = tuple(z.value for z in ZoneState)


class BlindMeter:
    """Seconds each cluster's lease stream was blind, summed over the samples taken (left sums:
    the time from a blind sample to the next counts as blind). Why here: the state knows when it is
    blind, not for how long in all; a counter lets ``increase()`` say how much of an hour was blind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, bool]] = {}
        self.total: dict[str, float] = {}

    def update(self, sample: FleetSample) -> dict[str, float]:
        with self._lock:
            for c in sample.clusters:
                prev = self._last.get(c.cluster)
                total = self.total.setdefault(c.cluster, 0.0)
                if prev is not None and prev[1] and sample.at > prev[0]:
                    self.total[c.cluster] = total + (sample.at - prev[0])
                if prev is None or sample.at >= prev[0]:
                    self._last[c.cluster] = (sample.at, c.leases_blind)
            return dict(self.total)


class FleetCollector(Collector):
    """``collect()`` = one sample (``sampler``), then every family built from it.

    ``api_cost``: (cluster, requests, bytes received) of the source's connections to API servers;
    ``blind``: the meter shared with whatever else samples (the Alertmanager pusher)."""

    def __init__(self, sampler: Callable[[], FleetSample], *, api_cost: Callable[[], list[tuple[str, int, int]]]
                 | None = None, blind: BlindMeter | None = None) -> None:
        self.sampler = sampler
        self.api_cost = api_cost or (lambda: [])
        self.blind = blind or BlindMeter()
        self.last_sample_seconds = 0.0
        self.samples = 0
        self.pusher: Any = None
        """The ``--alertmanager`` pusher, when there is one: its deliveries and failures are exported."""

    def describe(self) -> list[Metric]:
        return []  # built at each scrape: registering must not take a sample

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        sample = self.sampler()
        blind = self.blind.update(sample)
        took = time.perf_counter() - started
        self.last_sample_seconds = took
        self.samples += 1
        yield from families(sample, blind, self.api_cost(), took)
        if self.pusher is not None:
            yield from pusher_families(self.pusher)


def pusher_families(pusher: Any) -> list[Metric]:
    """What ``--alertmanager`` delivered and what failed, as Prometheus exports its own notifications
    (``prometheus_notifications_sent_total``, ``..._errors_total``): a team paged by nodewatch alone
    can alert on its pages not getting through."""
    sent = CounterMetricFamily("nodewatch_alertmanager_alerts_sent",
                               "Alerts (firing or resolved) delivered to Alertmanager by --alertmanager.")
    sent.add_metric([], float(pusher.sent))
    errors = CounterMetricFamily("nodewatch_alertmanager_post_errors",
                                 "POSTs of alerts to Alertmanager that failed (tried again seconds later).")
    errors.add_metric([], float(pusher.errors))
    return [sent, errors]


CLUSTER_GAUGES: tuple[tuple[str, str, Callable[[ClusterSample], float]], ...] = (
    ("nodewatch_node_monitor_grace_period_seconds",
     "The node-monitor grace period nodewatch judges the cluster's leases by (40s before v1.32, 50s since).",
     lambda c: c.grace),
    ("nodewatch_default_toleration_seconds",
     "The default unreachable:NoExecute toleration node evictions are counted with: --toleration, else what most "
     "watched pods carry (the API server's --default-unreachable-toleration-seconds), else 300s.",
     lambda c: c.toleration),
    ("nodewatch_leases_blind",
     "1 while the cluster's lease stream is down, listing or silent: no node can be judged by its lease.",
     lambda c: 1.0 if c.leases_blind else 0.0),
    ("nodewatch_cluster_readable",
     "1 when the cluster can be read at all (0: credentials rejected, refused, bad kubeconfig).",
     lambda c: 0.0 if c.error else 1.0),
    ("nodewatch_cluster_all_zones_full_disruption",
     "1 when every zone is in FullDisruption: the controller's master disruption mode (no evictions).",
     lambda c: 1.0 if c.all_zones_full else 0.0),
    ("nodewatch_cluster_controller_suspect",
     "1 when nodes stay Overdue past grace + 2 monitor periods with Ready still True: the node "
     "lifecycle controller may be down.", lambda c: 1.0 if c.controller_suspect else 0.0),
)
"""One gauge a cluster each: (name, help, its value)."""

NODE_MOMENTS: tuple[tuple[str, str, Callable[[NodeSample], float | None]], ...] = (
    ("nodewatch_node_noexecute_taint_timestamp_seconds",
     "When the controller added the node's unreachable/not-ready NoExecute taint (Unix time).",
     lambda n: n.taint_at),
    ("nodewatch_node_noexecute_taint_expected_timestamp_seconds",
     "For a node not Ready and not tainted yet: the earliest its NoExecute taint can come, by its "
     "zone's rate-limited queue (Unix time; absent when none is coming).", lambda n: n.taint_expected_at),
    ("nodewatch_node_eviction_timestamp_seconds",
     "When the taint manager evicts the node's pods that have only the default toleration "
     "(nodewatch_default_toleration_seconds) (Unix time).",
     lambda n: n.eviction_at),
)
"""Moments of a node, a series each when known: (name, help, the moment or None)."""


def families(sample: FleetSample, blind: dict[str, float], api: list[tuple[str, int, int]],
             sample_seconds: float = 0.0) -> list[Metric]:
    """Every metric family of one sample (a function: the bench and tests call it directly)."""
    g = GaugeMetricFamily
    info = InfoMetricFamily("nodewatch_build", "nodewatch's version and the Python running it.")
    info.add_metric([], {"version": __version__, "python": sys.version.split()[0]})
    clock = g("nodewatch_clock_timestamp_seconds",
              "nodewatch's own clock at this sample (Unix time): every _timestamp_seconds and age here is on it.")
    clock.add_metric([], sample.at)
    took = g("nodewatch_metrics_sample_duration_seconds", "Seconds this scrape took to read the fleet's state.")
    took.add_metric([], sample_seconds)

    ck = ["cluster"]
    nodes = g("nodewatch_nodes", "Nodes by nodewatch's state (Ready, Late, Overdue, Unknown, NotReady, Evicting, Evicted).",
              labels=ck + ["state"])
    per_cluster = [(g(name, text, labels=ck), value) for name, text, value in CLUSTER_GAUGES]
    blind_total = CounterMetricFamily("nodewatch_blind_seconds",
                                      "Seconds the cluster's lease stream was blind (down, listing or silent).",
                                      labels=ck)
    for c in sample.clusters:
        for st, count in c.counts:
            nodes.add_metric([c.cluster, st.word], count)
        for fam, value in per_cluster:
            fam.add_metric([c.cluster], value(c))
        blind_total.add_metric([c.cluster], blind.get(c.cluster, 0.0))

    zl = ["cluster", "zone"]
    zstate = g("nodewatch_zone_state", "1 for the zone's state as the node lifecycle controller judges it "
               "(Normal, PartialDisruption, FullDisruption), 0 for the others.", labels=zl + ["state"])
    znodes = g("nodewatch_zone_nodes", "Nodes counted in the zone (not those labelled exclude-disruption).", labels=zl)
    znr = g("nodewatch_zone_nodes_not_ready", "Nodes of the zone whose Ready condition is not True.", labels=zl)
    zrate = g("nodewatch_zone_eviction_rate",
              "Nodes per second the controller taints NoExecute in the zone (0: none at all).", labels=zl)
    for z in sample.zones:
        for zs in ZONE_STATES:
            zstate.add_metric([z.cluster, z.zone, zs], 1.0 if z.state == zs else 0.0)
        znodes.add_metric([z.cluster, z.zone], z.nodes)
        znr.add_metric([z.cluster, z.zone], z.not_ready)
        zrate.add_metric([z.cluster, z.zone], z.taint_rate)

    rl = ["cluster", "resource"]
    sup = g("nodewatch_stream_up", "1 while the watch stream of the resource is connected and listed.", labels=rl)
    relists = CounterMetricFamily("nodewatch_stream_relists", "Times the resource was listed again.", labels=rl)
    for stream in sample.streams:
        sup.add_metric([stream.cluster, stream.resource], 1.0 if stream.up else 0.0)
        relists.add_metric([stream.cluster, stream.resource], stream.relists)
    req = CounterMetricFamily("nodewatch_api_requests", "Requests nodewatch made to the cluster's API server.",
                              labels=ck)
    rx = CounterMetricFamily("nodewatch_api_received_bytes",
                             "Bytes of response bodies nodewatch read from the cluster's API server.", labels=ck)
    for cluster, requests, received in api:
        req.add_metric([cluster], requests)
        rx.add_metric([cluster], received)
    recorder = g("nodewatch_flight_recorder_up",
                 "1 while the flight recorder writes, 0 while it is stopped (a full disk); absent without one.")
    if sample.recording is not None:
        recorder.add_metric([], 0.0 if sample.recording else 1.0)
    room = _recorder_room(sample)

    nl = ["cluster", "node", "zone"]
    age = g("nodewatch_node_lease_age_seconds",
            "Seconds since nodewatch saw the node's Lease renewed, on nodewatch's clock (absent while blind).",
            labels=nl)
    remaining = g("nodewatch_node_grace_remaining_seconds",
                  "Seconds left of the node-monitor grace period before the controller marks Ready Unknown "
                  "(negative: past it).", labels=nl)
    state = g("nodewatch_node_state", "1 for the node's state as nodewatch judges it, 0 for the other states.",
              labels=nl + ["state"])
    skips = g("nodewatch_node_controller_skips",
              "1 for a node the node lifecycle controller skips rather than mark Unknown (its Lease was written "
              "since the last renewal it counted; 1.37+, NodeControllerLeaseCircuitBreaker): no Unknown, no "
              "eviction, whatever its lease age (absent for the others).", labels=nl)
    moments = [(g(name, text, labels=nl), moment) for name, text, moment in NODE_MOMENTS]
    cert = g("nodewatch_kubelet_client_certificate_expiry_timestamp_seconds",
             "NotAfter of the node's kubelet client certificate (Unix time).", labels=["cluster", "node"])
    ss = g("nodewatch_statefulset_pods_at_risk",
           "StatefulSet pods on a node that is Unknown or being evicted: they are not replaced until the node "
           "is fenced or its pods force-deleted.", labels=["cluster", "node"])
    for n in sample.nodes:
        lv = [n.cluster, n.name, n.zone]
        if n.lease_age is not None:
            age.add_metric(lv, n.lease_age)
            remaining.add_metric(lv, n.grace - n.lease_age)
        if n.controller_skips:
            skips.add_metric(lv, 1.0)
        word = n.state.word
        for w in STATES:
            state.add_metric(lv + [w], 1.0 if w == word else 0.0)
        for fam, moment in moments:
            t = moment(n)
            if t is not None:
                fam.add_metric(lv, t)
        if n.cert_not_after is not None:
            cert.add_metric([n.cluster, n.name], n.cert_not_after)
        if n.statefulset_pods:
            ss.add_metric([n.cluster, n.name], n.statefulset_pods)
    for n in sample.certs_expiring:
        if n.cert_not_after is not None:
            cert.add_metric([n.cluster, n.name], n.cert_not_after)
    return [info, clock, took, nodes, *(fam for fam, _ in per_cluster), blind_total, zstate, znodes, znr, zrate,
            sup, relists, req, rx, age, remaining, state, skips, *(fam for fam, _ in moments), cert, ss, recorder,
            *room]


RECORDER_GAUGES: tuple[tuple[str, str, Callable[[RecorderSample], float | None]], ...] = (
    ("nodewatch_flight_recorder_write_bytes_per_second",
     "Bytes the flight recorder writes a second, over its segments still on disk (absent in its first minute).",
     lambda r: r.bytes_per_second),
    ("nodewatch_flight_recorder_keep_bytes",
     "The flight recorder's size cap, --keep-bytes (absent without one).", lambda r: r.keep_bytes),
    ("nodewatch_flight_recorder_keep_seconds",
     "The flight recorder's age limit, --keep (absent without one).", lambda r: r.keep_seconds),
    ("nodewatch_flight_recorder_cap_holds_seconds",
     "How long --keep-bytes holds at the rate written so far: below keep_seconds, the oldest segments go "
     "before their age (absent without a cap or a rate yet).", lambda r: r.cap_holds_seconds),
)
"""A hub's flight recorder room: (name, help, its value), each absent while its value is None."""


def _recorder_room(sample: FleetSample) -> list[Metric]:
    """The recorder's rate and caps (``RECORDER_GAUGES``); none without a rotating recorder."""
    if sample.recorder is None:
        return []
    out: list[Metric] = []
    for name, text, value in RECORDER_GAUGES:
        fam = GaugeMetricFamily(name, text)
        v = value(sample.recorder)
        if v is not None:
            fam.add_metric([], float(v))
        out.append(fam)
    return out


def api_cost(source: Any) -> list[tuple[str, int, int]]:
    """(cluster, requests, bytes received) of each connection the source holds to an API server."""
    from .sample import cluster_label

    out = []
    feeds = getattr(source, "feeds", None)
    if feeds is not None:
        for f in feeds:
            conn = getattr(getattr(f, "live", None), "conn", None)
            if conn is not None:
                out.append((f.name, getattr(conn, "requests", 0), getattr(conn, "received_bytes", 0)))
        return out
    conn = getattr(source, "conn", None)
    if conn is not None:
        out.append((cluster_label(source), getattr(conn, "requests", 0), getattr(conn, "received_bytes", 0)))
    return out
