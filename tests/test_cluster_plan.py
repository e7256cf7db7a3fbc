"""The servers file and the placement of one emulation over several servers: pure, with
small graphs whose best cut is known."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from fogsdn.core.network_spec import FogHost, NetworkSpec
from fogsdn.core.scenario import Role
from fogsdn.core.topology import TopologySpec
from fogsdn.netem.cluster_plan import (
    ClusterError,
    crossing_links,
    crossing_weight,
    load_cluster,
    path_traffic,
    place,
)


def _two_cliques() -> nx.Graph:
    g = nx.Graph()
    g.add_edges_from(nx.complete_graph(["a1", "a2", "a3", "a4"]).edges)
    g.add_edges_from(nx.complete_graph(["b1", "b2", "b3", "b4"]).edges)
    g.add_edge("a1", "b1")
    return g


def test_two_cliques_are_cut_at_their_bridge() -> None:
    g = _two_cliques()
    at = place(g, ["s1", "s2"], {})
    assert crossing_links(g, at) == [("a1", "b1")]
    assert sorted(at.values()).count("s1") == 4


def test_traffic_decides_which_link_crosses() -> None:
    """A ring of six: any balanced cut crosses two links; the quiet ones cross."""
    g = nx.cycle_graph(["n0", "n1", "n2", "n3", "n4", "n5"])
    busy = {frozenset(e): 10.0 for e in g.edges}
    busy[frozenset(("n2", "n3"))] = 0.1
    busy[frozenset(("n5", "n0"))] = 0.1
    at = place(g, ["s1", "s2"], busy)
    assert crossing_links(g, at) == [("n0", "n5"), ("n2", "n3")]
    assert crossing_weight(g, at, busy) == pytest.approx(0.2, abs=1e-4)


def test_pins_hold_and_the_rest_follows_the_traffic() -> None:
    """The default star split as a user asks: the FN alone on one server."""
    net = NetworkSpec("star", 1, 5.0, (FogHost("fn", Role.FN), FogHost("o1", Role.OFN)), 2,
                      TopologySpec())
    g = net.graph()
    traffic = path_traffic(g, [(c, n, 1.0) for c in ("c1", "c2") for n in ("fn", "o1")])
    at = place(g, ["s1", "s2"], traffic, pinned={"fn": "s1", "o1": "s2", "c1": "s2",
                                                  "c2": "s2"})
    assert at["fn"] == "s1" and {at["o1"], at["c1"], at["c2"]} == {"s2"}
    switch = next(n for n, d in g.nodes(data=True) if d["kind"] == "switch")
    assert at[switch] == "s2"  # three busy host links stay local, the FN's crosses
    assert crossing_links(g, at) == [tuple(sorted(("fn", switch)))]


def test_placement_is_deterministic_and_balanced() -> None:
    g = nx.random_regular_graph(3, 20, seed=4)
    g = nx.relabel_nodes(g, {n: f"v{n}" for n in g})
    first = place(g, ["s1", "s2", "s3"], {})
    assert first == place(g, ["s1", "s2", "s3"], {})
    assert max(list(first.values()).count(s) for s in ("s1", "s2", "s3")) <= 8


@pytest.mark.parametrize(("pins", "why"), [
    ({"zz": "s1"}, "placement.zz: no such host"),
    ({"a1": "s9"}, "placement.a1: no server named 's9'"),
    ({n: "s1" for n in ("a1", "a2", "a3", "a4", "b1", "b2")}, "6 hosts pinned to s1"),
])
def test_impossible_pins_say_which(pins: dict[str, str], why: str) -> None:
    with pytest.raises(ClusterError, match=why):
        place(_two_cliques(), ["s1", "s2"], {}, pinned=pins)


def test_a_flow_rate_must_be_a_number() -> None:
    with pytest.raises(ClusterError, match="rate nan"):
        path_traffic(_two_cliques(), [("a1", "b2", float("nan"))])


def test_servers_file(tmp_path: Path) -> None:
    f = tmp_path / "servers.yaml"
    f.write_text("servers:\n  - {name: s1, address: 10.9.0.1}\n"
                 "  - {name: s2, address: node-2.lan, user: fog, key: /k, port: 2222}\n"
                 "placement: {fn: s1}\ntunnel: vxlan\n")
    spec = load_cluster(f)
    assert spec.names == ["s1", "s2"]
    assert spec.servers[1].port == 2222 and spec.tunnel == "vxlan"


@pytest.mark.parametrize(("text", "why"), [
    ("servers: []\n", "servers: Tuple should have at least 1 item"),
    ("servers:\n  - {name: s1, address: 'a b'}\n", "neither an IP address nor a host name"),
    ("servers:\n  - {name: s1, address: h}\n  - {name: s1, address: g}\n", "names repeat"),
    ("servers:\n  - {name: s1, address: h}\n  - {name: s2, address: h}\n", "one address"),
    ("servers:\n  - {name: s1, address: h}\nplacement: {fn: s3}\n", "placement.fn: no server"),
    ("servers:\n  - {name: head, address: h}\n", "names the machine that runs the run"),
    ("servers:\n  - {name: s1, address: h}\ncontroller: s1\n", "controller"),
    ("servers:\n  - {name: s1, address: h}\ntunnel: ssh\n", "tunnel"),
    ("servers:\n  - {name: s1, address: h}\ntunnel: gre\n", "tunnel"),
    ("- 1\n", "expected a mapping"),
    ("servers: [\n", "servers.yaml"),
])
def test_a_broken_servers_file_says_where(tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "servers.yaml"
    f.write_text(text)
    with pytest.raises(ClusterError, match=why) as err:
        load_cluster(f)
    assert "\n" not in str(err.value) and str(f) in str(err.value)


def test_set_up_installs_sshd_without_starting_it(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers are reached over ssh: set-up brings openssh-server, and keeps apt from
    starting a machine-wide sshd (a policy-rc.d only for the install, where none was)."""
    import bootstrap

    bare = bootstrap.missing_apt_packages(which=lambda exe: None, exists=lambda path: False)
    assert "openssh-server" in bare
    policy = tmp_path / "policy-rc.d"
    seen: list[str] = []
    monkeypatch.setattr(bootstrap, "POLICY_RC", policy)
    monkeypatch.setattr(bootstrap, "missing_apt_packages", lambda browser=False: ["x"])
    monkeypatch.setattr(bootstrap.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bootstrap, "_run", lambda cmd, **kw: seen.append(
        policy.read_text() if "install" in cmd else ""))
    bootstrap.ensure_apt()
    assert seen[-1].endswith("exit 101\n") and not policy.exists()
    policy.write_text("theirs")
    bootstrap.ensure_apt()
    assert policy.read_text() == "theirs"  # one that was there is left as it was
