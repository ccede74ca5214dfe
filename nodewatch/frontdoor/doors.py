"""The front doors as the hub opens them: its command-line options and one call that starts the
doors asked for, in the hub's directory (host key, web token, ``web-url``).

    add_frontdoor_arguments(parser)                # --ssh, --authorized-keys, --wall-user, --web, --web-full
    doors = await open_doors(DIR, args, default_viewer_command(DIR))
    ...
    for door in doors: door.close()
    for door in doors: await door.wait_closed()
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .files import web_token

HOST_KEY_NAME = "ssh_host_ed25519_key"
TOKEN_NAME = "web-token"
URL_NAME = "web-url"


def add_frontdoor_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("front doors: the dashboard for SSH clients and browsers")
    g.add_argument("--ssh", metavar="HOST:PORT",
                   help="serve the dashboard to SSH clients here (public keys only; one viewer per session)")
    g.add_argument("--authorized-keys", metavar="FILE",
                   help="OpenSSH authorized_keys file of who may log in over --ssh (re-read at each login); "
                   'a key\'s environment="NODEWATCH_WALL=1" option gives it wall mode')
    g.add_argument("--wall-user", action="append", default=[], metavar="USER",
                   help="SSH user name that gets wall mode (repeatable)")
    g.add_argument("--web", metavar="HOST:PORT",
                   help="serve the dashboard to browsers here, behind a token (the URL is printed and written to DIR/web-url)")
    g.add_argument("--web-full", action="store_true", help="the full dashboard on the web instead of wall mode")


def frontdoor_argument_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the front-door options, if anything (the caller reports it)."""
    if args.ssh and not args.authorized_keys:
        return "--ssh needs --authorized-keys FILE (who may log in)"
    if args.authorized_keys and not os.path.isfile(args.authorized_keys):
        return f"{args.authorized_keys}: no such file"
    return None


async def open_doors(directory: str | os.PathLike, args: argparse.Namespace, viewer: Sequence[str],
                     announce: Callable[[str], Any] = print) -> list[Any]:
    """Start the doors ``args`` ask for, each session running ``viewer`` (``--wall`` added where
    wall mode is wanted); say where they are with ``announce``. On failure, none stays open."""
    from .viewer import wall_command_for

    directory = Path(directory)
    doors: list[Any] = []
    try:
        if args.ssh:
            from .ssh import start_ssh

            door = await start_ssh(args.ssh, args.authorized_keys, directory / HOST_KEY_NAME,
                                   wall_command_for(viewer, args.wall_user))
            doors.append(door)
            announce(f"nodewatch: SSH front door on {door.host}:{door.port} (ssh -t -p {door.port} HOST)")
        if args.web:
            from .web import start_web

            door = await start_web(args.web, web_token(directory / TOKEN_NAME),
                                   list(viewer) + ([] if args.web_full else ["--wall"]),
                                   url_file=directory / URL_NAME)
            doors.append(door)
            announce(f"nodewatch: web front door: {door.url}")
    except BaseException:
        for door in doors:
            door.close()
        for door in doors:
            await door.wait_closed()
        raise
    return doors
