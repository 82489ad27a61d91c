"""The options of a run, once: key -> where its value goes in :class:`RunConfig`, with its help.

``dlsched simulate`` and ``compare`` generate their command-line options from :data:`OPTIONS`
(``dlsched.cli.run_options``), a sweep spec's keys are these keys, and
:func:`configs_from_options` is the one function that turns ``key -> value`` into run
configurations. An option's type and default are read from the dataclass field it fills, so the
command line, the sweep and the library cannot disagree about them. The policy options
(``--lam``, ``--priority-file``, ``--beta``...) are not listed here: :func:`policy_options`
generates one per field of the policies' parameter dataclasses, and ``--param NAME=VALUE`` sets
any of them as text.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import NoneType, UnionType

from dlsched.run import config as C
from dlsched.run.config import OptionError, RunConfig
from dlsched.run.params import make_params, parse_assignments

TRACE_FORMATS = "auto|helios|helios-log|philly-pollux|pai|dlsched"
SECTIONS = {"workload": C.WorkloadConfig, "cluster": C.ClusterConfig, "policy": C.PolicyConfig,
            "placement": C.PlacementConfig, "models": C.ModelsConfig, "energy": C.EnergyConfig,
            "engine": C.EngineConfig, "observe": C.ObserveConfig}
PARAMS = "params"  # the section of policy parameters


@dataclass(frozen=True, slots=True)
class RunOption:
    """One option of a run: its spec key (the flag without dashes), the CLI parameter name, the
    config field it fills, and its help text."""

    key: str
    param: str
    section: str
    field: str
    help: str
    decls: tuple[str, ...] = ()       # extra flag spellings / the bool pair, for the CLI
    metavar: str | None = None
    kind: type = str                  # filled from the dataclass field
    optional: bool = False
    default: object = None

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


def _opt(key: str, section: str, fld: str, help: str, param: str | None = None, decls: tuple[str, ...] = (),
         metavar: str | None = None, kind: type | None = None, optional: bool = False,
         default: object = None) -> RunOption:
    if section != PARAMS:
        cls = SECTIONS[section]
        f = {x.name: x for x in dataclasses.fields(cls)}[fld]
        hint = typing.get_type_hints(cls)[fld]
        if typing.get_origin(hint) in (typing.Union, UnionType):
            inner = [a for a in typing.get_args(hint) if a is not NoneType]
            kind, optional = inner[0], True
        else:
            kind, optional = hint, False
        default = f.default
    return RunOption(key, param or key, section, fld, help, decls, metavar, kind or str, optional, default)


OPTIONS: dict[str, RunOption] = {o.key: o for o in (
    # -- workload ----------------------------------------------------------------------------------
    _opt("trace", "workload", "trace", "Trace file; the built-in workload when omitted."),
    _opt("trace_format", "workload", "trace_format", TRACE_FORMATS),
    _opt("workload", "workload", "workload", "A GPU-sharing workload as input (instead of --trace): horus-wlarge|"
         "horus-wsmall|coscheml-15|coscheml-30|coscheml-60|philly-profiled, with its cluster and GPU type "
         "(docs/sharing.md)."),
    _opt("jobs", "workload", "jobs", "Jobs of the built-in workload."),
    _opt("seed", "workload", "seed", "Seed of the built-in workload (or of --workload)."),
    _opt("start", "workload", "start", "Window start (wall clock or seconds)."),
    _opt("end", "workload", "end", "Window end, inclusive."),
    _opt("vcs", "workload", "vcs", "Only these VCs (comma separated)."),
    _opt("skip_invalid", "workload", "skip_invalid", "Skip invalid rows (counted by reason)."),
    _opt("predict_resources", "workload", "predict_resources",
         "Predict each job's GPU utilisation and memory from its model graph.", param="predict"),
    _opt("predictor", "workload", "predictor", "With --predict-resources: a predictor saved by `dlsched predictor "
         "train` (default: the shipped one). Implies --predict-resources.", param="predictor_dir"),
    _opt("gpu", "workload", "gpu", "GPU type: for --predict-resources, and the cluster's GPU memory with "
         "--max-jobs-per-gpu > 1 or --failure-model oom (default: V100, or the --workload's testbed GPU)."),
    _opt("time_limits", "workload", "time_limits", "Give jobs without a time limit a user-style one: the true "
         "duration x overestimate (a factor, or LO:HI drawn log-uniformly per job), rounded up to a multiple of "
         "round seconds, for a share of the jobs; seeded by --seed. Jobs with a limit keep theirs; a note "
         "counts both (docs/backfill.md).", metavar="overestimate=F,round=S,share=P"),
    # -- cluster -----------------------------------------------------------------------------------
    _opt("vc_config", "cluster", "vc_config", "VC sizes (vc,node num): a shortcut for --cluster."),
    _opt("cluster", "cluster", "cluster_file", "The whole cluster in one TOML/YAML file (node groups per VC, GPU "
         "type, CPUs, memory, topology, power); see `dlsched cluster show`.", param="cluster_file"),
    _opt("nodes", "cluster", "nodes", "One shared pool of N nodes instead of VCs."),
    _opt("gpus_per_node", "cluster", "gpus_per_node", "GPUs per node."),
    _opt("topology", "cluster", "topology", "Node topology preset: pcie|dgx1|nvswitch|minsky."),
    # -- policy and placement ----------------------------------------------------------------------
    _opt("policy", "policy", "name", "Scheduling policy (see `dlsched policies`)."),
    _opt("backfill", "policy", "backfill", "Let later jobs start when the head does not fit."),
    _opt("placement", "placement", "name", "consolidate|first-fit|best-fit|spread|topo-aware|topo-aware-p|"
         "horus-cost|obp|... (see `dlsched policies`); default: the policy's own (e.g. horus-cost for horus), "
         "else consolidate."),
    _opt("max_jobs_per_gpu", "placement", "max_jobs_per_gpu",
         f"Jobs one GPU may hold (1 = exclusive; >1 lets placers share GPUs; at most {C.MAX_JOBS_PER_GPU})."),
    # -- ground truth ------------------------------------------------------------------------------
    _opt("speed_model", "models", "speed", "Ground-truth speed model: none|time-sliced|topology|colocation "
         "(topology: placement and bus interference; colocation: measured pair slowdowns, see --profiles). "
         "Default: topology with a topology placement (topo-aware, topo-aware-p) or --topology, else none "
         "(co-located jobs then run at full speed)."),
    _opt("failure_model", "models", "failure", "Ground-truth failure model: none|oom (out of memory when a "
         "GPU's jobs truly need more than it has; the job is resubmitted)."),
    _opt("profiles", "models", "profiles", "Profile table (the simulated truth) for --workload job types, "
         "--speed-model colocation and coscheml's interference model: builtin (Gavel-derived pairs capped at time "
         "slicing, true memory = estimate x a seeded measured error; the default), builtin-raw (pairs uncapped), "
         "lucid (../shared/profiles/lucid), a profiles folder (Lucid + Gavel) or a .json."),
    # -- energy ------------------------------------------------------------------------------------
    _opt("energy", "energy", "mode", "Energy saving: ces (Helios CES) or vanilla (idle timeout)."),
    _opt("boot_delay", "energy", "boot_delay", "Energy: seconds a woken node needs before taking jobs."),
    _opt("idle_timeout", "energy", "idle_timeout", "Energy (vanilla): power off nodes idle this many seconds."),
    _opt("buffer", "energy", "buffer", "Energy (ces): spare powered nodes (default 5% of nodes)."),
    # -- engine and observation --------------------------------------------------------------------
    _opt("compat", "engine", "compat", "none|helios: reproduce the Helios simulator's quirks."),
    _opt("check_invariants", "engine", "check_invariants", "Verify cluster state after every pass (slow)."),
    _opt("preemption_overhead", "engine", "preemption_overhead", "Seconds a preempted job redoes (default: "
         f"7/30/60 s for 1/<=8/>8 GPUs, as Helios; at most {C.MAX_PREEMPTION_OVERHEAD_S:,.0f})."),
    _opt("observe_after", "observe", "after", "After a job has run this long, its observed GPU utilisation and "
         "memory replace its predictions for later decisions (default: never).", metavar="SECONDS"),
    # -- policy parameters: --param here; a flag per field comes from policy_options() -----------
    _opt("param", PARAMS, "param", "A parameter of the policy's own, NAME=VALUE (repeatable; `dlsched policies` "
         "lists each policy's parameters), e.g. --policy las --param queues=3.", kind=list, default=(),
         metavar="NAME=VALUE"),
)}


def _help_of(params_cls: type, fld: dataclasses.Field) -> str:
    """A field's help: its ``metadata["help"]`` as written, else the first paragraph of the
    class docstring (what the parameters are), one line."""
    text = fld.metadata.get("help") if fld.metadata else None
    if text:
        return text
    doc = (params_cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


@lru_cache(maxsize=4)
def _policy_options(names: tuple[str, ...]) -> dict[str, RunOption]:
    """:func:`policy_options` for the registered names ``names`` (cached per registry contents,
    so a policy registered later -- a plug-in, a test's -- gets its flags)."""
    from dlsched.registry import policy_params
    from dlsched.run.params import field_kinds

    declared: dict[str, list[tuple[str, type, dataclasses.Field]]] = {}
    kinds: dict[str, tuple[type, bool]] = {}
    for name in names:
        cls = policy_params(name)
        if cls is None:
            continue
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key, kind in field_kinds(cls).items():
            if key in OPTIONS:
                raise TypeError(f"policy {name}: parameter {key!r} shadows the run option {OPTIONS[key].flag}")
            if kinds.setdefault(key, kind) != kind:
                raise TypeError(f"policy {name}: parameter {key!r} is {kind}, another policy's is {kinds[key]}")
            declared.setdefault(key, []).append((name, cls, fields[key]))
    out: dict[str, RunOption] = {}
    for key, owners in declared.items():
        kind, optional = kinds[key]
        defaults = {repr(f.default) for _, _, f in owners}
        default = owners[0][2].default if len(defaults) == 1 else None
        helps = dict.fromkeys(_help_of(cls, f) for _, cls, f in owners)
        policies = ", ".join(name for name, _, _ in owners)
        if len(helps) == 1 and owners[0][2].metadata.get("help"):
            text = next(iter(helps))
        else:
            text = f"{policies}: {' / '.join(helps)}"
        if len(defaults) > 1:
            text += " (default: each policy's own)"
        metavar = next((f.metadata["metavar"] for _, _, f in owners if "metavar" in f.metadata), None)
        out[key] = RunOption(key, key, PARAMS, key, text, metavar=metavar, kind=kind, optional=optional,
                             default=default)
    return out


def policy_options() -> dict[str, RunOption]:
    """A flag per field of every registered policy's parameter class (``--lam``, ``--beta``...),
    generated: a policy's new parameter is a flag and a sweep key with no edit outside its file.
    The type is the field's; the default is the field's when every policy declaring the field
    agrees on it (else none: each policy keeps its own); the help is the field's
    ``metadata["help"]`` when it has one, else the declaring policies and their class docstring.
    A field named like a run option, or typed differently by two policies, is refused
    (``TypeError``: a programming error the registry tests catch). Imports every policy module, so
    the commands call it only when a command line names a flag that is not a run option, or asks
    for help (``dlsched.cli.run_options``)."""
    from dlsched.registry import POLICIES

    return _policy_options(tuple(POLICIES))


def lookup(key: str) -> RunOption:
    """The option a spec key or CLI parameter name names (dashes or underscores)."""
    norm = str(key).replace("-", "_")
    if norm in OPTIONS:
        return OPTIONS[norm]
    for option in OPTIONS.values():
        if option.param == norm:
            return option
    raise KeyError(norm)


def policy_param_fields() -> dict[str, tuple[type, bool]]:
    """Every field of every registered policy's parameters: name -> (type, None allowed)
    (imports every policy module)."""
    return {k: (o.kind, o.optional) for k, o in policy_options().items()}


def policy_config(name: str, given: dict[str, object], generic: dict[str, str], backfill: bool = False
                  ) -> tuple[C.PolicyConfig, list[str]]:
    """Policy ``name`` with its parameters: ``given`` by their own flags (``--threshold``: typed
    values) and ``generic`` by ``--param NAME=VALUE`` (texts), and the names of those it does not
    read. ``simulate`` and ``serve`` both build their policy here, so a value is checked alike
    whichever command takes it; an error names the flag the user typed."""
    clash = sorted(set(generic) & set(given))
    if clash:
        raise OptionError("param", f"--param {clash[0]} is also given as {C.flag(clash[0])}")
    try:
        params, left = make_params(name, {**given, **generic})
    except OptionError as exc:  # the parameters' checks name --param KEY; a flag was typed as --KEY
        text = str(exc)
        if exc.key in given and f"--param {exc.key}" in text:
            raise OptionError(exc.key, text.replace(f"--param {exc.key}", C.flag(exc.key))) from None
        raise
    return C.PolicyConfig(name, params, backfill), left


def check_unread(names: list[str], given: dict[str, object], generic: dict[str, str], unread: set[str]) -> None:
    """Refuse what no policy of ``names`` reads and is surely a mistake: a file given by its flag
    (``--priority-file`` to a policy without one), or any ``--param NAME`` (a misspelling)."""
    files = [k for k in sorted(unread) if k in given and policy_param_fields().get(k, (None,))[0] is Path]
    if files:  # a file given to steer the run that no policy of it reads: surely a mistake
        from dlsched.run.params import readers

        raise OptionError(files[0], f"{C.flag(files[0])} is for the policies whose parameters include it "
                                    f"({', '.join(readers(files[0]))}), not {', '.join(names)}")
    left_generic = sorted(k for k in unread if k in generic)
    if left_generic:
        from dlsched.run.params import declared, readers

        who = readers(left_generic[0])
        raise OptionError("param", f"--param {left_generic[0]}: not a parameter of {', '.join(names)} "
                                   f"({declared(names)})" + (f"; it is a parameter of {_names(who)}" if who else ""))


def configs_from_options(values: dict[str, object], policies: list[str] | None = None
                         ) -> tuple[list[RunConfig], list[str]]:
    """``key -> value`` (keys of :data:`OPTIONS`, or a field of some policy's parameters; left
    out: the default) -> one RunConfig per policy (``policies``, default the ``policy`` value),
    plus the given policy parameters that none of these policies reads.

    Policy parameters count as given only when present in ``values``; ``param`` is a list of
    ``NAME=VALUE`` texts (an unknown NAME is an error)."""
    sections: dict[str, dict[str, object]] = {s: {} for s in SECTIONS}
    given: dict[str, object] = {}
    generic: dict[str, str] = {}
    for key, value in values.items():
        try:
            option = lookup(key)
        except KeyError:
            given[key] = value  # a policy parameter set by its own name (a sweep key)
            continue
        if option.section != PARAMS:
            if option.kind is Path and isinstance(value, str):
                value = Path(value)
            sections[option.section][option.field] = value
        elif key == "param":
            generic = parse_assignments(value or ())
        else:
            given[option.key] = value
    names = policies if policies is not None else [str(sections["policy"].pop("name", "fifo"))]
    sections["policy"].pop("name", None)
    clash = sorted(set(generic) & set(given))
    if clash:
        raise OptionError("param", f"--param {clash[0]} is also given as {C.flag(clash[0])}")
    built = {s: cls(**sections[s]) for s, cls in SECTIONS.items() if s != "policy"}
    backfill = bool(sections["policy"].get("backfill", False))
    runs, unread = [], None
    for name in names:
        chosen, left = policy_config(name, given, generic, backfill)
        unread = set(left) if unread is None else unread & set(left)
        runs.append(RunConfig(workload=built["workload"], cluster=built["cluster"], policy=chosen,
                              placement=built["placement"], models=built["models"], energy=built["energy"],
                              engine=built["engine"], observe=built["observe"]))
    check_unread(names, given, generic, unread or set())
    return runs, sorted(unread or ())


def _names(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
