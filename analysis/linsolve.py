"""Sparse solves of the nonsingular M-matrix systems the chains lead to.

Small systems get one sparse LU in minimum-degree order on A^T + A (on the chains'
multi-dimensional grids it fills two to three times less than COLAMD). Large ones
get BiCGSTAB with a Jacobi (diagonal) preconditioner, checked by its residual: on a
72,000-state chain of four dimensions it took 4 s where the LU took 130 s and 94
million nonzeros, and SuperLU's incomplete LU did not finish in minutes. If it does
not converge, the full LU (where it fits) or an error.

Stationary vectors by one pinned solve (`pinned_stationary`) are checked by their
componentwise residual (`stationary_error`): where a probability has lost its relative
accuracy, its own balance equation no longer holds to rounding, so the check sees
what the norm of the residual hides (measured: the largest relative error of any
entry is within 3x of it). Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, bicgstab, gmres, splu

# Above this many unknowns the full LU's fill (and time) grows too fast: BiCGSTAB.
DIRECT_MAX = 6_000
# Where BiCGSTAB fails, the full LU is still tried up to here (beyond: an error).
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

    @property
    def method(self) -> str:
        return "sparse LU" if self.direct else "BiCGSTAB"

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


def solve(A: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
    """x with A x = rhs (one factorisation, used once)."""
    return Solver(A).solve(rhs)


def stationary_error(G: sp.spmatrix, pi: np.ndarray) -> float:
    """Largest componentwise residual of pi G = 0: |(pi G)_j| / (|pi| |G|)_j.

    Independent of scale; rounding gives ~1e-16. Where the pinned state is far less
    likely than others, LU's pivots cancel and the small probabilities lose their
    digits (the norm of pi G stays tiny): this rises with that relative error.
    """
    A = sp.csr_matrix(G)
    flow = np.abs(pi) @ abs(A)
    r = np.abs(pi @ A)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(flow > 0, r / np.where(flow > 0, flow, 1.0), 0.0)
    return float(ratio.max()) if ratio.size else 0.0


def pinned_stationary(Gt: sp.spmatrix, pin: int, order: np.ndarray | None = None
                      ) -> np.ndarray:
    """Stationary vector from G^T pi = 0 with pi[pin] = 1 (then normalised).

    `Gt` is the transposed generator of a chain in which every state reaches `pin`;
    `order` the unknowns in a fill-reducing order (all states; `pin` is dropped from
    it), or None for SuperLU's minimum degree on A^T + A. The system left is a
    nonsingular M-matrix: no pivoting, so the given order is kept.
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


def checked_stationary(G: sp.spmatrix, order: np.ndarray | None = None
                       ) -> tuple[np.ndarray, float]:
    """Pinned LU at state 0; if its check fails, again pinned at the likeliest state.

    Returns the vector (negative entries clamped to 0) and its `stationary_error`,
    for the caller to fall back to GTH where that is still above STATIONARY_TOL.
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


# Where the two-level solve stops: GMRES's relative residual on the pinned system and
# the most iterations (measured: 26 on a drain chain of 1,003,002 states).
TWO_LEVEL_RTOL = 1e-12
TWO_LEVEL_MAXITER = 300
# Its smoother: two damped Jacobi sweeps before and after the coarse correction. One
# undamped sweep does not converge; Gauss-Seidel sweeps took 2 fewer iterations but
# their triangles cost 2 s to set up at 1M states (SuperLU), more than they saved.
JACOBI_DAMPING = 0.8
JACOBI_SWEEPS = 2


def two_level_stationary(G: sp.spmatrix, groups: np.ndarray,
                         coarse_order: np.ndarray | None = None
                         ) -> tuple[np.ndarray, int] | None:
    """Stationary vector by GMRES with a two-level preconditioner, or None.

    The pinned system (state 0) is preconditioned by damped Jacobi sweeps around an
    exact correction on the aggregates `groups` (state -> aggregate; the Galerkin
    product P^T A P, factorised once in `coarse_order`, or minimum degree). On the
    joint chain's grid, aggregates of 2 x 2 grid points (both availabilities) cut the
    LU's size 8x and its fill more, and the iteration count stays at ~25 from 250,000
    to 1,000,000 states (3 x 3 aggregates: 36, 4 x 4: 50). Accurate in absolute terms
    (||pi G|| ~ 1e-15), not entry by entry. None where GMRES does not converge (the
    caller falls back to the LU).
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
