"""``nvidia-smi topo -m`` parsing: the shipped samples and hand-written edge cases."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from palopt.errors import InputError
from palopt.importers.nvidia_smi import parse_nvidia_smi, read_nvidia_smi
from palopt.topology import Topology

SAMPLES = Path(__file__).resolve().parent.parent / "instances" / "topology"


def _one_server(matrix) -> Topology:
    graph = nx.Graph()
    matrix.add_to(graph, "host")
    return Topology.from_graph(graph)


def test_dgx_sample_is_one_nvswitch_island() -> None:
    m = read_nvidia_smi(SAMPLES / "dgx-a100.txt")
    assert m.local == tuple(range(8))
    assert m.islands() == [tuple(range(8))]
    assert {k for _, _, k in m.nvlinks()} == {12} and len(m.nvlinks()) == 28
    topo = _one_server(m)
    assert topo.tiers == ("nvlink", "server")
    assert topo.tier_of(range(8)) == "nvlink"
    assert topo.graph.edges["host/gpu0", "host/gpu7"] == {"link": "nvlink", "nvlinks": 12}


def test_pairs_sample_has_four_pairs() -> None:
    m = read_nvidia_smi(SAMPLES / "nvlink-pairs.txt")
    assert m.islands() == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert m.paths[0][2] == "PXB" and m.paths[0][4] == "SYS"
    topo = _one_server(m)
    assert topo.tier_of([topo.index("host/gpu2"), topo.index("host/gpu3")]) == "nvlink"
    assert topo.tier_of([topo.index("host/gpu1"), topo.index("host/gpu2")]) == "server"
    assert topo.graph.nodes["host"]["gpu_paths"][0][:3] == ["X", "NV4", "PXB"]


def test_gpu_paths_rows_are_in_local_order_whatever_the_header() -> None:
    # The rows were kept in the header's order: with GPU1 first, row 0 was GPU1's.
    m = parse_nvidia_smi("\tGPU1\tGPU0\tGPU2\nGPU1\t X \tNV4\tSYS\n"
                         "GPU0\tNV4\t X \tPIX\nGPU2\tSYS\tPIX\t X \n")  # fmt: skip
    paths = _one_server(m).graph.nodes["host"]["gpu_paths"]
    assert paths == [["X", "NV4", "PIX"], ["NV4", "X", "SYS"], ["PIX", "SYS", "X"]]


def test_pcie_sample_has_no_nvlink_tier() -> None:
    m = read_nvidia_smi(SAMPLES / "pcie-only.txt")
    assert m.n_gpus == 4 and m.nvlinks() == []
    assert m.paths[0] == ("X", "PIX", "SYS", "SYS")
    topo = _one_server(m)
    assert topo.tiers == ("server",)
    assert [topo.graph.nodes[g]["local"] for g in topo.gpu_ids] == [0, 1, 2, 3]


def test_colours_prompt_soc_and_gpu_numbers() -> None:
    text = (
        "$ nvidia-smi topo -m\n"
        "\x1b[4m\tGPU2\tGPU5\tmlx5_0\tCPU Affinity\x1b[0m\n"
        "\x1b[4mGPU2\x1b[0m\t X \tSOC\tPHB\t0-7\n"
        "\x1b[1;4mGPU5\x1b[0m\tSOC\t X \tSOC\t8-15\n"  # codes with several numbers too
        "mlx5_0\tPHB\tSOC\t X \n"
    )
    m = parse_nvidia_smi(text)
    assert m.local == (2, 5)
    assert m.paths == (("X", "SYS"), ("SYS", "X"))


def test_columns_out_of_number_order_keep_their_order_and_islands_sort() -> None:
    text = "\tGPU3\tGPU9\tGPU1\nGPU3\t X \tSYS\tSYS\nGPU9\tSYS\t X \tNV2\nGPU1\tSYS\tNV2\t X \n"
    m = parse_nvidia_smi(text)
    assert m.local == (3, 9, 1)  # paths[i] is the row of column i, so local keeps that order
    assert m.paths[1] == ("SYS", "X", "NV2")
    assert m.nvlinks() == [(1, 2, 2)]
    assert m.islands() == [(1, 9), (3,)]
    graph = nx.Graph()
    m.add_to(graph, "h")  # GPUs named and numbered by their GPU<n>, not their column
    assert {g: graph.nodes[g]["local"] for g in graph if g != "h"} == {
        "h/gpu3": 3,
        "h/gpu9": 9,
        "h/gpu1": 1,
    }
    assert graph.edges["h/gpu9", "h/gpu1"] == {"link": "nvlink", "nvlinks": 2}


def test_gpu_numbers_of_five_digits_up_to_65535() -> None:
    m = parse_nvidia_smi(
        "GPU0 GPU12345 GPU65535\nGPU0 X SYS SYS\nGPU12345 SYS X SYS\nGPU65535 SYS SYS X"
    )
    assert m.local == (0, 12345, 65535)
    # Leading zeros do not count towards the five digits: GPU000001 is GPU 1.
    assert parse_nvidia_smi("GPU0 GPU000001\nGPU0 X SYS\nGPU000001 SYS X").local == (0, 1)


def test_matrix_ends_at_the_legend() -> None:
    # What follows "Legend:" is not read, even a line starting with a GPU name.
    m = parse_nvidia_smi("\n".join(GOOD) + "\nLegend:\nGPU0 means the first GPU\n")
    assert m.local == (0, 1, 2)


def test_blank_lines_and_nic_rows_inside_the_matrix_are_skipped() -> None:
    """Only Legend: ends the matrix; a blank line or a NIC row between GPU rows does not."""
    text = "GPU0\tGPU1\tNIC0\n\nGPU0\t X \tNV2\tPIX\nNIC0\tPIX\tSYS\t X \n\nGPU1\tNV2\t X \tSYS\n"
    m = parse_nvidia_smi(text)
    assert m.local == (0, 1) and m.paths == (("X", "NV2"), ("NV2", "X"))


def test_single_gpu() -> None:
    m = parse_nvidia_smi("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n")
    assert m.local == (0,) and m.islands() == [(0,)]


GOOD = ["\tGPU0\tGPU1\tGPU2", "GPU0\t X \tNV1\tPHB", "GPU1\tNV1\t X \tPHB", "GPU2\tPHB\tPHB\t X "]


def _with(line: int, text: str | None) -> str:
    lines = list(GOOD)
    if text is None:
        del lines[line - 1]
    else:
        lines[line - 1] = text
    return "\n".join(lines) + "\n\nLegend:\n  X = Self\n"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (_with(4, None), 1, "'GPU2': GPU has a column in the header but no row"),
        (_with(4, "GPU3\tPHB\tPHB\t X "), 4, "no column in the header"),
        (_with(3, "GPU1\tNV1\t X "), 3, r"'GPU1\\tNV1\\t X': row GPU1 has 2 entries, expected 3"),
        (_with(3, "GPU1\tNV1\t X \tFOO"), 3, "'FOO': unknown entry in column GPU2"),
        (_with(3, "GPU1\tNV1\t X \tNV"), 3, "unknown entry"),
        (_with(3, "GPU1\tNV1\t X \tNV0"), 3, r"unknown entry.*NV<k> \(k from 1 to 999\)"),
        (_with(3, "GPU1\tNV1\tPIX\tPHB"), 3, "diagonal"),
        (_with(3, "GPU1\tX\tX\tPHB"), 3, "'X': GPU1/GPU0: X must be exactly the diagonal"),
        (_with(3, "GPU1\tPIX\t X \tPHB"), 3, "symmetric"),
        (_with(3, "GPU0\tNV1\t X \tPHB"), 3, r"'GPU0': row given twice \(first on line 2\)"),
        (_with(1, "\tGPU0\tGPU0\tGPU2"), 1, "GPU column given twice"),
        # GPU01 and GPU1: one GPU, named "a node linked to itself" among the graph's edges
        (_with(1, "\tGPU0\tGPU1\tGPU01"), 1, r"'GPU01': GPU column given twice \(as GPU1\)"),
        # int() of 4,301 digits: ValueError
        (_with(1, "\tGPU0\tGPU1\tGPU" + "9" * 4301), 1, "a GPU number from 0 to 65535"),
        (_with(1, "\tGPU0\tGPU1\tGPU65536"), 1, "a GPU number from 0 to 65535"),
        (_with(3, "GPU1\tNV1\t X \tNV" + "9" * 4301), 3, "unknown entry"),
        (_with(3, "GPU1\tNV1\t X \tNV1000"), 3, "'NV1000': unknown entry"),
    ],
)
def test_errors_name_file_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as info:
        parse_nvidia_smi(text, "srv.txt")
    assert info.value.field == f"srv.txt:{line}"


def test_no_header() -> None:
    with pytest.raises(InputError, match="no GPU matrix header") as info:
        parse_nvidia_smi("No devices were found\n", "empty.txt")
    assert info.value.field == "empty.txt"
