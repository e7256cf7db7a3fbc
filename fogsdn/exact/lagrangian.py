"""The constrained optimum without the big LP: Lagrangian relaxation, policy iteration
and the multipliers' search as column generation (pure).

The LP over state-action frequencies (`fogsdn.exact.optimal_policy`) is exact but its
simplex stalls on the degenerate balance equations past a few thousand states. Here the
same optimum comes from deterministic policies only: for multipliers nu >= 0 on the
constraints (and Dinkelbach's parameter theta for a ratio objective N / D), the
relaxed problem min N - theta D + sum nu_i C_i is an unconstrained average-cost MDP,
solved by policy iteration; each evaluation is one sparse solve of the policy's chain
(LU when small, BiCGSTAB warm-started from the last solution above). The multipliers
come from a small master LP over the policies found so far (Dantzig-Wolfe: the mixes
of their occupation measures), whose value is a feasible objective and whose duals are
the next (theta, nu); the relaxed MDP's optimum is the Lagrangian lower bound, so the
duality gap is printed and closes. With one binding constraint the optimum mixes two
deterministic policies; walking from one to the other a decision at a time finds two
that differ in one state, so the table randomises there only. docs/policies.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.linalg import LinearOperator, bicgstab, splu

from fogsdn.exact import linsolve
from fogsdn.exact.cmdp_program import Program

# A policy's chain is solved by a sparse LU (MMD order) while its fill stays small:
# up to DIRECT_MAX states, or where the grid's largest face (states / the longest
# node's phase count, ~ the fill per state) is at most LU_FACE_MAX (one FN and one OFN
# of any capacity). Above, BiCGSTAB with a Jacobi preconditioner, warm-started, which
# the stationary vectors need ~100 iterations for; the bias of a long queue would need
# thousands (docs/policies.md, "How large").
DIRECT_MAX = linsolve.DIRECT_MAX
LU_FACE_MAX = 400
ITER_RTOL = 1e-12
# The master stops when the Lagrangian bound is within this of its value (relative).
GAP_RTOL = 1e-10
MAX_ROUNDS = 400
MAX_PI_STEPS = 100
# Policy evaluations per pricing before a policy that improves the master is returned
# without waiting for policy iteration to converge (measured: docs/policies.md).
PARTIAL_STEPS = 2
# A policy-improvement step changes a decision only when it gains more than this share
# of the terms compared (ties keep the current decision: no cycling on rounding).
IMPROVE_RTOL = 1e-11
_CACHED_LU = 3  # LUs kept for the policies they factor
_KEEP_COLUMNS = 80  # the master's pool; older columns outside its basis are dropped
_MIN_SHARE = 1e-9


class Infeasible(ValueError):
    """No state-based policy meets the constraints (the phase-1 bound is positive)."""


@dataclass(frozen=True)
class Column:
    """One deterministic policy: per class, the pair chosen in each state; its stationary
    vector; and the forms' values at its occupation measure."""

    d: np.ndarray  # [2, N] pair indices
    pi: np.ndarray
    num: float
    den: float
    cons: np.ndarray  # [m]


@dataclass(frozen=True)
class Solution:
    """The optimum as a mix of deterministic policies, with the search's counts."""

    z: np.ndarray  # [y_hp, y_lp, 1]: the mixed occupation measure
    probs: np.ndarray  # [2, N, K]
    rounds: int  # master rounds (multiplier updates)
    evaluations: int  # policy evaluations (sparse solves of a policy's chain)
    gap: float  # the value minus the Lagrangian lower bound (objective units)
    columns: int  # deterministic policies found


class _Solves:
    """Solves with one policy's B (B^T where `trans`)."""

    def solve(self, rhs: np.ndarray, trans: bool) -> np.ndarray:
        raise NotImplementedError


class _Factor(_Solves):
    """A policy's LU; it times its solves per column for the Woodbury-or-LU choice."""

    def __init__(self, key: bytes, d: np.ndarray, B: sp.csr_matrix, lu: Any,
                 owner: Evaluator) -> None:
        self.key, self.d, self.B, self.lu, self.owner = key, d, B, lu, owner

    def solve(self, rhs: np.ndarray, trans: bool) -> np.ndarray:
        t0 = time.perf_counter()
        out = np.asarray(self.lu.solve(np.asarray(rhs, dtype=float), trans="T" if trans else "N"))
        cols = 1 if out.ndim == 1 else out.shape[1]
        self.owner._t_col = (time.perf_counter() - t0) / max(cols, 1)
        return out


class _Woodbury(_Solves):
    """Solves with B = B0 + U V^T (U: unit columns of the rows that changed, V^T: their
    change) from B0's LU by Sherman-Morrison-Woodbury: r + 1 solves, not a new LU."""

    def __init__(self, base: _Factor, rows: np.ndarray, Vt: sp.csr_matrix) -> None:
        self.base, self.rows, self.Vt = base, rows, Vt
        self._Z: np.ndarray | None = None  # B0^-1 U
        self._Zt: np.ndarray | None = None  # B0^-T V

    def solve(self, rhs: np.ndarray, trans: bool) -> np.ndarray:
        r = self.rows.size
        x0 = self.base.solve(rhs, trans)
        if r == 0:
            return x0
        if trans:
            if self._Zt is None:
                self._Zt = self.base.solve(self.Vt.T.toarray(), True).reshape(-1, r)
            S = np.eye(r) + self._Zt[self.rows, :]
            return np.asarray(x0 - self._Zt @ np.linalg.solve(S, x0[self.rows]))
        if self._Z is None:
            U = np.zeros((x0.size, r))
            U[self.rows, np.arange(r)] = 1.0
            self._Z = self.base.solve(U, False).reshape(-1, r)
        S = np.eye(r) + self.Vt @ self._Z
        return np.asarray(x0 - self._Z @ np.linalg.solve(S, self.Vt @ x0))


class Evaluator:
    """Builds a deterministic policy's chain and solves it (stationary vector, bias)."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        F = prog.fixed.tocoo()
        self._fr, self._fc, self._fv = F.row.astype(np.int64), F.col.astype(np.int64), F.data
        self._out = np.asarray(prog.fixed.sum(axis=1)).ravel()
        self.N, self.P = prog.N, prog.P
        self.lam = prog.m.lam
        self.accepted = prog.target >= 0
        self.evaluations = 0
        dims = [len(prog.m.phases(k)) for k in range(len(prog.m.nodes))]
        self.direct = self.N <= DIRECT_MAX or self.N / max(dims) <= LU_FACE_MAX
        self._factors: list[_Factor] = []
        self._t_lu = np.inf  # seconds of the last LU, and of one solve with it per column
        self._t_col = np.inf
        self._pi_prev: np.ndarray | None = None
        self._h_prev: np.ndarray | None = None

    def _generator(self, d: np.ndarray) -> sp.csr_matrix:
        """The policy's generator Q (diagonal included)."""
        N = self.N
        rows, cols, vals = [self._fr], [self._fc], [self._fv]
        diag = -self._out.copy()
        s = np.arange(N, dtype=np.int64)
        for c in range(2):
            ok = self.accepted[d[c]]
            rows.append(s[ok])
            cols.append(self.prog.target[d[c][ok]])
            vals.append(np.full(int(ok.sum()), self.lam[c]))
            diag[ok] -= self.lam[c]
        rows.append(s)
        cols.append(s)
        vals.append(diag)
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(N, N))

    def _iterative(self, B: sp.csr_matrix, rhs: np.ndarray, x0: np.ndarray | None,
                   trans: bool) -> np.ndarray:
        """x with B x = rhs (B^T x where `trans`) by BiCGSTAB from x0, checked; the LU
        where it does not converge (up to linsolve.FALLBACK_MAX unknowns)."""
        A = B.T.tocsr() if trans else B
        inv = 1.0 / A.diagonal()
        M = LinearOperator(A.shape, lambda v: inv * v)
        scale = float(np.abs(rhs).max())
        if scale == 0.0:
            return np.zeros_like(rhs)
        x, info = bicgstab(A, rhs, x0=x0, M=M, rtol=ITER_RTOL, atol=0.0, maxiter=20_000)
        if info == 0 and float(np.abs(A @ x - rhs).max()) <= 1e-10 * scale:
            return np.asarray(x)
        if A.shape[0] > linsolve.FALLBACK_MAX:
            raise linsolve.NoConvergence(f"BiCGSTAB did not converge on {A.shape[0]:,} unknowns")
        return np.asarray(splu(sp.csc_matrix(A), permc_spec=linsolve.ORDER).solve(rhs))

    def _direct(self, d: np.ndarray, B: sp.csr_matrix) -> _Solves:
        """Solves with policy d's B: a cached LU of d itself, a Woodbury update of a
        cached LU of a policy a few rows away (while 2 (rows + 1) solves take less than
        an LU), or a new LU."""
        key = d.tobytes()
        for f in self._factors:
            if f.key == key:
                return f
        best: tuple[int, _Factor, np.ndarray] | None = None
        for f in self._factors:
            rows = np.flatnonzero((f.d[:, 1:] != d[:, 1:]).any(axis=0))
            if best is None or rows.size < best[0]:
                best = (rows.size, f, rows)
        if best is not None and 2 * (best[0] + 1) * self._t_col < self._t_lu:
            _, f, rows = best
            return _Woodbury(f, rows, (B - f.B)[rows].tocsr())
        t0 = time.perf_counter()
        lu = splu(B.tocsc(), permc_spec=linsolve.ORDER)
        self._t_lu = time.perf_counter() - t0
        f = _Factor(key, d.copy(), B, lu, self)
        self._factors = (self._factors + [f])[-_CACHED_LU:]
        return f

    def evaluate(self, d: np.ndarray, w: np.ndarray | None
                 ) -> tuple[np.ndarray, float, np.ndarray | None]:
        """(pi, gain, bias h with h[0] = 0) of policy d under the per-pair cost w over z
        (gain includes w's t-column constant); only pi (gain 0, h None) when w is None."""
        self.evaluations += 1
        Q = self._generator(d)
        B = Q[1:, 1:].tocsr()
        row0 = np.asarray(Q[0, 1:].toarray()).ravel()
        solves = self._direct(d, B) if self.direct else None
        if solves is not None:
            x = solves.solve(-row0, trans=True)
        else:
            x0 = None if self._pi_prev is None else self._pi_prev[1:] / self._pi_prev[0]
            x = self._iterative(B, -row0, x0, trans=True)
        pi = np.concatenate([[1.0], np.maximum(x, 0.0)])
        pi /= pi.sum()
        self._pi_prev = pi
        if w is None:
            return pi, 0.0, None
        r = w[d[0]] + w[self.P + d[1]]
        g = float(pi @ r)
        if solves is not None:
            hx = solves.solve((g - r)[1:], trans=False)
        else:
            x0h = None if self._h_prev is None else self._h_prev[1:]
            hx = self._iterative(B, (g - r)[1:], x0h, trans=False)
        h = np.concatenate([[0.0], hx])
        self._h_prev = h
        return pi, g + float(w[-1]), h

    def column(self, d: np.ndarray, pi: np.ndarray, num: np.ndarray, den: np.ndarray,
               cons: list[np.ndarray]) -> Column:
        """The forms' values at policy d's occupation measure."""

        def at(v: np.ndarray) -> float:
            return float(v[d[0]] @ pi + v[self.P + d[1]] @ pi + v[-1])

        return Column(d.copy(), pi, at(num), at(den), np.array([at(c) for c in cons]))


def _segment_starts(s_idx: np.ndarray, N: int) -> np.ndarray:
    """Index of each state's first pair (the pairs are sorted by state, every state has
    at least one)."""
    return np.searchsorted(s_idx, np.arange(N))


def improve(prog: Program, w: np.ndarray, h: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Policy improvement: per state and class the pair with the least cost plus the
    bias change it causes; the current pair where nothing gains beyond rounding."""
    P, s_idx, t = prog.P, prog.s_idx, prog.target
    starts = _segment_starts(s_idx, prog.N)
    acc = t >= 0
    out = d.copy()
    for c in range(2):
        lam = prog.m.lam[c]
        wc = w[c * P:(c + 1) * P]
        val = wc.copy()
        val[acc] += lam * (h[t[acc]] - h[s_idx[acc]])
        scale = np.abs(wc) + lam * np.abs(h[s_idx])
        scale[acc] += lam * np.abs(h[t[acc]])
        best = np.minimum.reduceat(val, starts)
        top = np.maximum.reduceat(scale, starts)
        better = best < val[d[c]] - IMPROVE_RTOL * top
        if not better.any():
            continue
        idx = np.flatnonzero(val <= best[s_idx])
        states, first = np.unique(s_idx[idx], return_index=True)
        choice = np.empty(prog.N, dtype=d.dtype)
        choice[states] = idx[first]
        out[c, better] = choice[better]
    return out


def initial_policy(prog: Program) -> np.ndarray:
    """Each class to the first node that accepts (the first pair where none does)."""
    starts = _segment_starts(prog.s_idx, prog.N)
    acc = prog.target >= 0
    idx = np.flatnonzero(acc)
    states, first = np.unique(prog.s_idx[idx], return_index=True)
    choice = starts.copy()
    choice[states] = idx[first]
    return np.stack([choice, choice]).astype(np.int64)


class _Search:
    """The column generation: a pool of deterministic policies, the master LP over
    their mixes, and the relaxed MDP solved by policy iteration."""

    def __init__(self, prog: Program, num: np.ndarray, den: np.ndarray,
                 cons: list[np.ndarray]) -> None:
        self.prog, self.num, self.den, self.cons = prog, num, den, cons
        self.ev = Evaluator(prog)
        self.pool: list[Column] = []
        self.rounds = 0

    def add(self, d: np.ndarray, pi: np.ndarray) -> Column:
        col = self.ev.column(d, pi, self.num, self.den, self.cons)
        self.pool.append(col)
        return col

    def policy_iteration(self, w: np.ndarray, d0: np.ndarray, steps: int,
                         tol: float) -> tuple[np.ndarray, float, bool]:
        """Policy iteration on the relaxed MDP under cost w from d0: (policy, gain,
        converged). It stops early after `steps` evaluations once a policy's gain is
        below -tol (a column that improves the master: partial pricing); only a
        converged gain is the Lagrangian bound. Every policy evaluated joins the pool."""
        d = d0
        best_d, best_g = d0, np.inf
        for i in range(MAX_PI_STEPS):
            pi, g, h = self.ev.evaluate(d, w)
            assert h is not None
            self.add(d, pi)
            if g < best_g:
                best_d, best_g = d, g
            nxt = improve(self.prog, w, h, d)
            if np.array_equal(nxt, d):
                return d, g, True
            if i + 1 >= steps and best_g < -tol:
                return best_d, best_g, False
            d = nxt
        return best_d, best_g, False  # no convergence within the cap: the best seen

    def _prune(self, keep: np.ndarray) -> None:
        if len(self.pool) <= _KEEP_COLUMNS:
            return
        recent = set(range(len(self.pool) - _KEEP_COLUMNS // 2, len(self.pool)))
        self.pool = [c for i, c in enumerate(self.pool) if keep[i] > 0 or i in recent]

    def master(self, phase1: bool) -> tuple[float, np.ndarray, np.ndarray, float] | None:
        """(value, nu, weights, theta) of the master LP; None where it is infeasible.
        Phase 1 minimises the constraints' total excess over mixes (theta 0)."""
        n, m = len(self.pool), len(self.cons)
        C = np.array([c.cons for c in self.pool]).T.reshape(m, n)
        opts = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
        if phase1:
            res = linprog(np.concatenate([np.zeros(n), np.ones(m)]),
                          A_ub=np.hstack([C, -np.eye(m)]), b_ub=np.zeros(m),
                          A_eq=np.concatenate([np.ones(n), np.zeros(m)])[None, :], b_eq=[1.0],
                          bounds=(0, None), method="highs", options=opts)
            if res.status != 0:
                return None
            lam = res.x[:n]
        else:
            res = linprog(np.array([c.num for c in self.pool]),
                          A_ub=C if m else None, b_ub=np.zeros(m) if m else None,
                          A_eq=np.array([[c.den for c in self.pool]]), b_eq=[1.0],
                          bounds=(0, None), method="highs", options=opts)
            if res.status != 0:
                return None
            lam = res.x / max(float(res.x.sum()), 1e-300)
        nu = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0) if m else np.zeros(0)
        return float(res.fun), nu, lam, 0.0 if phase1 else float(res.fun)

    def reduced(self, col: Column, theta: float, nu: np.ndarray) -> float:
        return col.num - theta * col.den + float(nu @ col.cons)

    def start_from(self, theta: float, nu: np.ndarray, phase1: bool) -> np.ndarray:
        """The pool's policy with the least reduced cost (the latest among equals)."""
        if phase1:
            vals = [float(nu @ c.cons) for c in self.pool]
        else:
            vals = [self.reduced(c, theta, nu) for c in self.pool]
        i = len(vals) - 1 - int(np.argmin(vals[::-1]))
        return self.pool[i].d

    def run(self) -> tuple[np.ndarray, float, float, np.ndarray]:
        """(weights over the pool, value, gap, nu) at the optimum."""
        d0 = initial_policy(self.prog)
        pi, _, _ = self.ev.evaluate(d0, None)
        self.add(d0, pi)
        phase1 = bool(self.cons)
        while True:
            self.rounds += 1
            got = self.master(phase1)
            if got is None:
                if not phase1:  # the pool lost its feasible mix to rounding: phase 1 again
                    phase1 = True
                    continue
                raise ArithmeticError("the master LP failed")
            value, nu, lam, theta = got
            scale = max(abs(value), 1e-12)
            den_at = float(sum(lam[i] * self.pool[i].den for i in range(lam.size)))
            if phase1:
                if value <= 1e-11 * max(1.0, max(float(np.abs(c.cons).max()) for c in self.pool)):
                    phase1 = False
                    continue
                w = sum((v * c for v, c in zip(nu, self.cons, strict=True)),
                        np.zeros(2 * self.prog.P + 1))
            else:
                w = self.num - theta * self.den + sum(
                    (v * c for v, c in zip(nu, self.cons, strict=True)),
                    np.zeros(2 * self.prog.P + 1))
            feas_tol = 1e-11 * max(1.0, float(np.abs(self.pool[-1].cons).max())) if phase1 \
                else GAP_RTOL * scale * max(den_at, 1e-300)
            d, g, done = self.policy_iteration(w, self.start_from(theta, nu, phase1),
                                               PARTIAL_STEPS, feas_tol)
            if not done:  # a better column, not yet a bound
                self._prune(np.concatenate([lam, np.zeros(len(self.pool) - lam.size)]))
                continue
            if phase1:
                if g > 1e-11 * max(1.0, float(np.abs(self.pool[-1].cons).max())):
                    raise Infeasible("the constraints cannot all be met")
                if self.rounds > MAX_ROUNDS:
                    raise ArithmeticError("phase 1 did not end")
                self._prune(np.concatenate([lam, np.zeros(len(self.pool) - lam.size)]))
                continue
            gap = max(-g, 0.0) / max(den_at, 1e-300)
            if gap <= GAP_RTOL * scale or self.rounds > MAX_ROUNDS:
                return lam, value, gap, nu
            self._prune(np.concatenate([lam, np.zeros(len(self.pool) - lam.size)]))

    def walk(self, lam: np.ndarray, theta: float, nu: np.ndarray, tol: float
             ) -> tuple[list[Column], np.ndarray]:
        """With one constraint and two policies in the mix, two policies that differ in
        one decision and are as good (reduced cost within tol), mixed to meet the
        constraint with equality; the mix unchanged where no such pair is found."""
        used = [i for i in np.flatnonzero(lam > 0)]
        cols = [self.pool[i] for i in used]
        weights = lam[used] / lam[used].sum()
        if len(self.cons) != 1 or len(cols) != 2:
            return cols, weights
        a, b = (cols[0], cols[1]) if cols[0].cons[0] > cols[1].cons[0] else (cols[1], cols[0])
        if not (a.cons[0] > 0 >= b.cons[0]):
            return cols, weights
        diff = np.argwhere(a.d != b.d)  # (class, state)
        lo, hi = 0, len(diff)
        col_lo, col_hi = a, b
        while hi - lo > 1:
            mid = (lo + hi) // 2
            d = a.d.copy()
            sw = diff[:mid]
            d[sw[:, 0], sw[:, 1]] = b.d[sw[:, 0], sw[:, 1]]
            pi, _, _ = self.ev.evaluate(d, None)
            col = self.ev.column(d, pi, self.num, self.den, self.cons)
            if self.reduced(col, theta, nu) > tol:
                return cols, weights
            if col.cons[0] > 0:
                lo, col_lo = mid, col
            else:
                hi, col_hi = mid, col
        w_hi = col_lo.cons[0] / (col_lo.cons[0] - col_hi.cons[0])
        return [col_lo, col_hi], np.array([1.0 - w_hi, w_hi])


def mix(prog: Program, cols: list[Column], weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z, probs) of the stationary policy whose occupation measure is the weighted mix
    of the columns': in each state, the columns' choices weighted by weight times pi."""
    P, N, K = prog.P, prog.N, prog.K
    z = np.zeros(2 * P + 1)
    z[-1] = 1.0
    probs = np.zeros((2, N, K))
    mass = np.zeros(N)
    for col, wt in zip(cols, weights, strict=True):
        y = wt * col.pi
        mass += y
        for c in range(2):
            np.add.at(z, c * P + col.d[c], y)
    heavy = cols[int(np.argmax(weights))]
    s = np.arange(N)
    for c in range(2):
        for col, wt in zip(cols, weights, strict=True):
            share = np.where(mass > 0, wt * col.pi / np.where(mass > 0, mass, 1.0), 0.0)
            np.add.at(probs[c], (s, prog.k_idx[col.d[c]]), share)
        empty = mass <= 0
        probs[c, empty] = 0.0
        probs[c, empty, prog.k_idx[heavy.d[c][empty]]] = 1.0
        probs[c][probs[c] < _MIN_SHARE] = 0.0
        probs[c] /= probs[c].sum(axis=1, keepdims=True)
    return z, probs


def solve(prog: Program, num: np.ndarray, den: np.ndarray | None,
          cons: list[np.ndarray]) -> Solution:
    """The optimum of num/den (num alone where den is None) subject to each row r of
    `cons` meeting r @ z <= 0; `Infeasible` where no policy does."""
    den_v = den if den is not None else prog.t_only()
    search = _Search(prog, num, den_v, cons)
    lam, value, gap, nu = search.run()
    tol = 10 * GAP_RTOL * max(abs(value), 1e-12)
    cols, weights = search.walk(lam, value, nu, tol)
    z, probs = mix(prog, cols, weights)
    return Solution(z, probs, search.rounds, search.ev.evaluations, gap, len(search.pool))


__all__ = ["Column", "Evaluator", "Infeasible", "Solution", "improve", "initial_policy",
           "mix", "solve"]
