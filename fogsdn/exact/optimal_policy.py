"""The optimal state-based dispatch of a scenario, from the exact chain (pure).

A constrained MDP on the joint chain's states, by one of two methods that give the same
optimum: one linear program over state-action frequencies y_c(s, k) (scipy's HiGHS; a
ratio objective (W) by the Charnes-Cooper transform), exact and quick up to about
1,500 states; or the Lagrangian method (`fogsdn.exact.lagrangian`: policy iteration on
the relaxed MDP, the multipliers by column generation, Dinkelbach for W), which scales
with the chain's sparse solves. The formulation, and why `handoff` with churn is
outside it, is in docs/policies.md ("Method"). The optimum randomises in at most as many
states as there are constraints.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from fogsdn.core.scenario import LeaveMode, PolicySpec, Role, Scenario
from fogsdn.exact import lagrangian
from fogsdn.exact.cmdp_program import Program
from fogsdn.exact.model_params import AnyPrediction, node_busy
from fogsdn.exact.objective import CLASS_METRICS, Constraint, Expr, evaluate
from fogsdn.exact.policy_chain import predict_policy
from fogsdn.exact.policy_chain_model import PolicyModel, policy_model
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
METHODS = ("auto", "lp", "lagrangian")
# `auto` solves the LP (the reference) up to this many states, where it takes under a
# second; the Lagrangian method above (scripts/bench_analytic.py --optimizer: 0.05 s
# against 0.03 at 462 states, 3.8 s against 0.19 at 1,584; docs/policies.md).
AUTO_LP_MAX_STATES = 1_000
# Peak memory, bytes, as a + b * states (the Lagrangian method: vectors per state and
# the pool of policies; its LU only up to lagrangian.DIRECT_MAX states) or as
# a + b * states ** 1.5 (HiGHS on the LP: its basis factors fill in); fitted to
# scripts/bench_analytic.py --optimizer with a margin (docs/policies.md).
_MEM_BASE = 250e6
_MEM_LAGR_PER_STATE = 8e3
_MEM_LP_PER_STATE15 = 2e3


class OptimizeError(ValueError):
    """The optimum cannot be computed (infeasible, outside the model); one line."""


def pick_method(method: str, n_states: int) -> str:
    """`lp` or `lagrangian` for `method` (`auto` by size)."""
    if method not in METHODS:
        raise OptimizeError(f"method {method!r}: one of {', '.join(METHODS)}")
    if method != "auto":
        return method
    return "lp" if n_states <= AUTO_LP_MAX_STATES else "lagrangian"


def memory_needed(method: str, n_states: int) -> float:
    """The peak memory the method needs on `n_states` states, bytes (an estimate)."""
    if method == "lp":
        return _MEM_BASE + _MEM_LP_PER_STATE15 * n_states ** 1.5
    return _MEM_BASE + _MEM_LAGR_PER_STATE * n_states


@dataclass(frozen=True)
class OptimalPolicy:
    """The optimum, its decision table and how it was found."""

    model: PolicyModel
    objective: Expr
    constraints: tuple[Constraint, ...]
    value: float
    figures: dict[str, float]  # flat {"hp.W": ..., "power": ...} at the optimum
    probs: np.ndarray  # [2, N, K]: per class, state and node; NaN rows: unvisited
    phases: tuple[tuple[tuple[bool, int], ...], ...]
    n_states: int
    n_variables: int
    n_rows: int  # the LP's rows; 0 for the Lagrangian method
    randomised: int  # (state, class) decisions that randomise
    seconds: float
    reject: bool
    method: str = "lp"
    iterations: int = 0  # simplex iterations; master rounds for the Lagrangian method
    evaluations: int = 0  # the Lagrangian method's policy evaluations (sparse solves)
    gap: float = 0.0  # value minus the Lagrangian lower bound (0 for the LP)

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


@dataclass(frozen=True)
class _Found:
    """One method's answer: the normalised z, the table, and the search's counts."""

    z: np.ndarray
    probs: np.ndarray
    iterations: int = 0
    evaluations: int = 0
    gap: float = 0.0


def _solve_lp(prog: Program, objective: Expr, constraints: tuple[Constraint, ...],
              lp_method: str = "highs") -> _Found | str:
    """The LP (Charnes-Cooper where the objective is a ratio); its answer, or why not."""
    num, den = prog.expr_rows(objective)
    last = den if den is not None else prog.t_only()
    ub = prog.constraint_rows(constraints)
    res = linprog(num, A_ub=np.array(ub) if ub else None, b_ub=np.zeros(len(ub)) if ub else None,
                  A_eq=sp.vstack([prog.A_eq, sp.csr_matrix(last[None, :])]).tocsr(),
                  b_eq=np.concatenate([np.zeros(prog.A_eq.shape[0]), np.ones(1)]),
                  bounds=(0, None), method=lp_method,
                  options={"primal_feasibility_tolerance": 1e-10,
                           "dual_feasibility_tolerance": 1e-10})
    if res.status != 0 or res.x is None:
        return "infeasible" if res.status == 2 else str(res.message)
    z = np.asarray(res.x)
    return _Found(z / z[-1], _decisions(prog, z), int(res.nit))


def _solve_lagrangian(prog: Program, objective: Expr,
                      constraints: tuple[Constraint, ...]) -> _Found | str:
    """The Lagrangian method's answer, or "infeasible"."""
    num, den = prog.expr_rows(objective)
    try:
        sol = lagrangian.solve(prog, num, den, prog.constraint_rows(constraints))
    except lagrangian.Infeasible:
        return "infeasible"
    return _Found(sol.z, sol.probs, sol.rounds, sol.evaluations, sol.gap)


def _run(prog: Program, method: str, objective: Expr, constraints: tuple[Constraint, ...],
         lp_method: str) -> _Found | str:
    if method == "lp":
        return _solve_lp(prog, objective, constraints, lp_method)
    return _solve_lagrangian(prog, objective, constraints)


def _why_infeasible(prog: Program, method: str, constraints: tuple[Constraint, ...],
                    lp_method: str) -> str:
    """One line naming the constraint that cannot hold, with the best value reachable."""
    for con in constraints:
        got = _run(prog, method, con.expr if con.sense == "<=" else _negate(con.expr), (),
                   lp_method)
        if isinstance(got, str):
            continue
        best = evaluate(con.expr, prog.figures(got.z))
        if not con.holds(best):
            word = "least" if con.sense == "<=" else "largest"
            return (f"constraint {con.text!r} cannot be met: the {word} {con.expr} any "
                    f"state-based policy reaches here is {best:.6g}")
    names = ", ".join(repr(c.text) for c in constraints)
    return f"constraints {names} cannot all be met together"


def _negate(e: Expr) -> Expr:
    return Expr(tuple((-c, mt) for c, mt in e.terms), f"-({e.text})")


def optimize(scenario: Scenario, objective: Expr, constraints: tuple[Constraint, ...] = (),
             reject: bool = False, method: str = "auto", lp_method: str = "highs",
             max_bytes: float | None = None) -> OptimalPolicy:
    """The optimal state-based policy of `scenario` for `objective` under `constraints`,
    by `method` (`auto`: the LP on small chains, the Lagrangian method above);
    `lp_method` is scipy's HiGHS variant; a one-line refusal where the estimated memory
    is above `max_bytes` (the caller's free memory)."""
    t0 = time.perf_counter()
    try:
        m = policy_model(scenario, make_policy(scenario.policy))
    except ValueError as err:
        raise OptimizeError(str(err)) from None
    if m.leave is LeaveMode.HANDOFF and m.churns:
        raise OptimizeError("leave: handoff makes a handed-off request's stay depend on later "
                            "decisions; the optimiser takes drain and drop")
    n = m.n_states()
    chosen = pick_method(method, n)
    need = memory_needed(chosen, n)
    if max_bytes is not None and need > max_bytes:
        raise OptimizeError(f"{n:,} states: the {chosen} method needs about {need / 1e9:.1f} GB "
                            f"of memory, {max_bytes / 1e9:.1f} GB is free")
    prog = Program(scenario, m, reject)
    got = _run(prog, chosen, objective, constraints, lp_method)
    if isinstance(got, str):
        if got == "infeasible" and constraints:
            raise OptimizeError(_why_infeasible(prog, chosen, constraints, lp_method))
        raise OptimizeError(f"the {chosen} method for {objective} found no optimum: {got}")
    figures = prog.figures(got.z)
    seconds = time.perf_counter() - t0
    probs = got.probs
    randomised = int(sum(((probs[c] > 0).sum(axis=1) > 1).sum() for c in range(2)))
    rows = prog.A_eq.shape[0] + 1 + len(constraints) if chosen == "lp" else 0
    return OptimalPolicy(m, objective, constraints, evaluate(objective, figures), figures,
                         probs, prog.phases, prog.N, 2 * prog.P + 1, rows, randomised, seconds,
                         reject, chosen, got.iterations, got.evaluations, got.gap)


def _decisions(prog: Program, z: np.ndarray) -> np.ndarray:
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


class TableAttrs(TypedDict):
    """The class attributes of a decision table's `StateTablePolicy`."""

    name: str
    NODES: tuple[str, ...]
    PHASES: tuple[tuple[tuple[bool, int], ...], ...]
    HP: str
    LP: str
    MIXED: dict[tuple[str, int], dict[str, float]]


def _table_attrs(opt: OptimalPolicy, policy_name: str) -> TableAttrs:
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


__all__ = ["AUTO_LP_MAX_STATES", "Baseline", "METHODS", "OptimalPolicy", "OptimizeError",
           "baselines", "best_of_families", "memory_needed", "optimize", "pick_method",
           "policy_source", "prediction_figures", "table_policy_class"]
