"""What the user's terminal can draw: Unicode glyphs or ASCII only, millions of colours or 16.

A Linux console (``TERM=linux``), a serial line or an old SSH client (``TERM=vt100``), a locale that
is not UTF-8 (``LANG=en_US.ISO-8859-1``): the box, block and braille glyphs come out as garbage
and truecolor styles are rounded to whichever of 16 colours is nearest (warning and error can meet).
Such a terminal gets ASCII only (``ui/ascii.py``, one filter over every line drawn) and a palette
of the 16 ANSI colours (``theme.palette_16``). States stay apart without colour either way: each
has its word.

The choice, strongest first: ``--ascii``, ``$NODEWATCH_ASCII`` (``1``/``0``), ``ascii = true|false``
in the config file, then what the environment says. ``NO_COLOR`` is Textual's, untouched: it
removes colour in any mode. No Textual here: the commands decide before the app exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import parse_flag

ASCII_TERMS = frozenset({"linux", "vt100", "vt102", "vt220", "vt320", "ansi", "cons25", "pcansi", "sun", "wsvt25"})
"""Terminals (``$TERM`` before any ``-suffix``) that draw ASCII reliably and little else."""
COLOR_HINTS = ("256color", "truecolor", "direct", "24bit")
"""A ``$TERM`` (or ``$COLORTERM``) naming one of these can show more than 16 colours."""


@dataclass(frozen=True)
class Terminal:
    """How the dashboard draws. The default is a modern terminal: Unicode and the theme's colours."""

    ascii: bool = False
    """Only ASCII characters reach the screen (every other glyph is transliterated, same width)."""
    colors16: bool = False
    """The 16 ANSI colours (Textual's ``ansi-dark``/``ansi-light`` themes, ``theme.palette_16``)."""
    why: str = ""
    """What decided it, for ``nodewatch info`` and the tests (``--ascii``, ``TERM=linux``...)."""


MODERN = Terminal(why="Unicode, the theme's colours")
"""A terminal that draws every glyph in any colour (the dashboard's default)."""


def locale_charset(environ: Mapping[str, str]) -> str | None:
    """The character set of the locale in force (``LC_ALL``, else ``LC_CTYPE``, else ``LANG``), as
    the C library picks it: None when none is set (then nothing is assumed).

    Python itself turns a C locale into ``LC_CTYPE=C.UTF-8`` in its own environment (PEP 538):
    that value beside ``LANG=C`` is Python's doing, and the terminal's locale is still C."""
    if not environ.get("LC_ALL") and environ.get("LC_CTYPE") in ("C.UTF-8", "C.utf8") \
            and environ.get("LANG") in ("C", "POSIX"):
        return "ANSI_X3.4-1968"
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environ.get(name)
        if value:
            if value in ("C", "POSIX"):
                return "ANSI_X3.4-1968"
            return value.partition(".")[2].partition("@")[0] or "default"
    return None


def detect_terminal(environ: Mapping[str, str] | None = None, *, flag: bool = False,
                    config: bool | None = None) -> Terminal:
    """The drawing mode for this process (see the module docstring). ``flag``: ``--ascii`` was
    given; ``config``: the config file's ``ascii`` setting (None: not set)."""
    env = os.environ if environ is None else environ
    if flag:
        return Terminal(True, True, "--ascii")
    forced = parse_flag(env.get("NODEWATCH_ASCII"))
    if forced is not None:
        return Terminal(forced, forced, f"NODEWATCH_ASCII={env['NODEWATCH_ASCII']}")
    if config is not None:
        return Terminal(config, config, f"ascii = {'true' if config else 'false'} in the config file")
    if env.get("NODEWATCH_FRONTDOOR") == "web":
        return Terminal(why="web front door (the browser draws)")
    term = env.get("TERM", "")
    base = term.split("-", 1)[0]
    if base in ASCII_TERMS:
        return Terminal(True, True, f"TERM={term}")
    charset = locale_charset(env)
    if charset is not None and charset.lower().replace("-", "") != "utf8":
        return Terminal(True, not _many_colours(env), f"locale charset {charset}")
    if term and not _many_colours(env):
        return Terminal(False, True, f"TERM={term} (16 colours)")
    return MODERN


def _many_colours(env: Mapping[str, str]) -> bool:
    term, colorterm = env.get("TERM", "").lower(), env.get("COLORTERM", "").lower()
    return any(h in term or h in colorterm for h in COLOR_HINTS)
