"""Physical graph construction and the nvidia-smi parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlsched.topology.graph import W_NETWORK, W_SOCKET, cluster_graph, machine_graph
from dlsched.topology.smi import TopoParseError, load_topo_file, parse_topo_matrix

FIX = Path(__file__).parent / "fixtures" / "topo"


def test_minsky_graph_edges_and_weights():
    mg = machine_graph("minsky")
    g = mg.graph
    assert (g.count("machine"), g.count("socket"), g.count("gpu")) == (1, 2, 4)
    assert len(g.edges) == 8                      # 2 machine-socket, 4 socket-GPU, 2 NVLink
    assert sorted(w for _, _, w in g.edges_between("socket", "machine")) == [W_SOCKET, W_SOCKET]
    assert [w for _, _, w in g.edges_between("gpu", "gpu")] == [1, 1]
    assert mg.dist[0][1] == 1 and mg.dist[2][3] == 1       # NVLink pairs
    assert mg.dist[0][2] == 1 + W_SOCKET + W_SOCKET + 1    # across the SMP bus


def test_dgx1_graph_hybrid_cube_mesh():
    mg = machine_graph("dgx1")
    g = mg.graph
    assert g.count("gpu") == 8 and g.count("switch") == 4 and g.count("socket") == 2
    assert len(g.edges_between("gpu", "gpu")) == 16       # 12 cube edges + 4 face diagonals
    assert len(g.edges) == 30
    # fully connected faces {0..3} and {4..7}; 0-5 has no NVLink: switch, socket, machine
    assert all(mg.dist[a][b] == 1 for a in range(4) for b in range(4) if a != b)
    assert mg.dist[0][4] == 1 and mg.dist[0][5] == 52
    # a third GPU never relays P2P traffic (0 -> 4 -> 5 would be 2)
    assert mg.dist[1][4] == 52


def test_cluster_graph_levels():
    g = cluster_graph([machine_graph("minsky")] * 3)
    assert g.count("network") == 1 and g.count("machine") == 3 and g.count("gpu") == 12
    assert len(g.edges_between("network", "machine")) == 3
    assert all(w == W_NETWORK for _, _, w in g.edges_between("network", "machine"))


def test_parse_dgx1_fixture_matches_preset():
    smi = load_topo_file(FIX / "dgx1.txt")
    assert smi.gpus == [f"GPU{i}" for i in range(8)]
    assert smi.nics == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert smi.sockets() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert smi.nvlink_lanes(0, 3) == 2 and smi.nvlink_lanes(0, 1) == 1 and smi.nvlink_lanes(0, 5) == 0
    assert smi.pix_groups() == [[0, 1], [2, 3], [4, 5], [6, 7]]      # inferred from NIC rows
    assert smi.machine_graph("dgx1").dist == machine_graph("dgx1").dist


def test_parse_minsky_old_driver_fixture():
    smi = load_topo_file(FIX / "minsky.txt")
    assert smi.links[0][2] == "SOC" and smi.cpu_affinity == ["0-79", "0-79", "80-159", "80-159"]
    assert smi.numa_affinity == []
    assert smi.sockets() == [0, 0, 1, 1]
    assert smi.machine_graph("minsky").dist == machine_graph("minsky").dist


def test_parse_pcie_fixture_with_node_pxb_and_nic_legend():
    smi = load_topo_file(FIX / "pcie8.txt")
    assert smi.nics == ["NIC0", "NIC1"] and smi.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert smi.numa_affinity == ["0"] * 4 + ["1"] * 4
    mg = smi.machine_graph("pcie8")
    assert mg.dist[0][1] < mg.dist[0][2] < mg.dist[4][6] < mg.dist[0][4]   # PIX < PXB < NODE < SYS
    assert not mg.nvlink_peak
    assert len(mg.graph.edges_between("gpu", "gpu")) == 0


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: t.replace("GPU1\tNV1\t X \tNV2", "GPU1\tNV1\t X \tZZZ", 1), "unknown link code 'ZZZ'"),
    (lambda t: t.replace("GPU2\tNV1\tNV2\t X ", "GPU2\tNV1\tNV2\tNV1", 1), "diagonal cell of GPU2"),
    (lambda t: t.replace("GPU3\tNV2\tNV1\tNV2\t X \tSYS", "GPU3\tNV2\tNV1\tNV2\t X", 1), "expected 12 link cells"),
    (lambda t: t.replace("GPU5\tSYS\tNV2", "GPU5\tSYS\tSYS", 1), "GPU1-GPU5 is NV2 but GPU5-GPU1 is SYS"),
    (lambda t: t.replace("\nGPU6\t", "\nGPU9\t", 1), "row for unknown device 'GPU9'"),
])
def test_malformed_input_names_the_line(mutate, needle):
    text = (FIX / "dgx1.txt").read_text()
    bad = mutate(text)
    assert bad != text
    with pytest.raises(TopoParseError) as exc:
        parse_topo_matrix(bad)
    assert needle in str(exc.value)
    assert str(exc.value).startswith("line ")
    assert exc.value.lineno > 1


def test_no_header_is_an_error():
    with pytest.raises(TopoParseError, match="line 1: no header"):
        parse_topo_matrix("hello\nworld\n")
