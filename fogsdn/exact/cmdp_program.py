"""The constrained MDP of a scenario's optimal dispatch, as both solvers read it (pure).

The decisions are (state, node) pairs per class; every figure of the objective syntax is
a linear form over z = [y_hp (P), y_lp (P), t] (y: state-action frequencies, t: the
normalisation), and the chain's moves that no decision changes are one sparse matrix.
The linear program (`fogsdn.exact.optimal_policy`) adds the balance equations over z;
the Lagrangian method (`fogsdn.exact.lagrangian`) evaluates one deterministic policy at
a time with the same forms. docs/policies.md, "Method".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from fogsdn.core.scenario import Scenario
from fogsdn.exact.joint_chain import arrival_targets, enumerate_states, rate_matrix, transitions
from fogsdn.exact.objective import CLASS_METRICS, CLASS_NAMES, Constraint, Expr, Metric
from fogsdn.exact.policy_chain_model import PolicyModel
from fogsdn.exact.response_time import ErlangMixture


@dataclass(frozen=True)
class Forms:
    """Per-arrival figures of every (state, node) decision, for one class block."""

    acc: np.ndarray  # 1 where the request is accepted
    p_complete: np.ndarray
    t_complete: np.ndarray
    t_sojourn: np.ndarray
    late: np.ndarray  # P(accepted and not answered by the deadline)


def per_arrival(m: PolicyModel, count: np.ndarray, arr: np.ndarray, s_idx: np.ndarray,
                k_idx: np.ndarray) -> Forms:
    """The figures of a request sent to node k in state s, from `ErlangMixture` with
    one stage count at a time (the chain's own formulas)."""
    out = {f.name: np.zeros(s_idx.size) for f in fields(Forms)}
    for k, node in enumerate(m.nodes):
        stages = 1 if node.multi else node.capacity
        per = [ErlangMixture(np.eye(stages)[0 if node.multi else i], node.rate,
                             m.kill_rate(node)) for i in range(stages)]
        vals = {f: np.array([getattr(e, f) for e in per])
                for f in ("p_complete", "t_complete", "t_sojourn")}
        vals["late"] = np.array([float(e.not_completed_by(np.array([m.deadline]))[0]) for e in per])
        on = (k_idx == k) & (arr[s_idx, k_idx] >= 0)
        n = np.minimum(count[s_idx[on], k], stages - 1) if not node.multi \
            else np.zeros(int(on.sum()), dtype=np.int64)
        out["acc"][on] = 1.0
        for f, v in vals.items():
            out[f][on] = v[n]
    return Forms(**out)


def actions(avail: np.ndarray, arr: np.ndarray, reject: bool) -> tuple[np.ndarray, np.ndarray]:
    """(state, node) pairs a decision may name, sorted by state: nodes that are up (any
    node with `reject`); of the ones that block, only the first (they all do the same)."""
    N, K = avail.shape
    allowed = np.ones((N, K), dtype=bool) if reject else avail.copy()
    none = ~allowed.any(axis=1)
    allowed[none] = True
    blocks = allowed & (arr < 0)
    first = np.argmax(blocks, axis=1)
    keep = np.zeros_like(blocks)
    has = blocks.any(axis=1)
    keep[np.flatnonzero(has), first[has]] = True
    allowed &= ~blocks | keep
    s_idx, k_idx = np.nonzero(allowed)
    return s_idx.astype(np.int64), k_idx.astype(np.int64)


class Program:
    """The decisions, their figures' linear forms over z = [y_hp (P), y_lp (P), t], the
    chain's fixed moves, and (built on first use) the LP's balance equations."""

    def __init__(self, scenario: Scenario, m: PolicyModel, reject: bool) -> None:
        self.m = m
        strides, avail, count, phase, tables = enumerate_states(m)
        self.N, self.K = N, K = avail.shape
        self.phases = tuple(tuple(sorted(t, key=lambda st: t[st])) for t in tables)
        arr = arrival_targets(m, strides, phase, tables)
        self.s_idx, self.k_idx = s_idx, k_idx = actions(avail, arr, reject)
        self.P = P = s_idx.size
        self.target = arr[s_idx, k_idx]  # per pair: the state after acceptance, -1 blocks
        self.forms = per_arrival(m, count, arr, s_idx, k_idx)
        # the chain's moves that no decision changes (service, churn, leave): off-diagonal
        Q = rate_matrix(transitions(m, strides, avail, count, phase, tables,
                                    np.zeros((2, N, K))), N)
        Q.setdiag(0.0)
        Q.eliminate_zeros()
        self.fixed = Q.tocsr()
        self.occupy = sp.csr_matrix((np.ones(P), (s_idx, np.arange(P))), shape=(N, P))
        self.busy_power, self.idle_power = self._power(scenario, count)

    @cached_property
    def A_eq(self) -> sp.csr_matrix:
        """The LP's equalities over z: global balance (one redundant row left out), the
        classes' shared occupation, and sum y_hp = t."""
        N, P, m = self.N, self.P, self.m
        Q = self.fixed
        fixed = Q.T - sp.diags(np.asarray(Q.sum(axis=1)).ravel())  # d(p)/dt = fixed @ p
        s_idx, target = self.s_idx, self.target
        blocks = []
        j = np.flatnonzero(target >= 0)  # the pairs whose arrival is accepted
        for c in range(2):
            lam = m.lam[c]
            move = sp.csr_matrix((np.concatenate([np.full(j.size, lam), np.full(j.size, -lam)]),
                                  (np.concatenate([target[j], s_idx[j]]),
                                   np.concatenate([j, j]))), shape=(N, P))
            blocks.append(move + (fixed @ self.occupy if c == 0 else sp.csr_matrix((N, P))))
        zero_t = sp.csr_matrix((N, 1))
        balance = sp.hstack([blocks[0], blocks[1], zero_t]).tocsr()[1:]
        coupling = sp.hstack([-self.occupy, self.occupy, zero_t])
        norm = sp.hstack([sp.csr_matrix(np.ones((1, P))), sp.csr_matrix((1, P)),
                          sp.csr_matrix([[-1.0]])])
        return sp.vstack([balance, coupling, norm]).tocsr()

    def _power(self, scenario: Scenario, count: np.ndarray) -> tuple[np.ndarray, float]:
        """Mean server power as (per-state watts above idle, idle watts): P(n > 0) or
        E[n] / C busy, as `fogsdn.models.power_model.busy_fraction`."""
        per_state = np.zeros(self.N)
        idle = 0.0
        for k, (node, spec) in enumerate(zip(self.m.nodes, scenario.nodes, strict=True)):
            span = spec.power.max_w - spec.power.idle_w
            busy = count[:, k] / node.capacity if node.multi else (count[:, k] > 0)
            per_state += span * busy
            idle += spec.power.idle_w
        return per_state, idle

    def block(self, c: int, v: np.ndarray) -> np.ndarray:
        """A per-pair vector placed in class c's columns of z (t column 0)."""
        out = np.zeros(2 * self.P + 1)
        out[c * self.P:(c + 1) * self.P] = v
        return out

    def of_class(self, cls: str, per: Callable[[int], np.ndarray], weighted: bool) -> np.ndarray:
        """`per(c)` in class c's columns for `hp` or `lp`; for `all`, both classes',
        each times its arrival rate where `weighted` (a per-arrival figure)."""
        if cls != "all":
            c = 0 if cls == "hp" else 1
            return self.block(c, per(c))
        w = self.m.lam if weighted else (1.0, 1.0)
        return self.block(0, w[0] * per(0)) + self.block(1, w[1] * per(1))

    def linear(self, mt: Metric) -> np.ndarray:
        """Coefficients over z of a non-ratio metric, its constant on the t column."""
        f, lam = self.forms, self.m.lam
        if mt.name == "power":
            out = self.block(0, self.busy_power[self.s_idx])
            out[-1] = self.idle_power
            return out
        per = {"blocking": lambda c: 1.0 - f.acc,
               "outage": lambda c: (1.0 - f.acc) + f.late,
               "N": lambda c: lam[c] * f.t_sojourn,
               "throughput": lambda c: lam[c] * f.acc}[mt.name]
        share = mt.name in ("blocking", "outage")  # of every arrival, both classes'
        out = self.of_class(mt.cls, per, weighted=share)
        return out / (lam[0] + lam[1]) if share and mt.cls == "all" else out

    def ratio(self, mt: Metric) -> tuple[np.ndarray, np.ndarray]:
        """(numerator, denominator) over z of W: E[T; answered] and P(answered)."""
        f = self.forms
        return (self.of_class(mt.cls, lambda c: f.t_complete, weighted=True),
                self.of_class(mt.cls, lambda c: f.p_complete, weighted=True))

    def expr_rows(self, e: Expr) -> tuple[np.ndarray, np.ndarray | None]:
        """(numerator, denominator or None) of an expression over z."""
        r = e.ratio
        if r is not None:
            num, den = self.ratio(r)
            return e.terms[0][0] * num, den
        return sum((c * self.linear(mt) for c, mt in e.terms), np.zeros(2 * self.P + 1)), None

    def t_only(self) -> np.ndarray:
        """The denominator of a linear figure: t (1 at a normalised z)."""
        return np.eye(1, 2 * self.P + 1, 2 * self.P).ravel()

    def constraint_rows(self, constraints: tuple[Constraint, ...]) -> list[np.ndarray]:
        """Each constraint as a row r over z with r @ z <= 0 (a bound on W is the linear
        N_W - b D_W <= 0)."""
        out = []
        for con in constraints:
            cn, cd = self.expr_rows(con.expr)
            row = cn - con.bound * (cd if cd is not None else self.t_only())
            out.append(row if con.sense == "<=" else -row)
        return out

    def figures(self, z: np.ndarray) -> dict[str, float]:
        """Every metric at the (un-normalised) solution z."""
        out: dict[str, float] = {}
        for mt in (Metric(cls, name) for cls in CLASS_NAMES for name in CLASS_METRICS):
            if mt.is_ratio:
                num, den = self.ratio(mt)
                d = float(den @ z)
                out[str(mt)] = float(num @ z) / d if d > 0 else math.nan
            else:
                out[str(mt)] = float(self.linear(mt) @ z) / z[-1]
        out["power"] = float(self.linear(Metric("", "power")) @ z) / z[-1]
        return out


__all__ = ["Forms", "Program", "actions", "per_arrival"]
