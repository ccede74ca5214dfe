"""``nodewatch report``: the committed expected reports, hostile cluster strings, windows, errors."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from nodewatch.cli import main
from nodewatch.core.history import HistoryRecorder
from nodewatch.core.report_render import md_inert

DATA = Path(__file__).parents[1] / "data"
RECORDING = DATA / "incident-30.jsonl.gz"


def _report(tmp_path: Path, name: str, *extra: str, recording: Path = RECORDING) -> str:
    out = tmp_path / name
    assert main(["report", str(recording), "-o", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("suffix", ["md", "html"])
def test_the_committed_recording_gives_the_committed_report(tmp_path, suffix):
    """Regenerate after an intended change: ``nodewatch report tests/data/incident-30.jsonl.gz -o
    tests/data/expected-report.md`` (and ``.html``), and read the diff before committing."""
    got = _report(tmp_path, f"r.{suffix}")
    assert got == (DATA / f"expected-report.{suffix}").read_text(encoding="utf-8")


def test_the_report_is_the_same_twice_and_markdown_goes_to_stdout(tmp_path, capsys):
    assert main(["report", str(RECORDING)]) == 0
    first = capsys.readouterr().out
    assert main(["report", str(RECORDING)]) == 0
    assert capsys.readouterr().out == first
    assert first == (DATA / "expected-report.md").read_text(encoding="utf-8")


def test_the_html_has_the_timeline_picture_and_print_css(tmp_path):
    page = _report(tmp_path, "r.html")
    assert page.count("<svg") == 1 and "<polygon" in page
    assert "@media print" in page
    assert re.search(r"<text[^>]*>E<title>pod evicted: ", page)


def test_a_window_narrows_the_report(tmp_path):
    whole = _report(tmp_path, "a.md")
    late = _report(tmp_path, "b.md", "--from", "+120", "--to", "+200")
    assert "2026-11-29 10:02:00Z to 2026-11-29 10:03:20Z" in late
    assert "elasticsearch-3` | `compute-euw1a-06`" in late  # evicted at about +156 s
    assert "prometheus-3` | `general-use1a-21` | `StatefulSet/prometheus`" in whole
    assert "| `monitoring/prometheus-3` | `general-use1a-21` | `StatefulSet" not in late  # evicted at +111 s


HOSTILE_NODE = "evil|[click](http://x.example)<img src=x onerror=alert(1)>`\x1b]52;c;AAAA\x07\u202e"


def _hostile_recording(path: Path) -> None:
    """The committed recording with one node renamed to a hostile string everywhere."""
    with gzip.open(RECORDING, "rt") as f:
        text = f.read()
    text = text.replace("general-euw1b-01", json.dumps(HOSTILE_NODE)[1:-1])
    path.write_text(text, encoding="utf-8")


def test_cluster_strings_are_inert_in_markdown_and_html(tmp_path):
    rec = tmp_path / "hostile.jsonl"
    _hostile_recording(rec)
    md = _report(tmp_path, "h.md", recording=rec)
    page = _report(tmp_path, "h.html", recording=rec)
    for text in (md, page):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "<img" not in page and "&lt;img src=x" in page
    # Markdown: the name is inside code spans only, so no link and no HTML can come out of it
    hits = [line for line in md.splitlines() if "click" in line]
    assert hits
    for line in hits:
        assert "](http" not in _outside_code(line) and "<img" not in _outside_code(line)


def _outside_code(line: str) -> str:
    return re.sub(r"(`+)(?:(?!\1).)*?\1", "", line)


def test_md_inert_fences_backticks_and_escapes_table_pipes():
    assert md_inert("a`b") == "``a`b``"
    assert md_inert("``x") == "``` ``x ```"
    assert md_inert("a|b", in_table=True) == "`a\\|b`"
    assert md_inert("") == "-"
    assert md_inert("line\nbreak\x1b[2J") == "`line break\\x1b[2J`"


def test_an_empty_history_still_reports(tmp_path):
    from nodewatch.core.incident_report import RecordingInfo, build_report
    from nodewatch.core.report_render import to_html, to_markdown
    from nodewatch.core.settings import Settings

    info = RecordingInfo("x.jsonl", None, 0, None, Settings(), (), 0.0, 60.0)
    h = HistoryRecorder()
    md = to_markdown(build_report(info, h))
    assert "No node was down in the window." in md
    assert "<svg" in to_html(build_report(info, h), h, 0.0, 60.0)


@pytest.mark.parametrize("args, message", [
    (["report", "/nonexistent/rec.jsonl"], "no such file"),
    (["report", "{bad}"], "not a nodewatch recording"),
    (["report", str(RECORDING), "--from", "yesterday"], "neither RFC 3339"),
    (["report", str(RECORDING), "--from", "+100", "--to", "+10"], "--to is before --from"),
    (["report", str(RECORDING), "-o", "out.pdf"], "must end in .md or .html"),
    (["report", str(RECORDING), "-o", "/nonexistent-dir/r.md"], "cannot write"),
])
def test_errors_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    if args[1] == "{bad}":
        bad = tmp_path / "bad.jsonl"
        bad.write_text("this is not json\n")
        args = ["report", str(bad)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nodewatch: ")
    assert message in err


def _skipped_recording(path: Path, version: str) -> None:
    """Three nodes: web-1 renews; web-2's clock steps back 95 s at +30 s (its renewals count again at
    +120 s); db-1's kubelet stops after +20 s and its Lease is annotated at +32 s."""
    from nodewatch.core.settings import Settings
    from nodewatch.sources.recording import Recorder
    from support.factories import T0, lease, node

    rec = Recorder(str(path), {"kind": "test"}, Settings(server_version=version))
    for n in ("web-1", "web-2", "db-1"):
        rec.write("nodes", "ADDED", node(n), T0, listing=True)
        rec.write("leases", "ADDED", lease(n, T0 - 3, written=T0 - 2), T0, listing=True)
    for r in ("nodes", "leases"):
        rec.write(r, "SYNCED", None, T0)
    for k in range(1, 13):
        t = T0 + 10 * k
        rec.write("leases", "MODIFIED", lease("web-1", t, written=t), t)
        rec.write("leases", "MODIFIED", lease("web-2", t - 95 if k > 2 else t, written=t), t)
        if k <= 2:
            rec.write("leases", "MODIFIED", lease("db-1", t, written=t), t)
        if k == 3:
            annotated = lease("db-1", T0 + 20, written=T0 + 32)
            annotated["metadata"]["annotations"] = {"example.com/note": "looked at it"}
            rec.write("leases", "MODIFIED", annotated, T0 + 32)
    rec.close()


@pytest.mark.parametrize("version, skipped", [("v1.37.2", True), ("v1.31.0", False)])
def test_nodes_the_controller_skips_are_down_in_the_report_though_late(tmp_path, version, skipped):
    """From 1.37 the controller skips a node whose Lease was written since the last renewal it
    counted: it stays Late, never Unknown. The report said "No node stopped renewing its lease" and
    "No cause shown by the API" of a dead kubelet whose Lease was annotated."""
    rec = tmp_path / "skipped.jsonl"
    _skipped_recording(rec, version)
    text = _report(tmp_path, "r.md", recording=rec)
    assert "First node to stop renewing its lease: `db-1`, last renewal seen 2027-01-15 08:00:20Z." in text
    assert "1 node was still down at the end of the window." in text
    if skipped:
        assert "Last node to recover: `web-2`, Ready again at 2027-01-15 08:02:00Z." in text
        assert "- Lease written by another writer: the controller skips the node (1.37+) (1 node): `db-1`" in text
        assert "- Kubelet's clock stepped back (its renewals not counted) (1 node): `web-2`" in text
        assert "No cause shown by the API" not in text
    else:  # up to 1.36 the controller marks both Unknown at the grace: Overdue here (no Node update recorded)
        assert "Overdue" in text and "controller skips" not in text
