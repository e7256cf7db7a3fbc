"""The optimal state-based dispatch of a scenario, from the exact chain (pure).

A constrained MDP on the joint chain's states, solved exactly as one linear program
over state-action frequencies y_c(s, k) (scipy's HiGHS); a ratio objective (W) by the
Charnes-Cooper transform. The formulation, and why `handoff` with churn is outside it,
is in docs/policies.md ("Method"). A vertex of this LP randomises in at most as many
states as there are constraints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from fogsdn.core.scenario import LeaveMode, PolicySpec, Role, Scenario
from fogsdn.exact.joint_chain import arrival_targets, enumerate_states, rate_matrix, transitions
from fogsdn.exact.model_params import AnyPrediction, node_busy
from fogsdn.exact.objective import CLASS_METRICS, CLASS_NAMES, Constraint, Expr, Metric, evaluate
from fogsdn.exact.policy_chain import predict_policy
from fogsdn.exact.policy_chain_model import PolicyModel, policy_model
from fogsdn.exact.response_time import ErlangMixture
from fogsdn.models.power_model import server_power_w
from fogsdn.policies import make_policy
from fogsdn.policies.state_table import (
    FALLBACK_MARK,
    MIXED_MARK,
    StateTablePolicy,
    encode_choice,
)

# y / p below this share of a state's decisions is dropped as solver noise
_MIN_SHARE = 1e-9
# The largest joint chain the optimiser accepts: well below the 10,164 states whose LP
# did not finish in 8 minutes (timings in docs/policies.md).
MAX_OPT_STATES = 5_000


class OptimizeError(ValueError):
    """The optimum cannot be computed (infeasible, outside the model); one line."""


@dataclass(frozen=True)
class _Forms:
    """Per-arrival figures of every (state, node) decision, for one class block."""

    acc: np.ndarray  # 1 where the request is accepted
    p_complete: np.ndarray
    t_complete: np.ndarray
    t_sojourn: np.ndarray
    late: np.ndarray  # P(accepted and not answered by the deadline)


@dataclass(frozen=True)
class OptimalPolicy:
    """The LP's optimum and its decision table."""

    model: PolicyModel
    objective: Expr
    constraints: tuple[Constraint, ...]
    value: float
    figures: dict[str, float]  # flat {"hp.W": ..., "power": ...} at the optimum
    probs: np.ndarray  # [2, N, K]: per class, state and node; NaN rows: unvisited
    phases: tuple[tuple[tuple[bool, int], ...], ...]
    n_states: int
    n_variables: int
    n_rows: int
    randomised: int  # (state, class) decisions that randomise
    seconds: float
    reject: bool

    def table(self) -> tuple[str, str, dict[tuple[str, int], dict[str, float]]]:
        """(HP codes, LP codes, mixed rows) for `StateTablePolicy`."""
        names = [n.name for n in self.model.nodes]
        codes: list[str] = []
        mixed: dict[tuple[str, int], dict[str, float]] = {}
        for c, cls in enumerate(("hp", "lp")):
            chars = []
            for s in range(self.n_states):
                row = self.probs[c, s]
                if np.isnan(row).any():
                    chars.append(FALLBACK_MARK)
                    continue
                nz = np.flatnonzero(row > 0)
                if nz.size == 1:
                    chars.append(encode_choice(int(nz[0])))
                else:
                    chars.append(MIXED_MARK)
                    mixed[(cls, s)] = {names[k]: float(row[k]) for k in nz}
            codes.append("".join(chars))
        return codes[0], codes[1], mixed


def _per_arrival(m: PolicyModel, count: np.ndarray, arr: np.ndarray, s_idx: np.ndarray,
                 k_idx: np.ndarray) -> _Forms:
    """The figures of a request sent to node k in state s, from `ErlangMixture` with
    one stage count at a time (the chain's own formulas)."""
    out = {f.name: np.zeros(s_idx.size) for f in fields(_Forms)}
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
    return _Forms(**out)


def _actions(avail: np.ndarray, arr: np.ndarray, reject: bool) -> tuple[np.ndarray, np.ndarray]:
    """(state, node) pairs a decision may name: nodes that are up (any node with
    `reject`); of the ones that block, only the first (they all do the same)."""
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


class _Program:
    """The LP's matrices over z = [y_hp (P), y_lp (P), t] and the figures' forms."""

    def __init__(self, scenario: Scenario, m: PolicyModel, reject: bool) -> None:
        self.m = m
        strides, avail, count, phase, tables = enumerate_states(m)
        self.N, self.K = N, K = avail.shape
        self.phases = tuple(tuple(sorted(t, key=lambda st: t[st])) for t in tables)
        arr = arrival_targets(m, strides, phase, tables)
        self.s_idx, self.k_idx = s_idx, k_idx = _actions(avail, arr, reject)
        self.P = P = s_idx.size
        self.forms = _per_arrival(m, count, arr, s_idx, k_idx)
        # the chain's moves that no decision changes (service, churn, leave), as the
        # transposed generator: d(p)/dt = fixed @ p
        Q = rate_matrix(transitions(m, strides, avail, count, phase, tables,
                                    np.zeros((2, N, K))), N)
        Q.setdiag(0.0)
        fixed = Q.T - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
        occupy = sp.csr_matrix((np.ones(P), (s_idx, np.arange(P))), shape=(N, P))
        blocks = []
        j = np.flatnonzero(arr[s_idx, k_idx] >= 0)  # the pairs whose arrival is accepted
        for c in range(2):
            lam = m.lam[c]
            move = sp.csr_matrix((np.concatenate([np.full(j.size, lam), np.full(j.size, -lam)]),
                                  (np.concatenate([arr[s_idx[j], k_idx[j]], s_idx[j]]),
                                   np.concatenate([j, j]))), shape=(N, P))
            blocks.append(move + (fixed @ occupy if c == 0 else sp.csr_matrix((N, P))))
        zero_t = sp.csr_matrix((N, 1))
        # balance: one row is redundant with the others; the normalisation replaces it
        balance = sp.hstack([blocks[0], blocks[1], zero_t]).tocsr()[1:]
        coupling = sp.hstack([-occupy, occupy, zero_t])
        norm = sp.hstack([sp.csr_matrix(np.ones((1, P))), sp.csr_matrix((1, P)),
                          sp.csr_matrix([[-1.0]])])
        self.A_eq = sp.vstack([balance, coupling, norm]).tocsr()
        self.occupy = occupy
        self.busy_power, self.idle_power = self._power(scenario, count)

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


def _solve(prog: _Program, objective: Expr, constraints: tuple[Constraint, ...],
           method: str = "highs") -> tuple[np.ndarray | None, str]:
    """The LP (Charnes-Cooper where the objective is a ratio); z, or None and why."""
    nz = 2 * prog.P + 1
    t_only = np.eye(1, nz, nz - 1).ravel()  # a linear figure's denominator: t
    num, den = prog.expr_rows(objective)
    last = den if den is not None else t_only
    ub = []
    for con in constraints:
        cn, cd = prog.expr_rows(con.expr)
        row = cn - con.bound * (cd if cd is not None else t_only)
        ub.append(row if con.sense == "<=" else -row)
    res = linprog(num, A_ub=np.array(ub) if ub else None, b_ub=np.zeros(len(ub)) if ub else None,
                  A_eq=sp.vstack([prog.A_eq, sp.csr_matrix(last[None, :])]).tocsr(),
                  b_eq=np.concatenate([np.zeros(prog.A_eq.shape[0]), np.ones(1)]),
                  bounds=(0, None), method=method,
                  options={"primal_feasibility_tolerance": 1e-10,
                           "dual_feasibility_tolerance": 1e-10})
    if res.status != 0 or res.x is None:
        return None, str(res.message)
    return np.asarray(res.x), ""


def _why_infeasible(prog: _Program, constraints: tuple[Constraint, ...]) -> str:
    """One line naming the constraint that cannot hold, with the best value reachable."""
    for con in constraints:
        z, _ = _solve(prog, con.expr if con.sense == "<=" else _negate(con.expr), ())
        if z is None:
            continue
        best = evaluate(con.expr, prog.figures(z))
        if not con.holds(best):
            word = "least" if con.sense == "<=" else "largest"
            return (f"constraint {con.text!r} cannot be met: the {word} {con.expr} any "
                    f"state-based policy reaches here is {best:.6g}")
    names = ", ".join(repr(c.text) for c in constraints)
    return f"constraints {names} cannot all be met together"


def _negate(e: Expr) -> Expr:
    return Expr(tuple((-c, mt) for c, mt in e.terms), f"-({e.text})")


def optimize(scenario: Scenario, objective: Expr, constraints: tuple[Constraint, ...] = (),
             reject: bool = False, max_states: int = MAX_OPT_STATES, method: str = "highs"
             ) -> OptimalPolicy:
    """The optimal state-based policy of `scenario` for `objective` under `constraints`;
    `method` is scipy's HiGHS variant (scripts/bench_analytic.py compares them)."""
    t0 = time.perf_counter()
    try:
        m = policy_model(scenario, make_policy(scenario.policy))
    except ValueError as err:
        raise OptimizeError(str(err)) from None
    if m.leave is LeaveMode.HANDOFF and m.churns:
        raise OptimizeError("leave: handoff makes a handed-off request's stay depend on later "
                            "decisions; the optimiser takes drain and drop")
    if m.n_states() > max_states:
        raise OptimizeError(f"{m.n_states():,} states: above the {max_states:,} the "
                            "optimiser solves here in a minute or so (docs/policies.md)")
    prog = _Program(scenario, m, reject)
    z, why = _solve(prog, objective, constraints, method)
    if z is None:
        if "nfeasible" in why and constraints:
            raise OptimizeError(_why_infeasible(prog, constraints))
        raise OptimizeError(f"the LP for {objective} found no optimum: {why}")
    figures = prog.figures(z)
    probs = _decisions(prog, z)
    seconds = time.perf_counter() - t0
    randomised = int(sum(((probs[c] > 0).sum(axis=1) > 1).sum() for c in range(2)))
    return OptimalPolicy(m, objective, constraints, evaluate(objective, figures), figures,
                         probs, prog.phases, prog.N, 2 * prog.P + 1,
                         prog.A_eq.shape[0] + 1 + len(constraints), randomised, seconds,
                         reject)


def _decisions(prog: _Program, z: np.ndarray) -> np.ndarray:
    """Per class, state and node, y / p; NaN rows where the optimum never is."""
    P = prog.P
    p = prog.occupy @ z[:P]
    probs = np.full((2, prog.N, prog.K), np.nan)
    seen = p > 0  # the states the optimum never visits keep the fallback
    for c in range(2):
        y = np.maximum(z[c * P:(c + 1) * P], 0.0)
        row = np.zeros((prog.N, prog.K))
        np.add.at(row, (prog.s_idx, prog.k_idx), y)
        tot = row.sum(axis=1)
        ok = seen & (tot > 0)
        share = np.where(ok[:, None], row / np.where(tot > 0, tot, 1.0)[:, None], 0.0)
        share[share < _MIN_SHARE] = 0.0
        share /= np.where(share.sum(axis=1) > 0, share.sum(axis=1), 1.0)[:, None]
        probs[c, ok] = share[ok]
    return probs


def _table_attrs(opt: OptimalPolicy, policy_name: str) -> dict[str, Any]:
    """The class attributes of the decision table's `StateTablePolicy`."""
    hp, lp, mixed = opt.table()
    return {"name": policy_name, "NODES": tuple(n.name for n in opt.model.nodes),
            "PHASES": opt.phases, "HP": hp, "LP": lp, "MIXED": mixed}


def table_policy_class(opt: OptimalPolicy, policy_name: str = "optimal") -> type[StateTablePolicy]:
    """The decision table as a policy class (what the written file defines)."""
    attrs = {**_table_attrs(opt, policy_name), "__module__": __name__}
    return type("Optimal", (StateTablePolicy,), attrs)


def policy_source(opt: OptimalPolicy, scenario_name: str, policy_name: str = "optimal") -> str:
    """The text of a user policy file holding the table (docs/policies.md)."""
    t = _table_attrs(opt, policy_name)
    cons = "; ".join(c.text for c in opt.constraints) or "none"

    def wrap(s: str) -> str:
        return "\n".join(f"        {s[i:i + 80]!r}" for i in range(0, len(s), 80)) or "        ''"

    mixed_lines = "\n".join(f"        ({k[0]!r}, {k[1]}): {v!r},"
                             for k, v in sorted(t["MIXED"].items()))
    return f'''"""Optimal state-based dispatch for scenario {scenario_name!r}, written by
scripts/optimize_policy.py: minimise {opt.objective} subject to {cons}
(optimum {opt.value:.9g}; {opt.n_states} states, {opt.randomised} randomised decisions).

A decision table over the exact chain's states (fogsdn/policies/state_table.py);
load it like any policy file: --policy-module THIS_FILE.
"""

from typing import ClassVar

from fogsdn.policies.state_table import StateTablePolicy


class Optimal(StateTablePolicy):
    name: ClassVar[str] = {policy_name!r}
    NODES = {t["NODES"]!r}
    PHASES = {t["PHASES"]!r}
    HP = (
{wrap(t["HP"])}
    )
    LP = (
{wrap(t["LP"])}
    )
    MIXED = {{
{mixed_lines}
    }}
'''


def prediction_figures(scenario: Scenario, pred: AnyPrediction) -> dict[str, float]:
    """Every metric of the objective syntax from an exact prediction (any chain)."""
    both = (pred.hp, pred.lp)
    out = {f"{cp.cls}.{name}": getattr(cp, name) for cp in both for name in CLASS_METRICS}
    answered = [(cp.lam * cp.response.p_complete, cp.W) for cp in both]
    n_ok = sum(a for a, _ in answered)
    out["all.W"] = sum(a * w for a, w in answered if a > 0) / n_ok if n_ok > 0 else math.nan
    lam = sum(cp.lam for cp in both)
    for name in ("blocking", "outage"):  # shares of every arrival
        out[f"all.{name}"] = sum(cp.lam * getattr(cp, name) for cp in both) / lam
    for name in ("N", "throughput"):
        out[f"all.{name}"] = out[f"hp.{name}"] + out[f"lp.{name}"]
    busy = node_busy(scenario, pred)
    out["power"] = math.fsum(server_power_w(n.power, busy[n.name]) for n in scenario.nodes)
    return out


@dataclass(frozen=True)
class Baseline:
    """One built-in policy at one setting, with its exact figures."""

    family: str
    setting: dict[str, float]
    figures: dict[str, float]
    feasible: bool
    value: float

    @property
    def label(self) -> str:
        if not self.setting:
            return self.family
        return self.family + "(" + ",".join(f"{k}={v:g}" for k, v in self.setting.items()) + ")"


def _builtin_specs(scenario: Scenario) -> list[tuple[str, dict[str, float], PolicySpec]]:
    """The built-in state-based policies of seed 000 over their parameter ranges:
    prioritized, basic, nodiff at alpha 0, 0.1, ..., 1, threshold 0..C_F."""
    cap = max(n.capacity for n in scenario.nodes if n.role is Role.FN)
    out: list[tuple[str, dict[str, float], PolicySpec]] = [
        ("prioritized", {}, PolicySpec(name="prioritized")),
        ("basic", {}, PolicySpec(name="basic"))]
    out += [("nodiff", {"alpha": a}, PolicySpec(name="nodiff", alpha=a))
            for a in (i / 10 for i in range(11))]
    out += [("threshold", {"threshold": t}, PolicySpec(name="threshold", params={"threshold": t}))
            for t in range(cap + 1)]
    return out


def baselines(scenario: Scenario, objective: Expr, constraints: tuple[Constraint, ...] = ()
              ) -> list[Baseline]:
    """Every built-in state-based policy's exact figures, and whether it meets the
    constraints (the policy chain, as `predict` gives it)."""
    out = []
    for family, setting, spec in _builtin_specs(scenario):
        sc = scenario.model_copy(update={"policy": spec})
        pred = predict_policy(sc, make_policy(spec))
        fig = prediction_figures(sc, pred)
        ok = all(c.holds(evaluate(c.expr, fig)) for c in constraints)
        out.append(Baseline(family, setting, fig, ok, evaluate(objective, fig)))
    return out


def best_of_families(points: list[Baseline]) -> dict[str, Baseline]:
    """Per family, the best feasible setting (the best overall where none is)."""
    out: dict[str, Baseline] = {}
    for b in points:
        cur = out.get(b.family)
        if cur is None or (b.feasible, -b.value) > (cur.feasible, -cur.value):
            out[b.family] = b
    return out


__all__ = ["Baseline", "MAX_OPT_STATES", "OptimalPolicy", "OptimizeError",
           "baselines", "best_of_families", "optimize", "policy_source", "prediction_figures",
           "table_policy_class"]
