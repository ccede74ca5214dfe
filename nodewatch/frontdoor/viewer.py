"""Which viewer command a front-door session runs.

A session never runs what the client asks for: the door calls ``command_for(user, key_options)``
and spawns the argv it returns (None refuses the session). The default, ``wall_command_for``,
starts the viewer (``default_viewer_command``) and adds ``--wall`` for the users named and for keys
whose authorized_keys line asks for it, either way OpenSSH spells it:

    environment="NODEWATCH_WALL=1" ssh-ed25519 AAAA... tv-in-the-office
    command="nodewatch attach --wall" ssh-ed25519 AAAA... tv-in-the-office

A ``command=`` option naming anything but the viewer and ``--wall`` refuses the key's sessions
rather than guessing: this door runs the viewer and nothing else.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Collection, Mapping, Sequence

KeyOptions = Mapping[str, object]
"""The authorized_keys options of the key a client logged in with (``command``, ``environment``)."""

CommandFor = Callable[[str, KeyOptions], "list[str] | None"]

WALL_VARIABLE = "NODEWATCH_WALL"
TRUE_WORDS = frozenset({"1", "yes", "true", "on"})
FORCED_COMMAND_WORDS = frozenset({"nodewatch", "attach", "--wall"})
"""What a key's ``command=`` may say: the viewer, with or without wall mode."""


def default_viewer_command(directory: str | None = None) -> list[str]:
    """``nodewatch attach [DIR]`` run by this interpreter, so the viewer is this very install."""
    return [sys.executable, "-m", "nodewatch", "attach", *([directory] if directory else [])]


class KeyOptionError(ValueError):
    """An authorized_keys option this door cannot honour; the session is refused with it."""


def wants_wall(key_options: KeyOptions) -> bool:
    """Does this key's authorized_keys line ask for wall mode? Raises KeyOptionError."""
    env = key_options.get("environment") or {}
    wall = str(env.get(WALL_VARIABLE, "")).strip().lower() in TRUE_WORDS if isinstance(env, Mapping) else False
    forced = key_options.get("command")
    if forced:
        try:
            words = shlex.split(str(forced))
        except ValueError:
            raise KeyOptionError("cannot read the key's command= option") from None
        unknown = [w for w in words if w not in FORCED_COMMAND_WORDS and not w.endswith("/nodewatch")]
        if unknown:
            raise KeyOptionError(f"the key's command= option asks for {shlex.join(unknown)!r}; "
                                 "this server runs only `nodewatch attach [--wall]`")
        wall = wall or "--wall" in words
    return wall


def wall_command_for(base: Sequence[str], wall_users: Collection[str] = ()) -> CommandFor:
    """``command_for`` running ``base``, with ``--wall`` for ``wall_users`` and wall keys."""
    base = list(base)
    users = frozenset(wall_users)

    def command_for(user: str, key_options: KeyOptions) -> list[str]:
        wall = user in users or wants_wall(key_options)
        return base + ["--wall"] if wall else list(base)

    return command_for
