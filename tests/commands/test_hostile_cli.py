"""``status`` and the dashboard on hostile or empty input: no good news from an empty answer,
JSON as safe to ``cat`` as the table, and a recording's damaged lines shown in the dashboard too."""

from __future__ import annotations

import json
import unicodedata

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodewatch.cli import main
from nodewatch.core.report import terminal_safe_json
from nodewatch.core.timeutil import format_time
from nodewatch.ui.app import NodewatchApp
from support.factories import T0, event, lease, node
from support.simserver import TinyFleet, running_server

STEERING = ["\x9b31m", "\x9d0;x\x9c", "\x85", "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u2028", "\x7f",
            "\x1b[2J", "\U000e0001", "\u00ad"]


def header(started: float = T0) -> bytes:
    return orjson.dumps({"nodewatch_recording": 1, "started_at": format_time(started), "source": {"name": "x"},
                         "settings": {"server_version": "v1.33.0"}})


def write(tmp_path, lines: list[dict]) -> str:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join([header()] + [orjson.dumps(d) for d in lines]) + b"\n")
    return str(path)


def status(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["status", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def hostile_recording(tmp_path) -> str:
    name = "n" + "".join(STEERING)
    return write(tmp_path, [
        {"t": T0, "resource": "nodes", "type": "ADDED", "object": node(name, zone="z" + "".join(STEERING),
                                                                       reason="".join(STEERING)), "list": True},
        {"t": T0, "resource": "leases", "type": "ADDED", "object": lease(name, T0)},
        {"t": T0 + 1, "resource": "events", "type": "ADDED",
         "object": event("e1", name, "".join(STEERING), "".join(STEERING), T0)},
    ])


# --- empty answers ---------------------------------------------------------------------------------


def test_a_recording_with_a_header_and_no_events_is_an_error(tmp_path, capsys):
    rc, out, err = status(capsys, "--replay", write(tmp_path, []))
    assert rc == 2 and "no usable events" in err and out == ""


@pytest.mark.parametrize("lines", [[], ["not json"]])
def test_a_replay_of_a_recording_without_events_is_an_error_not_an_empty_dashboard(tmp_path, lines):
    """It opened a dashboard at 1970-01-01 with no node (a toast said why); ``status`` and ``report``
    already refused. What skipped the lines is said too."""
    from nodewatch.sources.recording import RecordingError
    from nodewatch.sources.replay import ReplaySource

    path = write(tmp_path, [])
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)
    for background in (False, True):
        with pytest.raises(RecordingError, match="no usable events in the recording, nothing to replay") as e:
            ReplaySource(path, background=background)
        assert ("malformed JSON" in str(e.value)) == bool(lines)


def test_a_moment_without_nodes_is_an_error_that_says_so(tmp_path, capsys):
    path = write(tmp_path, [{"t": T0, "resource": "leases", "type": "ADDED", "object": lease("a", T0)},
                            {"t": T0 + 30, "resource": "leases", "type": "MODIFIED", "object": lease("a", T0 + 30)}])
    rc, _, err = status(capsys, "--replay", path, "--format", "json")
    assert rc == 2 and "no nodes in" in err


@pytest.mark.parametrize("at", ["-60", "+3600", format_time(T0 - 1), format_time(T0 + 3600)])
def test_at_outside_the_recording_is_an_error(tmp_path, capsys, at):
    path = write(tmp_path, [{"t": T0, "resource": "nodes", "type": "ADDED", "object": node("a"), "list": True},
                            {"t": T0 + 30, "resource": "leases", "type": "ADDED", "object": lease("a", T0 + 30)}])
    rc, out, err = status(capsys, "--replay", path, f"--at={at}")
    assert rc == 2 and ("before the recording" in err or "after the recording" in err) and out == ""


@pytest.mark.parametrize("option, value, says", [
    ("--keep", "0", "argument --keep: '0': must be more than zero"),
    ("--keep-bytes", "12Q", "argument --keep-bytes: '12Q': expected a size like 500M or 2G"),
    ("--segment", "soon", "argument --segment: 'soon': expected an age like 90s"),
    ("--keep", "nan", "argument --keep: 'nan': expected an age like 90s"),  # (was taken: a NaN retention)
    ("--keep", "inf", "argument --keep: 'inf': expected an age like 90s"),
    ("--keep-bytes", "inf", "argument --keep-bytes: 'inf': expected a size like 500M"),  # (was a traceback)
    ("--keep-bytes", "nan", "argument --keep-bytes: 'nan': expected a size like 500M"),
])
def test_a_hubs_bad_retention_names_its_option(tmp_path, capsys, option, value, says):
    """``--keep 0`` said only "'0': must be more than zero" (of which option?): now a usage error
    naming it, told before a demo hub builds its fleet."""
    with pytest.raises(SystemExit) as exit_:
        main(["hub", "--demo", "--demo-nodes", "5", "--dir", str(tmp_path / "hub"), option, value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and says in err and "Traceback" not in err


@pytest.mark.parametrize("args, says", [
    (["status", "--demo", "--nodes", "0"], "argument --nodes: 0: a simulated fleet has 1 to 200,000 nodes"),
    (["status", "--demo", "--nodes", "10000000"], "10,000,000: a simulated fleet has 1 to 200,000 nodes"),
    (["status", "--demo", "--scenario", "kubelet-stop+nope"], "argument --scenario: unknown scenario 'nope'"),
    (["demo", "--scenario", "nope"], "argument --scenario: unknown scenario 'nope'; one of: incident"),
    (["demo", "--nodes", "x"], "argument --nodes: 'x' is not a whole number"),
    (["demo", "--speed", "nan"], "argument --speed: nan: a speed is more than 0 and at most 1000"),
    (["demo", "--speed", "-1"], "argument --speed: -1: a speed"),
    (["hub", "--demo", "--demo-scenario", "nope"], "argument --demo-scenario: unknown scenario 'nope'"),
    (["sim-server", "--nodes", "0"], "argument --nodes: 0: a simulated fleet"),
    (["replay", "x.jsonl", "--speed", "inf"], "argument --speed: inf: a speed"),
])
def test_a_simulated_fleet_that_cannot_be_is_a_usage_error(capsys, args, says):
    """Told before anything is built: ``demo --scenario nope`` built its fleet first and ended in a
    traceback, and ``--nodes 10000000`` would have filled the memory."""
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and says in err and "Traceback" not in err


def test_a_live_cluster_that_really_has_no_nodes_says_so(tmp_path, capsys):
    with running_server(tmp_path, fleet=TinyFleet(nodes=0)) as srv:
        rc, out, err = status(capsys, "--kubeconfig", str(srv.kubeconfig_path), "--wait", "20",
                              "--cert-cache-dir", str(tmp_path / "c"))
    assert rc == 0 and "the cluster has no nodes" in err and "no nodes" in out


# --- terminal-safe JSON ----------------------------------------------------------------------------


def test_status_json_escapes_every_steering_character(tmp_path, capsys):
    rc, out, _ = status(capsys, "--replay", hostile_recording(tmp_path), "--format", "json")
    assert rc in (0, 1)
    bad = [c for c in out if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c != "\n"]
    assert not bad, bad
    doc = json.loads(out)
    assert doc["nodes"][0]["name"] == "n" + "".join(STEERING)  # the value itself is unchanged
    assert "\\u009b" in out and "\\u202e" in out and "\\u200b" in out


@given(st.text())
def test_terminal_safe_json_keeps_the_value_and_drops_every_steering_character(s):
    data = terminal_safe_json(orjson.dumps({"k": s}))
    assert orjson.loads(data) == {"k": s}
    assert not [c for c in data.decode() if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


# --- the dashboard shows what the recording's reader skipped ------------------------------------


async def test_skipped_lines_are_shown_in_the_dashboard_with_line_numbers(tmp_path, open_replay):
    good = [{"t": T0, "resource": "nodes", "type": "ADDED", "object": node("a"), "list": True},
            {"t": T0 + 10, "resource": "leases", "type": "ADDED", "object": lease("a", T0 + 10)}]
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join([header(), orjson.dumps(good[0]), b'{"t": 1e308, "resource": "nodes"}',
                                 b"garbage", orjson.dumps(good[1]), b'{"t": 12, "resou']))
    src = open_replay(path)
    app = NodewatchApp(src, refresh_seconds=3600, source_problems=src.problems)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        shown = "\n".join(n.message for n in app._notifications)
    assert "line 3:" in shown and "line 4:" in shown and "line 6:" in shown


def test_replay_hands_the_problems_to_the_dashboard(tmp_path, monkeypatch):
    from nodewatch.ui import app as app_module

    seen: dict = {}
    monkeypatch.setenv("NODEWATCH_FORCE_TTY", "1")
    monkeypatch.setattr(app_module, "load_keymap", lambda *a: ({}, []))
    monkeypatch.setattr(app_module.NodewatchApp, "run", lambda self: seen.setdefault("problems", self.source_problems))
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join([header(), b"garbage", orjson.dumps(
        {"t": T0, "resource": "nodes", "type": "ADDED", "object": node("a"), "list": True})]) + b"\n")
    assert main(["replay", str(path)]) == 0
    assert any(p.startswith("line 2:") for p in seen["problems"])


@pytest.mark.parametrize("command", [
    ["status", "--replay", "{p}"], ["status", "--replay", "{p}", "--at", "+5"], ["report", "{p}"],
    ["replay", "{p}"], ["recording", "export", "{p}", "-o", "{out}"],
])
@pytest.mark.parametrize("what", ["not a recording", "an empty directory", "no such file"])
def test_a_recording_that_cannot_be_read_is_named_once(tmp_path, capsys, command, what):
    """Every command that reads a recording names it in its one line of error, once: some readers'
    errors name the file and some do not, and a command that added it to each said it twice."""
    path = tmp_path / "rec"
    if what == "not a recording":
        path.write_bytes(b"garbage\n")
    elif what == "an empty directory":
        path.mkdir()
    rc = main([a.format(p=path, out=tmp_path / "out.jsonl") for a in command])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count(str(path)) == 1 and err.startswith(f"nodewatch: {path}: "), err
