"""The run options of ``simulate`` and ``compare``, generated from :data:`dlsched.run.options.OPTIONS`.

The commands declare only their own options (``--out``, ``--json``, ``--policies``...); every
option that describes the run is added here from the library's table, with the type and default
of the :class:`~dlsched.run.config.RunConfig` field it fills. The command body receives the run
options as one ``key -> value`` dict and maps it with
:func:`dlsched.run.options.configs_from_options` -- the one place flags become a run.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import typer

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


def given_keys(ctx: typer.Context) -> set[str]:
    """The run options that came from the command line or the environment (not defaults)."""
    out = set()
    for option in OPTIONS.values():
        source = ctx.get_parameter_source(option.param)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.add(option.key)
    return out


def run_command(app: typer.Typer, name: str, own: list[inspect.Parameter], skip: tuple[str, ...] = (),
                defaults: dict[str, object] | None = None) -> Callable:
    """Register ``body(ctx, values, given, **own)`` as command ``name`` with every run option
    (except ``skip``) plus the command's ``own`` parameters. ``values`` maps run-option keys to
    their values; a policy parameter is in it only when given (so that its policy's default holds)."""
    options = [o for o in OPTIONS.values() if o.key not in skip]
    defaults = defaults or {}

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
            return body(ctx, values, given, **kwargs)

        params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)]
        params += [_typer_param(o, defaults.get(o.key)) for o in options]
        params += own
        del callback.__wrapped__  # typer must read the generated signature, not the body's
        callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        callback.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name)(callback)
        return callback

    return decorator


def own_option(name: str, annotation: object, info: object) -> inspect.Parameter:
    """One of a command's own parameters (``--out``, ``--json``...)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)
