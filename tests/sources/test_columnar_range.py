"""A one-shot answer reads runs of renewal blocks a block at a time (``columnar_range``): the same
states, renewal counts, problems and instants as the row-by-row read and as JSON Lines."""

from __future__ import annotations

import random

import pytest

from nodewatch.core.clock import ManualClock
from nodewatch.core.timeutil import format_time
from nodewatch.hub.codec import view_to_wire
from nodewatch.sources import columnar, columnar_range
from nodewatch.sources.recording import Recorder
from nodewatch.sources.replay import state_at

from .test_columnar import _api_shaped, _record_dirs


def _micro(t: float) -> str:
    return str(format_time(t, micro=True))


class _Fleet:
    """Nodes, and their Leases renewed every 10 s, received in order (as a watch delivers them), and
    what breaks a run: a renewTime that steps back, a line that steps back in time, a Lease silent
    for longer than ``PENDING_SECONDS``, one deleted and added again, a node that stops for good."""

    def __init__(self, tmp_path, nodes: int = 12, seconds: float = 400.0, far: bool = False) -> None:
        """``far``: one renewal of a Lease is dated 2.5 hours ahead (an offset delta beyond what a run
        reads, ``columnar_range.DELTA``)."""
        from nodewatch.sim.fleet import SimFleet

        sim = SimFleet(nodes=nodes, scenario="steady", seed=2)
        self.t0 = sim.now
        clock = ManualClock(self.t0)
        self.paths = (str(tmp_path / "f.jsonl.gz"), str(tmp_path / "f.nwcol"))
        recs = [Recorder(self.paths[0], {"name": "t"}, sim.settings, clock=clock),
                columnar.ColumnarRecorder(self.paths[1], {"name": "t"}, sim.settings, clock=clock)]
        rng = random.Random(9)
        rv = [100]

        def write(etype, obj, t, listing=False, resource="leases"):
            rv[0] += 1
            shaped = _api_shaped(resource, obj, rv[0], rng) if obj is not None else None
            for r in recs:
                r.write(resource, etype, shaped, t, listing)

        for node in sim.objects("nodes"):
            write("ADDED", node, self.t0, True, "nodes")
        write("SYNCED", None, self.t0, False, "nodes")
        leases = {lease["metadata"]["name"]: lease for lease in sim.objects("leases")}
        names = sorted(leases)
        phase = {n: rng.uniform(0, 10) for n in names}
        for n in names:
            write("ADDED", leases[n], self.t0, listing=True)
        write("SYNCED", None, self.t0)
        events = []
        for n in names:
            t = self.t0 + phase[n]
            while t < self.t0 + seconds:
                events.append((t, n))
                t += 10 + rng.uniform(0, 0.4)
        events.sort()
        stepped = False
        for at, n in events:
            if n == names[0] and 100 < at - self.t0 < 160:
                continue  # silent for a minute, then back
            if n == names[1] and at - self.t0 > 200:
                continue  # stopped for good
            if n == names[2] and 150 < at - self.t0 < 151 + 10:
                for r in recs:
                    r.write("leases", "DELETED", _api_shaped("leases", leases[n], rv[0], rng), at)
                continue
            renew = at - 0.003
            if n == names[3] and not stepped and at - self.t0 > 250:
                renew -= 30  # a renewTime that steps back
                stepped = True
            if far and n == names[6] and 45 < at - self.t0 < 56:
                renew = at + 9000  # 2.5 hours ahead: an offset delta of 9e9 us
            obj = dict(leases[n], spec=dict(leases[n]["spec"], renewTime=_micro(renew)))
            rx = at + 0.002
            if n == names[4] and 300 < at - self.t0 < 310:
                rx -= 2.5  # a line that steps back in time
            if n == names[5] and 330 < at - self.t0 < 340:
                rx -= 15  # and one before its Lease's last
            clock.set(rx)
            write("MODIFIED", obj, rx)
        for r in recs:
            r.close()


def _views(state, at) -> dict:
    return {v.name: view_to_wire(v) for v in state.evaluate(at).nodes}


def _answers(path: str, at: str) -> tuple:
    """What an answer shows, the renewal counts, the instant (but the count of lines read: fewer are
    read where more renewals are left out) and the problems."""
    state, seen, problems = state_at(path, at, compact=True, pods=False)
    return (_views(state, seen.at), {k: v.renewals for k, v in state.leases.items()},
            (seen.at, seen.start, seen.last, seen.read_to_end, seen.events > 0), problems)


def _counted(monkeypatch) -> list[int]:
    blocks = [0]
    real = columnar_range.FastRange.block

    def block(self, parts):
        ok = real(self, parts)
        blocks[0] += ok
        return ok

    monkeypatch.setattr(columnar_range.FastRange, "block", block)
    return blocks


def _row_by_row(monkeypatch) -> None:
    monkeypatch.setattr(columnar_range.FastRange, "fits", staticmethod(lambda s, c: (False, None)))


@pytest.mark.parametrize("buffered", [None, -1])
def test_runs_of_renewal_blocks_give_the_states_of_the_row_by_row_read_and_of_json_lines(tmp_path, monkeypatch,
                                                                                        buffered):
    """``buffered`` -1: every run ends after its first block (as one holding back more whole lines than
    ``MAX_BUFFERED`` does), and the next is tried only later (``Supersession.end_run``)."""
    if buffered is not None:
        monkeypatch.setattr(columnar, "MAX_BUFFERED", buffered)
    fleet = _Fleet(tmp_path)
    jsonl, col = fleet.paths
    instants = [format_time(fleet.t0 + s, micro=True) for s in (5, 30.5, 99, 130, 158, 170, 205, 252, 255.5, 303, 308.5, 333, 345, 399)]
    blocks = _counted(monkeypatch)
    fast = {at: _answers(col, at) for at in instants}
    assert blocks[0] > (20 if buffered else 200)  # (most) blocks were read a block at a time
    want = {at: _answers(jsonl, at) for at in instants}
    _row_by_row(monkeypatch)
    slow = {at: _answers(col, at) for at in instants}
    for at in instants:
        # (the problems too, but against JSON Lines: left out, the lines that a stepping-back line is
        # late after are not there to make it late, with or without runs)
        assert fast[at] == slow[at] and fast[at][:3] == want[at][:3], at
    assert any(v for v in want[instants[-1]][1].values()) and all(want[at][0] for at in instants)
    states = {v["state"] if isinstance(v, dict) and "state" in v else None for v in want[instants[-1]][0].values()}
    assert len(want[instants[-1]][0]) == 12, states


def test_a_run_leaves_out_the_renewals_the_row_by_row_read_leaves_out(tmp_path, monkeypatch):
    from nodewatch.sources.recording_input import open_binary
    from nodewatch.sources.replay.instant import _one_instant

    fleet = _Fleet(tmp_path)
    at = format_time(fleet.t0 + 280, micro=True)
    read = {}
    for how in ("fast", "slow"):
        if how == "slow":
            _row_by_row(monkeypatch)
        path, supersede = _one_instant(fleet.paths[1], at)
        read[how] = (sum(1 for _ in open_binary(path, supersede)), supersede.dropped, supersede.unsure)
    assert read["fast"][0] + read["fast"][1] == read["slow"][0] + read["slow"][1]  # every line accounted for
    assert read["fast"][1] >= read["slow"][1] > 200 and read["fast"][2] == read["slow"][2], read


@pytest.mark.parametrize("offset", [45, 100, 141, 181.5, 222, 290])
def test_a_hub_directory_read_in_runs_answers_as_json_lines(tmp_path_factory, monkeypatch, offset):
    tmp = tmp_path_factory.getbasetemp() / "dirs"
    if not (tmp / "columnar").exists():
        tmp.mkdir(exist_ok=True)
        _record_dirs(tmp, nodes=60)
    from nodewatch.sources.segments import list_segments

    start = list_segments(tmp / "jsonl")[0].start
    at = format_time(start + offset, micro=True)
    got = _answers(str(tmp / "columnar"), at)
    assert got[0] and got == _answers(str(tmp / "jsonl"), at)


def test_unpack_gives_the_list_readers_values():
    """The numpy unpacking gives ``columnar._unpack``'s values, the extremes of int64 included, and
    refuses a column of the wrong length."""
    rng = random.Random(4)
    values = [0, 1, -1, 2**63 - 1, -2**63, 2**32, -2**32 - 1] + [rng.randint(-2**63, 2**63 - 1) for _ in range(500)]
    values += [rng.randint(-300, 300) for _ in range(500)]
    data = columnar._pack(values)
    assert columnar_range.unpack(data, len(values)).tolist() == columnar._unpack(data, len(values)) == values
    assert columnar_range.unpack(data, len(values) + 1) is None
    assert columnar_range.unpack(b"", 0).tolist() == []


def test_values_beyond_64_bit_arithmetic_are_read_row_by_row(tmp_path, monkeypatch):
    """A renewTime 2.5 hours ahead makes an offset delta beyond what a run reads (``DELTA``: the bound
    that keeps its 64-bit arithmetic exact): its block is read row by row, and every answer is still
    the row-by-row read's and JSON Lines'."""
    fleet = _Fleet(tmp_path, far=True)
    jsonl, col = fleet.paths
    refused = [0]
    real = columnar_range.FastRange.block

    def block(self, parts):
        n, kinds, cols, n_lease, *_ = parts
        off = columnar_range.unpack(cols[4], n_lease)
        ok = real(self, parts)
        refused[0] += off is not None and off.size > 0 and int(abs(off).max()) > columnar_range.DELTA and not ok
        return ok

    monkeypatch.setattr(columnar_range.FastRange, "block", block)
    instants = [format_time(fleet.t0 + s, micro=True) for s in (45, 60, 150, 255.5, 399)]
    fast = {at: _answers(col, at) for at in instants}
    assert refused[0] >= 1
    want = {at: _answers(jsonl, at) for at in instants}
    _row_by_row(monkeypatch)
    for at in instants:
        assert fast[at] == _answers(col, at) and fast[at][:3] == want[at][:3], at


def test_a_json_lines_answer_does_not_import_numpy():
    """numpy is imported by a run of columnar blocks only: every reader imports ``columnar`` (to tell
    the formats apart), and numpy's import (0.1-0.2 s) is not for a JSON Lines answer to pay."""
    import subprocess
    import sys
    from pathlib import Path

    data = Path(__file__).parent.parent / "data" / "incident-30.jsonl.gz"
    code = ("import sys\n"
            "from nodewatch.sources.replay import state_at\n"
            f"state, seen, problems = state_at({str(data)!r}, '+60', compact=True, pods=False)\n"
            "assert seen.events > 0\n"
            "print('numpy' in sys.modules, 'nodewatch.sources.columnar' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["False", "True"]
