"""The Node list read by a child process (``sources/list_worker``), over real HTTPS against the
simulated API server: the same records as a list in the dashboard's own process, hostile objects,
a child that cannot start, a stream that breaks, a stop in the middle, a parent that goes away."""

from __future__ import annotations

import os
import time

import pytest

from nodewatch.sources import list_worker, reflector
from nodewatch.sources.reflector import INITIAL_EVENTS_END
from support.simserver import TinyFleet, make_fleet, running_server, wait_until


@pytest.fixture(autouse=True)
def child_for_any_size(monkeypatch, request):
    """These fleets are small (the child's behaviour is the same at any size): a child for each list
    but where a test is about the size threshold itself."""
    if request.node.get_closest_marker("worker_threshold") is None:
        monkeypatch.setattr(reflector, "WORKER_MIN", 0)


def _requests(srv, resource: str) -> list:
    return [r for r in srv.request_log if f"/{resource}" in r.target]


def _niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_child_lists_the_same_records_as_the_dashboards_own_process(tmp_path, start_live, monkeypatch):
    fleet = make_fleet(nodes=400, scenario="incident", start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        child = start_live(srv)
        assert child.reflector("nodes").lists_in_worker == 1
        monkeypatch.setenv(list_worker.ENV_SWITCH, "0")
        here = start_live(srv, cache="cache2")
        assert here.reflector("nodes").lists_in_worker == 0
        assert len(child.state.nodes) == 400
        assert child.state.nodes == here.state.nodes  # record by record, every field
        assert sorted(child.state.leases) == sorted(here.state.leases)


def _listed_here(tmp_path, start_live, nodes: int, also=lambda src: True) -> None:
    """A live source lists a fleet of ``nodes``: every Node, in its own process (and ``also`` holds
    of the source, while the server still runs)."""
    fleet = TinyFleet(nodes=nodes, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names
        r = src.reflector("nodes")
        assert (r.lists_in_worker, r.in_worker) == (0, True)
        assert also(src)


@pytest.mark.worker_threshold
def test_a_node_list_the_lease_list_says_is_small_is_read_here(tmp_path, start_live):
    """The Lease list comes first (a kubelet renews one Lease per Node): 40 Leases foretell a Node
    list not worth a child process."""
    _listed_here(tmp_path, start_live, 40)


@pytest.mark.worker_threshold
def test_a_node_list_of_unknown_size_goes_to_the_child(tmp_path, start_live):
    """Without a Lease list (here it fails: 500s) the Node list's size is unknown: a child, as a
    large fleet needs (below the threshold only in its tests' fleets)."""
    fleet = TinyFleet(nodes=40, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.fail_next(1000, 500, resource="leases")
        src = start_live(srv, synced=None)
        r = src.reflector("nodes")
        wait_until(lambda: r.listed, timeout=30)
        assert sorted(src.state.nodes) == fleet.names
        assert r.lists_in_worker == 1
        assert src.reflector("leases").listed is False


@pytest.mark.worker_threshold
def test_the_expected_size_decides_only_the_first_list(tmp_path):
    """Unit: a first list of an expected size below ``WORKER_MIN`` is read here, above or unknown in
    a child; once listed, the last list's size decides."""
    from nodewatch.sources.kubeconfig import Connection
    from nodewatch.sources.reflector import NODES, Reflector

    fleet = TinyFleet(nodes=1, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        conn = Connection(str(srv.kubeconfig_path), None)
        hint: list[int | None] = [None]
        r = Reflector(conn, NODES, lambda b: None, lambda *a, **k: None, lambda w, m: None,
                      expected=lambda: hint[0])
        assert r._worker_wanted()  # unknown
        hint[0] = reflector.WORKER_MIN - 1
        assert not r._worker_wanted()
        hint[0] = reflector.WORKER_MIN
        assert r._worker_wanted()
        r.known = dict.fromkeys(range(5))  # listed: 5 nodes, whatever the hint
        assert not r._worker_wanted()


class HostileFleet(TinyFleet):
    """Node 0 carries the initial-events-end annotation's name in a label value, and a field of an
    unexpected type (so its block is read line by line, where the end of a list is looked for)."""

    def node(self, name: str) -> dict:
        obj = super().node(name)
        if name == self.names[0]:
            obj["metadata"]["labels"]["trap"] = INITIAL_EVENTS_END
            obj["metadata"]["annotations"] = {INITIAL_EVENTS_END: "true"}
            obj["spec"]["unschedulable"] = "yes"  # not a bool: the typed decoder refuses the block
        return obj


def test_an_object_that_carries_the_end_marker_does_not_end_the_list(tmp_path, start_live):
    fleet = HostileFleet(nodes=900, start=time.time())  # several blocks: node 0 is in the first
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names
        assert src.reflector("nodes").lists_in_worker == 1
        assert [r for r in _requests(srv, "nodes") if "watch=true" not in r.target] == []  # no paged list


def test_a_child_that_cannot_start_leaves_the_list_to_the_dashboards_process(tmp_path, start_live, monkeypatch):
    monkeypatch.setattr(list_worker, "PYTHON", str(tmp_path / "no-such-python"))
    fleet = TinyFleet(nodes=9, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert sorted(src.state.nodes) == fleet.names
        r = src.reflector("nodes")
        assert (r.lists_in_worker, r.in_worker, r.watch_list) == (0, False, True)
        problems = [p.message for p in src.state.problems]
        assert any("cannot start the list worker" in t and "own process" in t for t in problems), problems


def test_a_stream_that_breaks_under_the_child_is_listed_again(tmp_path, start_live):
    fleet = TinyFleet(nodes=3000, start=time.time())  # several chunks of initial events
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.reset_streams_after(500)  # the connection is reset in the middle of the list
        src = start_live(srv, synced=None)
        r = src.reflector("nodes")
        assert src.wait_synced(30)
        assert sorted(src.state.nodes) == sorted(fleet.names)
        # then a paged list, here (a request is logged when it ends: wait for its line)
        reqs = wait_until(lambda: any("watch=true" not in q.target for q in _requests(srv, "nodes"))
                          and _requests(srv, "nodes"))
        assert "sendInitialEvents=true" in reqs[0].target  # the child's, broken
        assert r.lists_in_worker == 0  # the broken one did not count
        assert srv.faults.fired["reset"] >= 1


def test_a_stop_in_the_middle_of_the_list_ends_the_child(tmp_path, start_live):
    fleet = TinyFleet(nodes=5, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        srv.faults.stall(30)  # the child waits for bytes that do not come
        src = start_live(srv, synced=None)
        r = src.reflector("nodes")
        worker = wait_until(lambda: r._worker, timeout=15)
        pid = worker.pid
        assert not _gone(pid)
        # the child runs below the dashboard's priority (once it has started: it lowers its own)
        wait_until(lambda: _niceness(pid) == min(19, os.nice(0) + list_worker.NICE))
        src.stop()
        assert not r.alive
        assert _gone(pid)  # stopped and reaped


def test_the_child_exits_when_its_parent_goes_away(tmp_path):
    """The parent's end of the child's stdin closes when the parent dies: the child exits even while
    it waits for the API server."""
    from nodewatch.sources.kubeconfig import Connection

    fleet = TinyFleet(nodes=3, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        conn = Connection(str(srv.kubeconfig_path), None)
        url, headers, pool = conn.worker_request("/api/v1/nodes", {"watch": "true"})
        w = list_worker.ListWorker(list_worker.Request(url, headers, pool, "nodes", 5.0, 60.0, 1 << 16))
        assert next(w.frames()) == ("ok",)
        srv.faults.stall(30)  # (after the answer's head: stalled before it, "ok" waited the 30 s)
        w._proc.stdin.close()  # what the kernel does when the parent dies
        assert w._proc.wait(timeout=10) == 0
        w.close()


@pytest.mark.parametrize("value", ["0", "off"])
def test_the_switch_turns_it_off(monkeypatch, value):
    monkeypatch.setenv(list_worker.ENV_SWITCH, value)
    assert not list_worker.enabled()
    monkeypatch.setenv(list_worker.ENV_SWITCH, "1")
    assert list_worker.enabled()


def test_with_every_slot_taken_the_list_is_read_here_without_a_word(tmp_path, start_live):
    """A dashboard over many clusters starts many lists at once: children only up to the slots
    (cores but one), the rest read in the dashboard's process, which is no problem to report."""
    taken = 0
    while list_worker._slots.acquire(blocking=False):
        taken += 1
    try:
        assert taken == list_worker.MAX_AT_ONCE
        _listed_here(tmp_path, start_live, 6, lambda src: src.state.problem_count() == 0)
    finally:
        for _ in range(taken):
            list_worker._slots.release()


def test_each_child_reports_its_peak_memory(tmp_path, start_live):
    before = len(list_worker.peaks)
    fleet = TinyFleet(nodes=6, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        src = start_live(srv)
        assert src.reflector("nodes").lists_in_worker == 1
        wait_until(lambda: len(list_worker.peaks) == before + 1)  # read as the child was stopped
        assert 5 << 20 < list_worker.peaks[-1] < 500 << 20  # an interpreter with urllib3 and msgspec


def test_the_pipe_back_holds_several_frames() -> None:
    """The child must not wait at every frame for the dashboard's process to read it."""
    import fcntl

    r, w = os.pipe()
    try:
        with os.fdopen(r, "rb", closefd=False) as pipe:
            list_worker._widen(pipe)
            assert fcntl.fcntl(r, fcntl.F_GETPIPE_SZ) >= min(list_worker.PIPE_BYTES, _pipe_max())
    finally:
        os.close(r)
        os.close(w)


def _pipe_max() -> int:
    with open("/proc/sys/fs/pipe-max-size") as f:
        return int(f.read())


@pytest.mark.parametrize("reads", [
    [b'{"a":1}\n{"b":2}\n{"c"', b':3}\n{"d":4}\n'],  # a line cut by a read
    [b'{"a":1}\n', b'{"b":2}\n'],  # reads that end on a line's end
    [b'{"a"', b':1}', b'\n{"b":2}\n'],  # a line longer than a read
    [b'{"a":1}\n{"b', b'":2}\n'],  # a read whose only line end closes the last one's tail
])
def test_the_childs_reads_are_cut_into_the_same_lines_without_joining_them(reads):
    from nodewatch.sources.list_worker import _blocks

    whole = b"".join(reads)
    tail, lines = b"", []
    for chunk in reads:
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            tail += chunk
            continue
        lines += [bytes(b) for b in _blocks(tail, chunk, cut)]
        tail = chunk[cut:]
    assert tail == b""
    assert b"".join(lines) == whole and all(b.endswith(b"\n") for b in lines)
