"""The ``nodewatch`` command line. Each subcommand lives in ``nodewatch.commands``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__

COMMANDS = {
    "watch": ("watch", "dashboard on a live cluster (the default command)"),
    "demo": ("demo", "dashboard on the embedded simulated fleet"),
    "replay": ("replay", "dashboard replaying a recording or a kubectl watch log"),
    "status": ("status", "print the fleet once (table or JSON) and exit: 0 all Ready, 1 some not, 2 error"),
    "report": ("report", "write the incident report of a recording (Markdown, or HTML with the fleet timeline)"),
    "record": ("record", "record a live cluster's watch streams to a file, headless"),
    "recording": ("recording", "recordings: export any of them (or a span of a hub's directory) as JSON Lines"),
    "sim-server": ("sim_server", "serve the simulated fleet as a Kubernetes API on 127.0.0.1"),
    "testbed": ("testbed", "a real Kubernetes control plane (v1.20.2, or the newest release) on 127.0.0.1 with simulated or hollow kubelets"),
    "hub": ("hub", "one watcher for many screens: serve viewers and record everything, headless"),
    "attach": ("attach", "dashboard fed by a hub (its directory, socket or https://HOST:PORT)"),
    "info": ("info", "where every file nodewatch reads and writes is"),
    "completion": ("completion", "print a shell completion script (bash, zsh or fish)"),
    "man": ("man", "print the manual page (roff), generated from these options"),
}

PROG = "nodewatch"
KUBECTL_PROG = "kubectl nodewatch"  # the same program run as a kubectl plugin (`kubectl-nodewatch`)


def build_parser(only: str | None = None, *, prog: str = PROG) -> argparse.ArgumentParser:
    """The whole command line; ``only``: the arguments of that command alone (the others are listed
    with their help but their modules are not imported: ``status`` does not pay for the simulated
    API server's imports). ``prog``: the name usage lines say (``kubectl nodewatch`` as a plugin)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Is every node of a Kubernetes fleet still alive? Lease renewals against the "
        "node-monitor grace period, the eviction timer, conditions, taints and kubelet certificates.",
        epilog=f"Start with `{prog} demo`. Without a command, `{prog}` runs `watch`.",
    )
    parser.add_argument("--version", action="version", version=f"nodewatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            _module(module).add_arguments(p)
        p.set_defaults(_module=module, _build_parser=build_parser, _parser=p)  # `man` reads the whole parser
    return parser


def _module(name: str):
    return importlib.import_module(f"nodewatch.commands.{name}")


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (scripts of `completion`)
        import argcomplete

        argcomplete.autocomplete(build_parser(prog=prog))  # exits after answering
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["watch", *argv]
    parser = build_parser(only=argv[0] if argv else "", prog=prog)
    args, extra = parser.parse_known_args(argv)
    if extra:  # said with the usage of the command they were given to, not the top level's
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "context", False) is None and not getattr(args, "contexts", None):
        from .config import load_config

        args.context = load_config().context  # the config file's default context, if any
    from .commands.common import CommandError, fail
    from .frontdoor.child_guard import guard_viewer

    guard_viewer()  # a viewer a front door started ends with the door (kill -9 of the hub too)
    try:
        return int(_module(args._module).run(args) or 0)
    except CommandError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def kubectl_main() -> int:
    """``kubectl-nodewatch``: kubectl runs it for ``kubectl nodewatch ...`` (a kubectl plugin is any
    program of that name on the PATH); the same commands, with usage lines that say so."""
    return main(prog=KUBECTL_PROG)


if __name__ == "__main__":
    sys.exit(main())
