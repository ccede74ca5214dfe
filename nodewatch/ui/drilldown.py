"""The drill-down of one node: why it is down, since when, what is at risk; then everything else.

Opened with Enter on a row. It asks the source for the node's pods and events
(``source.focus_node``), repaints every tick (countdowns move) and closes with Escape.

The first screen answers the operator's questions in order: the title (state, how long, the
eviction countdown), "Why and since when" (likely causes, when the state began, every countdown,
the checks to run), the newest events, the pods at risk with the fencing advice (said once, in the
pods box), and the heartbeat history. Below: conditions, timeline, lease, certificate, taints, and
the Node's labels, addresses and capacity. Every section is full width (no two boxes of unequal
height side by side, so no blank gaps), and every list and string is capped (``MAX_*``, "+N more"):
a node with 10,000 conditions or 100 KB strings draws in the same few screens as any other.

All cluster text goes through ``safe`` into ``Text``: shown, never interpreted.
"""

from __future__ import annotations

import datetime as dt
import heapq
from itertools import islice

import humanize
from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..core.causes import CauseKind, checks_for
from ..core.fencing import fencing_advice
from ..core.fleet import FleetState
from ..core.format import ago, cert_text, clock_time, eviction_text, grace_text
from ..core.outlook import outlook_in
from ..core.text import duration, safe
from ..core.views import AGE_FROM, FleetView, NodeDetails
from .heartbeat import HeartbeatChart
from .item_lines import ItemLines
from .theme import DEFAULT_PALETTE, Palette

MAX_LABELS = 40
MAX_PODS = 200
"""Pods asked of the state (at-risk ones come first)."""
MAX_PODS_SHOWN = 10
MAX_EVENTS = 50
MAX_EVENTS_SHOWN = 6
MAX_CONDITIONS = 16
MAX_TAINTS = 16
MAX_ADDRESSES = 8
MAX_RESOURCES = 12
MAX_CAUSES = 6
MAX_TIMELINE_SHOWN = 20
MAX_TIMELINE_TEXT = 120
MAX_MESSAGE = 240
"""Characters of one message (an event's, a condition's, a cause's) shown."""


def more(n: int, what: str, p: Palette) -> Text:
    """The line that says what a capped list left out."""
    return Text(f"+{humanize.intcomma(n)} more {what}", p.muted)


def human_ago(t: float | None, now: float) -> str:
    """``9 minutes ago`` / ``in 4 months``: prose for the drill-down (tables keep ``3m05s``)."""
    if t is None:
        return "?"
    try:
        d = now - t
        if d >= 0:
            return humanize.naturaltime(dt.timedelta(seconds=d))
        return f"in {humanize.naturaldelta(dt.timedelta(seconds=-d))}"
    except (OverflowError, ValueError):
        return ago(t, now)


def _grid(*headers: str, wrap_last: bool = True) -> Table:
    """A borderless table; the last column (messages) takes the room left and wraps (unless
    ``wrap_last`` is False: one line per row), the others are cut with an ellipsis."""
    t = Table(box=None, pad_edge=False, show_header=bool(headers), header_style="bold", expand=True,
              padding=(0, 1))
    for i, h in enumerate(headers):
        last = i == len(headers) - 1
        wraps = last and wrap_last
        t.add_column(h, overflow="fold" if wraps else "ellipsis", no_wrap=not wraps, ratio=1 if last else None,
                     max_width=None if last else 48)
    return t


def _kv(rows: list[tuple[str, Text | str]]) -> Table:
    t = Table(box=None, pad_edge=False, show_header=False, expand=False, padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(Text(k), v if isinstance(v, Text) else Text(v))
    return t


def _when(t: float | None, now: float) -> Text:
    if t is None:
        return Text("?")
    return Text(f"{clock_time(t, date=True)} ({human_ago(t, now)})")


def _with_more(body: RenderableType, left_out: int, what: str, p: Palette) -> RenderableType:
    return Group(body, more(left_out, what, p)) if left_out > 0 else body


def title_section(d: NodeDetails, p: Palette) -> RenderableType:
    """One line (wrapped between items, never inside one): name │ state │ for how long │ eviction."""
    v = d.view
    name = Text(safe(d.name, 120), "bold")
    sep = Text(" │ ", p.muted)
    where = [Text(f"cluster {safe(d.cluster, 60)}", p.accent)] if d.cluster else []
    if v is None:
        return ItemLines(Text(" "), [name, *where, Text("not in the fleet (deleted, or not seen yet)", p.muted)], sep)
    items = [name, *where, Text(f"{v.state.symbol} {v.state.word}", p.state(v.state)),
             Text(grace_text(v.state.word, v.ready, v.grace_remaining(d.now), v.state_since, d.now))]
    ev = eviction_text(v.eviction_in(d.now))
    if ev:
        items.append(Text(ev, p.warn))
    if v.cordoned:
        items.append(Text("cordoned", p.warn))
    at_risk = sum(1 for pod in d.pods if pod.statefulset_risk)
    if at_risk:
        items.append(Text(f"⚠ {at_risk} StatefulSet {'pod' if at_risk == 1 else 'pods'} at risk (see Pods)", p.bad))
    return ItemLines(Text(" "), items, sep)


def cause_section(d: NodeDetails, p: Palette, outlook: str | None = None) -> RenderableType:
    """Why, since when, what happens next (every countdown; ``outlook``: when the NoExecute taint
    comes, ``core.outlook``), and what to run on the node."""
    v = d.view
    if v is None:
        return Text("not in the fleet", p.muted)
    out = Text()
    if v.causes:
        for c in v.causes[:MAX_CAUSES]:
            out.append("• ", p.warn)
            out.append(safe(c.text, MAX_MESSAGE))
            out.append("\n")
        if len(v.causes) > MAX_CAUSES:
            out.append_text(more(len(v.causes) - MAX_CAUSES, "causes", p))
            out.append("\n")
    else:
        out.append("nothing wrong that the API shows\n", p.good)
    out.append("since ", "bold")
    if v.state_since is not None:
        day_away = abs(d.now - v.state_since) >= 86400
        out.append(f"{clock_time(v.state_since, date=day_away)} ({human_ago(v.state_since, d.now)}): {v.state.word}")
    else:
        out.append(f"? ({v.state.word}; when it began is not known)", p.muted)
    if v.lease_observed_at is not None:
        out.append(f" · last lease renewal seen {human_ago(v.lease_observed_at, d.now)}", p.muted)
    out.append("\ncountdowns ", "bold")
    nexts: list[tuple[str, Style]] = []
    remaining = v.grace_remaining(d.now)
    skipped = any(c.kind is CauseKind.CONTROLLER_SKIPS for c in v.causes)
    if v.ready == "True" and remaining is not None and skipped:  # 1.37+: no NotReady comes of it
        nexts.append((f"grace {'runs out ' if remaining > 0 else 'ran out '}{human_ago(d.now + remaining, d.now)}: "
                      "the controller skips this node, no NotReady and no eviction will come of it", p.warn))
    elif v.ready == "True" and remaining is not None:
        nexts.append((f"NotReady {human_ago(d.now + remaining, d.now)} unless it renews"
                      if remaining > 0 else f"grace ran out {human_ago(d.now + remaining, d.now)}",
                      p.warn if remaining <= 0 else Style()))
    if outlook:
        nexts.append((outlook, p.warn))
    ev_in = v.eviction_in(d.now)
    if ev_in is not None:
        nexts.append((f"pods without a longer toleration: evicted {human_ago(d.now + ev_in, d.now)} "
                      f"({clock_time(d.now + ev_in)})", p.bad if ev_in < 60 else p.warn))
    if v.cert_not_after is not None:
        level = v.cert_level(d.now)
        nexts.append((f"kubelet certificate expires {human_ago(v.cert_not_after, d.now)}"
                      if v.cert_not_after > d.now else f"kubelet certificate expired {human_ago(v.cert_not_after, d.now)}",
                      p.cert.get(level, Style())))
    if not nexts:
        nexts.append(("nothing due", p.muted))
    for i, (text, style) in enumerate(nexts):
        if i:
            out.append(" · ", p.muted)
        out.append(text, style)
    checks = checks_for(list(v.causes), v.name) if v.causes else []
    if checks:
        out.append("\nchecks to run:", "bold")
        for cmd in checks[:8]:
            out.append(f"\n  $ {safe(cmd, 300)}", p.accent)
    return out


def events_section(d: NodeDetails, p: Palette) -> RenderableType:
    """The newest events, one line each (the message cut at the screen's edge)."""
    if not d.events:
        return Text("no events seen for this node", p.muted)
    t = _grid("WHEN", "TYPE", "REASON", "FROM", "MESSAGE", wrap_last=False)
    for e in d.events[:MAX_EVENTS_SHOWN]:
        count = f" ×{e.count}" if e.count > 1 else ""
        t.add_row(Text(ago(e.time, d.now)), Text(safe(e.type, 12), p.warn if e.type == "Warning" else p.muted),
                  Text(safe(e.reason, 40) + count), Text(safe(e.source, 60), p.muted),
                  Text(safe(e.message, MAX_MESSAGE)))
    return _with_more(t, len(d.events) - MAX_EVENTS_SHOWN, "older events", p)


def pods_section(d: NodeDetails, p: Palette) -> RenderableType:
    """At-risk pods first, with the fencing advice above them (the one place it is said)."""
    if not d.pods:
        return Text("no pods seen on this node", p.muted)
    t = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=True, padding=(0, 1))
    t.add_column("NAMESPACE/NAME", no_wrap=True, overflow="ellipsis", ratio=3)
    t.add_column("OWNER", no_wrap=True, overflow="ellipsis", ratio=2)
    t.add_column("PHASE", no_wrap=True, overflow="ellipsis", ratio=2)
    t.add_column("EVICTION", no_wrap=True, overflow="ellipsis", min_width=16)
    for pod in d.pods[:MAX_PODS_SHOWN]:
        style = p.bad if pod.statefulset_risk else Style()
        ev = eviction_text(pod.eviction_at - d.now if pod.eviction_at is not None else None) or "-"
        phase = safe(pod.phase, 20) + (" Terminating" if pod.terminating else "")
        if pod.disruption_target:
            phase += " DisruptionTarget"
        name = Text(f"{safe(pod.namespace, 40)}/{safe(pod.name, 80)}", style)
        if pod.statefulset_risk:
            name.append(" ⚠ at risk", p.bad)
        t.add_row(name, Text(f"{safe(pod.owner_kind, 30)}/{safe(pod.owner_name, 60)}" if pod.owner_kind else "-"),
                  Text(phase), Text(ev))
    body = _with_more(t, len(d.pods) - MAX_PODS_SHOWN, "pods", p)
    if any(pod.statefulset_risk for pod in d.pods):
        return Group(Text(f"⚠ StatefulSet pods at risk: {fencing_advice(d.server_version)}", p.bad), body)
    return body


def heartbeat_section(d: NodeDetails, p: Palette) -> RenderableType:
    ls, v = d.lease, d.view
    if ls is None or v is None:
        return Text("no Lease in kube-node-lease for this node: no heartbeat to show", p.muted)
    return HeartbeatChart(d.beats, now=d.now, grace=v.grace, lease_duration=ls.duration, skew=ls.skew,
                          palette=p, last_seen=v.lease_observed_at)


def node_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None:
        return Text("no Node object", p.muted)
    labels = Text()
    for i, (k, val) in enumerate(heapq.nsmallest(MAX_LABELS, r.labels.items())):
        if i:
            labels.append("\n")
        labels.append(safe(k, 80), p.muted)
        labels.append("=")
        labels.append(safe(val, 80))
    if len(r.labels) > MAX_LABELS:
        labels.append("\n")
        labels.append_text(more(len(r.labels) - MAX_LABELS, "labels", p))
    keys = heapq.nsmallest(MAX_RESOURCES + 1, set(r.capacity) | set(r.allocatable))
    resources = Text(", ".join(f"{safe(k, 40)} {safe(r.allocatable.get(k, '?'), 20)}/{safe(r.capacity.get(k, '?'), 20)}"
                               for k in keys[:MAX_RESOURCES]))
    if len(keys) > MAX_RESOURCES:
        resources.append(" ")
        resources.append_text(more(len(set(r.capacity) | set(r.allocatable)) - MAX_RESOURCES, "resources", p))
    addresses = Text(", ".join(f"{safe(a, 20)} {safe(b, 60)}" for a, b in r.addresses[:MAX_ADDRESSES]))
    if len(r.addresses) > MAX_ADDRESSES:
        addresses.append(" ")
        addresses.append_text(more(len(r.addresses) - MAX_ADDRESSES, "addresses", p))
    return _kv([
        ("zone", safe(r.zone, 60) or "(no zone)"),
        ("kubelet", safe(r.kubelet_version, 40)),
        ("runtime", safe(r.runtime_version, 60)),
        ("kernel", safe(r.kernel_version, 60)),
        ("os", safe(r.os_image, 60)),
        ("addresses", addresses),
        ("alloc/capacity", resources),
        ("created", _when(r.created, d.now)),
        ("cordoned", "yes" if r.unschedulable else "no"),
        ("labels", labels),
    ])


def conditions_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None or not r.conditions:
        return Text("no conditions", p.muted)
    t = _grid("TYPE", "STATUS", "REASON", "HEARTBEAT", "TRANSITION", "MESSAGE", wrap_last=False)
    for c in islice(r.conditions.values(), MAX_CONDITIONS):
        healthy = "True" if c.type == "Ready" else "False"
        style = p.good if c.status == healthy else p.warn if c.status == "Unknown" and c.type != "Ready" else p.bad
        t.add_row(Text(safe(c.type, 30)), Text(safe(c.status, 10), style),
                  Text(safe(c.reason, 40)), Text(ago(c.last_heartbeat, d.now)),
                  Text(ago(c.last_transition, d.now)), Text(safe(c.message, MAX_MESSAGE)))
    return _with_more(t, len(r.conditions) - MAX_CONDITIONS, "conditions", p)


def taints_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None or not r.taints:
        return Text("no taints", p.muted)
    t = _grid("KEY", "VALUE", "EFFECT", "ADDED", wrap_last=False)
    for tn in r.taints[:MAX_TAINTS]:
        t.add_row(Text(safe(tn.key, 80)), Text(safe(tn.value, 60)),
                  Text(safe(tn.effect, 20), p.warn if tn.effect == "NoExecute" else p.muted),
                  _when(tn.time_added, d.now) if tn.time_added is not None else Text("-"))
    return _with_more(t, len(r.taints) - MAX_TAINTS, "taints", p)


def lease_section(d: NodeDetails, p: Palette) -> RenderableType:
    ls, v = d.lease, d.view
    if ls is None:
        return Text("no Lease in kube-node-lease for this node", p.bad)
    age = v.lease_age(d.now) if v else None
    rows: list[tuple[str, Text | str]] = [
        ("holder", safe(ls.holder, 80)),
        ("renewTime", _when(ls.renew_time, d.now)),
        ("seen at", _when(ls.observed_at, d.now)),
        ("age from", AGE_FROM.get(ls.age_from, "?")),
        ("age", Text(duration(age) if age is not None else "unknown (dashboard blind or no renewal seen)",
                     p.bad if age is not None and v is not None and age > v.grace else Style())),
        ("duration", f"{ls.duration:g}s (renews every {ls.duration / 4:g}s)"),
        ("observed skew", f"{ls.skew:+.1f}s (receive time - renewTime)" if ls.skew is not None else "?"),
        ("renewals seen", humanize.intcomma(ls.renewals)),
    ]
    if v is not None:
        rows.append(("grace", f"{v.grace:g}s"))
    return _kv(rows)


def cert_section(d: NodeDetails, p: Palette) -> RenderableType:
    c = d.cert
    if c is None:
        return Text("kubelet client certificate: NotAfter unknown (no issued CSR seen)", p.muted)
    level = "expired" if c.not_after <= d.now else ""
    v = d.view
    if v is not None:
        level = v.cert_level(d.now)
    return _kv([
        ("NotAfter", _when(c.not_after, d.now)),
        ("left", Text(f"{cert_text(c.not_after, d.now)} ({level})", p.cert.get(level, Style()))),
        ("learned from", safe(c.source, 120)),
    ])


def timeline_section(d: NodeDetails, p: Palette) -> RenderableType:
    if not d.timeline:
        return Text("nothing recorded yet", p.muted)
    t = _grid("WHEN", "", "WHAT")
    shown = d.timeline[-MAX_TIMELINE_SHOWN:]
    for when, what in shown:
        future = when > d.now
        t.add_row(Text(clock_time(when)), Text(ago(when, d.now), p.warn if future else p.muted),
                  Text(safe(what, MAX_TIMELINE_TEXT), p.accent if future else Style()))
    left_out = len(d.timeline) - len(shown)
    return Group(more(left_out, "earlier entries", p), t) if left_out > 0 else t


SECTIONS = (
    ("cause", "Why, and since when", cause_section),
    ("events", "Events (newest first)", events_section),
    ("pods", "Pods", pods_section),
    ("heartbeat", "Heartbeats: intervals between lease renewals", heartbeat_section),
    ("conditions", "Conditions", conditions_section),
    ("timeline", "Timeline", timeline_section),
    ("lease", "Lease", lease_section),
    ("cert", "Kubelet client certificate", cert_section),
    ("taints", "Taints", taints_section),
    ("node", "Node", node_section),
)
"""Top to bottom, in the order an operator asks: every box full width, so none leaves a gap."""


class DrillDown(Screen):
    """One node in full. The app refreshes it each tick with ``show``."""

    AUTO_FOCUS = "#dd-scroll"
    """The sections scroll with the arrow and page keys at once."""

    BINDINGS = [
        Binding("escape", "close", "Back", id="drilldown.close"),
        Binding("q", "close", "Back", show=False, id="drilldown.close_q"),
    ]

    DEFAULT_CSS = """
    DrillDown #dd-summary { height: auto; max-height: 3; background: $panel; }
    DrillDown .section { height: auto; border: round $foreground 30%; padding: 0 1; }
    DrillDown #dd-pods.-risk { border: heavy $error; }
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self.palette: Palette = DEFAULT_PALETTE

    def compose(self) -> ComposeResult:
        yield Static(Text(safe(self.node, 120)), id="dd-summary")
        with VerticalScroll(id="dd-scroll"):
            for key, title, _ in SECTIONS:
                box = Static(Text(""), id=f"dd-{key}", classes="section")
                box.border_title = title
                yield box
        yield Footer()

    def show(self, state: FleetState, now: float, palette: Palette, view: FleetView | None = None) -> NodeDetails:
        """Redraw from the state at ``now``; ``view`` is the fleet judged at that tick (its zones say
        what the controller does next). Returns the snapshot (tests read it)."""
        self.palette = palette
        d = state.node_details(self.node, now, max_pods=MAX_PODS, max_events=MAX_EVENTS)
        outlook = outlook_in(view, d.view) if view is not None and d.view is not None else None
        self.query_one("#dd-summary", Static).update(title_section(d, palette))
        unwatched = state.details_not_watched(self.node)
        for key, _, fn in SECTIONS:
            body = cause_section(d, palette, outlook) if fn is cause_section else fn(d, palette)
            if unwatched and key in ("pods", "events"):  # say why they may be missing or old
                body = Group(Text(f"pods and events: {unwatched}", palette.warn), body)
            self.query_one(f"#dd-{key}", Static).update(body)
        pods = self.query_one("#dd-pods")
        pods.set_class(any(p.statefulset_risk for p in d.pods), "-risk")
        at_risk = sum(1 for p in d.pods if p.statefulset_risk)
        pods.border_title = f"Pods ({len(d.pods)}{f', {at_risk} at risk' if at_risk else ''})"
        return d

    def action_close(self) -> None:
        self.dismiss(None)
