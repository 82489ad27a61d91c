"""Pieces shared by the CLI commands: error reporting, trace + cluster loading, progress."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from dlsched.cli.tables import FittingConsole
from dlsched.run.inputs import time_arg  # noqa: F401 - re-exported for the commands that read windows

console = Console(stderr=True)
out = FittingConsole(width=None if sys.stdout.isatty() else 160)  # tables fitted: no number is ever cut


@contextlib.contextmanager
def clear_errors() -> Iterator[None]:
    """Turn expected failures (bad input, impossible requests) into a message and exit code 2."""
    try:
        yield
    except (ValueError, FileNotFoundError, PermissionError, RuntimeError, KeyError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        # soft_wrap: one unbroken line (easy to grep); Text: no markup parsing of '[' in messages
        console.print(Text.assemble(("error: ", "bold red"), str(msg)), soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None


def say(text: str, style: str = "") -> None:
    """Print one line of a library's report on stderr (the ``say`` the library functions take)."""
    console.print(Text(text, style=style), soft_wrap=True, highlight=False)


def load_jobs_and_cluster(trace: Path | None, trace_format: str, vc_config: Path | None, nodes: int | None,
                          gpus_per_node: int, start: str | None, end: str | None, vcs: str | None,
                          skip_invalid: bool, synthetic_jobs: int = 20000, seed: int = 0, quiet: bool = False,
                          topology: str | None = None, cluster_file: Path | None = None):
    """:func:`dlsched.run.inputs.load_jobs_and_cluster`, its report printed unless ``quiet``."""
    from dlsched.run import inputs

    return inputs.load_jobs_and_cluster(trace, trace_format, vc_config, nodes, gpus_per_node, start, end, vcs,
                                        skip_invalid, synthetic_jobs, seed, inputs.quiet if quiet else say,
                                        topology=topology, cluster_file=cluster_file)


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool = True):
    """A rich progress bar fed by the engine's ``progress(done, total)`` callback."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _announce_zoo_exports(jobs) -> dict[str, str]:
    """:func:`dlsched.run.resources.announce_zoo_exports`, printed."""
    from dlsched.run.resources import announce_zoo_exports

    return announce_zoo_exports(jobs, say)


def with_export_progress(resolver, exports: dict[str, str], say=say):
    """:func:`dlsched.run.resources.with_export_progress`, printed (or through ``say``)."""
    from dlsched.run import resources

    return resources.with_export_progress(resolver, exports, say)


def predict_resources(jobs, gpu: str, predictor_dir: Path | None = None) -> None:
    """:func:`dlsched.run.resources.predict_resources`, its report printed."""
    from dlsched.cli import progress
    from dlsched.cli.errors import missing_extra
    from dlsched.run import resources

    n_ref = sum(1 for j in jobs if j.onnx_ref or j.model_name)
    with progress.Activity(f"--predict-resources: {n_ref:,} jobs", progress.enabled()) as live:
        def say_live(text: str, style: str = "") -> None:
            live.clear()
            say(text, style)

        resources.predict_resources(jobs, gpu, predictor_dir, say_live, missing_extra)
