"""One network spec under the live core: the queueing scenario and the city study each give
one, with the same host naming, and the city's carries no workload."""

from __future__ import annotations

import networkx as nx
import pytest
from conftest import ROOT

from fogsdn.city.live_run import city_network, start_positions
from fogsdn.city.study_spec import load_city_study
from fogsdn.core.network_spec import FogHost, NetworkSpec, idle_service, network_of
from fogsdn.core.scenario import Role, load_scenario, scenario_graph, scenario_hosts
from fogsdn.core.topology import TopologySpec


def test_a_scenarios_network_is_its_graph() -> None:
    for name in ("default.yaml", "multipath.yaml", "many_ofns.yaml"):
        sc = load_scenario(ROOT / "scenarios" / name)
        net = network_of(sc)
        assert net.hosts() == scenario_hosts(sc)
        assert nx.utils.graphs_equal(net.graph(), scenario_graph(sc))
        assert net.timebase == sc.timebase
        assert [h.name for h in net.fog_hosts] == [n.name for n in sc.nodes]


def test_the_city_network_has_its_sites_and_clients() -> None:
    st = load_city_study(ROOT / "scenarios" / "city.yaml")
    lay = st.layout()
    net = city_network(st, lay, start_positions(st, lay, 7), st.params())
    assert [h.name for h in net.fog_hosts] == [s.name for s in lay.fog_nodes]
    assert {h.role for h in net.fog_hosts} == {Role.FN}
    assert net.clients == 7
    g = net.graph()
    assert {f"c{k}" for k in range(1, 8)} <= set(g.nodes)
    assert net.time_scale == st.time_scale
    assert net.static_neighbours  # no probe pays an ARP exchange over an emulated link


def test_clients_know_the_fog_hosts_and_fog_hosts_know_everyone() -> None:
    net = NetworkSpec("n", 3, 4.0, (FogHost("fn", Role.FN), FogHost("o1", Role.OFN)), 3,
                      TopologySpec())
    g = net.graph()
    table = net.neighbours(g)

    def of(*names: str) -> set[tuple[str, str]]:
        return {(g.nodes[n]["ip"], g.nodes[n]["mac"]) for n in names}

    assert set(table) == {"fn", "o1", "c1", "c2", "c3"}
    assert set(table["c2"]) == of("fn", "o1")
    assert set(table["fn"]) == of("o1", "c1", "c2", "c3")
    assert all(len(set(v)) == len(v) for v in table.values())
    assert not network_of(load_scenario(ROOT / "scenarios" / "default.yaml")).static_neighbours


def test_the_idle_service_routes_the_same_hosts() -> None:
    """The controller's service for a network without one: same hosts, same graph."""
    net = NetworkSpec("n", 3, 4.0, (FogHost("fn", Role.FN, cpu=0.5), FogHost("o1", Role.OFN)),
                      2, TopologySpec())
    sc = idle_service(net)
    assert scenario_hosts(sc) == net.hosts()
    assert nx.utils.graphs_equal(scenario_graph(sc), net.graph())
    assert (sc.seed, sc.time_scale, sc.node("fn").cpu) == (3, 4.0, 0.5)


@pytest.mark.parametrize(("hosts", "clients", "scale", "why"), [
    ((), 1, 1.0, "no fog host"),
    ((FogHost("a", Role.FN), FogHost("a", Role.OFN)), 1, 1.0, "repeat"),
    ((FogHost("a", Role.FN),), -1, 1.0, "clients -1"),
    ((FogHost("a", Role.FN),), 1, float("nan"), "time_scale"),
])
def test_an_impossible_network_says_why(hosts: tuple[FogHost, ...], clients: int, scale: float,
                                        why: str) -> None:
    with pytest.raises(ValueError, match=why):
        NetworkSpec("n", 1, scale, hosts, clients, TopologySpec())
