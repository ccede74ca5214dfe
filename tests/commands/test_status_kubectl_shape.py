"""``status`` in kubectl's shape (``commands/status_output.py``): ``-o``, ``--no-headers``, ``-l``,
``--sort-by`` and ``-w``, on the demo fleet, and ``-w`` against the simulated API server."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from nodewatch.cli import main
from nodewatch.commands.status_output import change_line, changes, nodes_shown, watch
from nodewatch.sources.demo import DemoSource


def _status(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["status", "--demo", "--at", "+120", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_yaml_and_name_agree(capsys):
    rc, out, _ = _status(capsys, "-o", "json")
    doc = json.loads(out)
    names = [n["name"] for n in doc["nodes"]]
    _, out, _ = _status(capsys, "-o", "yaml")
    assert yaml.safe_load(out) == doc
    _, out, _ = _status(capsys, "-o", "name")
    assert out.split() == [f"node/{n}" for n in names]
    assert rc == 1  # the incident has nodes not Ready
    _, out, _ = _status(capsys, "--format", "json")  # the old spelling still works
    assert json.loads(out) == doc


def test_wide_adds_columns_and_no_headers_leaves_only_rows(capsys):
    _, table, _ = _status(capsys)
    _, wide, _ = _status(capsys, "-o", "wide")
    header = next(line for line in wide.splitlines() if line.startswith("NODE"))
    assert "KUBELET" in header and "CONDITIONS" in header and "LEASE SEEN" in header
    assert "KUBELET" not in next(line for line in table.splitlines() if line.startswith("NODE"))
    _, rows, _ = _status(capsys, "--no-headers")
    _, doc, _ = _status(capsys, "-o", "json")
    names = [n["name"] for n in json.loads(doc)["nodes"]]
    assert [line.split()[0] for line in rows.splitlines()] == names


def test_selector_has_the_api_servers_grammar(capsys):
    _, doc, _ = _status(capsys, "-o", "json", "-l", "topology.kubernetes.io/zone=eu-west-1a")
    zones = {n["zone"] for n in json.loads(doc)["nodes"]}
    assert zones == {"eu-west-1/eu-west-1a"}
    _, doc, _ = _status(capsys, "-o", "json", "-l", "topology.kubernetes.io/zone notin (eu-west-1a),!no-such-label")
    assert json.loads(doc)["nodes"] and "eu-west-1/eu-west-1a" not in {n["zone"] for n in json.loads(doc)["nodes"]}
    rc, out, err = _status(capsys, "-l", "a in b")
    assert rc == 2 and not out and "unable to parse requirement" in err and "Traceback" not in err


def test_sort_by_a_json_field_with_missing_values_last(capsys):
    _, doc, _ = _status(capsys, "-o", "json", "--sort-by", "{.eviction_in_seconds}")
    values = [n["eviction_in_seconds"] for n in json.loads(doc)["nodes"]]
    present = [v for v in values if v is not None]
    assert present and present == sorted(present)
    assert values == present + [None] * (len(values) - len(present))
    rc, _, err = _status(capsys, "--sort-by", ".bogus")
    assert rc == 2 and "not a node field" in err


def test_watch_writes_each_state_change_once_on_the_sources_clock():
    demo = DemoSource(nodes=30, scenario="incident", seed=1)
    t0 = demo.clock.now()
    demo.advance_to(t0)
    first = demo.state.evaluate(t0)
    args = argparse.Namespace(output="json", format=None, node=None, selector=None, sort_by=None, no_headers=False)
    clock = [t0]
    lines: list[str] = []

    def evaluate():
        clock[0] += 5
        demo.advance_to(clock[0])
        return demo.state, demo.state.evaluate(clock[0])

    assert watch(evaluate, args, first, demo.state, sleep=lambda _: None, stop=lambda: clock[0] >= t0 + 300,
                 write=lines.append) == 0
    events = [json.loads(line) for line in lines]
    assert events, "the incident changes states within five minutes"
    # each line is a change: the node's state differs from the one before it
    last = {v.name: v.state.word for v in first.nodes}
    for e in events:
        assert e["was"] == last.get(e["name"]) and e["state"] != e["was"]
        last[e["name"]] = e["state"]
    assert last == {v.name: v.state.word for v in demo.state.evaluate(clock[0]).nodes}


def test_changes_and_the_table_line():
    demo = DemoSource(nodes=5, scenario="steady", seed=1)
    demo.advance_to(demo.clock.now() + 30)
    view = demo.state.evaluate(demo.clock.now() + 30)
    before: dict[str, str] = {}
    assert len(list(changes(before, view))) == len(view.nodes)
    assert list(changes(before, view)) == []
    v = view.nodes[0]
    assert f"{v.name}  - -> {v.state.symbol} {v.state.word}" in change_line(v, None, view.at, "table")


CTRL_C_AS_AT_A_TERMINAL = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                           "sys.argv[0] = 'nodewatch'; runpy.run_module('nodewatch', run_name='__main__')")
"""``python -m nodewatch ARGS`` with Ctrl-C as a terminal delivers it. A program started in the
background by a non-interactive shell (``sh -c 'make test &'``, as CI runners and ``nohup`` may do)
inherits SIGINT ignored, and Python then leaves it ignored: rightly, ``nohup nodewatch status -w &``
must not end on a Ctrl-C meant for the shell. The test is about the terminal's case, whatever
the shell that started pytest did (with SIGINT ignored it hung here twice, stuck in ``watch``)."""


def test_status_watch_as_a_process_streams_and_ends_on_interrupt(tmp_path):
    """-w as a user runs it: the first answer, then changes as they come; Ctrl-C ends it with 0."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", CTRL_C_AS_AT_A_TERMINAL, "status", "--demo", "-w",
                             "-o", "name"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = [proc.stdout.readline() for _ in range(3)]
        assert all(line.startswith("node/") for line in first), first
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # Say where it hangs: SIGABRT makes faulthandler write every thread's stack to stderr.
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"status -w did not end on SIGINT within 30 s; its threads:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_watch_refuses_a_recording(capsys, tmp_path):
    rc = main(["status", "--replay", str(tmp_path / "x.jsonl"), "-w"])
    assert rc == 2 and "nodewatch replay" in capsys.readouterr().err


def test_nodes_shown_keeps_node(capsys):
    demo = DemoSource(nodes=5, scenario="steady", seed=1)
    demo.advance_to(demo.clock.now() + 30)
    view = demo.state.evaluate(demo.clock.now() + 30)
    args = argparse.Namespace(node=view.nodes[1].name, selector=None, sort_by=None)
    assert [v.name for v in nodes_shown(demo.state, view, args)] == [view.nodes[1].name]


@pytest.mark.parametrize("flag", [["-o", "wide"], ["-w"], ["-l", "a=b"]])
def test_several_clusters_say_what_they_do_not_do(capsys, flag, tmp_path):
    rc = main(["status", "--context", "a", "--context", "b", *flag])
    assert rc == 2 and "several clusters" in capsys.readouterr().err
