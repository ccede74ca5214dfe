"""``nodewatch demo``: the dashboard on the embedded simulated fleet (no cluster needed)."""

from __future__ import annotations

import argparse

from .common import add_demo_arguments, add_settings_arguments, open_recorder, say_recording_stopped, settings_from_args
from .dashboard import add_dashboard_arguments, run_app
from .metrics_options import MetricsServices, add_metrics_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_demo_arguments(parser)
    add_dashboard_arguments(parser)
    add_metrics_arguments(parser)
    add_settings_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..sources.demo import DemoSource

    settings = settings_from_args(args)
    recorder = None
    if args.record:
        recorder = open_recorder(args.record, {"kind": "demo", "scenario": args.scenario, "nodes": args.nodes,
                                               "seed": args.seed}, settings)
    source = DemoSource(settings=settings, nodes=args.nodes, scenario=args.scenario, seed=args.seed,
                        speed=args.speed, recorder=recorder)
    if recorder is not None:
        recorder.on_stop = lambda message: say_recording_stopped(source, message)  # type: ignore[attr-defined]
    metrics = MetricsServices(source, args)
    try:
        if metrics.wanted:
            metrics.start()
        return run_app(source, args)
    finally:
        metrics.stop()
        if recorder is not None:
            recorder.close()
