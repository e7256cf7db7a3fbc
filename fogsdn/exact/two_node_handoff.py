"""The tagged OFN request under `handoff` in seed 000's two-node chain (`fogsdn.exact.ctmc`).

Followed jointly with the FN's count, since a leave moves it and the requests ahead of
it into the FN's tail; block-structured solves give its means in O(C_F C_O), and the
uniformised chain (`fogsdn.exact.response_time.Uniformised`) its distribution. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_banded

from fogsdn.exact.response_time import Component, Uniformised


@dataclass
class HandoffChain(Component):
    """A request accepted by the OFN under `handoff`, followed jointly with the FN.

    Transient states: (j ahead of it at the OFN, k at the FN), then its position at the
    FN after a leave (dropped if k + j + 1 > C_F); FIFO, so later arrivals never matter.
    """

    weights: np.ndarray  # [k, j], per arrival
    lam_f: float  # arrival rate to the FN while the OFN is up
    serv_f: np.ndarray  # FN completion rate with k held, k = 0..C_F
    mu_f: float
    mu_o: float
    eta: float
    multi_f: bool
    multi_o: bool

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        self.weights = w
        self._cf = w.shape[0] - 1
        self._jn = w.shape[1]
        self._nfn = 1 if self.multi_f else self._cf  # FN positions after a leave
        self.mass = float(w.sum())
        (done_fn, done_ofn), (drop_fn, drop_ofn) = self._absorb_done(), self._absorb_drop()
        h_done, h_drop, soj = self._solve_columns(
            [done_fn, drop_fn, np.ones(self._nfn)], [done_ofn, drop_ofn, np.ones(w.shape)])
        (g,) = self._solve_columns([h_done[0]], [h_done[1]])
        self.p_complete = float((w * h_done[1]).sum())
        self.p_drop = float((w * h_drop[1]).sum())
        self.t_sojourn = float((w * soj[1]).sum())
        self.t_complete = float((w * g[1]).sum())

    # -- structure ------------------------------------------------------------------
    def _ahead_rate(self, j: int) -> float:
        if j == 0:
            return 0.0
        return j * self.mu_o if self.multi_o else self.mu_o

    def _done_rate(self, j: int) -> float:
        return self.mu_o if (self.multi_o or j == 0) else 0.0

    def _absorb_done(self) -> tuple[np.ndarray, np.ndarray]:
        fn = np.zeros(self._nfn)
        fn[0] = self.mu_f  # only from the head of the FN
        ofn = np.tile([self._done_rate(j) for j in range(self._jn)], (self._cf + 1, 1))
        return fn, ofn

    def _absorb_drop(self) -> tuple[np.ndarray, np.ndarray]:
        k = np.arange(self._cf + 1)[:, None]
        j = np.arange(self._jn)[None, :]
        return np.zeros(self._nfn), self.eta * (k + j + 1 > self._cf).astype(float)

    def _fn_target(self, j: int) -> np.ndarray:
        """FN state index a leave sends (k, j) to, or -1 when it does not fit."""
        pos = np.arange(self._cf + 1) + j + 1
        if self.multi_f:
            return np.where(pos <= self._cf, 0, -1)
        return np.where(pos <= self._cf, pos - 1, -1)

    def _solve_columns(self, bs_fn: list[np.ndarray], bs_ofn: list[np.ndarray]
                       ) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Solve (-T) x = b for right-hand sides given as (FN part, OFN part [k, j]).

        The chain only moves to fewer requests ahead or to the FN, so forward
        substitution over j with one tridiagonal solve per j does it in O(C_F C_O).
        """
        n_fn = self._nfn
        nr = len(bs_fn)
        B_fn = np.stack(bs_fn, axis=1)
        x_fn = np.zeros((n_fn, nr))
        if self.multi_f:
            x_fn[0] = B_fn[0] / self.mu_f
        else:
            acc = np.zeros(nr)
            for pidx in range(n_fn):  # position p = pidx + 1 goes to p - 1
                acc = acc + B_fn[pidx] / self.mu_f
                x_fn[pidx] = acc
        kk = np.arange(self._cf + 1)
        up = self.lam_f * (kk < self._cf)
        down = self.serv_f
        x_ofn = np.zeros((self._cf + 1, self._jn, nr))
        ab = np.zeros((3, self._cf + 1))
        for j in range(self._jn):
            out = up + down + self._ahead_rate(j) + self._done_rate(j) + self.eta
            rhs = np.stack([b[:, j] for b in bs_ofn], axis=1)
            if j >= 1:
                rhs = rhs + self._ahead_rate(j) * x_ofn[:, j - 1]
            tgt = self._fn_target(j)
            ok = tgt >= 0
            rhs[ok] += self.eta * x_fn[tgt[ok]]
            # row k of (-T) x: out_k x_k - up_k x_{k+1} - down_k x_{k-1}
            ab[0, 1:] = -up[:-1]
            ab[1] = out
            ab[2, :-1] = -down[1:]
            # rounding can leave -1e-18 where the exact value is a tiny positive
            x_ofn[:, j] = np.maximum(solve_banded((1, 1), ab, rhs), 0.0)
        return tuple((x_fn[:, r], x_ofn[:, :, r]) for r in range(nr))

    # -- distribution -------------------------------------------------------------
    def _uniformised(self) -> Uniformised:
        """The tagged chain's transient rates, uniformised."""
        cf, jn, n_fn = self._cf, self._jn, self._nfn
        n_ofn = (cf + 1) * jn

        def sid(k: np.ndarray, j: np.ndarray) -> np.ndarray:
            return n_fn + j * (cf + 1) + k

        rows, cols, vals = [], [], []
        out = np.zeros(n_fn + n_ofn)
        if not self.multi_f and cf > 1:
            rows.append(np.arange(1, n_fn))
            cols.append(np.arange(0, n_fn - 1))
            vals.append(np.full(n_fn - 1, self.mu_f))
        out[:n_fn] = self.mu_f
        kk = np.arange(cf + 1)
        size = n_fn + n_ofn
        done = np.zeros(size)
        done[0] = self.mu_f
        drop = np.zeros(size)
        drop_rate = self._absorb_drop()[1]
        up, dn = self.lam_f * (kk < cf), self.serv_f
        for j in range(jn):
            src = sid(kk, np.full_like(kk, j))
            for rate, dk in ((up, 1), (dn, -1)):  # the FN's arrivals and completions
                m = rate > 0
                rows.append(src[m])
                cols.append(src[m] + dk)
                vals.append(rate[m])
            a = self._ahead_rate(j)
            if a > 0:
                rows.append(src)
                cols.append(sid(kk, np.full_like(kk, j - 1)))
                vals.append(np.full(kk.size, a))
            tgt = self._fn_target(j)
            ok = tgt >= 0
            if self.eta > 0 and ok.any():
                rows.append(src[ok])
                cols.append(tgt[ok])
                vals.append(np.full(int(ok.sum()), self.eta))
            out[src] = up + dn + a + self._done_rate(j) + self.eta
            done[src] = self._done_rate(j)
            drop[src] = drop_rate[:, j]
        T = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(size, size))
        v0 = np.zeros(size)
        v0[n_fn:] = self.weights.T.ravel()  # j-major, then k
        return Uniformised(T, out, done, drop, v0)
