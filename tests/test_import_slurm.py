"""Slurm ``topology.conf`` parsing: the shipped sample and hand-written edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palopt.errors import InputError
from palopt.importers.assemble import assemble_topology
from palopt.importers.nvidia_smi import parse_nvidia_smi
from palopt.importers.slurm import _logical_lines, parse_topology_conf, read_topology_conf

SAMPLES = Path(__file__).resolve().parent.parent / "instances" / "topology"


def test_sample_tree() -> None:
    tree = read_topology_conf(SAMPLES / "topology.conf")
    assert tree.root == "core"
    assert tree.nodes == (
        "node01",
        "node02",
        "node03",
        "node04",
        "node05",
        "node06",
        "dgx1",
        "dgx2",
        "t4-01",
        "t4-02",
    )
    assert {s.name: tree.tier(s.name) for s in tree.switches} == {
        "rack1": "rack",
        "rack2": "rack",
        "rack3": "rack",
        "core": "cluster",
    }
    assert [s.line for s in tree.switches] == [4, 5, 6, 7]


def test_three_levels_case_comments_continuation() -> None:
    text = """
    # fat tree
    switchname=leaf1 nodes=n[1-2]   # rack 1
    SwitchName=leaf2 Nodes=n[3-4]
    SwitchName=leaf3 \\
        Nodes=n[5-6]
    SwitchName=spine1 Switches=leaf[1-2] LinkSpeed=400
    SwitchName=spine2 Switches=leaf3
    SwitchName=top Switches=spine[1-2]
    """
    tree = parse_topology_conf(text)
    assert tree.root == "top"
    assert [tree.tier(s) for s in ("leaf1", "spine2", "top")] == ["rack", "level1", "cluster"]
    assert tree.nodes == ("n1", "n2", "n3", "n4", "n5", "n6")
    assert next(s for s in tree.switches if s.name == "spine1").line == 7


def test_single_switch_is_the_cluster() -> None:
    tree = parse_topology_conf("SwitchName=s0 Nodes=tux[0-3]")
    assert tree.root == "s0" and tree.tier("s0") == "cluster"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("SwitchName=s1 Nodes=a[1-2]\nSwitchName=s2 Nodes=a[3-4]\n", 2, "several root switches"),
        ("SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n", 1, "cycle"),
        (
            "SwitchName=t Nodes=a1\nSwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1\n"
            "SwitchName=top Switches=t\n",
            2,
            "cycle",
        ),
        ("SwitchName=s1 Nodes=a1\nSwitchName=top Switches=s[1-2]\n", 2, "'s2': undefined switch"),
        ("SwitchName=s1 Nodes=a1\nSwitchName=top Switches=s[2-1]\n", 2, "start above end"),
        ("SwitchName=s1 Nodes=a[1-\nSwitchName=top Switches=s1\n", 1, "bad host list"),
        ("SwitchName=s1 Nodes=a[3-1]\nSwitchName=top Switches=s1\n", 1, "start above end"),
        (
            "SwitchName=s1 Nodes=a1\nSwitchName=s2 Nodes=a1\nSwitchName=top Switches=s[1-2]\n",
            2,
            r"already under switch 's1' \(line 1\)",
        ),
        (
            "SwitchName=s1 Nodes=a1\nSwitchName=s2 Switches=s1\nSwitchName=top Switches=s[1-2]\n",
            3,
            r"already a child of 's2' \(line 2\)",
        ),
        ("SwitchName=s1 Nodes=a1\nSwitchName=s1 Nodes=a2\n", 2, "already defined on line 1"),
        ("SwitchName=s1 Nodes=a1 Switches=s2\n", 1, "exactly one of Nodes= and Switches="),
        ("SwitchName=s1\n", 1, "exactly one of Nodes= and Switches="),
        ("\n\nNodes=a1\n", 3, "SwitchName="),
        ("SwitchName=s1 Nodes=a1 Speed=3\n", 1, "unknown key"),
        ("BlockName=b1 Nodes=a1\n", 1, "not supported"),
        ("SwitchName=s1 Nodes\n", 1, "KEY=VALUE"),
        ("SwitchName=s1 Nodes=s1\n", 1, "both a switch and a node"),
        ("SwitchName=s[1-2] Nodes=a1\n", 1, "one name"),
        ("SwitchName=s1,s2 Nodes=a1\n", 1, "one name"),
        ("SwitchName=s1 Nodes=a1 nodes=a2\n", 1, "'nodes': key given twice on one line"),
        ("SwitchName=s1 Nodes=\n", 1, "empty value"),
        ("SwitchName= Nodes=a1\n", 1, "empty value"),
        ("SwitchName=s1 =a1\n", 1, "KEY=VALUE"),
        ("blockname=b1 Nodes=a1\n", 1, "not supported"),
        ('SwitchName=s1 Nodes="a[1-2]\n', 1, r"'\"a\[1-2\]': a quoted value must be all of"),
        ('SwitchName=s1 Nodes=a"1"\n', 1, "quoted value must be all of"),
        ('SwitchName=s1 Nodes="a"b\n', 1, "quoted value must be all of"),
        ('SwitchName=s1 Nodes="a"b"\n', 1, "quoted value must be all of"),
        ('SwitchName=" " Nodes=a1\n', 1, "'SwitchName': empty value"),
        ('SwitchName=s1 "Nodes"=a1\n', 1, "'\"Nodes\"=a1': expected KEY=VALUE"),
        ('SwitchName=s1 Nodes=""\n', 1, "empty value"),
        # A continued line is named by its first line.
        ("\nSwitchName=s1 \\\n  Nodes=a1 \\\n  Speed=3\n", 2, "unknown key"),
    ],
)
def test_errors_name_file_and_line(text: str, line: int, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as info:
        parse_topology_conf(text, "topology.conf")
    assert info.value.field == f"topology.conf:{line}"


def test_continuation_joins_directly_ignores_trailing_blanks_and_may_end_the_file() -> None:
    # As in Slurm: the next line follows the backslash's place directly, so a host list may be
    # continued inside a value; blanks before the backslash or on the next line stay.
    tree = parse_topology_conf("SwitchName=s1 Nodes=a[1-2],\\\na[5-6]\nSwitchName=t Switches=s1")
    assert tree.nodes == ("a1", "a2", "a5", "a6")
    assert parse_topology_conf("SwitchName=s1 Nodes=a[1-\\\n2]").nodes == ("a1", "a2")
    assert parse_topology_conf("SwitchName=s1 \\\n  Nodes=a1").nodes == ("a1",)
    with pytest.raises(InputError, match="'s1Nodes=a1'"):  # one word to Slurm too
        parse_topology_conf("SwitchName=s1\\\nNodes=a1")
    text = "SwitchName=s1 Nodes=a1 \\   # blanks and a comment after the backslash\n  LinkSpeed=9"
    assert parse_topology_conf(text).nodes == ("a1",)
    assert parse_topology_conf("SwitchName=s1 Nodes=a[1-2] \\\n").nodes == ("a1", "a2")


def test_backslash_escapes_as_in_slurm() -> None:
    # An escaped '#' starts no comment; an escaped backslash continues no line.
    tree = parse_topology_conf("SwitchName=s\\#1 Nodes=a1  # rack 1\nSwitchName=t Switches=s\\#1")
    assert [s.name for s in tree.switches] == ["s#1", "t"]
    with pytest.raises(InputError, match=r"'\\\\': expected KEY=VALUE") as info:
        parse_topology_conf("SwitchName=s1 Nodes=a1 \\\\\nSwitchName=t Switches=s1", "t.conf")
    assert info.value.field == "t.conf:1"
    # An escaped backslash, then a comment: the switch loses its Nodes=.
    with pytest.raises(InputError, match="exactly one of Nodes="):
        parse_topology_conf("SwitchName=s\\\\#1 Nodes=a1")


def _slurm_lines(text: str) -> list[str]:
    """Slurm's reading of a file, character by character: in each line a ``#`` after an even
    run of backslashes starts a comment; an odd run of backslashes at the end (blanks may
    follow) continues the line, cut at its last backslash; each backslash of the joined line is
    dropped and the character after it kept."""

    def plain(joined: str) -> str:
        out, escaped = "", False
        for ch in joined:
            if ch == "\\" and not escaped:
                escaped = True
            else:
                out, escaped = out + ch, False
        return out

    lines, buf = [], ""
    for raw in text.splitlines():
        line, run = raw, 0
        for i, ch in enumerate(raw):
            if ch == "#" and run % 2 == 0:
                line = raw[:i]
                break
            run = run + 1 if ch == "\\" else 0
        end = len(line)
        while end and line[end - 1].isspace():
            end -= 1
        start = end
        while start and line[start - 1] == "\\":
            start -= 1
        if (end - start) % 2:
            buf += line[: end - 1]
        else:
            lines.append(plain(buf + line))
            buf = ""
    lines.append(plain(buf))
    return [line.rstrip() for line in lines if line.strip()]


@settings(max_examples=300)
@given(st.text(alphabet="a\\# =\n\t", max_size=30))
def test_lines_are_read_as_slurm_reads_them(text: str) -> None:
    assert [line.rstrip() for _, line in _logical_lines(text)] == _slurm_lines(text)


def test_a_lone_continuation_before_a_blank_line_is_an_empty_line() -> None:
    """A backslash left alone on a line (an entry commented out after it) adds no line."""
    text = "SwitchName=s1 Nodes=a1\n  \\  # was: Nodes=a2\n\nSwitchName=top Switches=s1\n"
    tree = parse_topology_conf(text)
    assert [(s.name, s.line) for s in tree.switches] == [("s1", 1), ("top", 4)]


def test_blanks_around_equals_as_in_slurm() -> None:
    # Slurm's parser allows blanks on either side of '='; they were refused as "expected KEY=VALUE".
    tree = parse_topology_conf(
        'SwitchName = leaf1  Nodes= "node[01-02]" LinkSpeed =100\n'
        "SwitchName =top Switches = leaf1\n"
    )
    assert tree.nodes == ("node01", "node02")
    assert [s.name for s in tree.switches] == ["leaf1", "top"]
    # A key with nothing after its '=' stays empty: the next KEY=VALUE is not taken as its value.
    with pytest.raises(InputError, match="'SwitchName': empty value"):
        parse_topology_conf("SwitchName= Nodes=a1\n")
    with pytest.raises(InputError, match="'=a1': expected KEY=VALUE"):
        parse_topology_conf("SwitchName = s1 =a1\n")


def test_quoted_values_lose_their_quotes_as_in_slurm() -> None:
    # Nodes="node[01-02]" made hosts named '"node01"' and '"node02"', quotes included.
    tree = parse_topology_conf(
        'SwitchName="leaf1" Nodes="node[01-02], node03"\nSwitchName=top Switches="leaf1"\n'
    )
    assert tree.nodes == ("node01", "node02", "node03")
    assert [s.name for s in tree.switches] == ["leaf1", "top"]
    # Blanks inside the quotes are dropped too: the switch is "s1", which "top" then finds.
    tree = parse_topology_conf('SwitchName=" s1 " Nodes=a1\nSwitchName=top Switches=s1\n')
    assert [s.name for s in tree.switches] == ["s1", "top"]


def test_graph_lists_switches_root_first() -> None:
    # So a topology built from it (and written out) reads from the root down.
    tree = read_topology_conf(SAMPLES / "topology.conf")
    assert list(tree.graph())[:4] == ["core", "rack1", "rack2", "rack3"]


def test_assemble_without_tree_or_servers_is_refused() -> None:
    with pytest.raises(InputError, match="no server: give a topology.conf or name servers"):
        assemble_topology(None, {}, parse_nvidia_smi("GPU0\nGPU0 X"))


def _pair(source: str = "pair.txt"):
    return parse_nvidia_smi("GPU0 GPU1\nGPU0 X NV4\nGPU1 NV4 X", source)


def test_assemble_without_tree_keeps_the_server_order_and_a_free_switch_name() -> None:
    """Servers keep the order given; the added switch takes the first free "cluster~<n>"."""
    servers = dict.fromkeys(["b", "cluster", "cluster~1", "a"], _pair())
    topo = assemble_topology(None, servers)
    assert topo.server_ids == ("b", "cluster", "cluster~1", "a")
    assert topo.gpu_ids[:2] == ("b/gpu0", "b/gpu1")
    switches = [n for n, kind in topo.graph.nodes(data="kind") if kind == "switch"]
    assert switches == ["cluster~2"]
    assert topo.tiers == ("nvlink", "server", "cluster")
    assert topo.graph.graph["sources"] == ["pair.txt"]


def test_assemble_with_a_tree_keeps_file_order_and_names_the_first_stray_server() -> None:
    """Servers, their GPUs and the files used come in topology.conf order, not sorted; a server
    the tree does not hold is refused by name, the first one given."""
    tree = parse_topology_conf(
        "SwitchName=r1 Nodes=zz,aa\nSwitchName=r0 Nodes=mm\nSwitchName=top Switches=r1,r0",
        "t.conf",
    )
    topo = assemble_topology(tree, {"aa": _pair("aa.txt")}, _pair())
    assert topo.server_ids == ("zz", "aa", "mm")
    assert topo.gpu_ids[::2] == ("zz/gpu0", "aa/gpu0", "mm/gpu0")
    assert topo.graph.graph["sources"] == ["t.conf", "pair.txt", "aa.txt"]  # as first used
    with pytest.raises(InputError, match="'x9': no switch in t.conf reaches") as info:
        assemble_topology(tree, {"x9": _pair(), "aa": _pair(), "x1": _pair()})
    assert info.value.field == "server x9"
    with pytest.raises(InputError, match="'zz': no GPU matrix for this node") as info:
        assemble_topology(tree, {"aa": _pair()})  # no default: zz and mm have no matrix
    assert info.value.field == "server zz"


def test_empty_file() -> None:
    with pytest.raises(InputError, match="no SwitchName") as info:
        parse_topology_conf("# nothing\n", "t.conf")
    assert info.value.field == "t.conf"


@st.composite
def _trees(draw: st.DrawFn) -> tuple[str, dict[str, str], dict[str, str]]:
    """A random switch tree as topology.conf text, each host's leaf, each switch's parent."""
    n = draw(st.integers(1, 8))
    parent = {f"s{i}": f"s{draw(st.integers(0, i - 1))}" for i in range(1, n)}
    children: dict[str, list[str]] = {f"s{i}": [] for i in range(n)}
    for child, up in parent.items():
        children[up].append(child)
    lines, leaf_of, host = [], {}, 0
    for s, kids in children.items():
        if kids:
            lines.append(f"SwitchName={s} Switches={','.join(kids)}")
            continue
        hosts = [f"h{host + k}" for k in range(draw(st.integers(1, 2)))]
        host += len(hosts)
        leaf_of.update(dict.fromkeys(hosts, s))
        lines.append(f"SwitchName={s} Nodes={','.join(hosts)}")
    order = draw(st.permutations(lines))
    return "\n".join(order), leaf_of, parent


@given(_trees())
@settings(max_examples=40, deadline=None)
def test_random_trees_share_rack_on_a_leaf_and_lca_tier_otherwise(tree_data) -> None:
    text, leaf_of, parent = tree_data
    tree = parse_topology_conf(text)
    topo = assemble_topology(tree, {}, parse_nvidia_smi("GPU0\nGPU0 X"))

    def ancestors(s: str) -> list[str]:
        chain = [s]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        return chain

    hosts = list(topo.server_ids)
    for a in range(len(hosts)):
        for b in range(a + 1, len(hosts)):
            la, lb = leaf_of[hosts[a]], leaf_of[hosts[b]]
            if la == lb:
                expected = "rack" if la != "s0" else "cluster"
            else:
                up = set(ancestors(lb))
                lca = next(s for s in ancestors(la) if s in up)
                expected = "cluster" if lca == "s0" else f"level{len(ancestors(lca)) - 1}"
            assert topo.tier_of([a, b]) == expected
