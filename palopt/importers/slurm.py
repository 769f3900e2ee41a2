"""Read a Slurm ``topology.conf`` written for the tree plugin (``TopologyPlugin=topology/tree``).

Format (as Slurm reads it)::

    # comment
    SwitchName=s1 Nodes=node[01-16] LinkSpeed=100
    SwitchName=s2 Nodes=node[17-32]
    SwitchName=top Switches=s[1-2]

Each line names one switch and either the nodes (hosts) cabled to it or its child switches, as
Slurm host lists (:func:`palopt.hostlist.expand_hostlist`). Keys are case-insensitive;
``LinkSpeed`` is accepted and ignored; blanks may surround ``=``; a value may be written in double
quotes, as Slurm allows (``Nodes="node[01-04]"``). Lines are read as Slurm reads them: ``#``
starts a comment; a line ending in ``\\`` (blanks and a comment may follow it) continues on the
next, joined directly, so ``Nodes=n[01-16],\\`` followed by ``n[33-48]`` is one host list; a
backslash makes the character after it plain (``\\#`` is a ``#`` that starts no comment,
``\\\\`` a backslash that continues no line).
The switches must form one tree: one root, every other switch the child of exactly one switch,
every node under exactly one switch.

Mapping to the topology model: every switch becomes a ``switch`` node and every node a ``server``
node, joined by ``network`` links. Tiers: the root is ``cluster``, leaf switches (those listing
nodes) are ``rack``, switches in between are ``level1``, ``level2``, ... by depth below the root.
In an unbalanced tree the topology model counts every leaf switch at the deepest level (see
:mod:`palopt.topology`), so servers on one leaf switch always share the ``rack`` tier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import networkx as nx

from palopt.errors import InputError
from palopt.hostlist import expand_hostlist
from palopt.io import read_text

__all__ = ["SlurmSwitch", "SlurmTree", "parse_topology_conf", "read_topology_conf"]

_KEYS = {
    "switchname": "SwitchName",
    "switches": "Switches",
    "nodes": "Nodes",
    "linkspeed": "LinkSpeed",
}
#: A comment: from a ``#`` after an even number of backslashes (kept, as group 1) to the end.
_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)#.*")
#: A backslash and the character it makes plain (none at the end of a line).
_ESCAPE = re.compile(r"\\(.?)")
#: A token: runs of characters other than white space and quotes, or double-quoted text.
_TOKEN = re.compile(r'(?:[^\s"]+|"[^"]*"?)+')
#: A field as Slurm reads it, blanks allowed around ``=``: a key, then a whole value (quoted, or
#: free of blanks, quotes and ``=``). Where none starts, the text up to the next blank is taken as
#: a :data:`_TOKEN` and refused by :func:`_parse_line`; so ``SwitchName= Nodes=a1`` keeps its empty
#: value rather than taking ``Nodes`` as the switch's name.
_FIELD = re.compile(r'([A-Za-z0-9_.]+)\s*=\s*("[^"]*"|[^\s"=]+)(?=\s|$)')


@dataclass(frozen=True)
class SlurmSwitch:
    """One ``SwitchName=`` line.

    Attributes
    ----------
    name : str
    line : int
        1-based line number in the source file.
    switches : tuple of str
        Child switches (expanded).
    nodes : tuple of str
        Hosts cabled to this switch (expanded).
    """

    name: str
    line: int
    switches: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmTree:
    """A validated switch tree.

    Attributes
    ----------
    source : str
        File name (or ``"<string>"``), used in messages.
    switches : tuple of SlurmSwitch
        In file order.
    root : str
        Name of the root switch.
    depth : dict
        Switch name -> depth below the root (the root has depth 0).
    """

    source: str
    switches: tuple[SlurmSwitch, ...]
    root: str
    depth: dict[str, int]

    @property
    def nodes(self) -> tuple[str, ...]:
        """All hosts, in file order."""
        return tuple(n for s in self.switches for n in s.nodes)

    def tier(self, switch: str) -> str:
        """Tier name of a switch: ``cluster`` (root), ``rack`` (leaf) or ``level{depth}``."""
        if switch == self.root:
            return "cluster"
        return "rack" if self._by_name[switch].nodes else f"level{self.depth[switch]}"

    @cached_property
    def _by_name(self) -> dict[str, SlurmSwitch]:
        return {s.name: s for s in self.switches}

    def graph(self) -> nx.Graph:
        """The switches (kind ``switch`` with ``tier``) and hosts (kind ``server``) as a graph.

        Examples
        --------
        >>> tree = parse_topology_conf("SwitchName=s1 Nodes=n[1-2]\\nSwitchName=top Switches=s1")
        >>> sorted(tree.graph().nodes(data="kind"))
        [('n1', 'server'), ('n2', 'server'), ('s1', 'switch'), ('top', 'switch')]
        """
        g = nx.Graph()
        for s in sorted(self.switches, key=lambda s: self.depth[s.name]):
            g.add_node(s.name, kind="switch", tier=self.tier(s.name))
        for s in self.switches:
            for child in s.switches:
                g.add_edge(s.name, child, link="network")
            for node in s.nodes:
                g.add_node(node, kind="server")
                g.add_edge(node, s.name, link="network")
        return g


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each non-empty line, as Slurm reads them: comments removed,
    continued lines joined directly, escapes resolved."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate([*text.splitlines(), ""], start=1):  # "": ends a continuation
        line = _COMMENT.sub(r"\1", raw, count=1).rstrip()
        if not pending:
            start = number
        if (len(line) - len(line.rstrip("\\"))) % 2:  # an odd run of backslashes ends it
            pending += line[:-1]
            continue
        line, pending = _ESCAPE.sub(r"\1", pending + line), ""
        if line.strip():
            out.append((start, line))
    return out


def _tokens(line: str) -> list[str]:
    """``KEY=VALUE`` for each field of ``line`` (blanks around ``=`` dropped), other text as is."""
    out, pos = [], 0
    while (start := len(line) - len(line[pos:].lstrip())) < len(line):
        match = _FIELD.match(line, start) or _TOKEN.match(line, start)
        assert match is not None  # a _TOKEN matches any text that does not start with a blank
        out.append("=".join(match.groups()) if match.re is _FIELD else match[0])
        pos = match.end()
    return out


def _parse_line(where: str, line: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for token in _tokens(line):
        key, sep, value = token.partition("=")
        if not sep or not key or '"' in key:
            raise InputError(where, token, "expected KEY=VALUE")
        if '"' in value:  # Slurm takes KEY="VALUE" and drops the quotes
            if not (len(value) >= 2 and value[0] == value[-1] == '"' and value.count('"') == 2):
                raise InputError(where, value, 'a quoted value must be all of "VALUE"')
            value = value[1:-1].strip()
        canon = _KEYS.get(key.lower())
        if canon is None:
            problem = (
                "topology/block files are not supported (tree plugin only)"
                if key.lower() == "blockname"
                else f"unknown key; expected one of {', '.join(_KEYS.values())}"
            )
            raise InputError(where, key, problem)
        if canon in fields:
            raise InputError(where, key, "key given twice on one line")
        if not value:
            raise InputError(where, key, "empty value")
        fields[canon] = value
    if "SwitchName" not in fields:
        raise InputError(where, line.strip(), "every line must name a switch (SwitchName=...)")
    return fields


def parse_topology_conf(text: str, source: str = "<string>") -> SlurmTree:
    """Parse and validate a tree ``topology.conf``.

    Parameters
    ----------
    text : str
        The file content.
    source : str
        File name for messages.

    Returns
    -------
    SlurmTree

    Raises
    ------
    InputError
        Naming ``source:line``, for a malformed line, a bad host list, an unknown key, a
        duplicate switch, a switch with both or neither of Nodes and Switches, an undefined or
        doubly-parented child switch, a node under two switches, a name used for both a switch and
        a node, several roots, or a cycle.

    Examples
    --------
    >>> tree = parse_topology_conf('''
    ... SwitchName=s1 Nodes=node[01-02]
    ... SwitchName=s2 Nodes=node[03-04]  # second rack
    ... SwitchName=top Switches=s[1-2] LinkSpeed=200
    ... ''')
    >>> tree.root, tree.tier("s1"), tree.nodes
    ('top', 'rack', ('node01', 'node02', 'node03', 'node04'))
    """
    switches: dict[str, SlurmSwitch] = {}
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        fields = _parse_line(where, line)
        name = fields["SwitchName"]
        if any(c in name for c in "[],"):
            raise InputError(where, name, "SwitchName must be one name, not a host list")
        if name in switches:
            raise InputError(where, name, f"switch already defined on line {switches[name].line}")
        if ("Nodes" in fields) == ("Switches" in fields):
            raise InputError(where, name, "a switch needs exactly one of Nodes= and Switches=")
        switches[name] = SlurmSwitch(
            name,
            number,
            tuple(expand_hostlist(fields["Switches"], where)) if "Switches" in fields else (),
            tuple(expand_hostlist(fields["Nodes"], where)) if "Nodes" in fields else (),
        )
    if not switches:
        raise InputError(source, text[:40], "no SwitchName= line")
    parent: dict[str, str] = {}
    node_switch: dict[str, str] = {}
    for s in switches.values():
        where = f"{source}:{s.line}"
        for child in s.switches:
            if child not in switches:
                raise InputError(where, child, "undefined switch (no SwitchName= line for it)")
            if child in parent:
                raise InputError(
                    where,
                    child,
                    f"switch is already a child of {parent[child]!r} "
                    f"(line {switches[parent[child]].line})",
                )
            parent[child] = s.name
        for node in s.nodes:
            if node in switches:
                raise InputError(where, node, "name is used for both a switch and a node")
            if node in node_switch:
                raise InputError(
                    where,
                    node,
                    f"node is already under switch "
                    f"{node_switch[node]!r} (line {switches[node_switch[node]].line})",
                )
            node_switch[node] = s.name
    roots = [s for s in switches.values() if s.name not in parent]
    if len(roots) > 1:
        listed = ", ".join(f"{r.name} (line {r.line})" for r in roots)
        raise InputError(
            f"{source}:{roots[1].line}",
            roots[1].name,
            f"several root switches: {listed}; nodes under all but one are not "
            "reached from the root; join them under one top switch",
        )
    if not roots:
        first = next(iter(switches.values()))
        raise InputError(
            f"{source}:{first.line}",
            first.name,
            "the switches form a cycle: every switch has a parent",
        )
    depth = {roots[0].name: 0}
    stack = [roots[0].name]
    while stack:
        name = stack.pop()
        for child in switches[name].switches:
            depth[child] = depth[name] + 1
            stack.append(child)
    unreached = [s for s in switches.values() if s.name not in depth]
    if unreached:
        raise InputError(
            f"{source}:{unreached[0].line}",
            unreached[0].name,
            f"switch is on a cycle, not reached from the root {roots[0].name!r}",
        )
    return SlurmTree(source, tuple(switches.values()), roots[0].name, depth)


def read_topology_conf(path: str | Path) -> SlurmTree:
    """Read a ``topology.conf`` file (see :func:`parse_topology_conf`).

    Parameters
    ----------
    path : str or Path
        A UTF-8 ``topology.conf`` for the tree plugin.

    Returns
    -------
    SlurmTree
        With ``source`` set to ``path`` as a string.

    Raises
    ------
    InputError
        Naming the file and line of the problem, or a file not in UTF-8.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import tempfile
    >>> from palopt.io import write_text
    >>> text = "SwitchName=s1 Nodes=node[01-02]\\nSwitchName=top Switches=s1\\n"
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/topology.conf", text)
    ...     tree = read_topology_conf(f"{folder}/topology.conf")
    >>> tree.source.endswith("topology.conf"), tree.root, tree.nodes
    (True, 'top', ('node01', 'node02'))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_text(f"{folder}/topology.conf", text + "SwitchName=s1 Nodes=node03\\n")
    ...     read_topology_conf(f"{folder}/topology.conf")
    Traceback (most recent call last):
    ...
    palopt.errors.InputError: .../topology.conf:3 = 's1': switch already defined on line 1
    """
    return parse_topology_conf(read_text(path), str(path))
