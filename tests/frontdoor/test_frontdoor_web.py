"""The web front door against headless Chromium and plain HTTP: 401 without the token on every
path (page, static files, websocket), the dashboard drawn in the browser with it, wall mode by
default, and the URL written where the hub's users find it."""

from __future__ import annotations

import asyncio
import os
import sys

import aiohttp
import pytest

from nodewatch.frontdoor.background import DoorThread
from nodewatch.frontdoor.doors import URL_NAME
from nodewatch.frontdoor.files import web_token
from nodewatch.frontdoor.web import start_web, viewer_shell_command
from support.frontdoor_support import DEMO_NODE, DEMO_VIEWER, Chromium, luminance_stddev

PAGE_DRAWN = "document.body.classList.contains('-first-byte')"
"""textual-serve's page marks the body when the first byte of the viewer's screen arrives."""


@pytest.fixture
def web_door(tmp_path):
    """``web_door(argv)``: a web door serving ``argv`` on its own loop thread."""
    started = []

    def start(argv: list[str], **kw):
        thread = DoorThread()
        door = thread.run(start_web("127.0.0.1:0", web_token(tmp_path / "web-token"), argv,
                                    url_file=tmp_path / URL_NAME, **kw))
        started.append((thread, door))
        return door

    yield start
    for thread, door in started:
        thread.close(door)


def test_url_printed_and_written(web_door, tmp_path):
    door = web_door(DEMO_VIEWER + ["--wall"])
    token = (tmp_path / "web-token").read_text().strip()
    assert door.url == f"http://127.0.0.1:{door.port}/?token={token}"
    assert (tmp_path / URL_NAME).read_text() == door.url + "\n"
    assert (tmp_path / URL_NAME).stat().st_mode & 0o777 == 0o600


def test_every_path_needs_the_token(web_door):
    door = web_door(DEMO_VIEWER)
    base = door.url.split("?")[0].rstrip("/")
    token = door.url.split("token=")[1]

    async def check() -> None:
        async with aiohttp.ClientSession() as http:
            for path in ("/", "/static/js/textual.js", "/download/x", "/ws?width=80&height=24", "/?token=wrong",
                         f"/?token={token[:-1]}"):
                async with http.get(base + path) as r:
                    assert r.status == 401, path
                    assert "needs its token" in await r.text()
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(base + "/ws?width=80&height=24")
            assert refused.value.status == 401
            async with http.get(base + "/static/js/textual.js", headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 200
        # the page's cookie opens the rest (unsafe: a jar that keeps cookies of IP addresses)
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.get(door.url) as r:
                assert r.status == 200 and f'ws://127.0.0.1:{door.port}/ws' in await r.text()
            async with http.get(base + "/static/js/textual.js") as r:
                assert r.status == 200
            # a page of another site cannot open a viewer, even with the visitor's cookie
            with pytest.raises(aiohttp.WSServerHandshakeError) as foreign:
                await http.ws_connect(base + "/ws?width=80&height=24", origin="http://evil.example")
            assert foreign.value.status == 403
        assert door.sessions == 0

    asyncio.run(check())


def test_browser_without_the_token_gets_401(web_door):
    door = web_door(DEMO_VIEWER)

    async def check() -> None:
        async with Chromium() as browser:
            assert await browser.open(door.url.split("?")[0]) == 401
            assert "needs its token" in await browser.evaluate("document.body.innerText")
            assert not browser.received

    asyncio.run(check())


def test_browser_shows_the_dashboard_in_wall_mode(web_door, tmp_path):
    door = web_door(DEMO_VIEWER + ["--wall"])

    async def check() -> bytes:
        async with Chromium() as browser:
            assert await browser.open(door.url) == 200
            await browser.wait_for(PAGE_DRAWN)
            await _wait_received(browser, DEMO_NODE.encode())
            await _wait_received(browser, b"of 20 nodes not Ready")  # the wall's headline
            assert door.sessions == 1
            return await browser.screenshot()

    png = asyncio.run(check())
    (tmp_path / "web.png").write_bytes(png)
    assert luminance_stddev(png) > 10, "the page looks blank"


async def _wait_received(browser: Chromium, text: bytes, timeout: float = 60) -> None:
    from support.frontdoor_support import _wait_async

    try:
        await _wait_async(lambda: text in browser.received, timeout)
    except AssertionError:
        raise AssertionError(f"{text!r} not received within {timeout}s; got {bytes(browser.received[-2000:])!r}") from None


def test_viewer_command_is_quoted(tmp_path):
    marker = tmp_path / "pwned"
    line = viewer_shell_command([sys.executable, "-c", "print('hi')", f"; touch {marker}"], {"K": "v w"})
    import subprocess

    out = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=30)
    assert out.stdout == "hi\n" and not marker.exists()
    assert "NODEWATCH_FORCE_TTY=1" in line and "'K=v w'" in line


def test_closing_the_door_ends_its_viewers(tmp_path):
    pidfile = tmp_path / "viewer.pid"
    viewer = ["sh", "-c", f'echo $$ > {pidfile}; exec "$@"', "viewer", *DEMO_VIEWER, "--wall"]
    thread = DoorThread()
    door = thread.run(start_web("127.0.0.1:0", "a-token", viewer))

    async def browse() -> None:
        async with Chromium() as browser:
            assert await browser.open(door.url) == 200
            await _wait_received(browser, DEMO_NODE.encode())
            assert door.sessions == 1
            # the hub stops while a browser watches (from the doors' own thread)
            await asyncio.to_thread(thread.close, door)
            await browser.wait_for("document.body.classList.contains('-closed')")  # "Session ended."

    try:
        asyncio.run(browse())
    finally:
        if thread.thread.is_alive():
            thread.close(door)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


def test_a_textual_serve_without_the_private_make_app_is_one_clear_error(monkeypatch):
    """The door wraps textual-serve's private ``Server._make_app`` (pinned in pyproject.toml); a
    release without it must say so rather than fail inside aiohttp."""
    from textual_serve.server import Server

    monkeypatch.delattr(Server, "_make_app")
    with pytest.raises(RuntimeError, match="textual-serve 1.1"):
        asyncio.run(start_web(("127.0.0.1", 0), "t0ken", ["true"]))
