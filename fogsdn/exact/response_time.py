"""Response-time distribution of a tagged request, by phase-type analysis.

A request sees the stationary state (PASTA) and is followed through an absorbing chain
ending in `done` or `dropped`; weights are per arrival, so they sum to P(accepted).
Tails are computed directly, never as 1 - CDF (docs/model.md, "Accuracy"). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import gammainc, gammaincc
from scipy.stats import poisson

from fogsdn.exact import linsolve

Among = Literal["completed", "accepted", "all"]

# Poisson mass left beyond the last uniformisation step, relative (see `_steps_for`).
_POISSON_TAIL = 1e-15
_MAX_STEPS = 2_000_000


@dataclass
class Component:
    """One place a tagged request can start (a node, or the OFN under handoff); each
    kind fills in the per-arrival totals in its __post_init__."""

    mass: float = field(init=False)  # P(accepted into this component), per arrival
    p_complete: float = field(init=False)  # P(completed), per arrival
    p_drop: float = field(init=False)  # P(dropped after acceptance), per arrival
    t_complete: float = field(init=False)  # E[T ; completed], per arrival
    t_sojourn: float = field(init=False)  # E[time until completion or drop], per arrival
    _u: Uniformised | None = field(init=False, default=None, repr=False)

    def _uniformised(self) -> Uniformised:
        """The request's absorbing chain, for its distribution (built once)."""
        raise NotImplementedError

    def _dist(self) -> Uniformised:
        if self._u is None:
            self._u = self._uniformised()
        return self._u

    def completed_by(self, t: np.ndarray) -> np.ndarray:
        """P(completed within t), per arrival."""
        return self._dist().completed_by(t)

    def not_completed_by(self, t: np.ndarray) -> np.ndarray:
        """P(accepted and not completed within t: dropped, or still there), per arrival."""
        return self._dist().not_completed_by(t)


@dataclass
class ErlangMixture(Component):
    """A FIFO node where the tagged request has p stages of rate `rate` to go.

    `weights[i]` is the probability (per arrival) of starting with i+1 stages. A
    `kill` rate > 0 drops the request (OFN leaving under `drop`); by competing
    exponentials each stage then lasts Exp(rate + kill) and is won w.p. q.
    """

    weights: np.ndarray
    rate: float
    kill: float = 0.0

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        self.weights = w
        self._stages = np.arange(1, w.size + 1, dtype=float)
        self._nu = self.rate + self.kill
        log_q = -math.log1p(self.kill / self.rate)
        self._qp = np.exp(self._stages * log_q)  # P(complete | p stages)
        self._not_qp = -np.expm1(self._stages * log_q)  # P(dropped | p stages), no 1 - x
        self.mass = float(w.sum())
        self.p_complete = float(w @ self._qp)
        self.p_drop = float(w @ self._not_qp)
        self.t_complete = float(w @ (self._qp * self._stages / self._nu))
        soj = self._not_qp / self.kill if self.kill > 0 else self._stages / self.rate
        self.t_sojourn = float(w @ soj)

    def _live(self) -> np.ndarray:
        return np.flatnonzero(self.weights > 0)

    def _completing(self, t: np.ndarray,
                    regularised: Callable[[np.ndarray, np.ndarray], np.ndarray]
                    ) -> np.ndarray | None:
        """sum_p w_p q^p regularised(p, nu t) over the live stage counts p, with gammainc
        (completed by t) or gammaincc (completes later); None when no weight is live."""
        i = self._live()
        if i.size == 0:
            return None
        g = regularised(self._stages[i][None, :], self._nu * np.maximum(t, 0.0)[:, None])
        out: np.ndarray = g @ (self.weights[i] * self._qp[i])
        return out

    def completed_by(self, t: np.ndarray) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        done = self._completing(t, gammainc)
        return np.zeros_like(t) if done is None else done

    def not_completed_by(self, t: np.ndarray) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        later = self._completing(t, gammaincc)
        return np.zeros_like(t) if later is None else later + self.p_drop


class Uniformised:
    """P(done by t) and P(not done by t) of an absorbing chain, by uniformisation,
    summing only non-negative terms. Arguments as `TransientChain`'s, `v0` the initial
    weights (per arrival)."""

    def __init__(self, T: sp.csr_matrix, out: np.ndarray, done: np.ndarray,
                 drop: np.ndarray, v0: np.ndarray) -> None:
        lam_u = float(out.max()) if out.size and out.max() > 0 else 1.0
        P = T / lam_u + sp.diags(1.0 - out / lam_u)
        self._PT = sp.csr_matrix(P.T)
        self._done_frac = done / lam_u
        self._drop_frac = drop / lam_u
        self._lam_u = lam_u
        self._v = np.asarray(v0, dtype=float).copy()
        self.mass = float(self._v.sum())
        self._seq: dict[str, list[float]] = {"done": [0.0], "drop": [0.0], "trans": [self.mass]}

    def _extend(self, steps: int) -> None:
        done, drop, trans = self._seq["done"], self._seq["drop"], self._seq["trans"]
        while len(done) <= steps:
            v = self._v
            done.append(done[-1] + float(v @ self._done_frac))
            drop.append(drop[-1] + float(v @ self._drop_frac))
            self._v = self._PT @ v
            trans.append(float(self._v.sum()))  # non-negative terms only

    def _steps_for(self, t: float) -> int:
        mean = self._lam_u * t
        return int(poisson.isf(_POISSON_TAIL, mean)) + 1 if mean > 0 else 1

    def _weights(self, t: float) -> np.ndarray:
        m = min(self._steps_for(t), _MAX_STEPS)
        self._extend(m)
        return poisson.pmf(np.arange(m + 1), self._lam_u * t)

    def _at(self, t: np.ndarray, at_zero: float, seqs: tuple[str, ...]) -> np.ndarray:
        """sum over steps of Poisson weight times the sum of `seqs`, at each t > 0."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        out = np.full_like(t, at_zero)
        for i, ti in enumerate(t):
            if ti > 0:
                pw = self._weights(float(ti))
                out[i] = pw @ sum(np.asarray(self._seq[k][: pw.size]) for k in seqs)
        return out

    def completed_by(self, t: np.ndarray) -> np.ndarray:
        return self._at(t, 0.0, ("done",))

    def not_completed_by(self, t: np.ndarray) -> np.ndarray:
        return self._at(t, self.mass, ("trans", "drop"))


class TransientChain:
    """The transient part of an absorbing chain (ends: done, dropped), its hitting
    probabilities and mean times solved once for any starting weights. `T`: off-diagonal
    rates (row = from); `out_rate`: total out-rates; `done`/`drop`: rates into the ends.
    """

    def __init__(self, T: sp.csr_matrix, out_rate: np.ndarray, done: np.ndarray,
                 drop: np.ndarray) -> None:
        self.T, self.out_rate, self.done, self.drop = T, out_rate, done, drop
        solver = linsolve.Solver(sp.diags(out_rate) - T)
        h = np.maximum(solver.solve(np.stack([done, drop, np.ones(done.size)], axis=1)), 0.0)
        self.h_done, self.h_drop, self.sojourn = h[:, 0], h[:, 1], h[:, 2]
        # E[time ; done] from each state
        self.t_done = np.maximum(solver.solve(self.h_done), 0.0)


@dataclass
class AbsorbingChain(Component):
    """A tagged request that starts in `chain` with `weights` (per arrival): means from
    the chain's solves, the distribution from `Uniformised`."""

    chain: TransientChain
    weights: np.ndarray

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        c = self.chain
        self.mass = float(w.sum())
        self.p_complete = float(w @ c.h_done)
        self.p_drop = float(w @ c.h_drop)
        self.t_sojourn = float(w @ c.sojourn)
        self.t_complete = float(w @ c.t_done)

    def _uniformised(self) -> Uniformised:
        c = self.chain
        return Uniformised(c.T, c.out_rate, c.done, c.drop, self.weights)


@dataclass
class ClassResponse:
    """All the ways a request of one class can be served, with its blocking."""

    components: list[Component]
    blocking: float

    @property
    def accepted(self) -> float:
        return float(sum(c.mass for c in self.components))

    @property
    def p_complete(self) -> float:
        return float(sum(c.p_complete for c in self.components))

    @property
    def p_drop(self) -> float:
        return float(sum(c.p_drop for c in self.components))

    @property
    def mean_response(self) -> float:
        """E[T | completed]: what a trace's answered requests average to."""
        pc = self.p_complete
        return float(sum(c.t_complete for c in self.components) / pc) if pc > 0 else math.nan

    @property
    def mean_sojourn(self) -> float:
        """E[time in system | accepted], completed or dropped (Little's law's W)."""
        acc = self.accepted
        return float(sum(c.t_sojourn for c in self.components) / acc) if acc > 0 else math.nan

    def completed_by(self, t: np.ndarray) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return sum((c.completed_by(t) for c in self.components), np.zeros_like(t))

    def not_completed_by(self, t: np.ndarray) -> np.ndarray:
        """P(accepted and not answered within t), per arrival, summed without 1 - x."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return sum((c.not_completed_by(t) for c in self.components), np.zeros_like(t))

    def cdf(self, t: np.ndarray, among: Among = "completed") -> np.ndarray:
        """P(T <= t) among completed requests (default), accepted ones, or all arrivals."""
        f = self.completed_by(t)
        if among == "all":
            return f
        den = self.p_complete if among == "completed" else self.accepted
        return f / den if den > 0 else np.full_like(f, math.nan)

    def outage(self, deadline: float) -> float:
        """P(not answered within the deadline), over all arrivals: blocked counts."""
        return float(self.blocking + self.not_completed_by(np.array([deadline]))[0])

    def outage_accepted(self, deadline: float) -> float:
        acc = self.accepted
        if acc <= 0:
            return math.nan
        return float(self.not_completed_by(np.array([deadline]))[0] / acc)

    def percentile(self, q: float) -> float:
        """Smallest t with P(T <= t | completed) >= q."""
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1), got {q}")
        pc = self.p_complete
        if pc <= 0:
            return math.nan
        target = q * pc

        def f(t: float) -> float:
            return float(self.completed_by(np.array([t]))[0]) - target

        hi = max(self.mean_response, 1e-9)
        while f(hi) < 0:
            hi *= 2.0
            if hi > 1e12:
                return math.inf

        return float(brentq(f, 0.0, hi, xtol=1e-10 * hi, rtol=1e-12))
