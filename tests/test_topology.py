"""Topology section: generators, explicit graphs, one-line errors (no root, no Mininet)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import ScenarioError, load_scenario, parse_scenario, scenario_graph
from fogsdn.core.topology import fabric_of


def _graph(topology: dict[str, Any], **over: Any) -> nx.Graph:
    return scenario_graph(parse_scenario(scenario_dict(topology=topology, **over)))


def switch_names(g: nx.Graph) -> list[str]:
    return [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]


def host_names(g: nx.Graph) -> list[str]:
    return [n for n, d in g.nodes(data=True) if d["kind"] == "host"]


def _switch_path(g: nx.Graph, path: list[str]) -> list[str]:
    return [n for n in path if g.nodes[n]["kind"] == "switch"]


def test_default_is_seed000_fog_star_exactly() -> None:
    g = scenario_graph(load_scenario(ROOT / "scenarios" / "default.yaml"))
    assert switch_names(g) == ["s1"] and g.nodes["s1"]["dpid"] == 1
    got = [(n, d["role"], d["ip"], d["mac"], d["port"]) for n, d in g.nodes(data=True)
           if d["kind"] == "host"]
    assert got == [
        ("fn", "fn", "10.0.0.1", "02:00:00:00:00:01", 1),
        ("ofn1", "ofn", "10.0.0.2", "02:00:00:00:00:02", 2),
        ("c1", "client", "10.0.0.101", "02:00:00:00:00:65", 3),
        ("c2", "client", "10.0.0.102", "02:00:00:00:00:66", 4),
    ]
    assert all(d["delay_ms"] == 0 and d["bw_mbps"] is None for _, _, d in g.edges(data=True))
    fab = fabric_of(g)
    assert [h.port for h in fab.hosts] == [1, 2, 3, 4] and fab.vip == "10.0.0.250"


def test_line_puts_clients_and_fog_at_opposite_ends() -> None:
    g = _graph({"kind": "line", "length": 4, "link": {"delay_ms": 2}})
    assert switch_names(g) == ["s1", "s2", "s3", "s4"]
    assert nx.shortest_path_length(g, "c1", "fn", weight="delay_ms") == pytest.approx(10.0)


def test_tree_and_fat_tree_sizes() -> None:
    t = _graph({"kind": "tree", "depth": 2, "fanout": 3})
    assert len(switch_names(t)) == 1 + 3 + 9
    assert {t.nodes[c]["switch"] for c in ("c1", "c2")} <= set(switch_names(t)[4:])
    f = _graph({"kind": "fat_tree", "k": 4}, workload={"clients": 8})
    assert len(switch_names(f)) == 20  # (k/2)^2 core + k pods of k switches
    assert f.number_of_edges() - len(host_names(f)) == 32  # k^3/2 switch links
    assert all(f.degree(s) <= 4 for s in switch_names(f)[:4])


def test_multipath_has_two_disjoint_paths_of_different_lengths_to_fog_and_cloud() -> None:
    g = _graph({"kind": "multipath"},
               nodes=[{"name": "fn", "role": "fn", "mu": 1, "capacity": 5},
                      {"name": "fn2", "role": "ofn", "mu": 1, "capacity": 5},
                      {"name": "cloud", "role": "cloud", "mu": 5, "capacity": 50}])
    sw = g.subgraph(switch_names(g))
    edge = g.nodes["c1"]["switch"]
    for target in ("fn", "fn2", "cloud"):
        paths = list(nx.node_disjoint_paths(sw, edge, g.nodes[target]["switch"]))
        assert len(paths) >= 2
        assert len({len(p) for p in paths}) >= 2


def test_explicit_graph_with_per_link_figures() -> None:
    g = _graph({"kind": "graph", "switches": ["s1", "s2"], "link": {"delay_ms": 1},
                "links": [{"a": "s1", "b": "s2", "delay_ms": 3, "bw_mbps": 100}],
                "hosts": {"fn": "s2", "ofn1": {"switch": "s2", "loss": 0.01},
                          "c1": "s1", "c2": "s1"},
                "positions": {"s1": [0, 0]}})
    assert g.edges["s1", "s2"]["delay_ms"] == 3 and g.edges["s1", "s2"]["bw_mbps"] == 100
    assert g.edges["ofn1", "s2"]["loss"] == 0.01 and g.edges["fn", "s2"]["delay_ms"] == 1
    assert g.edges["s1", "s2"]["ports"] == {"s1": 3, "s2": 3}
    assert g.nodes["c1"]["pos"] == (0, 0)


def test_access_links_can_differ_from_the_others() -> None:
    g = _graph({"kind": "multipath", "link": {"delay_ms": 1.0}, "access": {"delay_ms": 0.0},
                "hosts": {"c2": {"switch": "s1", "delay_ms": 4.0}}})
    assert g.edges["s1", "s2"]["delay_ms"] == 1.0 and g.edges["c1", "s1"]["delay_ms"] == 0.0
    assert g.edges["c2", "s1"]["delay_ms"] == 4.0
    assert nx.shortest_path_length(g, "c1", "fn", weight="delay_ms") == pytest.approx(2.0)


GRAPH = {"kind": "graph", "switches": ["s1", "s2"], "links": [{"a": "s1", "b": "s2"}],
         "hosts": {"fn": "s2", "ofn1": "s2", "c1": "s1", "c2": "s1"}}


@pytest.mark.parametrize(
    ("topology", "field"),
    [
        ({**GRAPH, "links": [{"a": "s1", "b": "s9"}]}, "topology.links.0.b: unknown node 's9'"),
        ({**GRAPH, "links": [{"a": "s1", "b": "fn"}]}, "topology.links.0.b: 'fn' is a host"),
        ({**GRAPH, "links": []}, "topology: disconnected graph"),
        ({**GRAPH, "link": {"delay_ms": -1}}, "topology.link.delay_ms"),
        ({**GRAPH, "links": [{"a": "s1", "b": "s2", "jitter_ms": -2}]},
         "topology.links.0.jitter_ms"),
        ({**GRAPH, "hosts": {**GRAPH["hosts"], "c1": "fn"}},
         "topology.hosts.c1: attached to host 'fn'"),
        ({**GRAPH, "hosts": {**GRAPH["hosts"], "c1": "s7"}}, "topology.hosts.c1: unknown switch"),
        ({**GRAPH, "hosts": {**GRAPH["hosts"], "zz": "s1"}}, "topology.hosts.zz: unknown host"),
        ({**GRAPH, "hosts": {"fn": "s1"}}, "topology.hosts: ofn1, c1, c2 not attached"),
        ({**GRAPH, "switches": ["s1", "s2", "bridge1"]}, "bad switch name"),
        ({"kind": "fat_tree", "k": 3}, "even k"),
        ({"kind": "ring"}, "topology.kind"),
        ({"kind": "star", "links": [{"a": "s1", "b": "s2"}]}, "only for kind graph"),
        ({**GRAPH, "link": {"loss": 1.5}}, "topology.link.loss"),
    ],
)
def test_bad_topologies_get_one_line_naming_the_field(topology: dict, field: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario_dict(topology=topology), source="s.yaml")
    msg = str(err.value)
    assert "\n" not in msg and field in msg and msg.startswith("s.yaml: "), msg


def test_topology_survives_a_round_trip_through_yaml_and_overrides() -> None:
    sc = parse_scenario(scenario_dict(topology={"kind": "line", "length": 2,
                                                "link": {"delay_ms": 2.0}}))
    again = sc.with_overrides({"topology.link.delay_ms": 4.0})
    assert again.topology.kind == "line" and again.topology.link.delay_ms == 4.0
    g = scenario_graph(again)
    assert nx.shortest_path_length(g, "c1", "fn", weight="delay_ms") == pytest.approx(12.0)
