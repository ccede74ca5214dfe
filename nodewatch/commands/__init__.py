"""The ``nodewatch`` subcommands. Each module has ``add_arguments(parser)`` and ``run(args) -> int``."""
