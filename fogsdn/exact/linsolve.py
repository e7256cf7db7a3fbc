"""The chains' linear systems: stationary vectors and nonsingular M-matrix solves.

Stationary vectors of level-ordered chains (`Chain`) come from subtraction-free GTH
level reduction or from checked sparse solves, whichever the measured cost model
(`joint_method`) says is cheaper; nonsingular systems from one sparse LU or, when
large, Jacobi-preconditioned BiCGSTAB. Measurements: docs/model.md ("Accuracy",
"Choosing the solve"). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, bicgstab, gmres, splu

# Above this many unknowns the LU's fill grows too fast: BiCGSTAB, and where that
# fails the LU up to FALLBACK_MAX (beyond: an error).
DIRECT_MAX = 6_000
FALLBACK_MAX = 60_000
RTOL = 1e-13
ORDER = "MMD_AT_PLUS_A"
# A stationary vector whose every balance equation holds to this, relative to the
# flows in and out of the state, has every probability to ~3x this relative accuracy.
STATIONARY_TOL = 1e-10


class NoConvergence(ArithmeticError):
    """The iterative solve did not converge and the system is too large for the LU."""


class Solver:
    """A factorisation of A, for as many right-hand sides as needed."""

    def __init__(self, A: sp.spmatrix) -> None:
        self.direct = A.shape[0] <= DIRECT_MAX
        if self.direct:
            self.A = sp.csc_matrix(A)
            self._lu = splu(self.A, permc_spec=ORDER)
        else:
            self.A = sp.csr_matrix(A)
            inv = 1.0 / self.A.diagonal()
            self._pre = LinearOperator(self.A.shape, lambda v: inv * v)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """x with A x = rhs, for one right-hand side (a vector) or several (columns)."""
        b = np.asarray(rhs, dtype=float)
        cols = b.reshape(b.shape[0], -1)
        if self.direct:
            return np.asarray(self._lu.solve(cols)).reshape(b.shape)
        out = np.zeros_like(cols)
        for j in range(cols.shape[1]):
            bj = cols[:, j]
            scale = float(np.abs(bj).max())
            if scale == 0.0:
                continue
            x, info = bicgstab(self.A, bj, M=self._pre, rtol=RTOL, atol=0.0, maxiter=20_000)
            if info != 0 or float(np.abs(self.A @ x - bj).max()) > 1e-10 * scale:
                if self.A.shape[0] > FALLBACK_MAX:
                    raise NoConvergence(f"BiCGSTAB did not converge on {self.A.shape[0]:,} "
                                        "unknowns")
                self._lu = splu(sp.csc_matrix(self.A), permc_spec=ORDER)
                self.direct = True
                return self.solve(rhs)
            out[:, j] = x
        return out.reshape(b.shape)


def stationary_error(G: sp.spmatrix, pi: np.ndarray) -> float:
    """Largest componentwise residual of pi G = 0: |(pi G)_j| / (|pi| |G|)_j.

    Scale-free (rounding gives ~1e-16); unlike the norm of pi G it rises with the
    relative error of the smallest probabilities.
    """
    A = sp.csr_matrix(G)
    flow = np.abs(pi) @ abs(A)
    r = np.abs(pi @ A)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(flow > 0, r / np.where(flow > 0, flow, 1.0), 0.0)
    return float(ratio.max()) if ratio.size else 0.0


def pinned_stationary(Gt: sp.spmatrix, pin: int, order: np.ndarray | None = None) -> np.ndarray:
    """Stationary vector from G^T pi = 0 with pi[pin] = 1 (then normalised).

    Every state must reach `pin`. `order`: all states in a fill-reducing order, or None
    for SuperLU's minimum degree; the system left is a nonsingular M-matrix, so no
    pivoting and the order is kept.
    """
    n = Gt.shape[0]
    At = sp.csc_matrix(Gt)
    if order is None and pin == 0:  # slices, no gathers: small chains are overhead-bound
        perm = np.arange(1, n)
        B = At[1:, 1:]
        rhs = -At[:, 0].toarray().ravel()[1:]
    else:
        perm = np.arange(n) if order is None else np.asarray(order)
        perm = perm[perm != pin]
        B = At[perm][:, perm].tocsc()
        rhs = -np.asarray(At[perm, pin].toarray()).ravel()
    spec = ORDER if order is None else "NATURAL"
    lu = splu(B, permc_spec=spec, diag_pivot_thresh=0.0, options={"SymmetricMode": True})
    pi = np.zeros(n)
    pi[pin] = 1.0
    pi[perm] = lu.solve(rhs)
    return pi / pi.sum()


def checked_stationary(G: sp.spmatrix, order: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Pinned LU at state 0; if its check fails, again pinned at the likeliest state.

    Returns the vector (clamped to >= 0) and its `stationary_error`, for the caller's
    GTH fallback.
    """
    Gt = sp.csr_matrix(G).T  # CSC without a copy
    pi = pinned_stationary(Gt, 0, order)
    err = stationary_error(G, pi)
    if err > STATIONARY_TOL or pi.min() < 0:
        again = pinned_stationary(Gt, int(np.argmax(pi)), order)
        err_again = stationary_error(G, again)
        if err_again < err:
            pi, err = again, err_again
    pi = np.maximum(pi, 0.0)
    return pi / pi.sum(), err


# The two-level solve: GMRES's relative residual on the pinned system, its most
# iterations, and the damped Jacobi smoother around the coarse correction.
TWO_LEVEL_RTOL = 1e-12
TWO_LEVEL_MAXITER = 300
JACOBI_DAMPING = 0.8
JACOBI_SWEEPS = 2


def two_level_stationary(G: sp.spmatrix, groups: np.ndarray,
                         coarse_order: np.ndarray | None = None
                         ) -> tuple[np.ndarray, int] | None:
    """Stationary vector by GMRES with a two-level preconditioner, or None.

    Damped Jacobi sweeps around an exact correction on the aggregates `groups` (state
    -> aggregate; the Galerkin product factorised once in `coarse_order`, or minimum
    degree). Accurate in absolute terms, not entry by entry; None where GMRES does not
    converge (the caller falls back to the LU).
    """
    n = G.shape[0]
    At = sp.csr_matrix(G).T.tocsr()
    B = At[1:, 1:].tocsr()
    rhs = -At[1:, 0].toarray().ravel()
    agg = np.asarray(groups)[1:]
    nc = int(agg.max()) + 1
    if (np.bincount(agg, minlength=nc) == 0).any():
        return None  # an aggregate of state 0 alone: no coarse unknown for it
    P = sp.csr_matrix((np.ones(n - 1), (np.arange(n - 1), agg)), shape=(n - 1, nc))
    Bc = (P.T.tocsr() @ B @ P).tocsc()
    if coarse_order is None:
        coarse = splu(Bc, permc_spec=ORDER)
        solve_c = coarse.solve
    else:
        order = np.asarray(coarse_order)
        coarse = splu(Bc[order][:, order].tocsc(), permc_spec="NATURAL",
                      diag_pivot_thresh=0.0, options={"SymmetricMode": True})

        def solve_c(r: np.ndarray) -> np.ndarray:
            out = np.empty_like(r)
            out[order] = coarse.solve(r[order])
            return out

    step = JACOBI_DAMPING / B.diagonal()
    PT = P.T.tocsr()

    def precondition(r: np.ndarray) -> np.ndarray:
        x = step * r
        for _ in range(JACOBI_SWEEPS - 1):
            x += step * (r - B @ x)
        x += P @ solve_c(PT @ (r - B @ x))
        for _ in range(JACOBI_SWEEPS):
            x += step * (r - B @ x)
        return x

    M = LinearOperator(B.shape, precondition)
    its = [0]

    def count(_: object) -> None:
        its[0] += 1

    x, info = gmres(B, rhs, M=M, rtol=TWO_LEVEL_RTOL, atol=0.0, restart=20,
                    maxiter=TWO_LEVEL_MAXITER // 20 + 1, callback=count,
                    callback_type="pr_norm")
    if info != 0 or not np.isfinite(x).all():
        return None
    pi = np.concatenate([[1.0], np.maximum(x, 0.0)])
    pi /= pi.sum()
    scale = float(np.abs(sp.csr_matrix(G).diagonal()).max())
    if float(np.abs(pi @ G).max()) > 1e-12 * scale:
        return None
    return pi, its[0]


# -- level-ordered chains: GTH level reduction and the sparse routes -------------------

A, U = 0, 1  # availability index of the OFN

# Level reduction's flop budget (`ctmc.gth_flops`; 2e9 is ~3 s here): above it, it is
# never tried, not even as the sparse LU's fallback.
GTH_MAX_FLOPS = 2e9

# The cost model of the two exact routes, seconds on this machine (docs/model.md,
# "Choosing the solve").
GTH_S_PER_STATE = 55e-6
GTH_S_PER_FLOP = 1.6e-9
LU_S_FIXED = 2e-3
LU_S_PER_STATE = 10e-6
# Below this many states SuperLU's own minimum degree fills no more than nested
# dissection and skips an ordering step.
ND_MIN_STATES = 30_000
# From here the two-level solve beats the LU, on chains without jumps into level 0.
TWO_LEVEL_MIN_STATES = 50_000


@dataclass(frozen=True)
class Chain:
    """A generator in level order: `Q` holds off-diagonal rates only (row = from).

    Level l is `starts[l]:starts[l+1]`; level 0 starts with the empty state, which every
    state reaches. Moves go within a level, one level up or down, or (`hub`) into level
    0. `a`, `k`, `n`: each state's availability, FN count and OFN count.
    """

    Q: sp.csr_matrix
    a: np.ndarray
    k: np.ndarray
    n: np.ndarray
    starts: np.ndarray
    hub: bool


def rates_generator(Q: sp.spmatrix) -> sp.csr_matrix:
    """The full generator of off-diagonal rates `Q` (diagonal = minus the row's out-rate)."""
    return (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()


def generator(chain: Chain) -> sp.csr_matrix:
    return rates_generator(chain.Q)


def gth_dense(Q: np.ndarray) -> np.ndarray:
    """Stationary vector by Grassmann-Taksar-Heyman, with no subtractions at all; reads
    off-diagonal rates only, and every state must reach state 0."""
    W = np.array(Q, dtype=float, copy=True)
    np.fill_diagonal(W, 0.0)
    m = W.shape[0]
    s = np.zeros(m)
    for i in range(m - 1, 0, -1):
        s[i] = W[i, :i].sum()
        if s[i] <= 0:
            raise ArithmeticError(f"GTH: state {i} cannot reach the states below it")
        W[:i, :i] += np.outer(W[:i, i], W[i, :i] / s[i])
    pi = np.zeros(m)
    pi[0] = 1.0
    for i in range(1, m):
        pi[i] = pi[:i] @ W[:i, i] / s[i]
    return pi / pi.sum()


def gth_levels(chain: Chain) -> np.ndarray:
    """GTH state reduction level by level: eliminating the top level couples only the
    one below (and level 0 for jumps), so O(N p^2) time for levels of p phases."""
    Q, st = chain.Q, chain.starts
    L = len(st) - 2
    if L == 0:
        return gth_dense(Q[: st[1], : st[1]].toarray())
    p = np.diff(st)

    def blk(r: int, c: int) -> np.ndarray:
        return Q[st[r] : st[r + 1], st[c] : st[c + 1]].toarray()

    T = blk(L, L)  # censored local block of the top level
    D = blk(L, L - 1)  # its (censored) block one level down
    Z = blk(L, 0) if (chain.hub and L >= 2) else None  # censored jumps into level 0
    records: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for lev in range(L, 0, -1):
        nb, nc = int(p[lev - 1]), int(p[lev])
        n0 = int(p[0]) if Z is not None else 0
        # rows: [level lev-1, level lev]; columns: [level 0 (jumps), lev-1, lev]
        W = np.zeros((nb + nc, n0 + nb + nc))
        W[:nb, n0 : n0 + nb] = blk(lev - 1, lev - 1)
        W[:nb, n0 + nb :] = blk(lev - 1, lev)
        W[nb:, n0 : n0 + nb] = D
        W[nb:, n0 + nb :] = T
        if Z is not None:
            W[:nb, :n0] = blk(lev - 1, 0)
            W[nb:, :n0] = Z
        s = np.zeros(nc)
        colB = np.zeros((nb, nc))
        colC = np.zeros((nc, nc))
        for i in range(nc - 1, -1, -1):
            rb, cb = nb + i, n0 + nb + i
            row = W[rb, :cb] / 1.0
            s[i] = row.sum()
            if not s[i] > 0:
                raise ArithmeticError("GTH: a state cannot reach the levels below it")
            col = W[:rb, cb].copy()
            colB[:, i] = col[:nb]
            colC[:i, i] = col[nb:]
            nz = np.flatnonzero(col)
            if nz.size:
                lo = int(nz[0])
                W[lo:rb, :cb] += np.outer(col[lo:], row / s[i])
        records.append((colB, colC, s))
        T = W[:nb, n0 : n0 + nb].copy()
        np.fill_diagonal(T, 0.0)
        if Z is not None and lev - 1 >= 2:
            Z = W[:nb, :n0].copy()
            D = blk(lev - 1, lev - 2)
        elif Z is not None:  # lev - 1 == 1: its jumps into level 0 are its down block
            D = W[:nb, :n0].copy()
            Z = None
        elif lev - 1 >= 1:
            D = blk(lev - 1, lev - 2)
    parts = [gth_dense(T)]
    for colB, colC, s in reversed(records):
        base = parts[-1] @ colB
        x = np.zeros(len(s))
        for i in range(len(s)):
            x[i] = (base[i] + x[:i] @ colC[:i, i]) / s[i]
        parts.append(x)
    pi = np.concatenate(parts)
    return pi / pi.sum()


def nested_dissection(kmax: int, nmax: int, leaf: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Grid points (k, n) in nested-dissection order (halves first, separator last):
    LU fill O(N log N) on a 2-D grid instead of the band's O(N sqrt N)."""
    ks: list[np.ndarray] = []
    ns: list[np.ndarray] = []
    stack: list[tuple[int, int, int, int, bool]] = [(0, kmax + 1, 0, nmax + 1, False)]
    # iterative post-order: a region is expanded into (left, right, separator)
    while stack:
        k0, k1, n0, n1, is_sep = stack.pop()
        dk, dn = k1 - k0, n1 - n0
        if dk <= 0 or dn <= 0:
            continue
        if is_sep or dk * dn <= leaf:
            kg, ng = np.meshgrid(np.arange(k0, k1), np.arange(n0, n1), indexing="ij")
            ks.append(kg.ravel())
            ns.append(ng.ravel())
            continue
        if dk >= dn:
            m = (k0 + k1) // 2
            parts = [(k0, m, n0, n1, False), (m + 1, k1, n0, n1, False), (m, m + 1, n0, n1, True)]
        else:
            m = (n0 + n1) // 2
            parts = [(k0, k1, n0, m, False), (k0, k1, m + 1, n1, False), (k0, k1, m, m + 1, True)]
        stack.extend(reversed(parts))
    return np.concatenate(ks), np.concatenate(ns)


def nd_order(chain: Chain) -> np.ndarray:
    """All states in nested-dissection order over the (n_F, n_O) grid; the U states a
    handoff or drop jumps into (each reached from a whole anti-diagonal) last."""
    kmax, nmax = int(chain.k.max()), int(chain.n.max())
    kg, ng = nested_dissection(kmax, nmax)
    rank = np.empty((kmax + 1, nmax + 1), dtype=np.int64)
    rank[kg, ng] = np.arange(kg.size)
    key = rank[chain.k, chain.n] * 2 + chain.a
    if chain.hub or (nmax > 0 and not (chain.n[chain.a == U] > 0).any()):
        key = np.where(chain.a == U, 2 * kg.size + chain.k, key)
    return np.argsort(key, kind="stable")


def coarse_grid(chain: Chain, step: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Each state's aggregate of step x step grid points (both availabilities), and the
    aggregates in nested-dissection order, for `two_level_stationary`."""
    ck, cn = chain.k // step, chain.n // step
    width = int(cn.max()) + 1
    keys, groups = np.unique(ck * width + cn, return_inverse=True)
    kg, ng = nested_dissection(int(ck.max()), width - 1)
    rank = np.empty((int(ck.max()) + 1, width), dtype=np.int64)
    rank[kg, ng] = np.arange(kg.size)
    return groups, np.argsort(rank[keys // width, keys % width], kind="stable")


def checked_sparse(chain: Chain) -> tuple[np.ndarray, float, str]:
    """Stationary vector by sparse solves, its componentwise residual, and the route.

    `sparse`: one checked pinned LU (up to TWO_LEVEL_MIN_STATES, and for `hub` chains
    at any size). `two-level`: above, accurate in absolute terms only; the LU where
    it does not converge.
    """
    G = generator(chain)
    if chain.Q.shape[0] >= TWO_LEVEL_MIN_STATES and not chain.hub:
        groups, coarse_order = coarse_grid(chain)
        got = two_level_stationary(G, groups, coarse_order)
        if got is not None:
            return got[0], stationary_error(G, got[0]), "two-level"
    order = nd_order(chain) if chain.Q.shape[0] >= ND_MIN_STATES else None
    pi, err = checked_stationary(G, order)
    return pi, err, "sparse"


def joint_method(n_states: int, flops: float, *,
                 gth_per_state: float = GTH_S_PER_STATE,
                 gth_per_flop: float = GTH_S_PER_FLOP,
                 lu_fixed: float = LU_S_FIXED,
                 lu_per_state: float = LU_S_PER_STATE) -> Literal["gth", "sparse"]:
    """The route the cost model says is faster; GTH only within GTH_MAX_FLOPS (with
    this machine's constants the LU always wins, and GTH is its fallback)."""
    gth_s = gth_per_state * n_states + gth_per_flop * flops
    lu_s = lu_fixed + lu_per_state * n_states
    return "gth" if (flops <= GTH_MAX_FLOPS and gth_s < lu_s) else "sparse"

