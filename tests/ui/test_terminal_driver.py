"""The dashboard's driver (``ui/terminal_driver.py``) when its terminal is gone: a failed write ends the
app instead of killing Textual's writer thread, and a hung-up terminal is seen without a write."""

from __future__ import annotations

import errno
import os

import pytest
from textual.drivers.linux_driver import LinuxDriver

from nodewatch.ui.app import NodewatchApp
from nodewatch.ui.terminal_driver import DashboardDriver, TerminalOutput, hung_up


class _File:
    def __init__(self, fail: int | None = None, on: str = "write") -> None:
        self.fail, self.on, self.text = fail, on, []

    def _maybe_fail(self, where: str) -> None:
        if self.fail is not None and self.on == where:
            raise OSError(self.fail, os.strerror(self.fail))

    def write(self, text: str) -> int:
        self._maybe_fail("write")
        self.text.append(text)
        return len(text)

    def flush(self) -> None:
        self._maybe_fail("flush")

    def fileno(self) -> int:
        return 7

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("on", ["write", "flush"])
@pytest.mark.parametrize("code", [errno.EIO, errno.EPIPE])
def test_a_terminal_gone_is_said_once_and_what_follows_is_dropped(on, code):
    calls = []
    f = _File(code, on)
    out = TerminalOutput(f, lambda: calls.append(1))
    assert out.write("a") == 1
    out.flush()
    assert out.write("bb") == 2 and out.lost and calls == [1]
    f.fail = None
    out.write("c")
    out.flush()
    assert f.text == ([] if on == "write" else ["a"])  # nothing written once the terminal is gone
    assert out.fileno() == 7 and out.isatty()


def test_a_terminal_that_works_is_written_to_and_other_errors_are_raised():
    f = _File()
    out = TerminalOutput(f, lambda: pytest.fail("not gone"))
    out.write("x")
    out.flush()
    assert f.text == ["x"] and not out.lost
    f.fail = errno.ENOSPC
    with pytest.raises(OSError):
        out.write("y")
    assert not out.lost


def test_a_terminal_whose_other_side_closed_has_hung_up():
    primary, secondary = os.openpty()
    try:
        assert not hung_up(secondary)
        os.close(primary)
        primary = -1
        assert hung_up(secondary)
    finally:
        os.close(secondary)
        if primary >= 0:
            os.close(primary)


def test_the_dashboard_takes_the_driver_where_textual_would_take_its_terminal_driver(monkeypatch):
    app = object.__new__(NodewatchApp)  # (only the class's choice is asked: no source needed)
    assert issubclass(DashboardDriver, LinuxDriver)
    monkeypatch.setattr("textual.constants.DRIVER", None)
    assert app.get_driver_class() is DashboardDriver
    monkeypatch.setattr("textual.constants.DRIVER", "textual.drivers.headless_driver:HeadlessDriver")
    assert app.get_driver_class().__name__ == "HeadlessDriver"  # another driver asked for: as it is


def test_a_hang_up_is_seen_without_a_write_and_the_app_asked_to_exit_on_its_loop():
    """A paused replay may write nothing for minutes: the terminal's hang-up is polled for, and the
    app's ``exit`` runs on the loop's thread, once."""
    import asyncio
    import threading

    primary, secondary = os.openpty()
    loop = asyncio.new_event_loop()
    exits: list[str] = []

    class _App:
        def exit(self) -> None:
            exits.append(threading.current_thread().name)

    driver = object.__new__(DashboardDriver)  # (its terminal is the pty, not this process's stdin)
    driver._app, driver.fileno, driver._loop, driver._gone = _App(), secondary, loop, False
    driver.output = TerminalOutput(_File(), driver._terminal_gone)
    stopping = threading.Event()
    watcher = threading.Thread(target=driver._watch, args=(stopping,), name="watcher")
    try:
        watcher.start()
        loop.run_until_complete(asyncio.sleep(0.8))
        assert exits == [] and watcher.is_alive()  # a live terminal: nothing happens
        os.close(primary)
        primary = -1
        watcher.join(5)
        loop.run_until_complete(asyncio.sleep(0.05))
        assert not watcher.is_alive() and exits == [threading.current_thread().name]
        assert driver.output.lost
    finally:
        stopping.set()
        watcher.join(5)
        loop.close()
        os.close(secondary)
        if primary >= 0:
            os.close(primary)
