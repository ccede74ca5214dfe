"""The user's settings file, its ``NODEWATCH_*`` overrides, and where every file nodewatch uses is.

``~/.config/nodewatch/config.toml`` (``$XDG_CONFIG_HOME``, or the file named by
``$NODEWATCH_CONFIG``)::

    theme = "textual-light"        # any Textual theme name
    refresh = 2                    # seconds between dashboard ticks
    columns = ["state", "name", "renew", "grace", "evict", "cause"]
    context = "prod-eu"            # kubeconfig context when --context is not given
    ascii = true                   # ASCII and 16 colours (auto on TERM=linux/vt100, a non-UTF-8 locale)

Each key can be overridden by the environment (``NODEWATCH_THEME``, ``NODEWATCH_REFRESH``,
``NODEWATCH_COLUMNS`` comma-separated, ``NODEWATCH_CONTEXT``, ``NODEWATCH_ASCII`` 1 or 0), and a command-line flag beats both.
The theme a user picks in the dashboard (``T``, or the palette) is remembered in the state
directory, not written into their config file: a file the user owns is never rewritten.

A broken file or a bad value is a warning, never fatal (as with the keymap): the dashboard must
start during an incident whatever the user's dotfiles say. No Textual here: commands read it.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_ENV = "NODEWATCH_CONFIG"
KEYS = ("theme", "refresh", "columns", "context", "ascii")
MIN_REFRESH, MAX_REFRESH = 0.2, 60.0


@dataclass(frozen=True)
class UserConfig:
    theme: str | None = None
    refresh: float | None = None
    columns: tuple[str, ...] | None = None
    context: str | None = None
    ascii: bool | None = None
    """ASCII-only, 16-colour drawing (``ui/terminal.py``); None: as the terminal says."""
    problems: tuple[str, ...] = field(default=(), compare=False)
    """What was wrong with the file or the environment, one line each (shown as a warning)."""


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def config_home(environ: Mapping[str, str] | None = None) -> Path:
    env = _env(environ)
    return Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or os.path.expanduser("~")) / ".config") / "nodewatch"


def state_home(environ: Mapping[str, str] | None = None) -> Path:
    env = _env(environ)
    base = env.get("XDG_STATE_HOME") or Path(env.get("HOME") or os.path.expanduser("~")) / ".local" / "state"
    return Path(base) / "nodewatch"


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$NODEWATCH_CONFIG``, else ``$XDG_CONFIG_HOME/nodewatch/config.toml`` (``~/.config``)."""
    env = _env(environ)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return config_home(env) / "config.toml"


def remembered_theme_path(environ: Mapping[str, str] | None = None) -> Path:
    return state_home(environ) / "theme"


def parse_flag(text: str | None) -> bool | None:
    """``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off`` (any case); else None."""
    if text is None:
        return None
    word = text.strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


def _value(key: str, raw: Any, known_columns: tuple[str, ...]) -> tuple[Any, str | None]:
    """``raw`` checked for ``key``: (value, None) or (None, what is wrong)."""
    if key in ("theme", "context"):
        if isinstance(raw, str) and raw.strip() and raw.isprintable():
            return raw.strip(), None
        return None, f"{key}: expected a name, got {raw!r:.60}"
    if key == "ascii":
        flag = raw if isinstance(raw, bool) else parse_flag(str(raw))
        if flag is None:
            return None, f"ascii: expected true or false, got {raw!r:.60}"
        return flag, None
    if key == "refresh":
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return None, f"refresh: expected seconds, got {raw!r:.60}"
        if not MIN_REFRESH <= value <= MAX_REFRESH:
            return None, f"refresh: {value:g}s is outside {MIN_REFRESH:g}-{MAX_REFRESH:g}s"
        return value, None
    if key == "columns":
        items = [c.strip() for c in raw.split(",")] if isinstance(raw, str) else raw
        if not isinstance(items, list | tuple) or not all(isinstance(c, str) for c in items) or not items:
            return None, f"columns: expected a list of column names, got {raw!r:.60}"
        unknown = [c for c in items if c not in known_columns]
        if unknown:
            return None, f"columns: unknown {', '.join(repr(c) for c in unknown[:5])} (known: {', '.join(known_columns)})"
        if "name" not in items:
            items = ["name", *items]  # a row without its node's name answers nothing
        return tuple(dict.fromkeys(items)), None
    raise KeyError(key)


def load_config(environ: Mapping[str, str] | None = None, *, known_columns: tuple[str, ...] = ()) -> UserConfig:
    """The file, then the environment on top; bad values are left out and named in ``problems``."""
    env = _env(environ)
    path = config_path(env)
    problems: list[str] = []
    values: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: {exc}")
    for key, value in raw.items():
        if key not in KEYS:
            problems.append(f"{path}: unknown setting {key!r:.60} (known: {', '.join(KEYS)})")
            continue
        checked, problem = _value(key, value, known_columns)
        if problem:
            problems.append(f"{path}: {problem}")
        else:
            values[key] = checked
    for key in KEYS:
        name = f"NODEWATCH_{key.upper()}"
        if env.get(name):
            checked, problem = _value(key, env[name], known_columns)
            if problem:
                problems.append(f"${name}: {problem}")
            else:
                values[key] = checked
    return UserConfig(**values, problems=tuple(problems))


def remembered_theme(environ: Mapping[str, str] | None = None) -> str | None:
    try:
        name = remembered_theme_path(environ).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if name and name.isprintable() and len(name) < 100 else None


def remember_theme(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Write the chosen theme; returns what went wrong (a read-only home is not an error to raise)."""
    path = remembered_theme_path(environ)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(name + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        return f"could not remember the theme in {path}: {exc}"
    return None
