"""The drill-down of one node: everything the API says about it, and what to do next.

Opened with Enter on a row. It asks the source for the node's pods and events
(``source.focus_node``), repaints every tick (countdowns move) and closes with Escape. All cluster
text is rendered through ``safe`` into ``Text`` cells of Rich tables: shown, never interpreted.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..core.causes import checks_for
from ..core.fleet import FleetState
from ..core.format import ago, cert_text, clock_time, eviction_text, grace_text
from ..core.text import duration, safe
from ..core.views import NodeDetails
from .theme import DEFAULT_PALETTE, Palette

FENCING_ADVICE = (
    "do not force-delete without fencing: power off the node or detach the volume first; "
    "or taint node.kubernetes.io/out-of-service after fencing"
)
MAX_LABELS = 40
MAX_PODS = 200
MAX_EVENTS = 50


def _grid(*headers: str) -> Table:
    """A borderless table; the last column (messages) wraps, the others are cut with an ellipsis."""
    t = Table(box=None, pad_edge=False, show_header=bool(headers), header_style="bold", expand=True,
              padding=(0, 1))
    for i, h in enumerate(headers):
        last = i == len(headers) - 1
        t.add_column(h, overflow="fold" if last else "ellipsis", no_wrap=not last, ratio=1 if last else None)
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
    return Text(f"{clock_time(t, date=True)} ({ago(t, now)})")


def summary_section(d: NodeDetails, p: Palette) -> RenderableType:
    v = d.view
    t = Text()
    t.append(safe(d.name, 120), "bold")
    if v is None:
        t.append("  not in the fleet (deleted, or not seen yet)", p.muted)
        return t
    t.append("  ")
    t.append(f"{v.state.symbol} {v.state.word}", p.state(v.state))
    t.append("  " + grace_text(v.state.word, v.ready, v.grace_remaining(d.now), v.state_since, d.now))
    ev = eviction_text(v.eviction_in(d.now))
    if ev:
        t.append("  " + ev, p.warn)
    if v.cordoned:
        t.append("  cordoned", p.warn)
    if any(pod.statefulset_risk for pod in d.pods):
        t.append("\n⚠ StatefulSet pods at risk: ", p.bad)
        t.append(FENCING_ADVICE, p.bad)
    return t


def node_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None:
        return Text("no Node object", p.muted)
    labels = Text()
    for i, (k, val) in enumerate(sorted(r.labels.items())[:MAX_LABELS]):
        if i:
            labels.append("\n")
        labels.append(safe(k, 80), p.muted)
        labels.append("=")
        labels.append(safe(val, 80))
    if len(r.labels) > MAX_LABELS:
        labels.append(f"\n… {len(r.labels) - MAX_LABELS} more", p.muted)
    res = sorted(set(r.capacity) | set(r.allocatable))
    resources = Text(", ".join(f"{safe(k, 40)} {safe(r.allocatable.get(k, '?'), 20)}/{safe(r.capacity.get(k, '?'), 20)}"
                               for k in res[:12]))
    return _kv([
        ("zone", safe(r.zone, 60) or "(no zone)"),
        ("kubelet", safe(r.kubelet_version, 40)),
        ("runtime", safe(r.runtime_version, 60)),
        ("kernel", safe(r.kernel_version, 60)),
        ("os", safe(r.os_image, 60)),
        ("addresses", ", ".join(f"{safe(a, 20)} {safe(b, 60)}" for a, b in r.addresses[:8])),
        ("alloc/capacity", resources),
        ("created", _when(r.created, d.now)),
        ("cordoned", "yes" if r.unschedulable else "no"),
        ("labels", labels),
    ])


def conditions_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None or not r.conditions:
        return Text("no conditions", p.muted)
    t = _grid("TYPE", "STATUS", "REASON", "HEARTBEAT", "TRANSITION", "MESSAGE")
    for c in r.conditions.values():
        healthy = "True" if c.type == "Ready" else "False"
        style = p.good if c.status == healthy else p.warn if c.status == "Unknown" and c.type != "Ready" else p.bad
        t.add_row(Text(safe(c.type, 30)), Text(safe(c.status, 10), style),
                  Text(safe(c.reason, 40)), Text(ago(c.last_heartbeat, d.now)),
                  Text(ago(c.last_transition, d.now)), Text(safe(c.message, 300)))
    return t


def taints_section(d: NodeDetails, p: Palette) -> RenderableType:
    r = d.record
    if r is None or not r.taints:
        return Text("no taints", p.muted)
    t = _grid("KEY", "VALUE", "EFFECT", "ADDED")
    for tn in r.taints:
        t.add_row(Text(safe(tn.key, 80)), Text(safe(tn.value, 60)),
                  Text(safe(tn.effect, 20), p.warn if tn.effect == "NoExecute" else p.muted),
                  _when(tn.time_added, d.now) if tn.time_added is not None else Text("-"))
    return t


def lease_section(d: NodeDetails, p: Palette) -> RenderableType:
    ls, v = d.lease, d.view
    if ls is None:
        return Text("no Lease in kube-node-lease for this node", p.bad)
    age = v.lease_age(d.now) if v else None
    rows: list[tuple[str, Text | str]] = [
        ("holder", safe(ls.holder, 80)),
        ("renewTime", _when(ls.renew_time, d.now)),
        ("seen at", _when(ls.observed_at, d.now)),
        ("age", Text(duration(age) if age is not None else "unknown (dashboard blind or no renewal seen)",
                     p.bad if age is not None and v is not None and age > v.grace else Style())),
        ("duration", f"{ls.duration:g}s (renews every {ls.duration / 4:g}s)"),
        ("observed skew", f"{ls.skew:+.1f}s (receive time - renewTime)" if ls.skew is not None else "?"),
        ("renewals seen", str(ls.renewals)),
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
    for when, what in d.timeline[-30:]:
        future = when > d.now
        t.add_row(Text(clock_time(when)), Text(ago(when, d.now), p.warn if future else p.muted),
                  Text(safe(what, 200), p.accent if future else Style()))
    return t


def pods_section(d: NodeDetails, p: Palette) -> RenderableType:
    if not d.pods:
        return Text("no pods seen on this node", p.muted)
    t = _grid("NAMESPACE/NAME", "OWNER", "PHASE", "EVICTION")
    for pod in d.pods:
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
    if any(pod.statefulset_risk for pod in d.pods):
        return Group(t, Text(f"⚠ {FENCING_ADVICE}", p.bad))
    return t


def events_section(d: NodeDetails, p: Palette) -> RenderableType:
    if not d.events:
        return Text("no events seen for this node", p.muted)
    t = _grid("WHEN", "TYPE", "REASON", "FROM", "MESSAGE")
    for e in d.events:
        count = f" ×{e.count}" if e.count > 1 else ""
        t.add_row(Text(ago(e.time, d.now)), Text(safe(e.type, 12), p.warn if e.type == "Warning" else p.muted),
                  Text(safe(e.reason, 40) + count), Text(safe(e.source, 60), p.muted), Text(safe(e.message, 300)))
    return t


def cause_section(d: NodeDetails, p: Palette) -> RenderableType:
    v = d.view
    if v is None or not v.causes:
        return Text("nothing wrong that the API shows", p.good)
    out = Text()
    for c in v.causes:
        out.append("• ", p.warn)
        out.append(safe(c.text, 300))
        out.append("\n")
    out.append("checks to run on the node:\n", "bold")
    for cmd in checks_for(list(v.causes)):
        out.append(f"  $ {cmd}\n", p.accent)
    out.rstrip()
    return out


SECTIONS = (
    ("pods", "Pods", pods_section),
    ("conditions", "Conditions", conditions_section),
    ("cause", "Likely cause and checks", cause_section),
    ("timeline", "Timeline", timeline_section),
    ("lease", "Lease", lease_section),
    ("cert", "Kubelet client certificate", cert_section),
    ("taints", "Taints", taints_section),
    ("events", "Events (newest first)", events_section),
    ("node", "Node", node_section),
)
WIDE_SECTIONS = {"pods", "conditions", "taints", "events", "node"}
"""Full-width sections; the others pair up two by two (keep their count even)."""


class DrillDown(Screen):
    """One node in full. The app refreshes it each tick with ``show``."""

    BINDINGS = [
        Binding("escape", "close", "Back", id="drilldown.close"),
        Binding("q", "close", "Back", show=False, id="drilldown.close_q"),
    ]

    DEFAULT_CSS = """
    DrillDown #dd-summary { height: auto; padding: 0 1; background: $panel; }
    DrillDown Grid { grid-size: 2; grid-rows: auto; grid-columns: 1fr 1fr; height: auto; grid-gutter: 0 1; }
    DrillDown .section { height: auto; border: round $foreground 30%; padding: 0 1; }
    DrillDown .section.-wide { column-span: 2; }
    DrillDown #dd-pods.-risk { border: heavy $error; }
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self.palette: Palette = DEFAULT_PALETTE

    def compose(self) -> ComposeResult:
        yield Static(Text(safe(self.node, 120)), id="dd-summary")
        with VerticalScroll(id="dd-scroll"):
            with Grid():
                for key, title, _ in SECTIONS:
                    wide = key in WIDE_SECTIONS
                    box = Static(Text(""), id=f"dd-{key}", classes="section -wide" if wide else "section")
                    box.border_title = title
                    yield box
        yield Footer()

    def show(self, state: FleetState, now: float, palette: Palette) -> NodeDetails:
        """Redraw from the state at ``now``; returns the snapshot (tests read it)."""
        self.palette = palette
        d = state.node_details(self.node, now, max_pods=MAX_PODS, max_events=MAX_EVENTS)
        self.query_one("#dd-summary", Static).update(summary_section(d, palette))
        for key, _, fn in SECTIONS:
            self.query_one(f"#dd-{key}", Static).update(fn(d, palette))
        self.query_one("#dd-pods").set_class(any(p.statefulset_risk for p in d.pods), "-risk")
        return d

    def action_close(self) -> None:
        self.dismiss(None)
