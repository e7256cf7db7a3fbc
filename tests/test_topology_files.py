"""Topologies from files (fogsdn/core/topology_files.py): `topology: {graphml: FILE}` and
`{edge_list: FILE}` become explicit graphs, with the same one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml
from conftest import scenario_dict

from fogsdn.core.scenario import ScenarioError, load_scenario, scenario_graph
from fogsdn.core.topology import link_params

HOSTS = {"fn": "s2", "ofn1": "s2", "c1": "s1", "c2": {"switch": "s1", "delay_ms": 5}}


def _scenario(tmp_path: Path, topology: dict[str, Any]) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(scenario_dict(topology=topology)))
    return p


def _graphml(tmp_path: Path, g: nx.Graph) -> None:
    nx.write_graphml(g, tmp_path / "net.graphml")


def test_graphml_gives_switches_and_links_hosts_come_from_the_scenario(tmp_path: Path) -> None:
    g = nx.Graph()
    g.add_edge("s1", "s2", delay_ms=3.0, bw_mbps=100.0)
    g.add_edge("s2", "s3")
    g.add_edge("s1", "s3", delay_ms=1.0)
    _graphml(tmp_path, g)
    sc = load_scenario(_scenario(tmp_path, {"graphml": "net.graphml", "hosts": HOSTS,
                                            "link": {"delay_ms": 0.5}}))
    assert sc.topology.kind == "graph" and sorted(sc.topology.switches) == ["s1", "s2", "s3"]
    net = scenario_graph(sc)
    assert link_params(net, "s1", "s2").delay_ms == 3.0
    assert link_params(net, "s1", "s2").bw_mbps == 100.0
    assert link_params(net, "s2", "s3").delay_ms == 0.5  # from topology.link
    assert link_params(net, "c2", "s1").delay_ms == 5.0
    assert net.nodes["fn"]["switch"] == "s2"


def test_edge_list_with_and_without_figures(tmp_path: Path) -> None:
    (tmp_path / "net.edges").write_text(
        "# campus\ns1 s2 {'delay_ms': 2.0, 'loss': 0.01}\ns2 s3\n")
    sc = load_scenario(_scenario(tmp_path, {"edge_list": "net.edges",
                                            "hosts": {**HOSTS, "ofn1": "s3"}}))
    net = scenario_graph(sc)
    assert link_params(net, "s1", "s2").loss == 0.01
    assert link_params(net, "s2", "s3").delay_ms == 0.0
    assert net.nodes["ofn1"]["switch"] == "s3"


@pytest.mark.parametrize(("edges", "topology", "says"), [
    ("s1 s2\ns3 s4\n", {}, "topology: disconnected graph"),
    ("s1 s2\n", {"hosts": {**HOSTS, "fn": "s9"}}, "topology.hosts.fn: unknown switch 's9'"),
    ("s1 s2 {'delay_ms': -1}\n", {}, "link s1-s2: delay_ms must be >= 0"),
    ("s1 s2 {'colour': 'red'}\n", {}, "link s1-s2: unknown attribute 'colour'"),
    ("s1 s2\n", {"links": []}, "topology.links: not with topology.edge_list"),
    ("s1 s2\n", {"kind": "line"}, "topology.kind: a edge_list file is an explicit graph"),
    ("s1 s2 {'delay_ms':\n", {}, "topology.edge_list: net.edges is not a valid edge list"),
])
def test_bad_files_get_one_line_naming_the_cause(tmp_path: Path, edges: str,
                                                  topology: dict[str, Any], says: str) -> None:
    (tmp_path / "net.edges").write_text(edges)
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario(tmp_path, {"edge_list": "net.edges", "hosts": HOSTS,
                                           **topology}))
    msg = str(err.value)
    assert says in msg and "\n" not in msg, msg


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"topology.graphml: cannot read .*none.graphml"):
        load_scenario(_scenario(tmp_path, {"graphml": "none.graphml", "hosts": HOSTS}))
