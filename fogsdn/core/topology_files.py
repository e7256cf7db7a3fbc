"""A topology's switch graph from a file: `topology: {graphml: FILE}` or `{edge_list: FILE}`.

Expanded into a `kind: graph` section when the scenario is loaded, then validated like
any explicit graph (docs/topologies.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

FILE_KEYS = ("graphml", "edge_list")
LINK_FIGURES = ("delay_ms", "jitter_ms", "loss", "bw_mbps")


class TopologyFileError(ValueError):
    """A topology file that cannot be read or says something invalid (one line)."""


def expand_topology_file(topology: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """`topology` with its `graphml` or `edge_list` file (relative to `base`) turned
    into `kind: graph` with `switches` and `links`; unchanged without either key."""
    keys = [k for k in FILE_KEYS if k in topology]
    if not keys:
        return dict(topology)
    if len(keys) > 1:
        raise TopologyFileError("topology: give one of graphml and edge_list, not both")
    key = keys[0]
    for clash in ("switches", "links"):
        if clash in topology:
            raise TopologyFileError(f"topology.{clash}: not with topology.{key} (the file "
                                    "gives the switches and links)")
    if topology.get("kind", "graph") != "graph":
        raise TopologyFileError(f"topology.kind: a {key} file is an explicit graph, "
                                f"not {topology['kind']!r}")
    name = topology[key]
    if not isinstance(name, str) or not name:
        raise TopologyFileError(f"topology.{key}: a file name, got {name!r}")
    path = base / name  # an absolute name is kept as it is
    graph = _read(key, path)
    switches, links = graph_fields(graph, f"topology.{key} ({path.name})")
    rest = {k: v for k, v in topology.items() if k != key}
    return {**rest, "kind": "graph", "switches": switches, "links": links}


def _read(key: str, path: Path) -> nx.Graph:
    try:
        if key == "graphml":
            g = nx.read_graphml(path)
        else:
            g = nx.read_edgelist(path, data=True, comments="#")
    except OSError as err:
        raise TopologyFileError(f"topology.{key}: cannot read {path}: {err.strerror}") from None
    except Exception as err:  # the readers raise many kinds on a malformed file
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise TopologyFileError(f"topology.{key}: {path.name} is not a valid "
                                f"{'GraphML' if key == 'graphml' else 'edge list'} file: "
                                f"{why}") from None
    if g.is_directed() or g.is_multigraph():
        g = nx.Graph(g)
    return g


def graph_fields(g: nx.Graph, where: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Switch names and link dicts (`a`, `b` and any figures) of a switch graph (pure)."""
    switches = [str(n) for n in g.nodes]
    if not switches:
        raise TopologyFileError(f"{where}: no switches")
    links = []
    for a, b, d in g.edges(data=True):
        link: dict[str, Any] = {"a": str(a), "b": str(b)}
        for k, v in d.items():
            if k not in LINK_FIGURES:
                raise TopologyFileError(f"{where}: link {a}-{b}: unknown attribute {k!r} "
                                        f"(known: {', '.join(LINK_FIGURES)})")
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise TopologyFileError(f"{where}: link {a}-{b}: {k} must be a number, "
                                        f"got {v!r}") from None
            if math.isnan(x) or x < 0:
                raise TopologyFileError(f"{where}: link {a}-{b}: {k} must be >= 0, got {v!r}")
            link[k] = x
        links.append(link)
    return switches, links
