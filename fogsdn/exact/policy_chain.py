"""Exact CTMC built by asking a policy object where each class goes, state by state.

`predict_policy` is the one entry point: the policy's answers (`fogsdn.exact.policy_probe`)
make the generator, solved as the lumped chains where routing depends on availability
only and there is no handoff, else as the joint chain (docs/model.md, "Chains built
from the policy object"). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fogsdn.core.scenario import LeaveMode, Role, Scenario
from fogsdn.exact.class_prediction import CLASSES, ClassPair, ClassPrediction
from fogsdn.exact.handoff_chain import handoff_components
from fogsdn.exact.joint_chain import (
    MAX_STATES,
    StateSpaceTooLarge,
    build_joint,
    joint_stationary,
    too_large_message,
)
from fogsdn.exact.lumped_chain import avail_vectors, lumped_node
from fogsdn.exact.policy_chain_model import PolicyModel, policy_model
from fogsdn.exact.policy_probe import PolicyOracle, PolicyOutsideModel
from fogsdn.exact.response_time import ClassResponse, Component, ErlangMixture
from fogsdn.policies.base import Policy, PolicyError


@dataclass(frozen=True)
class PolicyPrediction(ClassPair):
    """The policy chain's answer, with the interface of `fogsdn.exact.ctmc.Prediction`."""

    model: PolicyModel
    hp: ClassPrediction
    lp: ClassPrediction
    node_means: dict[str, float]
    n_states: int  # of the joint chain
    method: str
    solved_states: int  # what was solved: the joint chain, or the per-node chains
    # per node, the mean share of its servers busy (exact server power)
    node_busy: dict[str, float] = field(default_factory=dict)
    # per node, P(a class's arrival is answered there), (HP, LP), for fogsdn.exact.network;
    # a handed-off request's end is not in it
    answered_at: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def p_available(self) -> float:
        return self.model.p_available()

    @property
    def mean_fn(self) -> float:
        return sum(v for k, v in self.node_means.items() if self._role(k) is not Role.OFN)

    @property
    def mean_ofn(self) -> float:
        return sum(v for k, v in self.node_means.items() if self._role(k) is Role.OFN)

    def _role(self, name: str) -> Role:
        return next(n.role for n in self.model.nodes if n.name == name)

    def _common(self) -> dict[str, object]:
        return {"p_available": self.p_available, "mean_fn": self.mean_fn,
                "mean_ofn": self.mean_ofn, "mean_in_system": dict(self.node_means),
                "model": {"chain": "policy", "policy": self.model.policy.name,
                          "states": self.n_states, "method": self.method,
                          "solved_states": self.solved_states}}


def _class_responses(m: PolicyModel, weights: list[list[np.ndarray]],
                     blocking: list[float], extra: list[list[Component]]
                     ) -> tuple[ClassPrediction, ClassPrediction, dict[str, tuple[float, float]]]:
    """weights[c][k][n]: P(class-c arrival accepted at node k finding n there). Also
    each node's P(answered there) per class (`PolicyPrediction.answered_at`)."""
    preds = []
    answered = np.zeros((len(m.nodes), len(CLASSES)))
    for c, name in enumerate(CLASSES):
        comps: list[Component] = list(extra[c])
        for k, node in enumerate(m.nodes):
            w = weights[c][k]
            if w.size == 0 or w.sum() <= 0:
                continue
            kill = m.kill_rate(node)
            ww = np.array([w.sum()]) if node.multi else w
            comps.append(ErlangMixture(ww, node.rate, kill))
            answered[k, c] = comps[-1].p_complete
        resp = ClassResponse(comps, blocking[c])
        preds.append(ClassPrediction(name, m.lam[c], resp, m.deadline))
    return preds[0], preds[1], {n.name: (float(a[0]), float(a[1]))
                                for n, a in zip(m.nodes, answered, strict=True)}


def solve(m: PolicyModel, oracle: PolicyOracle, max_states: int = MAX_STATES) -> PolicyPrediction:
    """Exact prediction; PolicyOutsideModel or StateSpaceTooLarge where it cannot."""
    K = len(m.nodes)
    n_joint = m.n_states()
    handoff_churn = m.leave is LeaveMode.HANDOFF and m.churns
    if m.lumpable():
        if m.n_lumped() > max_states:
            raise StateSpaceTooLarge(too_large_message(m.n_lumped(), max_states))
        vecs = avail_vectors(m)
        routes_by = {vec: _route_avail(m, oracle, vec) for vec in vecs}
        p_vec = np.array([math.prod((m.p_available() if a else 1 - m.p_available())
                                    for a in vec) for vec in vecs]) if m.churns \
            else np.ones(len(vecs))
        weights: list[list[np.ndarray]] = [[np.zeros(0)] * K for _ in CLASSES]
        blocking = [0.0, 0.0]
        node_means: dict[str, float] = {}
        node_busy: dict[str, float] = {}
        for k, node in enumerate(m.nodes):
            pk = lumped_node(m, k, routes_by)  # [P, C+1]
            node_means[node.name] = float(pk.sum(axis=0) @ np.arange(node.capacity + 1))
            node_busy[node.name] = (node_means[node.name] / node.capacity if node.multi
                                    else float(1.0 - pk.sum(axis=0)[0]))
            mine = m.ofns.index(k) if k in m.ofns else -1
            for c in range(len(CLASSES)):
                w = np.zeros(node.capacity)
                for v, vec in enumerate(vecs):
                    r = routes_by[vec][c, k]
                    if r <= 0:
                        continue
                    if mine >= 0 and not vec[mine]:
                        blocking[c] += r * p_vec[v]
                        continue
                    w += r * pk[v, :-1]
                    blocking[c] += r * pk[v, -1]
                weights[c][k] = w
        hp, lp, answered_at = _class_responses(m, weights, blocking, [[], []])
        return PolicyPrediction(m, hp, lp, node_means, n_joint, "lumped", m.n_lumped(),
                                node_busy, answered_at)
    if n_joint > max_states:
        raise StateSpaceTooLarge(too_large_message(n_joint, max_states))
    if n_joint + m.n_tagged() > max_states:
        raise StateSpaceTooLarge(
            f"{n_joint:,} states and {m.n_tagged():,} in the chains of a request handed off: "
            f"{n_joint + m.n_tagged():,} above the {max_states:,} this machine solves in "
            "under a minute (scripts/bench_analytic.py --policy-chain)")
    jc = build_joint(m, oracle)
    pi, method = joint_stationary(jc.Q)
    weights = [[np.zeros(0)] * K for _ in CLASSES]
    blocking = [0.0, 0.0]
    extra: list[list[Component]] = [[], []]
    node_means = {}
    node_busy = {}
    for k, node in enumerate(m.nodes):
        node_means[node.name] = float(pi @ jc.count[:, k])
        node_busy[node.name] = (node_means[node.name] / node.capacity if node.multi
                                else float(pi @ (jc.count[:, k] > 0)))
        full = (~jc.avail[:, k]) | (jc.count[:, k] >= node.capacity)
        handed = (handoff_components(m, jc, pi, k)
                  if node.role is Role.OFN and handoff_churn else None)
        for c in range(len(CLASSES)):
            r = jc.routes[c, :, k] * pi
            blocking[c] += float(r[full].sum())
            if handed is not None:
                comp = handed[c]
                if comp is not None:
                    extra[c].append(comp)
                continue  # its weights stay empty: the tagged chain has its response
            w = np.zeros(node.capacity)
            ok = ~full
            np.add.at(w, jc.count[ok, k], r[ok])
            weights[c][k] = w
    hp, lp, answered_at = _class_responses(m, weights, blocking, extra)
    return PolicyPrediction(m, hp, lp, node_means, n_joint, method, n_joint, node_busy, answered_at)


def _route_avail(m: PolicyModel, oracle: PolicyOracle, vec: tuple[bool, ...]) -> np.ndarray:
    avail = [True] * len(m.nodes)
    for j, k in enumerate(m.ofns):
        avail[k] = vec[j]
    return oracle.route(avail, [0] * len(m.nodes))


def predict_policy(scenario: Scenario, policy: Policy, max_states: int = MAX_STATES,
                   poison: frozenset[str] = frozenset()) -> PolicyPrediction:
    """Exact prediction of `scenario` under the policy object `policy`."""
    m = policy_model(scenario, policy)
    try:
        oracle = PolicyOracle(policy, m.nodes, m.per_request, poison)
    except PolicyError as err:
        raise PolicyOutsideModel(str(err)) from None
    return solve(m, oracle, max_states)


__all__ = ["PolicyPrediction", "predict_policy", "solve"]
