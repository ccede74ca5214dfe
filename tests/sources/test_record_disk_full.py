"""A full disk under the plain recorder (``watch --record``, ``record``): the recording stops, says
so (the dashboard's problems, ``/readyz``'s sample, one line of ``record``), the cluster is watched
and judged exactly as before, and what was written stays readable.

Before, the recorder's failed write raised ``OSError`` (Errno 28) out of the sink the watch streams
feed the state through: each stream took it for its connection breaking and relisted, again and
again (the hub's flight recorder had this fixed; the plain recorder did not). Real HTTPS to the
simulated API server, a real tmpfs filled to its last byte."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time

import pytest

from nodewatch.cli import main
from nodewatch.commands.common import open_recorder, say_recording_stopped
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.metrics.sample import take_sample
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.recording_stop import DISK_FULL
from support.simserver import TinyFleet, running_server, wait_until
from tests.hub.test_hub_disk_full import fill, small_disk
from tests.sources.test_live_faults import renew_all


@pytest.mark.parametrize("name", ["rec.jsonl", "rec.nwcol"])
def test_watch_record_on_a_full_disk_stops_only_the_recording(tmp_path, start_live, name):
    fleet = TinyFleet(nodes=20, start=time.time())
    with small_disk(tmp_path, "256k") as disk, running_server(tmp_path, fleet=fleet) as srv:
        path = str(disk / name)
        rec = open_recorder(path, {"kind": "test"}, Settings())
        src = start_live(srv, recorder=rec)
        rec.on_stop = lambda message: say_recording_stopped(src, message)  # as ``watch`` and ``demo`` wire it
        try:
            wait_until(src.watching)
            renew_all(fleet, src)
            rec.flush()
            relists = {res: src.reflector(res).relists for res in ("nodes", "leases")}
            written = [(e.t, e.resource, e.etype) for e in read_recording(path)[1]]
            filler = fill(disk)
            inner = getattr(rec, "recorder", rec)  # (the old code had no StoppingRecorder)
            for _ in range(200):  # until the file's last page is full too (columnar: ~2 bytes a renewal)
                renew_all(fleet, src)
                with contextlib.suppress(OSError):  # (the old recorder raised it here too)
                    rec.flush()  # the renewals meet the full disk now, not at the flusher's next look
                if inner.error is not None:
                    break
            assert inner.error is not None and inner.error.errno == errno.ENOSPC
            renew_all(fleet, src)  # and the streams' next writes find the recorder failed
            view = src.state.evaluate(time.time())
            for res in ("nodes", "leases"):  # the streams never saw the disk
                h = view.health[res]
                assert h.connected and not h.last_error and src.reflector(res).relists == relists[res], (res, h)
            assert {v.name: v.state for v in view.nodes} == {n: NodeState.READY for n in fleet.names}
            wait_until(lambda: rec.check() == DISK_FULL, timeout=5)
            problems = [p for p in src.state.recent_problems(20) if p.where == "recording"]
            assert len(problems) == 1 and DISK_FULL in problems[0].message and path in problems[0].message
            assert take_sample(src).recording == DISK_FULL  # /readyz and nodewatch_flight_recorder_up
            renew_all(fleet, src)  # writes after the stop are dropped, quietly
            assert len([p for p in src.state.recent_problems(20) if p.where == "recording"]) == 1
        finally:
            src.stop()
            rec.close()
        filler.unlink()
        header, entries, bad = read_recording(path)
        assert header is not None and entries, bad
        assert not [p for p in bad if "malformed" in p or "not JSON" in p], bad
        assert [(e.t, e.resource, e.etype) for e in entries][:len(written)] == written  # nothing written was lost
        assert {e.obj["metadata"]["name"] for e in entries if e.resource == "leases" and e.obj} == set(fleet.names)


def test_record_on_a_full_disk_ends_with_one_line_and_a_readable_file(tmp_path, capfd):
    fleet = TinyFleet(nodes=4, start=time.time())
    with small_disk(tmp_path, "256k") as disk, running_server(tmp_path, fleet=fleet) as srv:
        path = disk / "rec.jsonl"
        filled: list = []

        def director() -> None:
            """Once the lists are in the file, fill the disk and keep the kubelets renewing."""
            try:
                wait_until(lambda: path.exists() and b'"SYNCED"' in path.read_bytes(), 20)
                filled.append(fill(disk))
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not done.is_set():
                    fleet.step_to(fleet.now + 10)
                    done.wait(0.2)
            finally:
                if not done.is_set():
                    os.kill(os.getpid(), signal.SIGTERM)  # ends record: the test fails below, not hangs

        done = threading.Event()
        thread = threading.Thread(target=director, daemon=True)
        thread.start()
        started = time.monotonic()
        code = main(["record", str(path), "--kubeconfig", str(srv.kubeconfig_path), "--quiet",
                     "--cert-cache-dir", str(tmp_path / "cache")])
        done.set()
        thread.join(10)
        err = capfd.readouterr().err
        assert code == 1, err
        assert time.monotonic() - started < 25
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"nodewatch: {DISK_FULL}") and str(path) in lines[0], err
        filled[0].unlink()
        header, entries, bad = read_recording(str(path))
        assert header is not None and any(e.etype == "SYNCED" for e in entries)
        assert not [p for p in bad if "malformed" in p or "not JSON" in p], bad
