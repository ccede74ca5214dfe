"""No viewer of a front door can make the hub's host write a file: Textual's palette offers
"Screenshot" (an SVG saved in the Downloads folder of whoever runs the dashboard, on an SSH
session the hub's user), and ``deliver_*`` save files under a terminal driver. A front-door
session (``NODEWATCH_FRONTDOOR``, set by the doors) has none of it; a dashboard of one's own
keeps it."""

from __future__ import annotations

import os

import pytest

from nodewatch.ui.app import NodewatchApp
from support.ui_support import incident_source


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


async def _palette_titles(app: NodewatchApp) -> set[str]:
    return {c.title for c in app.get_system_commands(app.screen)}


@pytest.mark.parametrize("door", ["ssh", "web", None])
async def test_a_front_door_session_offers_no_command_that_writes_a_file(tmp_path, monkeypatch, door):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DOWNLOAD_DIR", str(home / "Downloads"))
    monkeypatch.chdir(home)
    if door:
        monkeypatch.setenv("NODEWATCH_FRONTDOOR", door)
    else:
        monkeypatch.delenv("NODEWATCH_FRONTDOOR", raising=False)
    app = NodewatchApp(incident_source(), refresh_seconds=3600)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        titles = await _palette_titles(app)
        assert "Quit" in titles
        if not door:
            assert "Screenshot" in titles  # one's own dashboard keeps it
            return
        assert "Screenshot" not in titles
        # the palette, as a viewer would use it: nothing to run
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "screenshot":
            await pilot.press(ch)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.5)
        # and the actions behind it, called directly
        app.action_screenshot()
        app.deliver_screenshot(path=str(home))
        with pytest.raises(PermissionError):
            app.save_screenshot(path=str(home))
        assert app.deliver_text(__import__("io").StringIO("x"), save_directory=str(home)) is None
        await pilot.pause(0.5)
    assert _files(home) == [], _files(home)
