"""Seed 000's chain as the paper prints it (its eqs. 1-10), a labelled prediction beside ours.

The paper's state (i, n, j) counts one node only. Where the printed text contradicts
itself, each reading is the one closest to it, and both are computed where two are
plausible (`Reading`); "item N" below is the numbered list in docs/model.md ("The
printed chain, computed as printed"). Pure: no I/O. Outage has no printed equation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fogsdn.core.scenario import Role, Scenario
from fogsdn.exact.ctmc import ModelParams
from fogsdn.exact.linsolve import gth_dense

Status = Literal["A", "U"]
Node = Literal["F", "O"]
State = tuple[Status, Node, int]
StationaryReading = Literal["rates", "balance"]
Eq4Reading = Literal["fn", "zero"]
Eq5Reading = Literal["node", "verbatim"]

LABEL = "the seed's chain as printed"


@dataclass(frozen=True)
class Reading:
    """Which reading of the printed text (items 6-8); the defaults are shown."""

    stationary: StationaryReading = "rates"
    eq4_u: Eq4Reading = "fn"
    eq5_rates: Eq5Reading = "node"

    def label(self) -> str:
        return f"stationary={self.stationary}, eq4_u={self.eq4_u}, eq5_rates={self.eq5_rates}"


SHOWN = Reading()


def states(p: ModelParams) -> tuple[State, ...]:
    """The printed state space (item 1)."""
    fa: list[State] = [("A", "F", j) for j in range(p.cap_f + 1)]
    if p.scheme == "basic":
        return tuple(fa)
    fu: list[State] = [("U", "F", j) for j in range(p.cap_f + 1)]
    oa: list[State] = [("A", "O", j) for j in range(1, p.cap_o + 1)]
    return tuple(fa + fu + oa)


def _fn_rate_a(p: ModelParams) -> float:
    """Arrivals at the FN while A: eq. 1 lambda_HP, eq. 9 alpha*lambda, Basic lambda."""
    return {"proposed": p.lam_hp, "nodiff": p.alpha * p.lam, "basic": p.lam}[p.scheme]


def _ofn_rate(p: ModelParams) -> float:
    """Arrivals at the OFN (status A): eq. 1 lambda_LP, eq. 9 beta*lambda, Basic none."""
    return {"proposed": p.lam_lp, "nodiff": (1.0 - p.alpha) * p.lam, "basic": 0.0}[p.scheme]


def transitions(p: ModelParams) -> dict[tuple[State, State], float]:
    """Eq. 1 (proposed) or eq. 9 (NoDiff) as rates between printed states (items 2-5);
    Basic is Fig. 3's status A with the FN taking every request."""
    space = set(states(p))
    out: dict[tuple[State, State], float] = {}

    def add(a: State, b: State, rate: float) -> None:
        if a in space and b in space and rate > 0:
            out[(a, b)] = out.get((a, b), 0.0) + rate

    up_a, to_o = _fn_rate_a(p), _ofn_rate(p)
    for j in range(p.cap_f + 1):
        add(("A", "F", j), ("A", "F", j + 1), up_a)
        add(("A", "F", j), ("A", "F", j - 1), p.mu_f)
        if p.scheme != "basic":
            add(("A", "F", j), ("U", "F", j), p.eta)
            add(("U", "F", j), ("A", "F", j), p.xi)
            add(("U", "F", j), ("U", "F", j + 1), p.lam)
            add(("U", "F", j), ("U", "F", j - 1), p.mu_f)
    if p.scheme != "basic":
        add(("A", "F", 0), ("A", "O", 1), to_o)
        for j in range(1, p.cap_o + 1):
            add(("A", "O", j), ("A", "O", j + 1), to_o)
            add(("A", "O", j), ("A", "O", j - 1) if j > 1 else ("A", "F", 0), p.mu_of)
    return out


def generator(p: ModelParams) -> np.ndarray:
    """The dense generator of `transitions` in the order of `states`."""
    space = states(p)
    index = {s: k for k, s in enumerate(space)}
    q = np.zeros((len(space), len(space)))
    for (a, b), rate in transitions(p).items():
        q[index[a], index[b]] += rate
    np.fill_diagonal(q, -q.sum(axis=1))
    return q


def balance_rows(p: ModelParams) -> list[dict[State, float]]:
    """Eq. 2 (proposed) or eq. 10 (NoDiff) as printed, each row as {state: coefficient}
    of `lhs - rhs = 0` (item 6). Basic: the birth-death rows of its chain."""
    lam, lhp, llp, mf, mo, eta, xi = p.lam, p.lam_hp, p.lam_lp, p.mu_f, p.mu_of, p.eta, p.xi
    cf, co = p.cap_f, p.cap_o
    rows: list[dict[State, float]] = []

    def row(lhs: dict[State, float], rhs: dict[State, float]) -> None:
        r = dict(lhs)
        for s, c in rhs.items():
            r[s] = r.get(s, 0.0) - c
        rows.append(r)

    if p.scheme == "basic":
        q = generator(p)
        space = states(p)
        for k in range(len(space)):
            rows.append({space[i]: float(q[i, k]) for i in range(len(space)) if q[i, k]})
        return rows
    nd = p.scheme == "nodiff"
    fa = lam if nd else lhp  # eq. 10 (2)-(3) lambda, eq. 2 (2)-(3) lambda_HP

    def af(j: int) -> State:
        return ("A", "F", j)

    def uf(j: int) -> State:
        return ("U", "F", j)

    def ao(j: int) -> State:
        return ("A", "O", j)

    # (1) (A,F,0): no eta in the outflow (both eqs.)
    row({af(0): lam}, {af(1): mf, uf(0): xi, ao(1): mo})
    for j in range(1, cf):  # (2)
        row({af(j): fa + eta + mf}, {af(j - 1): fa, af(j + 1): mf, uf(j): xi})
    row({af(cf): eta + mf}, {af(cf - 1): fa, uf(cf): xi})  # (3)
    row({uf(0): xi + lam}, {uf(1): mf, af(0): eta})  # (4)
    for j in range(1, cf):  # (5)
        row({uf(j): xi + lam + mf}, {uf(j - 1): lam, uf(j + 1): mf, af(j): eta})
    row({uf(cf): xi + mf}, {uf(cf - 1): lam, af(cf): eta})  # (6)
    if nd:  # eq. 10 (7)-(8): no mu_OF in the outflow
        b = (1.0 - p.alpha) * lam
        row({ao(1): b}, {ao(2): mo, af(0): b})
        for j in range(2, co):
            row({ao(j): b}, {ao(j - 1): b, ao(j + 1): mo})
    else:  # eq. 2 (7): fed from (U,F,0); (8)
        row({ao(1): mo + llp}, {ao(2): mo, uf(0): llp})
        for j in range(2, co):
            row({ao(j): llp + mo}, {ao(j - 1): llp, ao(j + 1): mo})
    # the printed rows may name (A,O,C_O+1) when C_O = 1: a state outside the space
    known = set(states(p))
    return [{s: c for s, c in r.items() if s in known} for r in rows]


@dataclass(frozen=True)
class Stationary:
    """A stationary vector over `states` and how well it solves what it solves."""

    pi: np.ndarray
    residual: float  # max |row . pi| over the equations used
    min_prob: float  # below 0 only for the balance reading


def stationary(p: ModelParams, how: StationaryReading = "rates") -> Stationary:
    """Item 6: GTH on eq. 1's generator, or the printed balance equations plus
    sum(pi) = 1 by least squares."""
    space = states(p)
    if how == "rates":
        q = generator(p)
        pi = gth_dense(q)
        return Stationary(pi, float(np.abs(pi @ q).max()), float(pi.min()))
    index = {s: k for k, s in enumerate(space)}
    rows = balance_rows(p)
    m = np.zeros((len(rows) + 1, len(space)))
    for r, coeffs in enumerate(rows):
        for s, c in coeffs.items():
            m[r, index[s]] += c
    m[-1, :] = 1.0
    rhs = np.zeros(len(rows) + 1)
    rhs[-1] = 1.0
    pi = np.linalg.lstsq(m, rhs, rcond=None)[0]
    return Stationary(pi, float(np.abs(m[:-1] @ pi).max()), float(pi.min()))


@dataclass(frozen=True)
class PrintedFigures:
    """Eqs. 3-8 on one stationary vector: N, the effective rates and W per class."""

    scheme: str
    reading: Reading
    N_hp: float  # noqa: N815 - the paper's letters
    N_lp: float  # noqa: N815
    lam_e_hp: float
    lam_e_lp: float
    W_hp: float  # noqa: N815
    W_lp: float  # noqa: N815
    residual: float
    min_prob: float
    states: int

    @property
    def W(self) -> float:  # noqa: N802 - a scheme's single curve (item 10)
        return self.W_hp

    @property
    def is_distribution(self) -> bool:
        """False where the stationary vector has negative entries (the printed balance
        equations' only solution does): its W are then no response times."""
        return self.min_prob >= -1e-12

    def to_dict(self) -> dict[str, object]:
        return {"scheme": self.scheme, "reading": self.reading.label(), "label": LABEL,
                "hp": {"W": self.W_hp, "N": self.N_hp, "lambda_e": self.lam_e_hp},
                "lp": {"W": self.W_lp, "N": self.N_lp, "lambda_e": self.lam_e_lp},
                "states": self.states, "residual": self.residual, "min_prob": self.min_prob,
                "is_distribution": self.is_distribution}


def _div(a: float, b: float) -> float:
    return a / b if b != 0 else float("nan")


def figures(p: ModelParams, reading: Reading = SHOWN) -> PrintedFigures:
    """W_HP and W_LP by eqs. 3-8 as printed, under `reading` (items 7-9)."""
    st = stationary(p, reading.stationary)
    space = states(p)

    def total(status: Status, node: Node, weight_j: bool) -> float:
        return float(sum((s[2] if weight_j else 1.0) * st.pi[k]
                         for k, s in enumerate(space) if s[0] == status and s[1] == node))

    n_af, n_uf, n_ao = total("A", "F", True), total("U", "F", True), total("A", "O", True)
    p_af, p_uf, p_ao = total("A", "F", False), total("U", "F", False), total("A", "O", False)
    if reading.eq5_rates == "verbatim" or p.scheme == "proposed":
        fn_a, ofn = p.lam_hp, p.lam_lp
    else:
        fn_a, ofn = _fn_rate_a(p), _ofn_rate(p)
    n_hp = n_af + n_uf  # eq. 3
    n_lp = (n_uf if reading.eq4_u == "fn" else 0.0) + n_ao  # eq. 4
    lam_e_hp = fn_a * p_af + p.lam * p_uf  # eq. 5
    lam_e_lp = ofn * p_ao + p.lam * p_uf  # eq. 6
    return PrintedFigures(p.scheme, reading, n_hp, n_lp, lam_e_hp, lam_e_lp,
                          _div(n_hp, lam_e_hp), _div(n_lp, lam_e_lp),  # eqs. 7-8
                          st.residual, st.min_prob, len(space))


def all_readings() -> tuple[Reading, ...]:
    """Every combination of the readings, the shown one first."""
    combos = [Reading(s, e4, e5) for s in ("rates", "balance") for e4 in ("fn", "zero")
              for e5 in ("node", "verbatim")]
    combos.remove(SHOWN)
    return (SHOWN, *combos)


class OutsidePrintedModel(ValueError):
    """The scenario is not one the printed chain describes; the message says why."""


def printed_params(scenario: Scenario) -> ModelParams:
    """The printed chain's parameters for `scenario`: one FN, one OFN, exponential sizes,
    a built-in scheme, one server per node, fixed capacities; else OutsidePrintedModel."""
    from fogsdn.exact.model_params import OutsideModel, model_params_from_scenario

    if scenario.capacity_drawn:
        raise OutsidePrintedModel("the printed chain takes fixed capacities (a capacity "
                                  "here is drawn per replication)")
    ofns = scenario.nodes_with(Role.OFN)
    if len(ofns) != 1:
        raise OutsidePrintedModel(f"the printed chain has one OFN, the scenario has {len(ofns)}")
    try:
        p = model_params_from_scenario(scenario)
    except OutsideModel as err:
        raise OutsidePrintedModel(str(err)) from None
    if p.servers_f != "single" or p.servers_o != "single":
        raise OutsidePrintedModel("the printed chain has one server per node (servers: single)")
    if p.discipline_f != "fifo":
        raise OutsidePrintedModel(f"the printed chain has a FIFO FN (nodes discipline "
                                  f"{p.discipline_f})")
    return p


def printed_figures(scenario: Scenario, reading: Reading = SHOWN) -> PrintedFigures:
    """Eqs. 3-8 of the printed chain for `scenario` (OutsidePrintedModel if it is not
    seed 000's model). The leave mode does not enter: the printed OFN never leaves busy."""
    return figures(printed_params(scenario), reading)
