"""The run options of ``simulate`` and ``compare``, generated from the library's option tables.

The commands declare only their own options (``--out``, ``--json``, ``--policies``...); every
option that describes the run is added here from :data:`dlsched.run.options.OPTIONS`, with the
type and default of the :class:`~dlsched.run.config.RunConfig` field it fills, and every policy
parameter (``--lam``, ``--beta``...) from :func:`dlsched.run.options.policy_options`, generated from
the policies' parameter dataclasses: a new policy's parameter is a flag with no edit here. The
command body receives the run options as one ``key -> value`` dict and maps it with
:func:`dlsched.run.options.configs_from_options` -- the one place flags become a run.

Generating the policy flags imports every policy module (tens of milliseconds), so
:class:`RunCommand` adds them only when a command line needs them: when it names a flag that is
not one of the command's own or a run option, or asks for ``--help``. ``dlsched simulate --policy
fifo`` imports FIFO alone, as before; a misspelt flag still gets click's "No such option" (with
the policy flags among the suggestions), which the CLI prints as one ``error:`` line.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:  # Typer carries its own click (typer._click): the package itself is not imported
    import click

from dlsched.run.options import OPTIONS, PARAMS, RunOption


def _typer_param(option: RunOption, default: object = None) -> inspect.Parameter:
    flag = option.flag
    default = option.default if default is None else default
    if option.kind is list:
        info = typer.Option(None, flag, help=option.help, metavar=option.metavar, show_default=False)
        annotation: object = list[str] | None
    elif option.kind is bool:
        info = typer.Option(default, flag, help=option.help)
        annotation = bool
    else:
        info = typer.Option(default, flag, help=option.help, metavar=option.metavar)
        annotation = option.kind | None if option.optional or default is None else option.kind
    return inspect.Parameter(option.param, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def _click_param(option: RunOption) -> click.Parameter:
    """The click option Typer would build for ``option`` (same types, help and default display)."""
    from typer.main import get_click_param
    from typer.models import ParamMeta

    p = _typer_param(option)
    return get_click_param(ParamMeta(name=p.name, default=p.default, annotation=p.annotation))[0]


class RunCommand(TyperCommand):
    """A run command whose policy-parameter flags are generated on demand (see the module doc).

    The flags go just before ``--param`` (the text spelling of the same parameters), so
    ``--help`` lists them together."""

    def _static_flags(self) -> set[str]:
        return {opt for p in self.params for opt in (*p.opts, *p.secondary_opts)}

    def add_policy_flags(self) -> list[click.Parameter]:
        """Add and return a flag per policy parameter; made again when the registry has changed
        since (a policy registered later: a plug-in's, a test's)."""
        from dlsched.registry import POLICIES
        from dlsched.run.options import policy_options

        names = tuple(POLICIES)
        if getattr(self, "_policy_names", None) == names:
            return self._policy_flags
        old = set(map(id, getattr(self, "_policy_flags", ())))
        self.params = [p for p in self.params if id(p) not in old]
        taken = {p.name for p in self.params}
        added = []
        for option in policy_options().values():
            if option.param in taken:
                raise TypeError(f"policy parameter {option.key!r} shadows {self.name}'s own option of that name")
            added.append(_click_param(option))
        at = next((i for i, p in enumerate(self.params) if p.name == "param"), len(self.params))
        self.params[at:at] = added
        self._policy_flags, self._policy_names = added, names
        return added

    def _needs_policy_flags(self, args: list[str]) -> bool:
        """Whether ``args`` name a long flag that is not a static one (``--help`` included)."""
        static = self._static_flags()
        for arg in args:
            if arg == "--":
                return False
            if arg.startswith("--") and arg.split("=", 1)[0] not in static:
                return True
        return False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if self._needs_policy_flags(args):
            self.add_policy_flags()
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.add_policy_flags()
        return super().format_help(ctx, formatter)


def given_keys(ctx: typer.Context) -> set[str]:
    """The run options that came from the command line or the environment (not defaults),
    policy parameters included (by their keys)."""
    out = set()
    for option in OPTIONS.values():
        source = ctx.get_parameter_source(option.param)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(option.key)
    for param in getattr(ctx.command, "_policy_flags", ()):
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(param.name)
    return out


def run_command(app: typer.Typer, name: str, own: list[inspect.Parameter], skip: tuple[str, ...] = (),
                defaults: dict[str, object] | None = None) -> Callable:
    """Register ``body(ctx, values, given, **own)`` as command ``name`` with every run option
    (except ``skip``) plus the command's ``own`` parameters. ``values`` maps run-option keys to
    their values; a policy parameter is in it only when given (so that its policy's default holds)."""
    options = [o for o in OPTIONS.values() if o.key not in skip]
    defaults = defaults or {}
    own_names = {p.name for p in own}

    def decorator(body: Callable) -> Callable:
        @functools.wraps(body)
        def callback(**kwargs):
            ctx = kwargs.pop("ctx")
            given = given_keys(ctx)
            values = {}
            for option in options:
                value = kwargs.pop(option.param)
                if option.section != PARAMS or option.key in given:
                    values[option.key] = value
            for key in [k for k in kwargs if k not in own_names]:  # generated policy flags
                value = kwargs.pop(key)
                if key in given:
                    values[key] = value
            return body(ctx, values, given, **kwargs)

        params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)]
        params += [_typer_param(o, defaults.get(o.key)) for o in options]
        params += own
        del callback.__wrapped__  # typer must read the generated signature, not the body's
        callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        callback.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name, cls=RunCommand)(callback)
        return callback

    return decorator


def own_option(name: str, annotation: object, info: object) -> inspect.Parameter:
    """One of a command's own parameters (``--out``, ``--json``...)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)
