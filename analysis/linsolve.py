"""Sparse solves of the nonsingular M-matrix systems the chains lead to.

Small systems get one sparse LU in minimum-degree order on A^T + A (on the chains'
multi-dimensional grids it fills three to five times less than COLAMD); large ones
an incomplete LU of the same order as GMRES's preconditioner, checked by its
residual and replaced by the full LU if it does not converge. Pure: no I/O.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, gmres, spilu, splu

# Above this many unknowns the full LU's fill (and time) grows too fast: ILU + GMRES.
DIRECT_MAX = 6_000
RTOL = 1e-13
ORDER = "MMD_AT_PLUS_A"


class Solver:
    """A factorisation of A, for as many right-hand sides as needed."""

    def __init__(self, A: sp.spmatrix) -> None:
        self.A = sp.csc_matrix(A)
        self.direct = self.A.shape[0] <= DIRECT_MAX
        if self.direct:
            self._lu = splu(self.A, permc_spec=ORDER)
        else:
            ilu = spilu(self.A, drop_tol=1e-4, fill_factor=10, permc_spec=ORDER)
            self._pre = LinearOperator(self.A.shape, ilu.solve)

    @property
    def method(self) -> str:
        return "sparse LU" if self.direct else "ILU-GMRES"

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
            x, info = gmres(self.A, bj, M=self._pre, rtol=RTOL, atol=0.0, restart=60,
                            maxiter=400)
            if info != 0 or float(np.abs(self.A @ x - bj).max()) > 1e-10 * scale:
                self._lu = splu(self.A, permc_spec=ORDER)  # did not converge: the full LU
                self.direct = True
                return self.solve(rhs)
            out[:, j] = x
        return out.reshape(b.shape)


def solve(A: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
    """x with A x = rhs (one factorisation, used once)."""
    return Solver(A).solve(rhs)
