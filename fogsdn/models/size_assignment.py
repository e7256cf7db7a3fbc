"""Size-based task assignment (seed 002b): cutoffs and M/G/1 predictions (pure).

Hosts are single FCFS servers with unbounded queues fed by one Poisson stream; a host
of rate mu serves size s in s/mu model ms. SITA and Random split the stream Poisson, so
per-host Pollaczek-Khinchine is exact; TAGS uses a per-host APPROXIMATION (Harchol-Balter's
TAGS paper's; the seed's abstract names no model).
The models and the meaning of wait, W and slowdown: docs/size_based.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import accumulate

import numpy as np
from scipy import optimize, special

from fogsdn.core.scenario import SizeSpec

INF = math.inf


class SizeModelError(ValueError):
    """Inputs a size-based model cannot use (the message is one line)."""


# -- the size distribution --------------------------------------------------------


def support(spec: SizeSpec) -> tuple[float, float]:
    """Smallest and largest possible size."""
    if spec.distribution == "bounded_pareto":
        assert spec.low is not None and spec.high is not None
        return spec.low, spec.high
    if spec.distribution == "deterministic":
        return spec.mean, spec.mean
    return 0.0, INF


def tail(spec: SizeSpec, x: float) -> float:
    """P(X > x)."""
    lo, hi = support(spec)
    if x < lo:
        return 1.0
    if x >= hi:
        return 0.0
    if spec.distribution == "exponential":
        return math.exp(-x / spec.mean)
    a = spec.shape
    assert a is not None
    return ((lo / x) ** a - (lo / hi) ** a) / (1.0 - (lo / hi) ** a)


def partial_moment(spec: SizeSpec, k: int, a: float, b: float) -> float:
    """E[X^k ; a < X <= b] for an integer k >= -1."""
    lo, hi = support(spec)
    if spec.distribution == "deterministic":
        return spec.mean**k if a < spec.mean <= b else 0.0
    a, b = max(a, lo), min(b, hi)
    if not a < b:
        return 0.0
    if spec.distribution == "exponential":
        m = spec.mean
        if k == -1:
            if a <= 0.0:
                return INF
            return float(special.exp1(a / m) - (special.exp1(b / m) if b < INF else 0.0)) / m
        hi_part = 1.0 if b == INF else float(special.gammainc(k + 1, b / m))
        return m**k * math.gamma(k + 1) * (hi_part - float(special.gammainc(k + 1, a / m)))
    al = spec.shape
    assert al is not None
    c = al * lo**al / (1.0 - (lo / hi) ** al)
    if abs(k - al) < 1e-12:
        return c * math.log(b / a)
    return c * (b ** (k - al) - a ** (k - al)) / (k - al)


def moment(spec: SizeSpec, k: int) -> float:
    lo, hi = support(spec)
    return partial_moment(spec, k, lo - 1.0 if lo > 0 else -1.0, hi)


def load_cutoff(spec: SizeSpec, work: float) -> float:
    """The size s with E[X ; X <= s] = work (0 < work < E[X]): closed form for bounded
    Pareto, a root-finder otherwise."""
    lo, hi = support(spec)
    total = moment(spec, 1)
    if not 0.0 < work < total:
        raise SizeModelError(f"load share {work / total:.6g} is outside (0, 1)")
    if spec.distribution == "deterministic":
        raise SizeModelError("deterministic sizes cannot be split by size interval")
    if spec.distribution == "bounded_pareto":
        al = spec.shape
        assert al is not None
        c = al * lo**al / (1.0 - (lo / hi) ** al)
        if abs(al - 1.0) < 1e-12:
            return lo * math.exp(work / c)
        return (lo ** (1.0 - al) + work * (1.0 - al) / c) ** (1.0 / (1.0 - al))
    upper = spec.mean
    while partial_moment(spec, 1, 0.0, upper) < work:
        upper *= 2.0
    return float(optimize.brentq(lambda s: partial_moment(spec, 1, 0.0, s) - work, 0.0, upper,
                                 xtol=1e-12 * upper, rtol=1e-13))


# -- predictions -------------------------------------------------------------------


@dataclass(frozen=True)
class HostPrediction:
    name: str
    low: float  # size interval (low, high]; for TAGS `high` is the host's cutoff
    high: float
    arrival_rate: float  # tasks per model ms reaching this host
    rho: float
    W: float  # mean time at this host (queueing + service), model ms
    wait: float  # mean queueing time at this host
    slowdown: float  # mean slowdown of the tasks that complete here (NaN for TAGS hosts)

    def to_dict(self) -> dict[str, float | str]:
        d: dict[str, float | str] = asdict(self)
        d["lambda"] = d.pop("arrival_rate")
        return d


@dataclass(frozen=True)
class SizePrediction:
    policy: str
    exact: bool  # False for the TAGS approximation
    W: float
    wait: float
    slowdown: float
    hosts: tuple[HostPrediction, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "model": "M/G/1 FCFS per host (Pollaczek-Khinchine)"
            + ("" if self.exact else ", TAGS per-host approximation"),
            "exact": self.exact,
            "overall": {"W": self.W, "wait": self.wait, "slowdown": self.slowdown},
            "hosts": [h.to_dict() for h in self.hosts],
            "notes": list(self.notes),
        }


def _check(lam: float, mus: Sequence[float], names: Sequence[str],
           cutoffs: Sequence[float] | None = None) -> None:
    if lam <= 0:
        raise SizeModelError("arrival rate must be positive")
    if not mus or len(mus) != len(names):
        raise SizeModelError("need one rate per host")
    if cutoffs is not None and len(cutoffs) != len(mus) - 1:
        raise SizeModelError(f"{len(mus)} hosts need {len(mus) - 1} cutoffs, got {len(cutoffs)}")


def _pk(rate: float, es: float, es2: float) -> tuple[float, float]:
    """(rho, mean wait) of M/G/1 FCFS; wait is inf when rho >= 1."""
    rho = rate * es
    if rho >= 1.0:
        return rho, INF
    return rho, rate * es2 / (2.0 * (1.0 - rho))


def _sita_like(policy: str, lam: float, spec: SizeSpec, edges: Sequence[tuple[float, float]],
               shares: Sequence[float], mus: Sequence[float], names: Sequence[str]
               ) -> SizePrediction:
    """Host i gets share_i of the tasks whose size lies in edges[i] (P-K per host)."""
    hosts = []
    tot_w = tot_wait = tot_sd = 0.0
    for (a, b), share, mu, name in zip(edges, shares, mus, names, strict=True):
        p = share * partial_moment(spec, 0, a, b)
        rate = lam * p
        if p <= 0.0:
            hosts.append(HostPrediction(name, a, b, 0.0, 0.0, 0.0, 0.0, math.nan))
            continue
        es = partial_moment(spec, 1, a, b) / (p / share) / mu
        es2 = partial_moment(spec, 2, a, b) / (p / share) / mu**2
        inv = partial_moment(spec, -1, a, b) / (p / share) * mu  # E[1 / service]
        rho, wq = _pk(rate, es, es2)
        sd = wq * inv + 1.0 if math.isfinite(wq) else INF
        hosts.append(HostPrediction(name, a, b, rate, rho, wq + es, wq, sd))
        tot_w += p * (wq + es)
        tot_wait += p * wq
        tot_sd += p * sd
    return SizePrediction(policy, True, tot_w, tot_wait, tot_sd, tuple(hosts))


def predict_sita(lam: float, spec: SizeSpec, cutoffs: Sequence[float], mus: Sequence[float],
                 names: Sequence[str], policy: str = "sita") -> SizePrediction:
    """SITA with the given h-1 cutoffs: exact per-host P-K."""
    _check(lam, mus, names, cutoffs)
    lo, hi = support(spec)
    bounds = [-1.0 if lo <= 0 else lo - 1e-300, *cutoffs, hi]
    edges = [(bounds[i], bounds[i + 1]) for i in range(len(mus))]
    pred = _sita_like(policy, lam, spec, edges, [1.0] * len(mus), mus, names)
    return replace(pred, hosts=tuple(replace(h, low=max(h.low, lo)) for h in pred.hosts))


def predict_random(lam: float, spec: SizeSpec, mus: Sequence[float], names: Sequence[str]
                   ) -> SizePrediction:
    """Uniform random assignment: each host is M/G/1 with rate lambda / h (exact)."""
    _check(lam, mus, names)
    lo, hi = support(spec)
    h = len(mus)
    edges = [(-1.0 if lo <= 0 else lo - 1e-300, hi)] * h
    pred = _sita_like("random", lam, spec, edges, [1.0 / h] * h, mus, names)
    return replace(pred, hosts=tuple(replace(x, low=lo, high=hi) for x in pred.hosts))


def predict_tags(lam: float, spec: SizeSpec, cutoffs: Sequence[float], mus: Sequence[float],
                 names: Sequence[str]) -> SizePrediction:
    """TAGS with cutoffs s_1 < ... < s_(h-1) (s_h = the largest size): the per-host
    approximation (hosts after the first taken as M/G/1 with Poisson arrivals)."""
    _check(lam, mus, names, cutoffs)
    h = len(mus)
    lo, hi = support(spec)
    s = [lo - 1.0 if lo > 0 else -1.0, *cutoffs, hi]
    hosts: list[HostPrediction] = []
    waits: list[float] = []
    overall_w = overall_wait = 0.0
    for i in range(h):
        a, b, mu = s[i], s[i + 1], mus[i]
        reach = tail(spec, a) if i > 0 else 1.0
        rate = lam * reach
        if reach <= 0.0:
            hosts.append(HostPrediction(names[i], max(a, lo), b, 0.0, 0.0, 0.0, 0.0, math.nan))
            waits.append(0.0)
            continue
        beyond = tail(spec, b)
        cut1, cut2 = (b * beyond, b * b * beyond) if beyond > 0.0 else (0.0, 0.0)
        es = (partial_moment(spec, 1, a, b) + cut1) / reach / mu
        es2 = (partial_moment(spec, 2, a, b) + cut2) / reach / mu**2
        rho, wq = _pk(rate, es, es2)
        waits.append(wq)
        hosts.append(HostPrediction(names[i], max(a, lo), b, rate, rho, wq + es, wq, math.nan))
        overall_w += reach * (wq + es)
        overall_wait += reach * wq
    # slowdown: a task of size in (s_(j-1), s_j] waits at hosts 1..j, is killed at 1..j-1
    sd = 0.0
    waited = wasted = 0.0
    for j in range(h):
        waited += waits[j]
        inv = partial_moment(spec, -1, s[j], s[j + 1]) * mus[j]
        sd += (waited + wasted) * inv + partial_moment(spec, 0, s[j], s[j + 1])
        wasted += s[j + 1] / mus[j]
    if not math.isfinite(overall_wait):
        sd = INF
    note = ("approximation: hosts after the first are taken as M/G/1 with Poisson arrivals "
            "(their arrivals are really the previous host's killed tasks)")
    return SizePrediction("tags", False, overall_w, overall_wait, sd, tuple(hosts), (note,))


# -- cutoffs -------------------------------------------------------------------------


def sita_e_cutoffs(spec: SizeSpec, mus: Sequence[float]) -> tuple[float, ...]:
    """Cutoffs giving host i a share of the work proportional to its rate (equal loads
    for equal hosts): E[X ; X <= s_i] = E[X] * sum(mu_1..mu_i) / sum(mu)."""
    total_mu = float(sum(mus))
    ex = moment(spec, 1)
    return tuple(load_cutoff(spec, ex * acc / total_mu) for acc in accumulate(mus[:-1]))


def _cutoffs_from_shares(spec: SizeSpec, x: np.ndarray) -> tuple[float, ...]:
    """Unconstrained vector (h values) -> increasing cutoffs by cumulative work share."""
    w = np.exp(x - x.max())
    shares = np.cumsum(w / w.sum())[:-1]
    ex = moment(spec, 1)
    return tuple(load_cutoff(spec, float(min(max(q, 1e-12), 1 - 1e-12)) * ex) for q in shares)


_INFEASIBLE = 1e12


def _score(pred: SizePrediction, metric: str) -> float:
    """The prediction's `metric` where every host is stable; otherwise a penalty growing
    with the overload (so the search can walk back into the feasible region)."""
    value = getattr(pred, metric)
    excess = sum(max(0.0, h.rho - (1.0 - 1e-9)) for h in pred.hosts)
    if excess > 0.0 or not math.isfinite(value):
        return _INFEASIBLE * (1.0 + excess)
    return value


def _minimise(spec: SizeSpec, h: int, objective: Callable[[tuple[float, ...]], float]
              ) -> tuple[float, ...]:
    """Minimise objective(cutoffs) over increasing cutoffs (Nelder-Mead from several starts
    in the work-share parametrisation; infeasible points score at least _INFEASIBLE)."""
    if h == 1:
        return ()
    best: tuple[float, tuple[float, ...]] = (INF, ())

    def f(x: np.ndarray) -> float:
        try:
            return objective(_cutoffs_from_shares(spec, x))
        except SizeModelError:
            return INF

    for x0 in _starts(h):
        res = optimize.minimize(f, x0, method="Nelder-Mead",
                                options={"xatol": 1e-7, "fatol": 1e-12, "maxiter": 4000})
        if res.fun < best[0]:
            best = (float(res.fun), _cutoffs_from_shares(spec, res.x))
    if not best[0] < _INFEASIBLE:
        raise SizeModelError("no cutoffs keep every host's load below 1")
    return best[1]


def _starts(h: int) -> list[np.ndarray]:
    """Equal shares, and shares tilted towards the first and towards the last host."""
    ramp = np.linspace(-1.0, 1.0, h)
    return [np.zeros(h), 2.0 * ramp, -2.0 * ramp, 5.0 * ramp, -5.0 * ramp, 10.0 * ramp]


def sita_u_cutoffs(lam: float, spec: SizeSpec, mus: Sequence[float]) -> tuple[float, ...]:
    """SITA cutoffs minimising mean slowdown (numerically)."""
    names = [f"h{i}" for i in range(len(mus))]
    return _minimise(spec, len(mus),
                     lambda c: _score(predict_sita(lam, spec, c, mus, names), "slowdown"))


def tags_cutoffs(lam: float, spec: SizeSpec, mus: Sequence[float]) -> tuple[float, ...]:
    """TAGS cutoffs minimising the approximate mean response time (numerically)."""
    names = [f"h{i}" for i in range(len(mus))]
    return _minimise(spec, len(mus), lambda c: _score(predict_tags(lam, spec, c, mus, names), "W"))


def parse_cutoffs(text: str, hosts: int, spec: SizeSpec) -> tuple[float, ...]:
    """`policy.params.cutoffs` ("s1,s2,...": hosts - 1 increasing sizes inside the support)."""
    try:
        vals = tuple(float(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise SizeModelError(f"policy.params.cutoffs: not a list of numbers: {text!r}") from None
    if len(vals) != hosts - 1:
        raise SizeModelError(f"policy.params.cutoffs: {hosts} hosts need {hosts - 1} "
                             f"cutoffs, got {len(vals)}")
    lo, hi = support(spec)
    increasing = all(a < b for a, b in zip(vals, vals[1:], strict=False))
    if any(not lo < v < hi for v in vals) or not increasing:
        raise SizeModelError(f"policy.params.cutoffs: need increasing values inside ({lo:g}, "
                             f"{hi:g}), got {text!r}")
    return vals


__all__ = ["HostPrediction", "SizeModelError", "SizePrediction", "load_cutoff", "moment",
           "parse_cutoffs", "partial_moment", "predict_random", "predict_sita", "predict_tags",
           "sita_e_cutoffs", "sita_u_cutoffs", "support", "tags_cutoffs", "tail"]
