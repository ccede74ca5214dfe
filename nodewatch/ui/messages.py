"""Messages the dashboard's widgets send up to the app ("attributes down, messages up")."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class NodeChosen(Message):
    """The user asked for the drill-down of this node (Enter or double click on a row)."""

    name: str

