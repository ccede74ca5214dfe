"""The fleet table without a screen: columns, row selection, row drawing, untrusted text."""

from __future__ import annotations

import re
import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate
from textual.app import App
from textual.strip import Strip

from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import TAINT_UNREACHABLE, NodeState
from nodewatch.core.search import LabelSearch
from nodewatch.core.settings import Settings
from nodewatch.ui import partial_update
from nodewatch.ui.cells import RowContext, changed_cells, render_header, render_row
from nodewatch.ui.fleet_table import FleetTable
from nodewatch.ui.rows import (
    COLUMNS,
    NOT_READY,
    RowQuery,
    layout_columns,
    select_rows,
)
from support.factories import T0, event, lease, node, taint
from support.ui_support import big_state, feed, incident_state

BAD = {"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"}


def strip_is_inert(strip) -> None:
    for seg in strip:
        if seg.control:
            raise AssertionError(f"control segment {seg!r}")
        for ch in seg.text:
            assert unicodedata.category(ch) not in BAD, (seg.text, hex(ord(ch)))


@pytest.mark.parametrize("width", [40, 80, 120, 160, 200, 300])
def test_columns_fit_every_width(width):
    cols = layout_columns(width)
    used = sum(w for _, w in cols) + len(cols) - 1
    keys = [c.key for c, _ in cols]
    assert {"state", "name", "grace"} <= set(keys)
    assert used == width
    assert keys == [c.key for c in COLUMNS if c.key in keys]  # display order kept
    for c, w in cols:
        assert w >= (12 if c.key == "cause" else c.width), (c.key, w)  # none narrower than its (compact) form


@pytest.mark.parametrize("name_width", [12, 16, 20])
def test_a_normal_terminal_shows_conditions_taints_and_the_certificate(name_width):
    """120 columns (a common SSH window): every column that says why a node is down is there, in
    compact forms where needed; at 80 the countdowns and the conditions still are; the likely
    cause is what gives way first (cut, then dropped) and the name is never cut."""
    at_120 = {c.key: (c, w) for c, w in layout_columns(120, name_width=name_width)}
    assert {"state", "name", "renew", "grace", "evict", "cond", "taints", "cert", "cause"} <= set(at_120)
    assert at_120["name"][1] >= name_width
    assert at_120["cause"][1] < 32  # cut before anything else gave way
    at_80 = {c.key: (c, w) for c, w in layout_columns(80, name_width=name_width)}
    assert {"state", "name", "renew", "grace", "evict", "cond"} <= set(at_80)
    assert "cause" not in at_80 and at_80["name"][1] >= name_width
    assert at_80["renew"][0].compact  # the age without its bar
    at_200 = layout_columns(200, name_width=name_width)
    assert not any(c.compact for c, _ in at_200)  # a wide screen has the full forms


def test_compact_cells_read_like_the_issue_says():
    state = incident_state()
    view = state.evaluate(T0)
    ctx = RowContext(T0)
    texts = {v.name: render_row(v, ctx, layout_columns(80, name_width=16), 80).text for v in view.nodes}
    b0 = texts["worker-b-0"]
    assert "» Evicting" in b0 and "down 2m00s" in b0 and "in 3m00s" in b0 and "?····" in b0
    assert "unreach:NE 2m +1" in b0
    assert "2m50s" in b0  # the lease age, without its bar
    assert "R····" in texts["worker-a-0"] and "in 47s" in texts["worker-a-0"]
    assert "over 20s" in texts["worker-c-overdue"]
    assert "RM···" in texts["worker-c-mem"] and "mem:NS 10m" in texts["worker-c-mem"]
    at_120 = {v.name: render_row(v, ctx, layout_columns(120, name_width=18), 120).text for v in view.nodes}
    assert "200d" in at_120["worker-a-0"] and "5d" in at_120["worker-c-cert"]
    assert "unreach:NE 2m +1" in at_120["worker-b-0"]
    header = render_header(layout_columns(80, name_width=18), ctx, 80, "cond", False).text
    assert "RMDPN" in header and "RENEW" in header and "EVICT" in header


def test_state_filters_are_slices_of_the_fleet_order():
    state = incident_state()
    view = state.evaluate(T0)
    for f in [NOT_READY, *NodeState]:
        got = select_rows(view, RowQuery(states=f))
        if f == NOT_READY:
            want = [v for v in view.nodes if v.state is not NodeState.READY]
        else:
            want = [v for v in view.nodes if v.state is f]
        assert [v.name for v in got] == [v.name for v in want], f


def test_zone_filter_search_and_sort():
    state = incident_state()
    view = state.evaluate(T0)
    rows = select_rows(view, RowQuery(zone="eu-1/eu-1b"))
    assert {v.name for v in rows} == {"worker-b-0", "worker-b-1", "worker-b-2"}
    rows = select_rows(view, RowQuery(search="CORDON"), LabelSearch(state))
    assert [v.name for v in rows] == ["worker-c-cordoned"]
    # labels too: key=value
    rows = select_rows(view, RowQuery(search="zone=eu-1/eu-1a"), LabelSearch(state))
    assert rows == []  # the label value is "eu-1a", the region is a separate label
    rows = select_rows(view, RowQuery(search="zone=eu-1a"), LabelSearch(state))
    assert {v.name for v in rows} == {"worker-a-0", "worker-a-1", "worker-a-2", "worker-a-late"}
    by_name = select_rows(view, RowQuery(sort="name"))
    assert [v.name for v in by_name] == sorted(v.name for v in view.nodes)
    rev = select_rows(view, RowQuery(sort="name", reverse=True))
    assert [v.name for v in rev] == sorted((v.name for v in view.nodes), reverse=True)
    by_evict = select_rows(view, RowQuery(sort="evict"))
    assert by_evict[0].name == "worker-c-runtime"  # the earliest deadline (already passed)
    by_cert = select_rows(view, RowQuery(sort="cert"))
    assert by_cert[0].name == "worker-c-cert"
    for col in COLUMNS:  # every column sorts without error
        assert len(select_rows(view, RowQuery(sort=col.key))) == len(view.nodes)


def test_label_search_notices_changed_labels():
    state = incident_state()
    m = LabelSearch(state)
    view = state.evaluate(T0)
    assert select_rows(view, RowQuery(search="team=storage"), m) == []
    state.apply("nodes", "MODIFIED", node("worker-a-0", zone="eu-1a", region="eu-1", labels={"team": "storage"}), T0)
    view = state.evaluate(T0)
    assert [v.name for v in select_rows(view, RowQuery(search="team=storage"), m)] == ["worker-a-0"]


def test_rows_read_like_the_issue_says():
    state = incident_state()
    view = state.evaluate(T0)
    cols = layout_columns(300)
    ctx = RowContext(T0)
    texts = {v.name: render_row(v, ctx, cols, 300).text for v in view.nodes}
    assert "» Evicting" in texts["worker-b-0"]
    assert "Unknown for 2m00s" in texts["worker-b-0"]
    assert "evict in 3m00s" in texts["worker-b-0"]
    assert "unreachable:NoExec 2m +1" in texts["worker-b-0"]
    assert "NotReady in 47s" in texts["worker-a-0"]
    assert "200d" in texts["worker-a-0"] and "5d" in texts["worker-c-cert"]
    assert "grace over 20s" in texts["worker-c-overdue"]
    assert "R M · · ·" in texts["worker-c-mem"]
    assert "container runtime is down" in texts["worker-c-runtime"]
    header = render_header(cols, ctx, 300, "state", False).text
    assert "STATE ▼" in header and "LIKELY CAUSE" in header


def test_blind_rows_say_since_when():
    state = incident_state()
    state.update_health("leases", connected=False, down_since=T0 - 30, last_error="connection reset")
    view = state.evaluate(T0)
    assert view.leases_blind
    cols = layout_columns(300)
    ctx = RowContext(T0, blind_since=T0 - 30)
    text = render_row(view.node("worker-a-0"), ctx, cols, 300).text
    assert "? since 07:59:30" in text and "lease age unknown" in text
    assert "Overdue" not in text and "Late" not in text


def test_a_lease_whose_age_is_not_known_yet_is_not_called_missing():
    """Seen on the v1.20.2 testbed: for up to 10 s after a start every row said "no lease" (" none"
    compact) while its listed Lease waited for a renewal to date it; only a node the rules find
    without a Lease says so."""
    s = FleetState(Settings())
    for res in ("nodes", "leases"):
        s.update_health(res, connected=True, synced=False, down_since=None, last_error="")
    s.apply("nodes", "ADDED", node("listed", heartbeat=T0 - 25), T0 + 0.5, True)
    s.apply("leases", "ADDED", lease("listed", T0 - 25), T0 + 0.5, True)
    s.apply("nodes", "ADDED", node("leaseless", "False", transition=T0 - 60, heartbeat=T0), T0 + 0.5, True)
    for res in ("nodes", "leases"):
        s.apply(res, "SYNCED", None, T0 + 1.0, True)
        s.update_health(res, synced=True, last_activity=T0 + 1.0)
    view = s.evaluate(T0 + 1.2)
    assert view.node("listed").lease_age(T0 + 1.2) is None and view.awaiting_renewals == 1
    ctx = RowContext(T0 + 1.2)
    for width in (300, 90):
        cols = layout_columns(width)
        texts = {v.name: render_row(v, ctx, cols, width).text for v in view.nodes}
        assert "lease" not in texts["listed"].replace("lease age unknown", "") and "none" not in texts["listed"]
        assert ("no lease" if width == 300 else " none") in texts["leaseless"]


@pytest.mark.parametrize("width", [30, 80, 133, 250])
def test_every_row_is_exactly_the_width(width):
    state = incident_state()
    view = state.evaluate(T0)
    cols = layout_columns(width)
    for v in view.nodes:
        for sel in (False, True):
            strip = render_row(v, RowContext(T0), cols, width, sel)
            assert strip.cell_length == width


NASTY = st.one_of(
    st.text(min_size=1, max_size=300),
    st.sampled_from([
        "[red]x[/red]", "[bold][link=http://x]y", "\x1b[2J\x1b[H", "\x1b]52;c;ZXZpbA==\x07", "\u202edlrow",
        "a\u200b\u200c\u200db", "\x00\x07\x08", "ｗｉｄｅ漢字" * 20, "e" + "\u0301" * 40, "\ud800", "\t\n\r",
    ]),
)


@given(name=NASTY, label=NASTY, taint_value=NASTY, reason=NASTY, message=NASTY, zone=NASTY,
       version=NASTY, width=st.integers(min_value=20, max_value=260))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzz_untrusted_text_through_the_rendering_path(name, label, taint_value, reason, message, zone,
                                                        version, width):
    """Cluster strings of any kind go through FleetState into rows: inert, and the layout holds."""
    state = FleetState(Settings())
    n = node(name, "False", zone=zone, reason=reason, message=message, labels={label[:60] or "k": label},
             taints=[{**taint(TAINT_UNREACHABLE, "NoExecute", T0 - 10), "value": taint_value},
                     {"key": label or "k", "effect": "NoSchedule", "value": taint_value}])
    n["status"]["nodeInfo"]["kubeletVersion"] = version
    feed(state, [("nodes", n), ("leases", lease(name, T0 - 100)),
                 ("events", event("e1", name, reason, message, T0 - 5))])
    view = state.evaluate(T0)
    assert len(view.nodes) == 1
    cols = layout_columns(width)
    for blind in (None, T0 - 5):
        ctx = RowContext(T0, blind_since=blind)
        for sel in (False, True):
            strip = render_row(view.nodes[0], ctx, cols, width, sel)
            assert strip.cell_length == width
            strip_is_inert(strip)
            assert sum(cell_len(s.text) for s in strip) == width


def test_frame_cost_does_not_grow_with_the_fleet():
    """Drawing the visible lines costs the same at 2,000 and 20,000 nodes (O(visible), not O(n))."""
    timings = {}
    for n in (2_000, 20_000):
        state = big_state(n)
        view = state.evaluate(T0)
        rows = select_rows(view, RowQuery())
        cols = layout_columns(200)
        ctx = RowContext(T0)
        started = time.perf_counter()
        for frame in range(5):
            c = RowContext(T0 + frame, ctx.palette)
            top = (frame * 997) % (len(rows) - 60)
            for i in range(top, top + 60):
                render_row(rows[i], c, cols, 200)
        timings[n] = (time.perf_counter() - started) / 5
    assert timings[20_000] < 0.05  # one frame of 60 lines, generously
    assert timings[20_000] < 4 * timings[2_000] + 0.005


# --- incremental repaint: what a terminal receives ------------------------------------------------

_TOKEN = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\r|\n|[^\x1b\r\n]")


class VirtualTerminal:
    """Just enough of a terminal to replay Textual's output: cursor moves, text, newlines (styles
    are ignored; a wide character takes two cells)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.grid = [[" "] * width for _ in range(height)]
        self.bytes = 0

    def feed(self, data: str) -> None:
        self.bytes += len(data.encode())
        x = y = 0
        for m in _TOKEN.finditer(data):
            tok = m.group(0)
            if m.group(2):
                if m.group(2) == "H":
                    row, _, col = m.group(1).partition(";")
                    y, x = int(row or 1) - 1, int(col or 1) - 1
            elif tok.startswith("\x1b"):
                continue
            elif tok == "\r":
                x = 0
            elif tok == "\n":
                y += 1
            else:
                w = cell_len(tok)
                if 0 <= y < self.height and 0 <= x < self.width:
                    self.grid[y][x] = tok
                    if w == 2 and x + 1 < self.width:
                        self.grid[y][x + 1] = ""
                x += w

    def line(self, y: int, width: int) -> str:
        return "".join(self.grid[y][:width])


def test_partial_update_writes_only_the_dirty_span_and_reaches_the_same_screen():
    console = Console(color_system="truecolor", force_terminal=True, width=40, legacy_windows=False)
    red, blue = Style(color="red", bgcolor="black"), Style(color="blue", bgcolor="black", bold=True)
    new = [
        Strip([Segment("name-0001 ", red), Segment("Unknown for 1m44s", blue), Segment(" zone", red)]),
        Strip([Segment("漢字漢字  ", red), Segment("evict in 2m05s", blue), Segment("      end", red)]),
    ]
    old = ["name-0001 Unknown for 1m43s zone", "漢字漢字  evict in 2m04s      end"]
    spans = [(0, 25, 27), (1, 3, 24)]  # line 1's span starts inside a wide character's segment
    chops = [{0: s} for s in new]
    ends = [[s.cell_length] for s in new]
    written = {}
    for patched in (False, True):
        partial_update.install() if patched else partial_update.uninstall()
        try:
            term = VirtualTerminal(40, 2)
            for y, text in enumerate(old):
                term.feed(f"\x1b[{y + 1};1H{text}")
            term.bytes = 0
            term.feed(ChopsUpdate(chops, spans, ends).render_segments(console))
            assert [term.line(y, s.cell_length) for y, s in enumerate(new)] == [s.text for s in new]
            written[patched] = term.bytes
        finally:
            partial_update.install()
    assert written[True] < written[False]
    # line 0 is cut inside the one-cell segment: "44s" -> only from the changed cell on
    out = ChopsUpdate(chops, [(0, 25, 27)], ends).render_segments(console)
    assert "Unknown" not in out and "name" not in out and "4s" in out
    # line 1's span starts in the segment of wide characters: written from its start, never split there
    out = ChopsUpdate(chops, [(1, 3, 8)], ends).render_segments(console)
    assert out.startswith("\x1b[2;1H") and "漢字漢字" in out


def test_changed_cells_narrow_a_countdown_to_the_characters_that_moved():
    s = Style(color="red")
    assert changed_cells(("Unknown for 1m43s", s), ("Unknown for 1m44s", s), 18) == (15, 16)
    assert changed_cells(("evict in 59s", s), ("evict in 1m00s", s), 18) == (9, 14)
    assert changed_cells(("x", s), ("x", Style(color="blue")), 18) == (0, 18)  # a style change: the column
    assert changed_cells(("漢字", s), ("漢子", s), 18) == (0, 18)  # wide characters: the column
    bar_a = ("███▌", s, "─────", s, "   4s", s)
    bar_b = ("███▋", s, "─────", s, "   5s", s)
    assert changed_cells(bar_a, bar_b, 16) == (3, 13)


class _Host(App):
    def __init__(self, table: FleetTable) -> None:
        super().__init__()
        self.table = table
        self.updates: list[CompositorUpdate] = []

    def compose(self):
        yield self.table

    def _display(self, screen, renderable) -> None:
        if isinstance(renderable, CompositorUpdate):
            self.updates.append(renderable)
        super()._display(screen, renderable)


async def test_ticks_repaint_only_changed_cells_and_the_terminal_matches_a_full_render():
    """Drive the table through ticks, renewals, cursor moves, a page down and a sort change; replay
    every update Textual produced into a virtual terminal: it shows what a full render shows,
    and a plain tick costs a small fraction of the first screen."""
    width, height = 200, 30
    state = big_state(400)
    table = FleetTable(id="t")
    app = _Host(table)
    term = VirtualTerminal(width, height)
    console = Console(color_system="truecolor", force_terminal=True, width=width, legacy_windows=False)

    async with app.run_test(size=(width, height)) as pilot:
        now = T0

        def show(at: float, sort: str = "state") -> None:
            view = state.evaluate(at)
            table.set_rows(select_rows(view, RowQuery(sort=sort)), RowContext(at), sort=sort)

        async def settle() -> int:
            await pilot.pause()
            before = term.bytes
            for u in app.updates:
                term.feed(u.render_segments(console))
            app.updates.clear()
            return term.bytes - before

        def check() -> None:
            w = table.scrollable_content_region.width
            cols = layout_columns(w, table.column_keys, table._name_width)
            expect = [render_header(cols, table.ctx, w, table.sort, table.reverse).text]
            top = int(table.scroll_y)
            for i in range(top, top + height - 1):
                expect.append(render_row(table.rows[i], table.ctx, cols, w, i == table.cursor).text)
            assert [term.line(y, w) for y in range(height)] == expect

        show(now)
        first = await settle()
        check()
        tick_bytes = []
        for _k in range(1, 6):
            now += 1
            show(now)
            tick_bytes.append(await settle())
            check()
        # (the first tick repaints every line: the scrollbar appeared and the table lost a column)
        assert max(tick_bytes[1:]) < first / 8, (tick_bytes, first)
        # no plain tick repaints a whole row: every dirty region is narrower than the table
        regions: list = []
        original = table.refresh
        table.refresh = lambda *r, **kw: (regions.extend(r) or original(*r, **kw))  # type: ignore[method-assign]
        now += 1
        show(now)
        assert regions and all(r.width < width // 4 for r in regions if r.y > 0)
        table.refresh = original  # type: ignore[method-assign]
        await settle()
        check()
        # renewals move nodes; the cursor moves; a page down scrolls; a new sort reorders
        for i in range(0, 400, 37):
            state.apply("leases", "MODIFIED", lease(f"node-{i:05d}", now), now)
        now += 1
        show(now)
        await settle()
        check()
        table.action_cursor_down()
        table.action_cursor_down()
        await settle()
        check()
        table.action_page_down()
        now += 1
        show(now)
        await settle()
        check()
        now += 1
        show(now, sort="name")
        await settle()
        check()


def test_whole_names_cost_optional_columns_before_letters_of_the_name():

    for width in (100, 130, 170, 250):
        cols = dict((c.key, w) for c, w in layout_columns(width, name_width=19))
        assert cols["name"] >= 19, (width, cols)
        assert sum(cols.values()) + len(cols) - 1 <= width


def test_long_zones_are_cut_in_the_middle_so_their_letters_still_tell_them_apart():
    """``ap-southeast-1a``, ``-1b`` and ``-1c`` cut at the end all read ``ap-southeast`` in the
    12-cell zone column: the table keeps each one's end (``ap-so…ast-1a``), and a short zone whole."""
    state = FleetState(Settings(server_version="v1.33.2"))
    zones = ["ap-southeast-1a", "ap-southeast-1b", "ap-southeast-1c", "eu-west-1a", "z" * 55 + "-east-1d"]  # (<= 63)
    feed(state, [obj for i, z in enumerate(zones)
                 for obj in (("nodes", node(f"n{i}", zone=z, region="ap-southeast-1")), ("leases", lease(f"n{i}", T0 - 1)))])
    view = state.evaluate(T0)
    cols = layout_columns(200, name_width=12)
    x = 0
    for c, w in cols:
        if c.key == "zone":
            break
        x += w + 1
    cells = {v.name: render_row(v, RowContext(T0), cols, 200).text[x:x + w].rstrip() for v in view.nodes}
    assert [cells[f"n{i}"] for i in range(5)] == ["ap-so…ast-1a", "ap-so…ast-1b", "ap-so…ast-1c", "eu-west-1a",
                                                  "zzzzz…ast-1d"]
