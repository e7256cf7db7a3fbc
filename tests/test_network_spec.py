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
