"""The incident report's two renderings: Markdown (pastes into an incident doc) and HTML (the fleet
timeline as an inline SVG picture; reads well printed). They only render the blocks that
``incident_report.build_report`` made, and each makes cluster strings inert in one place:
``md_inert`` (a code span after ``text.safe``) and ``_html_line`` (escaped)."""

from __future__ import annotations

import html

from .format import clock_time
from .history import STATE_ORDER, HistoryRecorder, MarkKind
from .incident_report import STATE_COLOURS, Block, Line, Untrusted
from .rules import NodeState
from .text import safe

# --- Markdown ---------------------------------------------------------------------------------


def md_inert(s: str, *, in_table: bool = False, max_len: int = 300) -> str:
    """A cluster string as a Markdown code span: no link, no HTML, no emphasis can come out of it,
    and ``text.safe`` has removed control characters and line breaks first."""
    text = safe(s, max_len)
    if not text:
        return "-"
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_line(line: Line, in_table: bool = False) -> str:
    return "".join(md_inert(p.text, in_table=in_table) if isinstance(p, Untrusted) else p for p in line)


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + _md_line(b.line))
        elif b.kind == "p":
            out.append(_md_line(b.line))
        elif b.kind == "ul":
            out.append("\n".join("- " + _md_line(i) for i in b.items))
        elif b.kind == "table":
            lines = ["| " + " | ".join(b.header) + " |", "|" + "|".join("---" for _ in b.header) + "|"]
            for r in b.rows:
                lines.append("| " + " | ".join(_md_line(c, in_table=True) for c in r) + " |")
            out.append("\n".join(lines))
        elif b.kind == "timeline":
            continue  # the table after it says it in words; the HTML draws it
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- HTML -------------------------------------------------------------------------------------

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; margin: 2em auto;
       max-width: 60em; padding: 0 1em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05em; margin: 1.2em 0 .4em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: .92em; }
th, td { border: 1px solid #d0d7de; padding: .2em .55em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
code { font: .9em ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #f6f8fa;
       padding: 0 .25em; border-radius: 3px; overflow-wrap: anywhere; }
figure { margin: .5em 0 1em; }
figcaption { font-size: .85em; color: #57606a; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
@media print {
  body { margin: 0; max-width: none; font-size: 10.5pt; }
  h2 { break-after: avoid; } h3 { break-after: avoid; }
  table, figure, tr { break-inside: avoid; }
  th { background: #eee !important; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  svg { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  @page { margin: 1.5cm; }
}
"""


def _html_line(line: Line) -> str:
    return "".join(f"<code>{html.escape(safe(p.text, 300))}</code>" if isinstance(p, Untrusted) else html.escape(p)
                   for p in line)


def to_html(blocks: list[Block], h: HistoryRecorder, start: float, end: float) -> str:
    title = next((b for b in blocks if b.kind == "h1"), None)
    head_title = "".join(p.text if isinstance(p, Untrusted) else p for p in title.line) if title else "Incident report"
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{html.escape(safe(head_title, 200))}</title>", f"<style>{CSS}</style>", "</head>", "<body>"]
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append(f"<{b.kind}>{_html_line(b.line)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_html_line(b.line)}</p>")
        elif b.kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_html_line(i)}</li>" for i in b.items) + "</ul>")
        elif b.kind == "table":
            rows = ["<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in b.header) + "</tr>"]
            for r in b.rows:
                rows.append("<tr>" + "".join(f"<td>{_html_line(c)}</td>" for c in r) + "</tr>")
            out.append("<table>" + "\n".join(rows) + "</table>")
        elif b.kind == "timeline":
            out.append("<figure>" + timeline_svg(h, start, end) + "<figcaption>Nodes not Ready over the window, "
                       "stacked worst state first; marks: Z zone state change, T NoExecute taint, E pod evicted."
                       "</figcaption></figure>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def timeline_svg(h: HistoryRecorder, start: float, end: float, width: int = 960, height: int = 220) -> str:
    """The fleet timeline as an inline SVG: stacked step areas of the not-Ready states (scaled to
    the peak), marks above, a time axis below, and a legend."""
    left, right, top, bottom = 44, 190, 24, 34
    pw, ph = width - left - right, height - top - bottom
    samples = h.samples_between(start, end)
    span = max(end - start, 1e-9)
    peak = max((s.not_ready for s in samples), default=0)
    scale = ph / max(peak, 1)

    def x(t: float) -> float:
        return left + (min(max(t, start), end) - start) / span * pw

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             f'role="img" aria-label="fleet timeline">',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#f6f8fa" stroke="#d0d7de"/>']
    states = [s for s in STATE_ORDER if s is not NodeState.READY]
    if samples:
        # runs of equal counts: one step each (a quiet hour is a few points, not 3,600)
        runs: list[tuple[float, float, tuple[int, ...]]] = []
        for i, s in enumerate(samples):
            x1 = x(samples[i + 1].at) if i + 1 < len(samples) else x(end)
            if runs and runs[-1][2] == s.counts:
                runs[-1] = (runs[-1][0], x1, s.counts)
            else:
                runs.append((x(s.at), x1, s.counts))
        for k, st in enumerate(states):
            pts_top: list[str] = []
            pts_bot: list[str] = []
            for x0, x1, counts in runs:
                below = sum(counts[:k])
                y0 = top + ph - below * scale
                y1 = y0 - counts[k] * scale
                pts_top += [f"{x0:.1f},{y1:.1f}", f"{x1:.1f},{y1:.1f}"]
                pts_bot += [f"{x0:.1f},{y0:.1f}", f"{x1:.1f},{y0:.1f}"]
            if any(counts[k] for _, _, counts in runs):
                poly = " ".join(pts_top + list(reversed(pts_bot)))
                parts.append(f'<polygon points="{poly}" fill="{STATE_COLOURS[st]}"><title>{st.word}</title></polygon>')
    for m in h.all_marks():
        if start <= m.at <= end:
            xm = x(m.at)
            colour = "#0969da" if m.kind is MarkKind.ZONE else "#1f2328"
            parts.append(f'<line x1="{xm:.1f}" y1="{top}" x2="{xm:.1f}" y2="{top + ph}" stroke="{colour}" '
                         f'stroke-width="0.8" stroke-dasharray="3,2"/>')
            parts.append(f'<text x="{xm:.1f}" y="{top - 6}" text-anchor="middle">{m.kind.letter}<title>'
                         f'{html.escape(safe(m.kind.meaning + ": " + m.subject + " " + m.text, 200))}</title></text>')
    parts.append(f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{peak}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + ph}" text-anchor="end">0</text>')
    ticks = 6
    for i in range(ticks + 1):
        t = start + span * i / ticks
        anchor = "start" if i == 0 else "end" if i == ticks else "middle"
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="{anchor}">{clock_time(t)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">nodes not Ready '
                 f'(peak {peak}), {clock_time(start, date=True)} to {clock_time(end)}</text>')
    ly = top
    for st in states:
        parts.append(f'<rect x="{left + pw + 14}" y="{ly}" width="12" height="12" fill="{STATE_COLOURS[st]}"/>')
        parts.append(f'<text x="{left + pw + 32}" y="{ly + 10}">{st.word}</text>')
        ly += 18
    for kind in MarkKind:
        parts.append(f'<text x="{left + pw + 14}" y="{ly + 10}">{kind.letter}  {kind.meaning}</text>')
        ly += 16
    parts.append("</svg>")
    return "\n".join(parts)
