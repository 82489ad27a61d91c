"""A cluster in one file: parsing, errors that name file and key, round trips, and the CLI around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.topology import preset_topology
from dlsched.traces.cluster_file import cluster_to_toml, read_cluster_file
from dlsched.traces.model import TraceError

TOPO = Path(__file__).parent / "fixtures" / "topo"

TOML = """
[defaults]
gpu = "A100"
cpus = 96
idle_watts = 650

[[groups]]
vc = "train"
nodes = 2
topology = "dgx1"

[[groups]]
vc = "train"
nodes = 1
gpus = 4
gpu = "T4"
gpu_memory_mib = 15000
host_memory_gib = 256

[[groups]]
vc = "infer"
nodes = 3
gpus = 4
topology_file = "topo/minsky.txt"
"""

YAML = """
defaults: {gpu: A100, cpus: 96, idle_watts: 650}
groups:
  - {vc: train, nodes: 2, topology: dgx1}
  - {vc: train, nodes: 1, gpus: 4, gpu: T4, gpu_memory_mib: 15000, host_memory_gib: 256}
  - {vc: infer, nodes: 3, gpus: 4, topology_file: topo/minsky.txt}
"""


@pytest.fixture()
def cluster_dir(tmp_path: Path) -> Path:
    (tmp_path / "topo").mkdir()
    (tmp_path / "topo" / "minsky.txt").write_text((TOPO / "minsky.txt").read_text())
    return tmp_path


def _check(spec) -> None:
    assert list(spec.vcs) == ["train", "infer"]
    assert [len(v.node_ids) for v in spec.vcs.values()] == [3, 3]
    assert spec.total_gpus == 2 * 8 + 4 + 3 * 4
    first, t4, infer = spec.nodes[0], spec.nodes[2], spec.nodes[3]
    assert (first.gpus, first.gpu_type.name, first.gpu_type.memory_mib, first.cpus, first.idle_watts) == \
        (8, "A100", 40 * 1024, 96, 650.0)
    assert first.topology == preset_topology("dgx1")
    assert (t4.gpus, t4.gpu_type.name, t4.gpu_type.memory_mib, t4.host_memory_gib, t4.topology) == \
        (4, "T4", 15000, 256, None)
    assert infer.topology is not None and infer.topology.gpus == 4 and infer.node_id == "infer-n0000"


def test_toml_and_yaml_describe_the_same_cluster(cluster_dir) -> None:
    (cluster_dir / "c.toml").write_text(TOML)
    (cluster_dir / "c.yaml").write_text(YAML)
    toml_spec = read_cluster_file(cluster_dir / "c.toml")
    _check(toml_spec)
    yaml_spec = read_cluster_file(cluster_dir / "c.yaml")
    assert yaml_spec.nodes == toml_spec.nodes and yaml_spec.vcs == toml_spec.vcs


def test_round_trip_through_the_writer(cluster_dir) -> None:
    spec = read_cluster_file(_write(cluster_dir, TOML.replace(
        'topology_file = "topo/minsky.txt"', 'topology = "minsky"')))
    again = read_cluster_file(_write(cluster_dir, cluster_to_toml(spec), "again.toml"))
    assert again.nodes == spec.nodes and again.vcs == spec.vcs


def _write(folder: Path, text: str, name: str = "c.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,message", [
    ('[[groups]]\nvc = "a"\nnodes = 2\ngpuz = 4\n', "groups[1]: unknown key(s) gpuz; known: "),
    ('[[groups]]\nvc = "a"\nnodes = 0\n', "groups[1].nodes = 0: want a whole number >= 1"),
    ('[[groups]]\nvc = "a"\nnodes = 1\ngpu = "X9"\n', "groups[1].gpu: unknown GPU type 'X9'; choose from"),
    ('[[groups]]\nvc = "a"\nnodes = 1\ngpus = 4\ntopology = "dgx1"\n', "groups[1].topology: "),
    ('[[groups]]\nnodes = 1\n', "groups[1]: 'vc' is missing"),
    ('groups = []\n', "'groups' must list at least one node group"),
    ('vcs = 3\n[[groups]]\nvc = "a"\nnodes = 1\n', "unknown top-level key(s) vcs"),
    ('[[groups]\n', "not valid TOML"),
    # non-finite numbers: one error naming the line and key (inf was an internal error, nan named nothing)
    ('[[groups]]\nvc = "a"\nnodes = inf\n', "line 3: groups[1].nodes = inf: want a whole number >= 1"),
    ('[[groups]]\nvc = "a"\nnodes = nan\n', "line 3: groups[1].nodes = nan: want a whole number >= 1"),
    ('[[groups]]\nvc = "a"\nnodes = 1\nidle_watts = inf\n', "line 4: groups[1].idle_watts = inf: want a finite"),
    ('[[groups]]\nvc = "a"\nnodes = 1\ngpu_max_watts = nan\n', "groups[1].gpu_max_watts = nan: want a finite"),
])
def test_errors_name_the_file_and_key(tmp_path, text, message) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(TraceError) as err:
        read_cluster_file(path)
    assert str(path) in str(err.value) and message in str(err.value)


def _run(*argv) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_generated_trace_simulates_as_is_with_its_cluster_file(tmp_path) -> None:
    code, text = _run("trace", "generate", tmp_path / "t.csv", "--jobs", "300", "--seed", "2")
    assert code == 0 and (tmp_path / "t.cluster.toml").is_file()
    code, _ = _run("simulate", "--trace", tmp_path / "t.csv", "--cluster", tmp_path / "t.cluster.toml",
                   "--out", tmp_path / "file")
    assert code == 0
    code, _ = _run("simulate", "--jobs", "300", "--seed", "2", "--out", tmp_path / "builtin")
    assert code == 0
    a = json.loads((tmp_path / "file" / "summary.json").read_text())
    b = json.loads((tmp_path / "builtin" / "summary.json").read_text())
    assert a["cluster"] == b["cluster"] and a["avg_jct"] == b["avg_jct"] and a["jobs"] == b["jobs"] == 300


def test_cluster_show_builtin_is_the_builtin_cluster(tmp_path) -> None:
    from dlsched.traces.synthetic import DEFAULT_CLUSTER

    code, _ = _run("cluster", "show", "--builtin", "--out", tmp_path / "b.toml")
    assert code == 0
    spec = read_cluster_file(tmp_path / "b.toml")
    assert {vc: len(v.node_ids) for vc, v in spec.vcs.items()} == DEFAULT_CLUSTER


def test_heterogeneous_cluster_file_simulates(cluster_dir) -> None:
    path = _write(cluster_dir, '[[groups]]\nvc = "vc01"\nnodes = 8\n\n[[groups]]\nvc = "vc01"\nnodes = 2\ngpus = 4\n'
                               'gpu = "T4"\nidle_watts = 300\n')
    code, text = _run("simulate", "--jobs", "200", "--vcs", "vc01", "--cluster", path, "--out", cluster_dir / "r")
    assert code == 0, text
    summary = json.loads((cluster_dir / "r" / "summary.json").read_text())
    assert summary["cluster"] == {"vcs": ["vc01"], "nodes": 10, "gpus": 8 * 8 + 2 * 4}


def test_cluster_with_shortcuts_is_refused(cluster_dir) -> None:
    path = _write(cluster_dir, '[[groups]]\nvc = "vc01"\nnodes = 3\n')
    code, text = _run("simulate", "--jobs", "50", "--cluster", path, "--nodes", "4", "--out", cluster_dir / "r")
    assert code == 2 and text.strip() == (f"error: --cluster {path} describes the whole cluster: leave out "
                                          "--vc-config, --nodes and --topology")


def test_the_docs_first_example_says_which_jobs_it_leaves_out(tmp_path) -> None:
    # docs/cluster-file.md's first run leaves out 69 % of the jobs: the doc says so, with this run's numbers
    example = Path(__file__).resolve().parent.parent / "docs" / "examples" / "cluster.toml"
    code, text = _run("simulate", "--cluster", example, "--jobs", "2000", "--out", tmp_path / "r")
    assert code == 0, text
    assert "left out 1373 jobs of VCs missing from the cluster: {'vc03': 80," in text
    assert "627 jobs simulated" in text
    doc = " ".join((Path(__file__).resolve().parent.parent / "docs" / "cluster-file.md").read_text().split())
    assert "left out 1373 jobs of VCs missing from the cluster: {'vc03': 80, ...}`: 1,373 of the 2,000, 69 %" in doc
    assert "627 are simulated" in doc
