"""kube-controller-manager's node lifecycle controller, with the real controller's timing.

A monitor pass every ``--node-monitor-period``; probe timestamps on the controller's own clock;
Ready and the pressure conditions go Unknown after the grace; NoSchedule taints follow the
conditions at once; NoExecute taints go through a per-zone token-bucket queue swept every 100ms;
zone states, and the "all Nodes are not-Ready" (master disruption) mode. The rules themselves
(zone state, tainting rate, which taint follows which condition) come from
``nodewatch.core.rules``; this module supplies the timing machinery. Sources for each behaviour:
``docs/kubernetes-rules.md``.

Work is O(what changed): nodes whose probe may expire sit in a heap, and the per-pass taint work
only visits nodes that are not Ready or still tainted.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from ..core import rules
from ..core.settings import Settings, taint_queued_in_the_flip_pass
from .events import EventRecorder
from .pod_controllers import TaintEvictionController, Workloads
from .schedule import PRIO_CONTROLLER
from .shapes import Cond, SimNode, SimTaint
from .world import SimWorld

TAINT_PASS_PERIOD = 0.1
"""scheduler.NodeEvictionPeriod: how often the NoExecute tainting queues are swept."""
PASS_DURATION = 0.001
"""How long one monitor pass takes. The real controller runs its passes with ``wait.Until``, whose
period starts when the previous pass *ends*, so pass k starts a little after ``t0 + k * period``.
That is why Ready goes Unknown on the first pass at or after ``probeTimestamp + grace`` (the test
is ``now > probe + grace``, and "now" has drifted past it), i.e. on the first pass after the last
renewal + grace (see docs/kubernetes-rules.md, "What the real controllers did")."""
UNKNOWN_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
"""tryUpdateNodeHealth's list: NetworkUnavailable is managed by the network plugin, left alone."""
CONTROLLER_NOSCHEDULE_KEYS = frozenset({
    rules.TAINT_NOT_READY, rules.TAINT_UNREACHABLE, rules.TAINT_UNSCHEDULABLE, rules.TAINT_MEMORY_PRESSURE,
    rules.TAINT_DISK_PRESSURE, rules.TAINT_PID_PRESSURE, rules.TAINT_NETWORK_UNAVAILABLE,
})


class TokenBucket:
    """client-go's ``NewTokenBucketRateLimiter(qps, burst=1)``; qps <= 0 is the never-accepting limiter."""

    __slots__ = ("qps", "tokens", "last")

    def __init__(self, qps: float, now: float, full: bool = True) -> None:
        self.qps = qps
        self.tokens = 1.0 if (full and qps > 0) else 0.0
        self.last = now

    def try_accept(self, now: float) -> bool:
        if self.qps <= 0:
            return False
        self.tokens = min(1.0, self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            return True
        return False


@dataclass(slots=True)
class Zone:
    key: str
    ready: int = 0
    not_ready: int = 0
    state: rules.ZoneState | None = None
    limiter: TokenBucket | None = None
    queue: deque = field(default_factory=deque)
    queued: set = field(default_factory=set)
    """The UniqueQueue's set: a node stays in it after being tainted, until it is Ready again."""

    @property
    def size(self) -> int:
        return self.ready + self.not_ready


class NodeLifecycleController:
    """Its inputs: the simulated cluster (``world``), the controller manager's flags
    (``settings``), and the parts it calls: the event recorder, taint eviction (told of every
    NoExecute change) and the workloads (MarkPodsNotReady)."""

    def __init__(self, world: SimWorld, settings: Settings, events: EventRecorder,
                 taint_eviction: TaintEvictionController, workloads: Workloads) -> None:
        self.world = world
        self.settings = settings
        self.events = events
        self.taint_eviction = taint_eviction
        self.workloads = workloads
        t0 = world.t0
        s = settings
        self.period = s.monitor_period_seconds
        self.interval = self.period + PASS_DURATION
        """Start to start, as wait.Until's sliding period makes it."""
        self.grace = s.grace
        self.in_the_flip_pass = taint_queued_in_the_flip_pass(s.server_version)
        """processTaintBaseEviction judges by the Ready condition after this pass's update (1.34+)
        rather than the one it observed before it (``settings.taint_queued_in_the_flip_pass``)."""
        self.startup_grace = s.startup_grace_seconds
        self.t0 = t0
        self.probe_floor = t0
        self.zones: dict[str, Zone] = {}
        self.deadlines: list[tuple[float, int, str]] = []
        self.attention: set[str] = set()
        """Nodes the per-pass taint work must visit: not Ready, tainted, or queued."""
        self.all_full = False
        self._seq = 0
        self._ticking = False
        self._noschedule_pending: set[str] = set()
        self._listed_tainted: set[str] = set()
        """Nodes with an eviction taint when the current pass began (its node list)."""
        self.passes = 0

    # probe timestamps ----------------------------------------------------------------------------

    def pass_time(self, k: int) -> float:
        """When monitor pass ``k`` (0 at ``t0``) runs."""
        return self.t0 + k * self.interval

    def first_pass_from(self, t: float) -> float:
        """The first monitor pass at or after ``t``."""
        return self.pass_time(max(0, math.ceil((t - self.t0) / self.interval - 1e-9)))

    def probe(self, node: SimNode) -> float:
        """The controller's probeTimestamp: the first pass that saw the node's last change, a Lease
        renewal or a Ready heartbeat, whichever is newer (``observe_change``; ``rules.probe_time``)."""
        return max(self.first_pass_from(node.last_change), self.probe_floor)

    def node_grace(self, node: SimNode) -> float:
        """tryUpdateNodeHealth: the startup grace while the Node has no Ready condition at all
        (a kubelet that posted Ready=False, e.g. CNI not ready yet, gets the normal grace)."""
        return rules.node_grace(node.ready() is not None, self.grace, self.startup_grace)

    def observe_change(self, node: SimNode) -> None:
        """A lease renewal or a Ready heartbeat change reached the API server now."""
        node.last_change = self.world.now
        if node.armed_deadline is None:
            self._arm(node)

    def _arm(self, node: SimNode) -> None:
        """Put the node's expiry in the heap; an entry whose deadline is no longer the node's is stale."""
        self._seq += 1
        deadline = self.probe(node) + self.node_grace(node)
        node.armed_deadline = deadline
        heapq.heappush(self.deadlines, (deadline, self._seq, node.name))

    # zones ------------------------------------------------------------------------------------------

    def zone(self, key: str) -> Zone:
        z = self.zones.get(key)
        if z is None:
            z = self.zones[key] = Zone(key)
            z.limiter = TokenBucket(self.settings.eviction_rate, self.world.now)
        return z

    def count(self, node: SimNode, status: str | None, delta: int) -> None:
        if rules.LABEL_EXCLUDE_DISRUPTION in node.labels:
            return
        z = self.zone(node.zone_key)
        if status == "True":
            z.ready += delta
        else:
            z.not_ready += delta

    def ready_changed(self, node: SimNode, old: str | None, new: str | None) -> None:
        """Keep the zone tallies and the attention set in step with a Ready status change."""
        if old == new:
            return
        self.count(node, old, -1)
        self.count(node, new, +1)
        if old is None and node.armed_deadline is not None:
            self._arm(node)  # the first Ready condition: the normal grace from now on
        if new != "True":
            self.attention.add(node.name)

    def node_added(self, node: SimNode) -> None:
        self.count(node, node.ready(), +1)
        if node.ready() != "True":
            self.attention.add(node.name)
        node.last_change = self.world.now
        self._arm(node)

    def _dequeue(self, node: SimNode) -> None:
        """Forget the node in its zone's NoExecute tainting queue."""
        z = self.zones.get(node.zone_key)
        if z is not None and node.name in z.queued:
            z.queued.discard(node.name)
            try:
                z.queue.remove(node.name)
            except ValueError:
                pass

    def restart(self) -> None:
        """kube-controller-manager restarted, or another took the lead: the new process knows no
        probe time ("Missing timestamp for Node. Assuming now as a timestamp", so every grace counts
        from now), registers every node (a ``RegisteredNode`` event each, and the NoExecute
        unreachable and not-ready taints taken off: ``markNodeAsReachable``, which the next pass's
        tainting puts back with a new ``timeAdded``), starts with full zone limiters, and its
        taint-eviction controller times every pod anew (``TaintEvictionController.restart``). Seen
        on both testbed releases (``tests/testbed/test_controller_restart.py``)."""
        now = self.world.now
        self.probe_floor = max(self.probe_floor, now)
        for z in self.zones.values():
            z.limiter = TokenBucket(self.zone_rate(z), now) if not self.all_full else TokenBucket(0.0, now)
        for name in list(self.world.node_order):
            node = self.world.nodes.get(name)
            if node is None:
                continue
            self.events.node_event(node, "RegisteredNode", f"Node {name} event: Registered Node {name} in Controller",
                                   component="node-controller", controller=True)
            self.mark_reachable(node)
            if node.ready() != "True" or node.taints:
                self.attention.add(name)
            self._arm(node)
        self.taint_eviction.restart()
        self.ensure_ticking()

    def node_deleted(self, node: SimNode) -> None:
        self.count(node, node.ready(), -1)
        self.attention.discard(node.name)
        self._dequeue(node)

    # the monitor pass -------------------------------------------------------------------------------

    def start(self) -> None:
        self.world.at(self.t0, self.monitor_pass, prio=PRIO_CONTROLLER)

    def monitor_pass(self) -> None:
        """monitorNodeHealth: expire probes, then taint work per node, then the zones.

        Up to 1.33 processTaintBaseEviction sees the Ready condition as it was *before* this pass
        flipped it, so a node that goes Unknown in this pass is only queued for its NoExecute taint
        on the next pass: the taint lands one monitor period after the flip, as the real v1.20
        controller was seen to do. From 1.34 (kubernetes PR #120816) it sees the condition this
        pass wrote, so the pass that flips the node queues it (v1.37.2 in the testbed;
        docs/kubernetes-rules.md).
        """
        world = self.world
        now = world.now
        self.passes += 1
        # the node list the pass began with: what handleDisruption marks reachable from
        self._listed_tainted = {n for n in self.attention if n in world.nodes and self._eviction_tainted(world.nodes[n])}
        # up to 1.33, processTaintBaseEviction looks at the Ready condition as it was before this pass updated it
        observed = ([] if self.in_the_flip_pass else
                    [(world.nodes[n], world.nodes[n].ready()) for n in sorted(self.attention) if n in world.nodes])
        heap = self.deadlines
        while heap and heap[0][0] < now:
            deadline, _, name = heapq.heappop(heap)
            node = world.nodes.get(name)
            if node is None or node.deleted or node.armed_deadline != deadline:
                continue
            node.armed_deadline = None
            if rules.probe_expired(self.probe(node), self.node_grace(node), now):
                self.mark_unknown(node)
            else:
                self._arm(node)
        if self.in_the_flip_pass:  # the condition as this pass left it (nodes it flipped are in attention now)
            observed = [(world.nodes[n], world.nodes[n].ready()) for n in sorted(self.attention) if n in world.nodes]
        for node, status in observed:
            if not node.deleted:
                self.process_taint_based_eviction(node, status)
        if self.in_the_flip_pass:
            # The real pass takes seconds (its writes under the client's rate limit) and the
            # tainting loop runs every 100 ms meanwhile: the nodes this pass queued are tainted, a
            # token a zone, before handleDisruption decides the zones at its end.
            self._sweep_queues(now)
        self.handle_disruption()
        world.at(self.pass_time(self.passes), self.monitor_pass, prio=PRIO_CONTROLLER)

    def mark_unknown(self, node: SimNode) -> None:
        """tryUpdateNodeHealth after the grace: Ready and the pressure conditions go Unknown.

        A condition the kubelet posted gets ``NodeStatusUnknown``; one it never posted is added
        with ``NodeStatusNeverUpdated``, its heartbeat at the Node's creation (as the real
        controller writes it; docs/kubernetes-rules.md).
        """
        world = self.world
        now = world.now
        old_ready = node.ready()
        changed = False
        for ctype in UNKNOWN_CONDITIONS:
            c = node.conditions.get(ctype)
            if c is None:
                node.conditions[ctype] = Cond(ctype, "Unknown", rules.NEVER_UPDATED_REASON,
                                              rules.NEVER_UPDATED_MESSAGE, node.created, now)
                changed = True
                continue
            if c.status == "Unknown":
                continue
            c.status = "Unknown"
            c.reason = rules.UNKNOWN_REASON
            c.message = rules.UNKNOWN_MESSAGE
            c.transition = now
            changed = True
        if not changed:
            return
        world.emit_node(node)
        self.ready_changed(node, old_ready, "Unknown")
        self.request_noschedule_sync(node)
        if old_ready == "True":
            self.events.node_event(node, "NodeNotReady", f"Node {node.name} status is now: NodeNotReady",
                                    component="node-controller", controller=True)
            self.workloads.mark_pods_not_ready(node)

    def process_taint_based_eviction(self, node: SimNode, observed: str | None) -> None:
        """``processTaintBaseEviction`` with the Ready status the pass judges by (``monitor_pass``):
        a kubelet's Ready=False is queued by the first pass that sees it, an Unknown the pass wrote
        by that pass from 1.34 or by the next one up to 1.33 (``rules.taint_queue_delay``); Ready
        again: the taints come off."""
        if observed == "False":
            if node.has_taint(rules.TAINT_UNREACHABLE, "NoExecute"):
                self.swap_eviction_taint(node, rules.TAINT_NOT_READY)
            else:
                self.mark_for_tainting(node)
        elif rules.controller_removes_eviction_taints(observed, False):  # Ready again
            self.mark_reachable(node)
            if node.ready() == "True":
                self.attention.discard(node.name)
        else:
            if node.has_taint(rules.TAINT_NOT_READY, "NoExecute"):
                self.swap_eviction_taint(node, rules.TAINT_UNREACHABLE)
            else:
                self.mark_for_tainting(node)

    def mark_for_tainting(self, node: SimNode) -> None:
        z = self.zone(node.zone_key)
        if node.name in z.queued:
            return
        z.queued.add(node.name)
        z.queue.append(node.name)
        self.ensure_ticking()

    @staticmethod
    def _eviction_tainted(node: SimNode) -> bool:
        return any(t.effect == "NoExecute" and t.key in rules.EVICTION_TAINTS for t in node.taints)

    def mark_reachable(self, node: SimNode, listed_tainted: bool = True) -> None:
        """Remove the NoExecute not-ready/unreachable taints and forget the node in its zone queue.
        ``listed_tainted`` False: the copy the caller judged by had none, so none is removed."""
        self._dequeue(node)
        if not listed_tainted:
            return
        before = len(node.taints)
        node.taints = [t for t in node.taints if not (t.effect == "NoExecute" and t.key in rules.EVICTION_TAINTS)]
        if len(node.taints) != before:
            self.world.emit_node(node)
            self.taint_eviction.node_taints_changed(node)

    def swap_eviction_taint(self, node: SimNode, key: str) -> None:
        """SwapNodeControllerTaint: the new taint is stamped now, the opposite one removed."""
        node.taints = [t for t in node.taints if not (t.effect == "NoExecute" and t.key in rules.EVICTION_TAINTS)]
        node.taints.append(SimTaint(key, "NoExecute", self.world.now))
        self.world.emit_node(node)
        self.taint_eviction.node_taints_changed(node)

    # NoExecute tainting queue, swept every 100ms ------------------------------------------------------

    def ensure_ticking(self) -> None:
        if self._ticking or self.all_full:
            return
        if not any(z.queue and z.limiter is not None and z.limiter.qps > 0 for z in self.zones.values()):
            return
        now = self.world.now
        k = math.floor((now - self.t0) / TAINT_PASS_PERIOD + 1e-6) + 1
        while self.t0 + k * TAINT_PASS_PERIOD <= now:
            k += 1
        self._ticking = True
        self.world.at(self.t0 + k * TAINT_PASS_PERIOD, self.tainting_pass, prio=PRIO_CONTROLLER)

    def tainting_pass(self) -> None:
        """doNoExecuteTaintingPass, every 100 ms while a queue holds nodes."""
        self._ticking = False
        self._sweep_queues(self.world.now)
        self.ensure_ticking()

    def _sweep_queues(self, now: float) -> None:
        """Each zone's queue, as fast as its limiter allows."""
        for key in sorted(self.zones):
            z = self.zones[key]
            while z.queue and z.limiter is not None and z.limiter.try_accept(now):
                name = z.queue.popleft()  # RemoveFromQueue: it stays in ``queued``
                node = self.world.nodes.get(name)
                if node is None or node.deleted:
                    z.queued.discard(name)
                    continue
                want = rules.wanted_eviction_taint(node.ready())
                if want is None:
                    continue  # Ready again: no taint (the token is spent all the same)
                self.swap_eviction_taint(node, want)

    # zones and the "all zones down" mode ------------------------------------------------------------------

    def zone_rate(self, z: Zone) -> float:
        s = self.settings
        assert z.state is not None
        return rules.zone_taint_rate(z.state, z.size, all_full=False, eviction_rate=s.eviction_rate,
                                     secondary_eviction_rate=s.secondary_eviction_rate,
                                     large_cluster_threshold=s.large_cluster_threshold)

    def swap_limiter(self, z: Zone, qps: float) -> None:
        """RateLimitedTimedQueue.SwapLimiter: a new bucket, drained if the old one was empty."""
        old = z.limiter
        now = self.world.now
        if old is not None and old.qps == qps:
            return
        new = TokenBucket(qps, now)
        if old is None or not old.try_accept(now):
            new.try_accept(now)
        z.limiter = new

    def handle_disruption(self) -> None:
        """handleDisruption, after every node of the pass (zone states from the new conditions).

        Every zone in FullDisruption ("all Nodes are not-Ready. Entering master disruption
        mode"): the NoExecute taints come off every node and every zone's limiter becomes the
        never-accepting one, so nodes still get queued but none is tainted and nothing is evicted.
        Leaving it: every probe timestamp restarts now, and each zone's limiter is set for its state
        (drained when the old one was empty). Otherwise only zones whose state changed get a new
        limiter. Rates: ``rules.zone_taint_rate``; see docs/kubernetes-rules.md.
        """
        now = self.world.now
        thr = self.settings.unhealthy_zone_threshold
        new_states = {k: rules.zone_state(z.ready, z.not_ready, thr) for k, z in self.zones.items() if z.size > 0}
        all_full = rules.all_zones_full(new_states.values())
        if all_full and not self.all_full:
            # "Controller detected that all Nodes are not-Ready. Entering master disruption mode."
            # From the node list the pass began with: RemoveTaintOffNode skips a node whose listed
            # copy has no eviction taint, so a taint this pass added (from 1.34 the nodes it flipped
            # and queued, and swaps) stays (rules.master_disruption_kept).
            for name in sorted(self.attention):
                node = self.world.nodes.get(name)
                if node is not None:
                    self.mark_reachable(node, listed_tainted=name in self._listed_tainted)
            for z in self.zones.values():
                self.swap_limiter(z, 0.0)
        elif not all_full and self.all_full:
            # "Controller detected that some Nodes are Ready. Exiting master disruption mode."
            self.probe_floor = now
            for k, z in self.zones.items():
                z.state = new_states.get(k, rules.ZoneState.NORMAL)
                self.swap_limiter(z, self.zone_rate(z))
        elif not all_full:
            for k, state in new_states.items():
                z = self.zones[k]
                if z.state is not state:
                    z.state = state
                    self.swap_limiter(z, self.zone_rate(z))
        for k, state in new_states.items():
            self.zones[k].state = state
        self.all_full = all_full
        self.ensure_ticking()

    # NoSchedule taints follow the conditions at once ---------------------------------------------------

    def request_noschedule_sync(self, node: SimNode) -> None:
        if node.name in self._noschedule_pending:
            return
        self._noschedule_pending.add(node.name)
        self.world.at(self.world.now + 0.02, self.noschedule_sync, node.name, prio=PRIO_CONTROLLER)

    def noschedule_sync(self, name: str) -> None:
        self._noschedule_pending.discard(name)
        node = self.world.nodes.get(name)
        if node is None or node.deleted:
            return
        statuses = {c.type: c.status for c in node.conditions.values()}
        want = rules.condition_taints(statuses, node.unschedulable)
        have = {t.key for t in node.taints if t.effect == "NoSchedule" and t.key in CONTROLLER_NOSCHEDULE_KEYS}
        if want == have:
            return
        kept = [t for t in node.taints if not (t.effect == "NoSchedule" and t.key in CONTROLLER_NOSCHEDULE_KEYS)]
        added = [SimTaint(k, "NoSchedule") for k in sorted(want)]
        node.taints = added + kept
        self.world.emit_node(node)
