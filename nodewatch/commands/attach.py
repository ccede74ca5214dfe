"""``nodewatch attach [DIR | ADDRESS]``: the dashboard fed by a hub.

``DIR`` is a hub's directory (its ``hub.sock``; default the hub's default directory), a socket
path, ``https://HOST:PORT`` (with ``--token-file`` and ``--ca``), or a viewer config file written
by the hub (``DIR/viewer.json``). Exits 0 when the user quits, 3 when the hub is gone for good
(unreachable for ``--reconnect-for`` seconds, or it refused the token).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .common import CommandError, fail

EXIT_HUB_GONE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", nargs="?", metavar="DIR|ADDRESS",
                        help="the hub's directory, socket, https://HOST:PORT, or its viewer.json")
    parser.add_argument("--token-file", metavar="FILE", help="over TCP: the hub's token")
    parser.add_argument("--ca", metavar="FILE", help="over TCP: the hub's CA certificate")
    parser.add_argument("--reconnect-for", type=float, default=120.0, metavar="S",
                        help="try to reconnect to a hub that went away for this long, then exit 3 (default 120)")
    parser.add_argument("--wall", action="store_true", help="wall-screen mode: big counts, only nodes that are not Ready")
    from .dashboard import add_ascii_argument

    add_ascii_argument(parser)


def viewer_source_from_args(args: argparse.Namespace, on_gone=None):
    """The ``ViewerSource`` the arguments name. Raises CommandError."""
    from ..hub.paths import default_dir
    from ..hub.viewer_source import ViewerSource, parse_address

    text = args.address or str(default_dir())
    token_file, ca = args.token_file, args.ca
    if text.endswith(".json") and os.path.isfile(os.path.expanduser(text)):
        try:
            with open(os.path.expanduser(text)) as f:
                cfg = json.load(f)
            text = str(cfg["address"])
            token_file = token_file or cfg.get("token_file")
            ca = ca or cfg.get("ca")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"{args.address}: not a viewer config ({exc})") from None
    token = None
    if token_file:
        try:
            with open(os.path.expanduser(token_file)) as f:
                token = f.read().strip()
        except OSError as exc:
            raise CommandError(f"{token_file}: cannot read ({exc.strerror or exc})") from None
    try:
        address = parse_address(text)
        return ViewerSource(address, token=token, ca_file=ca, reconnect_for=args.reconnect_for, on_gone=on_gone)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if not sys.stdout.isatty() and not os.environ.get("NODEWATCH_FORCE_TTY"):
        return fail("the dashboard needs a terminal; for scripts use `nodewatch status`")
    from ..ui.app import NodewatchApp, binding_ids
    from ..ui.keymap import keymap_path, load_keymap

    holder: dict = {}

    def gone(reason: str) -> None:
        app = holder.get("app")
        if app is not None:
            app.call_from_thread(app.exit, return_code=EXIT_HUB_GONE)

    source = viewer_source_from_args(args, on_gone=gone)
    keymap, problems = load_keymap(keymap_path(), binding_ids())
    source.start()
    try:
        if source.gone.is_set():
            return fail(f"hub: {source.gone_reason}") or EXIT_HUB_GONE
        from ..config import load_config
        from ..ui.terminal import detect_terminal

        terminal = detect_terminal(flag=args.ascii, config=load_config().ascii)  # an SSH viewer: its client's TERM
        app = NodewatchApp(source, wall=args.wall, keymap=keymap, keymap_problems=problems, terminal=terminal)
        holder["app"] = app
        app.run()
        if source.gone.is_set():
            print(f"nodewatch: hub: {source.gone_reason}", file=sys.stderr)
            return EXIT_HUB_GONE
        return app.return_code or 0
    finally:
        source.stop()
