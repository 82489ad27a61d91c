"""Entry point of the ``dlsched`` command. Each command group lives in its own module that
exposes ``register(app)``; adding a command = one module + one line in COMMAND_MODULES."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="dlsched",
    help="Prediction-based, interference- and topology-aware GPU cluster scheduler and simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES: list[str] = [
    "trace_cmd",
    "sim_cmd",
    "predictor_cmd",
    "estimate_cmd",
    "energy_cmd",
    "topology_cmd",
    "predict_cmd",
    "report_cmd",
]

for _module in COMMAND_MODULES:
    importlib.import_module(f"dlsched.cli.{_module}").register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
