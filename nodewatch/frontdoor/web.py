"""The web front door: the dashboard served to browsers (textual-serve), for the TV in the office.

textual-serve serves a page with a terminal emulator and, per websocket, runs the viewer command
with Textual's web driver; this module puts a token in front of all of it. Every path answers 401
without the token: the page, its static files and the websocket that drives a viewer. The token
arrives once in the URL (``/?token=...``, what the hub prints and writes to ``DIR/web-url``); the
page's answer sets it as a cookie (HttpOnly, SameSite=Strict, one name per port) for the requests
the page makes next, and a websocket must also come from a page of this same host (Origin), so
another site cannot open a viewer with a visitor's cookie. ``Authorization: Bearer TOKEN`` works too.

The viewer runs in wall mode unless asked otherwise, and reads nothing but the hub: nothing a
browser types can change what another screen shows.

The hub opens it with ``doors.open_doors`` (or ``start_web``); ``python -m nodewatch.frontdoor``
runs it alone.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import shlex
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from .child_guard import parent_environment
from .files import replace_private
from .listen import parse_listen, url_host

log = logging.getLogger("nodewatch.frontdoor.web")

SHUTDOWN_SECONDS = 5.0
"""How long closing the door waits for its viewers to quit."""
KEEPALIVE_SECONDS = 15.0
"""How long a connection may stay open without a whole request: an idle connection, or one that
sends its headers a byte at a time (slowloris), is closed then (aiohttp's default is 75 s). Each
costs one file descriptor and a few KB until then; a websocket that drives a viewer is not
affected (its heartbeat keeps it)."""
VIEWER_GRACE_SECONDS = 3.0
"""How long a viewer has to quit once told to (its page closed, the door closing) before SIGKILL."""
HEARTBEAT_SECONDS = 15.0
"""A viewer's websocket is pinged this often, and closed when no pong comes within half of it. A
page that stops reading (a frozen tab, a peer that never reads) cannot answer, its pong being
behind everything sent before: it is closed, and its viewer ended, within 1.5 heartbeats. Until
then what it holds up is bounded: its viewer's output waits in the kernel's socket buffers and at
most 64 KiB more in aiohttp's (textual-serve awaits each send, so the viewer's pipe, then the
viewer itself, wait too); the hub, its other viewers and their pages go on (tests/
test_frontdoor_web_stuck.py)."""
MAX_SESSIONS = 32
"""Viewers at once (one process per open page)."""
HOST_HEADER = re.compile(r"[A-Za-z0-9.\-]+(:\d+)?|\[[0-9A-Fa-f:.]+\](:\d+)?")
UNAUTHORIZED = ("nodewatch: this page needs its token. Open the URL the hub printed when it started "
                "(also in its directory, in the file web-url).\n")


def viewer_shell_command(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """textual-serve runs a shell command line; this one runs ``argv`` with ``env`` added, every
    word quoted. NODEWATCH_FORCE_TTY: the viewer's output is the web driver's pipe, not a tty.
    ``exec``: the viewer replaces the shell, so the door is its parent (``child_guard``) and the
    process the door stops is the viewer itself."""
    variables = {"NODEWATCH_FORCE_TTY": "1", "NODEWATCH_FRONTDOOR": "web", **parent_environment(), **env}
    assignments = [f"{k}={v}" for k, v in variables.items()]
    return "exec " + shlex.join(["env", *assignments, *argv])


class WebFrontDoor:
    """A listening web front door. Make one with ``await start_web(...)``."""

    def __init__(self, server: _TokenServer, runner: web.AppRunner, url: str) -> None:
        self._server = server
        self._runner = runner
        self.url = url
        self.host = server.host
        self.port = server.port

    @property
    def sessions(self) -> int:
        """Viewers running now (open websockets)."""
        return len(self._server.session_tasks)

    def close(self) -> None:
        """Stop listening and end every viewer (each gets Textual's quit, as when a page closes)."""
        if getattr(self, "_closing", None) is None:
            self._closing = asyncio.ensure_future(self._shut())

    async def _shut(self) -> None:
        # aiohttp would wait for open websockets to end by themselves: end them first.
        tasks = list(self._server.session_tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_SECONDS)
        await self._runner.cleanup()

    async def wait_closed(self) -> None:
        closing = getattr(self, "_closing", None)
        if closing is not None:
            await closing


async def start_web(listen: str | tuple[str, int], token: str, command: Sequence[str], *,
                    url_file: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
                    title: str = "nodewatch", max_sessions: int = MAX_SESSIONS,
                    keepalive_seconds: float = KEEPALIVE_SECONDS,
                    heartbeat_seconds: float = HEARTBEAT_SECONDS) -> WebFrontDoor:
    """Serve ``command`` (the viewer argv; add ``--wall`` for wall mode) to browsers on ``listen``
    (``"HOST:PORT"`` or a pair; port 0 picks one). The URL with the token is ``.url``, and is
    written to ``url_file`` (owner-only) when given."""
    host, port = parse_listen(listen) if isinstance(listen, str) else listen
    if not token:
        raise ValueError("the web front door needs a token")
    if not callable(getattr(Server, "_make_app", None)):  # private: pyproject pins the textual-serve it has
        raise RuntimeError("this textual-serve has no Server._make_app: the web front door needs textual-serve 1.1")
    server = _TokenServer(viewer_shell_command(command, env or {}), host, port, title=title, token=token,
                          max_sessions=max_sessions, heartbeat_seconds=heartbeat_seconds)
    runner = web.AppRunner(await server._make_app(), handle_signals=False, access_log=None,
                           shutdown_timeout=SHUTDOWN_SECONDS, keepalive_timeout=keepalive_seconds,
                           max_line_size=8190, max_field_size=8190)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    if port == 0:
        server.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    url = f"http://{url_host(shown)}:{server.port}/?token={token}"
    if url_file is not None:
        replace_private(Path(url_file), (url + "\n").encode())
    return WebFrontDoor(server, runner, url)


class _TokenServer(Server):
    """textual-serve's server behind the token, with URLs taken from the request (the host the
    browser used), quiet at start."""

    def __init__(self, command: str, host: str, port: int, *, title: str, token: str, max_sessions: int,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = token
        self.max_sessions = max_sessions
        self.heartbeat_seconds = heartbeat_seconds
        self.session_tasks: set[asyncio.Task] = set()

    @property
    def cookie(self) -> str:
        """Cookies are shared by every port of a host: the name keeps two hubs' tokens apart."""
        return f"nodewatch-token-{self.port}"

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._require_token)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """(textual-serve prints a logo here; the hub says what it serves itself.)"""

    def _has_token(self, request: web.Request) -> bool:
        offered = [request.query.get("token", ""), request.cookies.get(self.cookie, "")]
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            offered.append(auth[len("Bearer "):])
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered if o)

    @web.middleware
    async def _require_token(self, request: web.Request, handler) -> web.StreamResponse:
        if not self._has_token(request):
            log.info("401 %s %s from %s", request.method, request.path, request.remote)
            return web.Response(status=401, text=UNAUTHORIZED,
                                headers={"WWW-Authenticate": 'Bearer realm="nodewatch"', "Cache-Control": "no-store"})
        if request.path == "/ws":
            origin = request.headers.get("Origin")
            if origin is not None and origin.split("://", 1)[-1] != request.host:
                return web.Response(status=403, text="nodewatch: a viewer opens only from this server's own page\n")
            if len(self.session_tasks) >= self.max_sessions:
                return web.Response(status=503, text=f"nodewatch: already {self.max_sessions} viewers; try later\n")
            task = asyncio.current_task()
            assert task is not None
            self.session_tasks.add(task)
            try:
                return await handler(request)
            finally:
                self.session_tasks.discard(task)
        response = await handler(request)
        if request.query.get("token"):
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's, with a viewer that is killed if it outlasts its grace (``_Viewer``)."""
        websocket = web.WebSocketResponse(heartbeat=self.heartbeat_seconds)
        width = _int(request.query.get("width", "80"), 80, 10, 1000)
        height = _int(request.query.get("height", "24"), 24, 5, 1000)
        viewer: _Viewer | None = None
        try:
            await websocket.prepare(request)

            async def close() -> None:
                await websocket.close()

            viewer = _Viewer(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                             close=close, download_manager=self.download_manager, debug=False)
            await viewer.start(width, height)
            await self._process_messages(websocket, viewer)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as exc:  # noqa: BLE001 - one page's trouble, said in one line
            log.warning("web viewer: %s: %s", type(exc).__name__, exc)
        finally:
            if viewer is not None:
                await viewer.stop()
        return websocket

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page, its URLs built from the Host the browser asked for (textual-serve would use
        the listening address, which a browser elsewhere cannot reach when that is 0.0.0.0)."""
        import aiohttp_jinja2

        host = request.host if HOST_HEADER.fullmatch(request.host or "") else f"{url_host(self.host)}:{self.port}"
        ws = "wss" if request.secure else "ws"
        context: dict[str, Any] = {
            "font_size": _int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{ws}://{host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)


class _Viewer(AppService):
    """One page's viewer process. textual-serve's stop sends Textual's quit and waits for ever: a
    viewer that hangs (or ignores it) would keep its process, and the door's closing, for ever.
    Here it gets ``VIEWER_GRACE_SECONDS``, then SIGKILL."""

    async def stop(self) -> None:
        if self._task is None:
            return
        process = self._process
        loop = asyncio.get_running_loop()
        deadline = loop.time() + VIEWER_GRACE_SECONDS
        stopping = asyncio.ensure_future(super().stop())
        await asyncio.wait({stopping}, timeout=VIEWER_GRACE_SECONDS)
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), max(0.1, deadline - loop.time()))
        except asyncio.TimeoutError:
            log.warning("web viewer %d still runs %.0f s after quit: SIGKILL", process.pid, VIEWER_GRACE_SECONDS)
            try:
                process.kill()
            except ProcessLookupError:
                pass
            await process.wait()
        await asyncio.wait({stopping}, timeout=VIEWER_GRACE_SECONDS)


def _int(text: str, default: int, low: int = 6, high: int = 64) -> int:
    try:
        return max(low, min(int(text), high))
    except ValueError:
        return default
