"""``dlsched cluster show``: print a cluster file (checked), or export the built-in cluster as one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlsched.cli.common import clear_errors, console

cluster_app = typer.Typer(help="Clusters described in one TOML/YAML file (--cluster FILE).",
                          no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``cluster`` sub-app to the main app."""
    app.add_typer(cluster_app, name="cluster")


@cluster_app.command("show")
def show(
    file: Annotated[Path | None,
                    typer.Argument(help="A cluster file (.toml, .yaml) to check and print.")] = None,
    builtin: Annotated[bool, typer.Option("--builtin", help="The built-in workload's cluster.")] = False,
    out: Annotated[Path | None,
                   typer.Option("--out", help="Write the TOML here instead of printing it.")] = None,
) -> None:
    """Print a cluster as a TOML cluster file (the format --cluster reads)."""
    from dlsched.traces.cluster_file import cluster_to_toml, read_cluster_file

    with clear_errors():
        if out is not None:
            from dlsched.cli.checks import check_out_file

            check_out_file(out, "--out")
        if (file is None) == (not builtin):
            raise ValueError("give a cluster FILE or --builtin (one of them)")
        if builtin:
            from dlsched.core.cluster import ClusterSpec
            from dlsched.traces import synthetic

            cluster = ClusterSpec.from_vc_sizes(synthetic.default_cluster())
            title = "the built-in workload's cluster"
        else:
            cluster = read_cluster_file(file)
            title = str(file)
        text = cluster_to_toml(cluster, title)
        if file is not None:
            from dlsched.traces.cluster_queues import queues_to_toml, read_queues

            text += queues_to_toml(read_queues(file, cluster))
        if out is None:
            print(text, end="")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            console.print(f"wrote {out} ({len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs)",
                          highlight=False, markup=False)
