"""``nodewatch status``: the JSON contract, exit codes, and one-line errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import pytest

from nodewatch.cli import main
from support.simserver import TinyFleet, running_server

NODE_KEYS = {"name", "zone", "state", "ready", "lease_age_seconds", "grace_remaining_seconds",
             "eviction_in_seconds", "taints", "cert_not_after", "cordoned", "cause"}
STATES = {"Evicted", "Evicting", "Unknown", "NotReady", "Overdue", "Late", "Ready"}


def run_status(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["status", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def demo_json():
    r = subprocess.run([sys.executable, "-m", "nodewatch", "status", "--demo", "--at", "+90", "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, json.loads(r.stdout)


def test_demo_json_contract(demo_json):
    rc, doc = demo_json
    assert rc == 1  # the incident scenario has nodes that are not Ready
    assert set(doc) == {"at", "settings", "nodes", "zones"}
    assert doc["at"].endswith("Z")
    assert doc["settings"] == {"grace_seconds": 50.0, "toleration_seconds": 300.0}  # demo server is v1.33
    for n in doc["nodes"]:
        assert set(n) == NODE_KEYS
        assert n["state"] in STATES
        for t in n["taints"]:
            assert set(t) == {"key", "effect", "time_added"}
    for z in doc["zones"]:
        assert set(z) == {"name", "state", "nodes", "not_ready"}
        assert z["state"] in {"Normal", "PartialDisruption", "FullDisruption"}
    evicting = [n for n in doc["nodes"] if n["state"] == "Evicting"]
    assert evicting and all(n["eviction_in_seconds"] > 0 for n in evicting)
    ready = [n for n in doc["nodes"] if n["state"] == "Ready"]
    assert ready and all(0 <= n["lease_age_seconds"] <= 20 for n in ready)


def test_node_detail_has_pods_and_events(capsys, demo_json):
    _, doc = demo_json
    name = next(n["name"] for n in doc["nodes"] if n["state"] in ("Evicting", "Evicted"))
    rc, out, _ = run_status(capsys, "--demo", "--at", "+90", "--format", "json", "--node", name)
    detail = json.loads(out)
    assert rc == 1
    assert [n["name"] for n in detail["nodes"]] == [name]
    assert detail["pods"], "an evicting node has pods in the demo"
    assert set(detail["pods"][0]) == {"namespace", "name", "owner_kind", "owner_name", "phase", "terminating",
                                      "eviction_in_seconds", "statefulset_risk"}
    assert set(detail["events"][0]) == {"time", "reason", "message", "source", "object"}


def test_node_detail_says_when_the_noexecute_taint_comes(capsys, demo_json):
    """An Unknown node not yet tainted: the zone rules' answer, in the table and in the JSON."""
    _, doc = demo_json
    zones = {z["name"]: z["state"] for z in doc["zones"]}
    waiting = {n["zone"]: n["name"] for n in doc["nodes"] if n["state"] == "Unknown"
               and not any(t["effect"] == "NoExecute" for t in n["taints"])}
    partial = next(name for zone, name in waiting.items() if zones[zone] == "PartialDisruption")
    rc, out, _ = run_status(capsys, "--demo", "--at", "+90", "--node", partial)
    assert "next: no NoExecute taint while zone" in out and "is not tainted at all" in out
    evicting = next(n["name"] for n in doc["nodes"] if n["state"] == "Evicting")
    rc, out, _ = run_status(capsys, "--demo", "--at", "+90", "--format", "json", "--node", evicting)
    assert json.loads(out)["noexecute_outlook"] is None  # tainted: the eviction countdown says the rest


def test_table_output(capsys):
    rc, out, _ = run_status(capsys, "--demo", "--at", "+90")
    assert rc == 1
    assert "grace 50s (server v1.33.2)" in out and "NODE" in out and "Evicting" in out


def test_settings_flags_are_used_and_shown(capsys):
    rc, out, _ = run_status(capsys, "--demo", "--format", "json", "--grace", "45", "--toleration", "120")
    assert json.loads(out)["settings"] == {"grace_seconds": 45.0, "toleration_seconds": 120.0}


@pytest.mark.parametrize("args, message", [
    (["--demo", "--at", "tomorrow"], "RFC 3339"),
    (["--replay", "/nonexistent/recording.jsonl"], "recording.jsonl"),
    (["--demo", "--node", "no-such-node"], "no-such-node"),
    (["--at", "+5"], "--at needs"),
    (["--demo", "--replay", "x"], "choose one"),
])
def test_errors_are_one_line_and_exit_2(capsys, args, message):
    rc, out, err = run_status(capsys, *args)
    assert rc == 2
    assert message in err and err.count("\n") == 1 and err.startswith("nodewatch: ")


def test_no_kubeconfig_names_the_demo(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    rc, _, err = run_status(capsys, "--wait", "2")
    assert rc == 2 and "nodewatch demo" in err


def test_help_lists_the_commands():
    r = subprocess.run([sys.executable, "-m", "nodewatch", "--help"], capture_output=True, text=True, timeout=60)
    for cmd in ("watch", "demo", "replay", "status", "record", "sim-server"):
        assert cmd in r.stdout


def test_no_help_shows_the_docstrings_markup():
    """Every command's and action's --help is for a terminal: ``recording export --help`` printed its
    module docstring, ``double backticks`` and all."""
    from nodewatch.cli import build_parser

    def helps(parser: argparse.ArgumentParser, path: str):
        yield path, parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from helps(sub, f"{path} {name}")

    shown = dict(helps(build_parser(), "nodewatch"))
    assert "nodewatch recording export" in shown and len(shown) > 15
    assert [path for path, text in shown.items() if "``" in text] == []


def live_status(capsys, srv, tmp_path, *args: str) -> tuple[int, str, str]:
    return run_status(capsys, "--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir", str(tmp_path / "c"),
                      *args)


def test_status_of_a_node_waits_for_its_pods_and_events(capsys, tmp_path):
    """Against a real API server the answer came before the node's pod and event lists in 13 of 24
    runs. Here their first lists fail (500), so they are listed a backoff later than nodes and leases."""
    fleet = TinyFleet(nodes=3, start=time.time(), pods_per_node=2)
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.fail_next(1, 500, resource="pods")
        srv.faults.fail_next(1, 500, resource="events")
        rc, out, err = live_status(capsys, srv, tmp_path, "--node", "node-001", "--format", "json")
        assert srv.faults.fired["http_500"] == 2
    assert rc == 0, err
    doc = json.loads(out)
    assert [p["name"] for p in doc["pods"]] == ["web-node-001-0", "web-node-001-1"]
    assert doc["events"]
    assert err == ""


def test_status_says_which_streams_it_could_not_list(capsys, tmp_path):
    fleet = TinyFleet(nodes=3, start=time.time(), pods_per_node=2)
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.fail_next(1000, 500, resource="pods")
        rc, out, err = live_status(capsys, srv, tmp_path, "--node", "node-001", "--format", "json", "--wait", "3")
        assert json.loads(out)["pods"] == []
        assert "warning: not listed within 3s, so missing from this answer: pods on node-001" in err
        rc, out, err = live_status(capsys, srv, tmp_path, "--node", "node-001", "--wait", "3")
        assert "problem: status: not listed within 3s, so missing from this answer: pods on node-001" in out
    assert rc == 0


def test_status_says_which_list_is_missing_and_why(capsys, tmp_path):
    """Without the Node list there is no answer: the error names that list and what its stream last
    said, and that the Leases are in (it used to say "the API server did not list nodes and leases",
    whoever was slow)."""
    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.fail_next(1000, 500, resource="nodes")
        rc, out, err = live_status(capsys, srv, tmp_path, "--wait", "2")
    assert rc == 2 and out == ""
    assert "not listed within 2s: nodes: " in err and "500" in err
    assert "(the leases are in)" in err



def test_status_counts_a_tainted_node_with_the_toleration_its_pods_carry(capsys, tmp_path):
    """An API server whose admission plugin gives pods 60 s (``--default-*-toleration-seconds``): a
    kubelet stopped 200 s ago, its node tainted unreachable ~125 s ago. ``status`` (no --toleration)
    waits for that node's pod list, though it comes a backoff late, and counts with what the pods
    carry (``core/pod_tolerations``): Evicted, where the 300 s default said Evicting."""
    from nodewatch.core.settings import Settings
    from nodewatch.sim.fleet import SimFleet

    now = time.time()
    fleet = SimFleet(nodes=6, scenario="kubelet-stop", seed=2, start=now - 200,
                     settings=Settings(toleration_seconds=60.0), pods_per_node=3)
    fleet.step_to(now)
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.fail_next(1, 500, resource="pods")
        rc, out, err = live_status(capsys, srv, tmp_path, "--format", "json")
        assert srv.faults.fired["http_500"] == 1
        states = {n["name"]: n["state"] for n in json.loads(out)["nodes"]}
        assert sorted(states.values()).count("Evicted") == 1, states
        assert json.loads(out)["settings"]["toleration_seconds"] == 60.0
        rc, out, err = live_status(capsys, srv, tmp_path)
        assert "toleration 60s (pods)" in out
        rc, out, err = live_status(capsys, srv, tmp_path, "--format", "json", "--toleration", "300")
        assert "Evicted" not in {n["state"] for n in json.loads(out)["nodes"]}  # the flag is the user's word


def test_a_hubs_own_directory_stands_for_its_recordings(capsys, tmp_path):
    """``status --replay DIR`` of the directory given to ``hub --dir`` (and to ``attach``) read its
    ``recordings/``; it said "holds no hub recording segments". A directory of segments, a file and
    a path that does not exist are taken as they are."""
    from pathlib import Path

    from nodewatch.commands.common import recording_path

    recording = Path(__file__).parents[1] / "data" / "incident-30.jsonl.gz"
    hub = tmp_path / "hub"
    (hub / "recordings").mkdir(parents=True)
    (hub / "recordings" / "nodewatch-20261129T100000Z-000001.jsonl.gz").write_bytes(recording.read_bytes())
    assert recording_path(str(hub)) == str(hub / "recordings")
    for same in (str(hub / "recordings"), str(recording), str(tmp_path / "nothing"), "-"):
        assert recording_path(same) == same
    rc, out, err = run_status(capsys, "--replay", str(hub), "--at", "+120", "--format", "json")
    assert err == "" and rc == 1
    rc2, direct, _ = run_status(capsys, "--replay", str(recording), "--at", "+120", "--format", "json")
    assert json.loads(out) == json.loads(direct)


def test_a_hubs_recordings_are_named_by_the_hub_in_a_report(capsys, tmp_path):
    """``report HUBDIR`` called the recording "recordings" (the folder ``recording_path`` reads)."""
    from pathlib import Path

    from nodewatch.sources.segments import recording_label

    recording = Path(__file__).parents[1] / "data" / "incident-30.jsonl.gz"
    hub = tmp_path / "ops-hub"
    (hub / "recordings").mkdir(parents=True)
    (hub / "recordings" / "nodewatch-20261129T100000Z-000001.jsonl.gz").write_bytes(recording.read_bytes())
    assert main(["report", str(hub), "-o", str(tmp_path / "r.md")]) == 0
    text = (tmp_path / "r.md").read_text()
    assert "ops-hub/recordings" in text
    assert recording_label(str(recording)) == "incident-30.jsonl.gz" and recording_label("-") == "stdin"


@pytest.mark.parametrize("argv, usage", [
    (["record", "out.jsonl", "-o", "x"], "usage: nodewatch record "),
    (["status", "--bogus"], "usage: nodewatch status "),
    (["recording", "export", "src", "-o", "x", "--bogus"], "usage: nodewatch recording export "),
    (["--bogus"], "usage: nodewatch watch "),
])
def test_an_argument_a_command_does_not_take_is_said_with_that_commands_usage(capsys, argv, usage):
    """It was said with the top level's usage (``nodewatch [-h] [--version] COMMAND``), which
    lists no option of the command."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(usage) and "error: unrecognized arguments: " in err
