"""Layers: the core, the sources, the simulator, the hub and the testbed never import the UI toolkit
(harlequin's import hygiene); nothing outside the core reads the fleet state's fields; and readers
ask the state only what ``core.source.FleetReader`` offers, which every state implements."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import nodewatch

NO_UI_PACKAGES = ("nodewatch.core", "nodewatch.sources", "nodewatch.sim", "nodewatch.hub", "nodewatch.testbed",
                  "nodewatch.metrics")


def _modules() -> list[str]:
    out = []
    for info in pkgutil.walk_packages(nodewatch.__path__, "nodewatch."):
        if info.name.startswith(NO_UI_PACKAGES) or info.name in NO_UI_PACKAGES:
            out.append(info.name)
    return out


def test_there_are_core_modules_to_check():
    mods = _modules()
    assert "nodewatch.core.fleet" in mods and "nodewatch.core.rules" in mods


def test_no_textual_or_rich_below_the_ui():
    mods = _modules()
    code = (
        "import importlib, sys\n"
        f"mods = {mods!r}\n"
        "bad = []\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "    leaked = [x for x in ('textual', 'rich') if x in sys.modules]\n"
        "    if leaked: bad.append((m, leaked)); break\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"UI toolkit imported below the UI layer: {r.stdout} {r.stderr[-2000:]}"


def test_every_command_module_imports():
    from nodewatch.cli import COMMANDS, build_parser

    for _, (module, _) in COMMANDS.items():
        __import__(f"nodewatch.commands.{module}")
    build_parser()


# --- one door into the state ---------------------------------------------------------------------

NODEWATCH = Path(nodewatch.__file__).parent
PUBLIC_FIELDS = {"settings", "silence_seconds"}
"""Configuration a reader may read (a replay builds a scratch state with the same settings)."""


def _state_fields() -> set[str]:
    """The parts of a FleetState and every field they own (the store's, the evaluator's), and the
    store's fields it shows read-only: none of them is a reader's business."""
    from nodewatch.core.fleet import FleetState

    st = FleetState()
    own = set(vars(st)) | set(vars(st.store)) | set(vars(st.evaluator))
    shown = {n for n, v in vars(FleetState).items() if isinstance(v, property)}
    return (own | shown) - PUBLIC_FIELDS


def _reaching_in(source: str, fields: set[str]) -> list[tuple[int, str]]:
    """Where ``source`` reads a field of a FleetState: ``x.field`` where ``x`` is ``<anything>.state``,
    a name ``state``, or a name bound to one (``st = self.state``, ``s = FleetState(...)``, a parameter
    annotated ``FleetState``). A heuristic, but one that sees every way the code reaches in today."""
    tree = ast.parse(source)
    hits = []
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        names = {"state"}
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in scope.args.args + scope.args.kwonlyargs:
                if a.annotation is not None and "FleetState" in ast.unparse(a.annotation):
                    names.add(a.arg)
        for n in ast.walk(scope):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                v = n.value
                if (isinstance(v, ast.Attribute) and v.attr == "state") or (
                        isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "FleetState"):
                    names.add(n.targets[0].id)
        for n in ast.walk(scope):
            if isinstance(n, ast.Attribute) and n.attr in fields:
                v = n.value
                if (isinstance(v, ast.Name) and v.id in names) or (isinstance(v, ast.Attribute) and v.attr == "state"):
                    hits.append((n.lineno, n.attr))
    return sorted(set(hits))


def test_the_door_scan_sees_a_reader_reaching_in():
    fields = _state_fields()
    assert {"nodes", "leases", "certs", "lock", "_views"} <= fields
    src = ("def f(src, other: 'FleetState'):\n"
           "    st = src.state\n"
           "    with st.lock:\n"
           "        n = len(src.state.nodes) + len(other.leases)\n"
           "    return view.nodes, src.state.evaluate(0), src.state.settings\n")
    assert _reaching_in(src, fields) == [(3, "lock"), (4, "leases"), (4, "nodes")]


def test_no_module_outside_the_core_touches_the_state_fields():
    """Readers use FleetState's methods and the views (core/views.py), never its fields."""
    fields = _state_fields()
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(NODEWATCH.rglob("*.py")):
        rel = path.relative_to(NODEWATCH).as_posix()
        if rel.startswith("core/"):
            continue
        for line, field in _reaching_in(path.read_text(), fields):
            found.setdefault((rel, field), []).append(line)
    assert not found, f"modules outside the core read FleetState's fields (use its queries): {found}"


def _reader_members() -> set[str]:
    from nodewatch.core.source import FleetReader

    return {n for n in vars(FleetReader) if not n.startswith("_")}


def test_every_state_a_reader_gets_answers_all_of_fleet_reader():
    import inspect

    from nodewatch.core.fleet import FleetState
    from nodewatch.core.multi import MultiFleet
    from nodewatch.core.source import FleetReader
    from nodewatch.hub.viewer_state import ViewerState

    members = _reader_members()
    assert {"evaluate", "node_details", "node_labels", "pod_records_on"} <= members
    for cls in (FleetState, ViewerState, MultiFleet):
        for name in members:
            impl = getattr(cls, name, None)
            assert callable(impl), f"{cls.__name__} lacks {name}"
            want = [p.name for p in inspect.signature(getattr(FleetReader, name)).parameters.values()]
            got = [p.name for p in inspect.signature(impl).parameters.values()]
            assert got == want, (cls.__name__, name, got, want)


def test_the_ui_asks_the_state_only_what_fleet_reader_offers():
    """Calls on ``....state.X(...)`` / ``state.X(...)`` in the UI and the fleet history: a hub viewer
    must be able to answer each (it found a gap once: the history read the state's pod index)."""
    root = Path(nodewatch.__file__).parent
    members = _reader_members()
    files = [*sorted((root / "ui").glob("*.py")), root / "core" / "history.py", root / "core" / "search.py"]
    asked: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                target = node.func.value
                named = (isinstance(target, ast.Name) and target.id == "state") or (
                    isinstance(target, ast.Attribute) and target.attr == "state")
                if named:
                    asked.setdefault(node.func.attr, []).append(f"{path.name}:{node.lineno}")
    assert asked, "the scan found no calls on the state at all"
    unknown = {k: v for k, v in asked.items() if k not in members}
    assert not unknown, f"the UI asks the state for what FleetReader does not offer: {unknown}"
