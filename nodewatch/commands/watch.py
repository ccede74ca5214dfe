"""``nodewatch watch`` (the default): the dashboard on a live cluster through kubeconfig."""

from __future__ import annotations

import argparse

from .common import add_live_arguments, add_settings_arguments, live_source_from_args, settings_from_args
from .dashboard import add_dashboard_arguments, run_app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_live_arguments(parser)
    add_dashboard_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    source = live_source_from_args(args, settings_from_args(args), record=args.record)
    try:
        return run_app(source, args)
    finally:
        source.stop()
        if source.recorder is not None:
            source.recorder.close()
