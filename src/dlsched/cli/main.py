"""Entry point of the ``dlsched`` command.

Each command group lives in its own module that exposes ``register(app)``. The modules are
imported lazily: ``dlsched simulate`` imports only ``sim_cmd`` (not the predictors, the report or
the energy code), which keeps start-up short; ``dlsched --help`` imports them all to list every
command with its help. Adding a command = one module + one line per command name in COMMANDS
(``tests/test_cli_main.py`` checks that the table and the modules agree).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping

import typer
from typer.core import TyperGroup

# Command name -> the module(s) of dlsched.cli that register it, in the order `dlsched --help`
# lists them (plain commands first, then groups, as Typer orders them). A group that several
# modules extend (e.g. ``experiment``) names all of them.
COMMANDS: dict[str, tuple[str, ...]] = {
    "policies": ("sim_cmd",),
    "simulate": ("sim_cmd",),
    "compare": ("sim_cmd",),
    "demo": ("sim_cmd",),
    "estimate": ("estimate_cmd",),
    "forecast": ("energy_cmd",),
    "predict": ("predict_cmd",),
    "report": ("report_cmd",),
    "sweep": ("sweep_cmd",),
    "reproduce": ("reproduce_cmd",),
    "serve": ("serve_cmd",),
    "replay": ("replay_cmd",),
    "agent": ("agent_cmd",),
    "whatif": ("whatif_cmd",),
    "trace": ("trace_cmd",),
    "predictor": ("predictor_cmd",),
    "energy": ("energy_cmd",),
    "experiment": ("topology_cmd", "sharing_exp_cmd", "eta_cmd", "preempt_exp_cmd", "backfill_exp_cmd"),
    "bench": ("topology_cmd",),
    "topo": ("topology_cmd",),
    "interference": ("interference_cmd",),
    "cluster": ("cluster_cmd",),
}

# Every command module, in the order they were registered when all were imported eagerly.
COMMAND_MODULES: list[str] = ["trace_cmd", "sim_cmd", "predictor_cmd", "estimate_cmd", "energy_cmd",
                              "topology_cmd", "predict_cmd", "report_cmd", "interference_cmd", "sweep_cmd",
                              "reproduce_cmd", "serve_cmd", "replay_cmd", "agent_cmd", "cluster_cmd",
                              "sharing_exp_cmd", "eta_cmd", "whatif_cmd", "preempt_exp_cmd", "backfill_exp_cmd"]


class _LazyCommands(MutableMapping):
    """The group's name -> click command mapping; a name's module is imported on first lookup.

    Iterating yields every known name without importing anything (used for "did you mean"
    suggestions); reading a value (``get``, ``items``) imports the module(s) behind it.
    """

    def __init__(self, eager: MutableMapping) -> None:
        self._built: dict = dict(eager)
        self._registry = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        self._registered: set[str] = set()

    def _load(self, name: str) -> None:
        modules = [m for m in COMMANDS[name] if m not in self._registered]
        for module in modules:
            importlib.import_module(f"dlsched.cli.{module}").register(self._registry)
            self._registered.add(module)
        if modules:  # one shared sub-app so that modules extending the same group meet in it
            self._built.update(typer.main.get_group(self._registry).commands)

    def __getitem__(self, name: str):
        if name in COMMANDS and not set(COMMANDS[name]) <= self._registered:
            self._load(name)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._built if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(1 for n in self._built if n not in COMMANDS)

    def __setitem__(self, name: str, command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]


class LazyGroup(TyperGroup):
    """A Typer group whose commands come from :data:`COMMANDS`, imported when first used.

    ``main`` also guarantees that no traceback reaches a user: parser mistakes, a missing
    optional extra and unforeseen failures all end as one ``error:`` line (``cli/errors.py``).
    """

    def __init__(self, **attrs) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)

    def __call__(self, *args, **kwargs):
        # The program's entry point: the `dlsched` script and `python -m` call ``app()``, which
        # lands here; test runners (CliRunner) call ``main`` directly and never exit the process.
        self._as_program = True
        return self.main(*args, **kwargs)

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        argv = kwargs.get("args", args[0] if args else None)
        argv = sys.argv[1:] if argv is None else list(argv)
        if not argv or len(argv) == 1 or "--help" in argv or "-h" in argv:   # help may be printed
            from dlsched.cli.help_layout import install

            install()   # whole option names and choices at 80 columns (cli/help_layout.py)
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        from dlsched.cli.exiting import exit_code, quick_exit, take_request

        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except SystemExit as exc:   # a command (or a library) that called sys.exit itself
            code = exit_code(exc.code)
        except Exception as exc:  # the one place where everything is caught
            from dlsched.cli.errors import explain, print_error, show_traceback

            take_request()
            if show_traceback():
                raise
            message, code = explain(exc)
            print_error(message)
        code = code if isinstance(code, int) else 0
        asked = take_request()
        if getattr(self, "_as_program", False) and (asked or code != 0):
            # done and its files closed, or failing: skip the teardown, which with pyarrow loaded
            # ended ~3 error exits in 100 with 134 ("terminate called without an active exception")
            quick_exit(code)
        sys.exit(code)


app = typer.Typer(
    name="dlsched",
    cls=LazyGroup,
    help="Prediction-based, interference- and topology-aware GPU cluster scheduler and simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"dlsched {version('dlsched')}")
        except PackageNotFoundError:  # running from a source tree that was never installed
            from dlsched import __version__

            typer.echo(f"dlsched {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                            help="Print dlsched's version and exit."),
          quiet: bool = typer.Option(False, "--quiet", "-q",
                                     help="No live progress line (it is also off when stderr is not a terminal).")
          ) -> None:
    # Typer builds a group only for an app with a callback or registered commands; the
    # commands are lazy, hence this callback (which also carries --version).
    return None


if __name__ == "__main__":  # pragma: no cover
    app()
