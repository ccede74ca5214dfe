"""The SSH front door: the dashboard served to ``ssh`` clients (asyncssh).

Every session runs one viewer command on its own pseudo-terminal, sized like the client's
terminal and resized with it, and ends when the viewer exits. Nothing else is on offer: public-key
logins only (an OpenSSH authorized_keys file, re-read at each login so that removing a key takes
effect at once); no shell, no command of the client's choosing, no subsystem (sftp/scp), no port,
agent or X11 forwarding. A key's options choose the viewer's mode (``viewer.py``).

The hub opens it with ``doors.open_doors`` (or ``start_ssh``); ``python -m nodewatch.frontdoor``
runs it alone. The host key is made in the hub's directory on first start (``doors.HOST_KEY_NAME``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..loop_thread import keep
from .child_guard import parent_environment
from .files import host_key
from .listen import parse_listen
from .pty_child import PtyChild
from .ssh_library import asyncssh
from .viewer import CommandFor, KeyOptionError

log = logging.getLogger("nodewatch.frontdoor.ssh")

MAX_SESSIONS = 64
"""Viewers at once, over all clients: each is a process, so a bound keeps a busy door from
exhausting the host."""
LOGIN_TIMEOUT_SECONDS = 20
"""How long a connection has from its first byte to a login: an idle or half-open handshake, a
client that tries key after key, is closed then."""
KEEPALIVE_SECONDS = 30
MAX_UNAUTHENTICATED = 512
"""Connections at once that have not logged in yet; one more closes the oldest of them (an honest
client logs in within a second or two, so a flood of idle or failing ones only churns itself).
Each costs one file descriptor and a few tens of KB until ``LOGIN_TIMEOUT_SECONDS``."""
REFUSAL_LOG_SECONDS = 10.0
TERM_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
DEFAULT_TERM = "xterm-256color"
VIEWER_DIR_NAME = "viewer-cwd"
"""The viewers' working directory, beside the host key (in the hub's directory): whatever a viewer
writes to "." (nothing, as screenshots are off in a front-door session) stays there, not where the
hub was started. One for every session, made once: a directory made per session was left behind by
every session of a hub that was killed, one more in the temporary directory each time."""
NO_TERMINAL = ("nodewatch: this server shows the dashboard and nothing else, on a terminal: "
               "connect with `ssh -t`\r\n")


class SSHFrontDoor:
    """A listening SSH front door. Make one with ``await start_ssh(...)``."""

    def __init__(self, authorized_keys: Path, command_for: CommandFor, *, env: Mapping[str, str],
                 max_sessions: int, viewer_dir: Path) -> None:
        self.authorized_keys = Path(authorized_keys)
        self.command_for = command_for
        self.env = dict(env)
        self.max_sessions = max_sessions
        self.sessions: set[_ViewerSession] = set()
        self.unauthenticated: collections.OrderedDict[int, _Server] = collections.OrderedDict()
        """Connections that have not logged in yet, oldest first."""
        self.max_unauthenticated = MAX_UNAUTHENTICATED
        self.refused: collections.Counter[str] = collections.Counter()
        """Connections that ended without a login, by why (for the log and the tests)."""
        self._unlogged: collections.Counter[str] = collections.Counter()
        self._logged_at: dict[str, float] = {}
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self.host = ""
        self.port = 0
        self.viewer_dir = viewer_dir
        """The viewers' working directory (``start_ssh``: ``VIEWER_DIR_NAME`` beside the host key)."""

    def read_authorized_keys(self) -> asyncssh.SSHAuthorizedKeys | None:
        """The keys allowed now; None (nobody may log in) when the file cannot be read."""
        try:
            return asyncssh.read_authorized_keys(str(self.authorized_keys))
        except (OSError, ValueError) as exc:  # asyncssh.KeyImportError is a ValueError
            log.error("%s: cannot read authorized keys (%s): refusing every login", self.authorized_keys, exc)
            return None

    def refuse(self, why: str) -> None:
        """Count a connection that ended without a login; logged once per kind and 10 s."""
        self.refused[why] += 1
        self._unlogged[why] += 1
        now = time.monotonic()
        if now - self._logged_at.get(why, -REFUSAL_LOG_SECONDS) >= REFUSAL_LOG_SECONDS:
            log.warning("refused %d connection(s): %s (%d since start)", self._unlogged[why], why, self.refused[why])
            self._unlogged[why] = 0
            self._logged_at[why] = now

    def close(self) -> None:
        """Stop listening and end every session (their viewers get SIGHUP)."""
        if self._acceptor is not None:
            self._acceptor.close()
        for session in list(self.sessions):
            session.hang_up()

    async def wait_closed(self) -> None:
        if self._acceptor is not None:
            await self._acceptor.wait_closed()
        while self.sessions:
            await asyncio.gather(*(s.done.wait() for s in list(self.sessions)))


async def start_ssh(listen: str | tuple[str, int], authorized_keys: str | os.PathLike,
                    host_key_path: str | os.PathLike, command_for: CommandFor, *,
                    env: Mapping[str, str] | None = None,
                    max_sessions: int = MAX_SESSIONS, login_timeout: float = LOGIN_TIMEOUT_SECONDS,
                    max_unauthenticated: int = MAX_UNAUTHENTICATED) -> SSHFrontDoor:
    """Listen for SSH clients on ``listen`` (``"HOST:PORT"`` or a pair; port 0 picks one, read it
    back from ``.port``). ``command_for(user, key_options)`` gives the viewer argv of a session
    (None refuses it); ``env`` is added to the viewers' environment."""
    host, port = parse_listen(listen) if isinstance(listen, str) else listen
    viewer_dir = Path(host_key_path).parent / VIEWER_DIR_NAME
    viewer_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    door = SSHFrontDoor(Path(authorized_keys), command_for, env=env or {}, max_sessions=max_sessions,
                        viewer_dir=viewer_dir)
    door.max_unauthenticated = max_unauthenticated
    door._acceptor = await asyncssh.listen(
        host, port, server_factory=lambda: _Server(door),
        server_host_keys=[host_key(Path(host_key_path))],
        server_version="nodewatch",
        encoding=None, line_editor=False, allow_pty=True,
        public_key_auth=True, password_auth=False, kbdint_auth=False, host_based_auth=False,
        gss_host=None, agent_forwarding=False, x11_forwarding=False, allow_scp=False,
        login_timeout=login_timeout, keepalive_interval=KEEPALIVE_SECONDS,
    )
    door.host, door.port = host, door._acceptor.get_port()
    return door


class _Server(asyncssh.SSHServer):
    """One client connection: public-key logins against the door's authorized_keys file. Every
    forwarding request is refused by asyncssh's defaults (``connection_requested``,
    ``server_requested`` and the UNIX and TUN variants all answer False) and by the options above."""

    def __init__(self, door: SSHFrontDoor) -> None:
        self.door = door
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        waiting = self.door.unauthenticated
        while len(waiting) >= self.door.max_unauthenticated:
            _, oldest = waiting.popitem(last=False)
            self.door.refuse(f"{self.door.max_unauthenticated} connections not logged in: the oldest closed")
            if oldest.conn is not None:
                oldest.conn.abort()
        waiting[id(self)] = self

    def auth_completed(self) -> None:
        self.door.unauthenticated.pop(id(self), None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.door.unauthenticated.pop(id(self), None) is not None:
            self.door.refuse("ended without a login" + (f" ({type(exc).__name__})" if exc else ""))

    def begin_auth(self, username: str) -> bool:
        assert self.conn is not None
        keys = self.door.read_authorized_keys()
        if keys is not None:
            self.conn.set_authorized_keys(keys)
        else:
            self.conn.set_authorized_keys(asyncssh.import_authorized_keys(""))
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def session_requested(self) -> asyncssh.SSHServerSession:
        assert self.conn is not None
        return _ViewerSession(self.door, self.conn)


class _ViewerSession(asyncssh.SSHServerSession):
    """One SSH session: one viewer on a pty. The client's bytes go to the viewer's terminal and
    the viewer's output back, paused while the client's window is full."""

    def __init__(self, door: SSHFrontDoor, conn: asyncssh.SSHServerConnection) -> None:
        self.door = door
        self.conn = conn
        self.chan: asyncssh.SSHServerChannel | None = None
        self.child: PtyChild | None = None
        self.term = DEFAULT_TERM
        self.size: tuple[int, int] | None = None
        self.done = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._paused = False
        self._hung_up = False

    # --- what the client asks for ------------------------------------------------------------

    def connection_made(self, chan: asyncssh.SSHServerChannel) -> None:
        self.chan = chan

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int], term_modes) -> bool:
        self.term = term_type if TERM_TYPE.fullmatch(term_type or "") else DEFAULT_TERM
        self.size = (term_size[0] or 80, term_size[1] or 24)
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        """Only the key's own ``command=`` option gets here as a command (asyncssh puts it in
        place of whatever the client asked for); ``viewer.py`` reads it. Anything else is
        refused: this door runs no command of the client's."""
        forced = self.conn.get_key_option("command")
        if forced is not None and command == forced:
            return True
        log.info("refused command %r from %s", command, self._who())
        return False

    def subsystem_requested(self, subsystem: str) -> bool:
        log.info("refused subsystem %r from %s", subsystem, self._who())
        return False

    def session_started(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    # --- the viewer ---------------------------------------------------------------------------

    async def _run(self) -> None:
        chan = self.chan
        assert chan is not None
        code = 1
        self.door.sessions.add(self)
        try:
            argv = self._argv()
            if argv is not None:
                code = await self._run_viewer(argv)
        except Exception as exc:  # a viewer that cannot start ends its session, never the door
            log.exception("session of %s failed", self._who())
            self._say(f"nodewatch: cannot start the viewer ({exc})\r\n")
        finally:
            self.door.sessions.discard(self)
            if not self._hung_up:
                chan.exit(code & 0xFF if code >= 0 else 128 - code)
            self.done.set()

    def _argv(self) -> list[str] | None:
        if self.size is None:
            self._say(NO_TERMINAL)
            return None
        if len(self.door.sessions) > self.door.max_sessions:
            self._say(f"nodewatch: this server already shows {self.door.max_sessions} viewers; try later\r\n")
            return None
        options = {"command": self.conn.get_key_option("command"),
                   "environment": self.conn.get_key_option("environment") or {}}
        try:
            argv = self.door.command_for(self._user(), options)
        except KeyOptionError as exc:
            self._say(f"nodewatch: {exc}\r\n")
            return None
        if not argv:
            self._say("nodewatch: no viewer for this user\r\n")
        return argv or None

    async def _run_viewer(self, argv: Sequence[str]) -> int:
        assert self.size is not None
        cols, rows = self.size
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.setdefault("LANG", "C.UTF-8")
        env.update(self.door.env, TERM=self.term, NODEWATCH_FRONTDOOR="ssh", **parent_environment())
        log.info("%s: viewer %s on %dx%d", self._who(), argv, cols, rows)
        self.child = await PtyChild.spawn(argv, cols=cols, rows=rows, env=env, cwd=str(self.door.viewer_dir),
                                          on_output=self._output)
        if self._paused:
            self.child.pause()
        if self._hung_up:
            await self.child.terminate()
        code = await self.child.wait()
        log.info("%s: viewer exited (%s)", self._who(), code)
        return code

    def _output(self, data: bytes) -> None:
        if self.chan is not None and not self._hung_up:
            self.chan.write(data)

    def _say(self, text: str) -> None:
        if self.chan is not None:
            self.chan.write_stderr(text.encode())

    # --- while it runs ------------------------------------------------------------------------

    def data_received(self, data: bytes, datatype) -> None:
        if self.child is not None:
            self.child.write(data)

    def eof_received(self) -> bool:
        """The client has no more to type (``ssh -tt < /dev/null``): the viewer goes on showing."""
        return True

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        if self.size is None or not width or not height:
            return
        self.size = (width, height)
        if self.child is not None:
            self.child.resize(width, height)

    def pause_writing(self) -> None:
        self._paused = True
        if self.child is not None:
            self.child.pause()

    def resume_writing(self) -> None:
        self._paused = False
        if self.child is not None:
            self.child.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        self.hang_up()

    def hang_up(self) -> None:
        """The client went away (or the door closes): the viewer gets SIGHUP."""
        if self._hung_up:
            return
        self._hung_up = True
        if self.child is not None:
            keep(asyncio.ensure_future(self.child.terminate()))
        elif self._task is None:
            self.done.set()
        if self.chan is not None:
            self.chan.close()

    def _user(self) -> str:
        return str(self.conn.get_extra_info("username") or "")

    def _who(self) -> str:
        peer = self.conn.get_extra_info("peername") or ("?", 0)
        return f"{self._user()}@{peer[0]}:{peer[1]}"
