"""``status`` in kubectl's shape: ``-o table|wide|json|yaml|name``, ``--no-headers``,
``-l/--selector``, ``--sort-by`` and ``-w/--watch``.

Why kubectl's shape: the people who run ``status`` during an incident type ``kubectl get nodes``
all day, and pipe its output (``-o name | xargs kubectl describe``). The selector has the API
server's grammar (``sim/selectors.py``, shared with the simulated API server) and is applied to the
nodes nodewatch holds, since Leases carry no node labels. ``--sort-by`` takes a field of the JSON
contract (``lease_age_seconds``, or kubectl's ``{.lease_age_seconds}``); nodes without the field
go last, as kubectl puts them.

``-w`` prints the fleet once, then one line (``-o json``: one JSON object) per state change of a
node, judged on the source's clock every second, until interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from ..core.report import fleet_json, fleet_table_lines, node_json, terminal_safe_json, write_fleet_json
from ..core.text import safe
from ..core.timeutil import format_time
from ..core.views import FleetView, NodeView

OUTPUTS = ("table", "wide", "json", "yaml", "name")
SORT_FIELDS = ("name", "zone", "state", "ready", "lease_age_seconds", "grace_remaining_seconds",
               "eviction_in_seconds", "cert_not_after", "cordoned", "cause")


class OutputError(ValueError):
    """A bad ``-l`` or ``--sort-by``: one line, exit 2."""


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("output (kubectl's flags)")
    g.add_argument("-o", "--output", choices=OUTPUTS, default=None,
                   help="table (default), wide (+ kubelet, conditions, lease seen), json, yaml, or name (node/NAME)")
    g.add_argument("--format", choices=("table", "json"), default=None, help="the same as -o table|json")
    g.add_argument("--no-headers", action="store_true", help="table and wide: the node rows alone")
    g.add_argument("-l", "--selector", metavar="SELECTOR",
                   help="only the nodes whose labels match (kubectl's grammar: k=v, k!=v, k in (a,b), !k)")
    g.add_argument("--sort-by", metavar="FIELD",
                   help=f"order the nodes by a field of the JSON ({', '.join(SORT_FIELDS)}); default worst first")
    g.add_argument("-w", "--watch", action="store_true",
                   help="then one line (or JSON object) per state change of a node, until interrupted")


def output_of(args: argparse.Namespace) -> str:
    return args.output or args.format or "table"


def _sort_field(text: str) -> str:
    field = text.strip()
    if field.startswith("{") and field.endswith("}"):
        field = field[1:-1]
    field = field.lstrip(".")
    if field not in SORT_FIELDS:
        raise OutputError(f"--sort-by {text}: not a node field (one of {', '.join(SORT_FIELDS)})")
    return field


def nodes_shown(state: Any, view: FleetView, args: argparse.Namespace) -> list[NodeView]:
    """The nodes the answer shows, in its order: ``--node``, ``-l``, then ``--sort-by``."""
    shown: Sequence[NodeView] = view.nodes
    if getattr(args, "node", None) is not None:
        shown = [v for v in shown if v.name == args.node]
    if getattr(args, "selector", None):
        from ..sim.selectors import SelectorError, Slim, parse_label_selector

        try:
            pred = parse_label_selector(args.selector)
        except SelectorError as exc:
            raise OutputError(f"-l {args.selector}: {exc}") from None
        if pred is not None:
            shown = [v for v in shown if pred(Slim({}, dict(state.node_labels(v.name) or {})))]
    if getattr(args, "sort_by", None):
        field = _sort_field(args.sort_by)
        now = view.at

        def key(v: NodeView) -> tuple[bool, Any]:
            value = node_json(v, now)[field]
            return (value is None, value if value is not None else 0)

        shown = sorted(shown, key=key)
    return list(shown)


def write_answer(state: Any, view: FleetView, args: argparse.Namespace, shown: list[NodeView],
                 write: Callable[[str], Any] | None = None) -> None:
    """The fleet once, in ``-o``'s form."""
    write = write or sys.stdout.write  # looked up now: a test or a caller may have replaced stdout
    output = output_of(args)
    node = getattr(args, "node", None)
    if output == "json":  # written piece by piece: 65,000 nodes are never held as one text
        sys.stdout.flush()
        write_fleet_json(sys.stdout.buffer.write, state, view, node, shown=shown)
        sys.stdout.buffer.write(b"\n")
        sys.stdout.buffer.flush()
    elif output == "yaml":
        import yaml

        doc = orjson.loads(terminal_safe_json(orjson.dumps(fleet_json(state, view, node, shown=shown))))
        write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=120))
    elif output == "name":
        for v in shown:
            write(f"node/{safe(v.name, 253)}\n")
    else:
        for line in fleet_table_lines(state, view, node, shown=shown, headers=not args.no_headers,
                                      wide=output == "wide"):
            write(line)
            write("\n")


def changes(before: dict[str, str], view: FleetView) -> Iterator[NodeView]:
    """The views whose state differs from ``before`` (name -> state word), updating it; a node
    gone from the view is forgotten silently (a deletion is not a state)."""
    seen = set()
    for v in view.nodes:
        seen.add(v.name)
        word = v.state.word
        if before.get(v.name) != word:
            before[v.name] = word
            yield v
    for name in [n for n in before if n not in seen]:
        del before[name]


def change_line(v: NodeView, was: str | None, now: float, output: str) -> str:
    if output == "json":
        doc = {"at": format_time(now), "was": was, **node_json(v, now)}
        return terminal_safe_json(orjson.dumps(doc)).decode() + "\n"
    if output == "name":
        return f"node/{safe(v.name, 253)}\n"
    cause = safe(v.cause, 120) or "-"
    return f"{format_time(now)}  {safe(v.name, 63)}  {was or '-'} -> {v.state.symbol} {v.state.word}  {cause}\n"


def watch(evaluate: Callable[[], tuple[Any, FleetView]], args: argparse.Namespace, first: FleetView,
          state: Any, *, interval: float = 1.0, sleep: Callable[[float], None] = time.sleep,
          stop: Callable[[], bool] = lambda: False, write: Callable[[str], Any] | None = None) -> int:
    """``-w``: after the first answer, every ``interval`` the fleet judged again and each change
    written at once (flushed: a pipe sees it). Returns when ``stop()`` says so or on Ctrl-C (0)."""
    write = write or sys.stdout.write
    output = output_of(args)
    before = {v.name: v.state.word for v in nodes_shown(state, first, args)}
    try:
        while not stop():
            sleep(interval)
            state, view = evaluate()
            allowed = {v.name for v in nodes_shown(state, view, args)}
            prev = dict(before)
            for v in changes(before, _only(view, allowed)):
                write(change_line(v, prev.get(v.name), view.at, output))
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 0
    return 0


def _only(view: FleetView, names: set[str]) -> FleetView:
    import dataclasses

    return dataclasses.replace(view, nodes=tuple(v for v in view.nodes if v.name in names))
