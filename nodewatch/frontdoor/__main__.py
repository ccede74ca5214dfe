"""``python -m nodewatch.frontdoor DIR --ssh HOST:PORT --authorized-keys FILE --web HOST:PORT``:
the front doors alone, for trying them out; the hub opens the same doors itself.

``--viewer 'nodewatch demo'`` serves another dashboard than ``nodewatch attach DIR``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import sys

from .doors import add_frontdoor_arguments, frontdoor_argument_error, open_doors
from .viewer import default_viewer_command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nodewatch.frontdoor", description=__doc__.splitlines()[0])
    p.add_argument("dir", metavar="DIR", help="the hub's directory (host key, web token and web-url are kept here)")
    p.add_argument("--viewer", metavar="COMMAND", help="viewer command line (default: nodewatch attach DIR)")
    p.add_argument("-v", "--verbose", action="store_true", help="log logins, sessions and refused requests")
    add_frontdoor_arguments(p)
    return p


async def serve(args: argparse.Namespace) -> None:
    viewer = shlex.split(args.viewer) if args.viewer else default_viewer_command(args.dir)
    doors = await open_doors(args.dir, args, viewer, announce=lambda line: print(line, flush=True))
    try:
        await asyncio.Event().wait()
    finally:
        for door in doors:
            door.close()
        for door in doors:
            await door.wait_closed()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not (args.ssh or args.web):
        parser.error("nothing to serve: give --ssh and/or --web")
    if error := frontdoor_argument_error(args):
        parser.error(error)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 0
    except (OSError, ValueError) as exc:
        print(f"nodewatch: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
