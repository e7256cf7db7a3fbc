"""The network's share of the end-to-end response, where the model can state it (pure).

On links that only delay, the end-to-end response is W plus a fixed path time
(`fogsdn.core.latency`), as long as every serving node is equally far from the clients on
average; where that fails (loss, a link near saturation, nodes at different distances)
there is no W_e2e, and the reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

from fogsdn.core.latency import CONGESTED_UTILISATION, busiest_link, request_network
from fogsdn.core.scenario import Scenario, scenario_graph
from fogsdn.exact.policy_chain import PolicyPrediction

if TYPE_CHECKING:
    from fogsdn.exact.model_params import AnyPrediction


@dataclass(frozen=True)
class NetworkShare:
    fixed_ms: float | None  # to add to W for W_e2e; None: no number (or per class)
    why: str  # what was added, or why nothing could be
    # nodes at different distances: per class ("hp", "lp"), the mean network time of
    # its answered requests (each node's weighted by the answers it gives the class)
    by_class: dict[str, float] | None = None

    def to_dict(self) -> dict[str, object]:
        return {"fixed_ms": self.fixed_ms, "why": self.why, "by_class": self.by_class}

    def e2e(self, w: float, cls: str = "") -> float | None:
        if self.by_class is not None and cls in self.by_class:
            return w + self.by_class[cls]
        return None if self.fixed_ms is None else w + self.fixed_ms


def _class_mix(by_node: dict[str, float], pred: AnyPrediction | None) -> dict[str, float] | None:
    """Per class, the network time of its answered requests from the exact mix of nodes
    that answers it (`PolicyPrediction.answered_at`); None where the prediction has no
    such mix or it does not account for every answer (a handed-off request)."""
    if not isinstance(pred, PolicyPrediction) or not pred.answered_at:
        return None
    at, out = pred.answered_at, {}
    for c, cls in enumerate(("hp", "lp")):
        total = sum(a[c] for a in at.values())
        whole = pred.cls(cls).response.p_complete
        if total <= 0 or abs(total - whole) > 1e-9 * max(1.0, whole):
            return None
        out[cls] = sum(a[c] * by_node[n] for n, a in at.items()) / total
    return out


def network_share(scenario: Scenario, pred: AnyPrediction | None = None) -> NetworkShare:
    """The network's share of W_e2e. With nodes at different distances, a prediction
    that says where each class is answered (the policy chain's) gives it per class."""
    g = scenario_graph(scenario)
    net = request_network(scenario)
    if net.zero:
        return NetworkShare(0.0, "no link delay: W_e2e = W")
    lossy = sorted({str(d["id"]) for _, _, d in g.edges(data=True) if d["loss"] > 0})
    if lossy:
        return NetworkShare(None, f"loss on {', '.join(lossy[:3])}: TCP retransmissions are "
                                  "outside the model")
    lam = scenario.workload.lambda_hp + scenario.workload.lambda_lp
    worst = busiest_link(g, net, lam)
    if worst is not None and worst[1] > CONGESTED_UTILISATION:
        return NetworkShare(None, f"link {worst[0]} up to {worst[1]:.0%} busy: queueing in the "
                                  "network is outside the model")
    clients = sorted({c for c, _ in net.paths})
    by_node = {n.name: fmean(net.mean_ms(c, n.name) for c in clients) for n in scenario.nodes}
    values = sorted(set(round(v, 9) for v in by_node.values()))
    if len(values) > 1:
        far = ", ".join(f"{n} {v:.4g}" for n, v in by_node.items())
        mix = _class_mix(by_node, pred)
        if mix is not None:
            return NetworkShare(None, f"two round trips over each node's path plus "
                                      f"transmission ({far} model ms), weighted by where "
                                      "each class is answered", mix)
        return NetworkShare(None, f"nodes at different network distances ({far} model ms): "
                                  "the class's mix of nodes would matter")
    return NetworkShare(values[0], f"two round trips over the path plus transmission: "
                                   f"{values[0]:.6g} model ms")
