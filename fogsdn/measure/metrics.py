"""Measured metrics from a trace, with confidence intervals honest for correlated samples.

Response times of successive requests through one queue are correlated, so the
naive i.i.d. interval is too narrow; we use non-overlapping batch means in
arrival order (Law & Kelton), or independent replications when several runs exist.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from fogsdn.core.trace import Outcome, TraceRow
from fogsdn.exact.class_prediction import PERCENTILES

DEFAULT_BATCHES = 20


@dataclass(frozen=True)
class MeanCI:
    mean: float
    half_width: float  # 95 %
    n: int


def _t_half(x: np.ndarray) -> float:
    """95 % half-width (Student t) of the mean of independent values (at least two)."""
    return float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def batch_means_ci(values: Sequence[float], batches: int = DEFAULT_BATCHES) -> MeanCI:
    """Mean and 95 % half-width from `batches` consecutive batch means."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0)
    b = min(batches, n // 2)
    if b < 2:
        return MeanCI(float(x.mean()), math.inf, n)
    size = n // b
    return MeanCI(float(x.mean()), _t_half(x[: b * size].reshape(b, size).mean(axis=1)), n)


def binomial_half_width(n: int, hits: int) -> float:
    """The farther end of the exact (Clopper-Pearson) 95 % interval of hits/n: a share is
    never known better, though batch means of few hits give a zero-width interval."""
    if n <= 0:
        return math.nan
    p = hits / n
    lo = float(stats.beta.ppf(0.025, hits, n - hits + 1)) if hits > 0 else 0.0
    hi = float(stats.beta.ppf(0.975, hits + 1, n - hits)) if hits < n else 1.0
    return max(p - lo, hi - p)


def share_ci(indicators: Sequence[float], batches: int = DEFAULT_BATCHES) -> MeanCI:
    """A share with its 95 % half-width: batch means, never below the binomial one."""
    bm = batch_means_ci(indicators, batches)
    if bm.n == 0:
        return bm
    hits = int(round(float(np.sum(indicators))))
    return MeanCI(bm.mean, max(bm.half_width, binomial_half_width(bm.n, hits)), bm.n)


def batch_quantile_ci(values: Sequence[float] | np.ndarray, q: float, batches: int = DEFAULT_BATCHES
                      ) -> MeanCI:
    """The q-th percentile of `values` (in arrival order) with a 95 % half-width from
    the spread of the same percentile over consecutive batches (batch quantiles)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0)
    est = float(np.percentile(x, q))
    b = min(batches, n // 2)
    # a batch must be large enough to hold its own tail point
    while b >= 2 and (n // b) * (1.0 - q / 100.0) < 5.0:
        b -= 1
    if b < 2:
        return MeanCI(est, math.inf, n)
    size = n // b
    return MeanCI(est, _t_half(np.percentile(x[: b * size].reshape(b, size), q, axis=1)), n)


def percentiles_ci(values: Sequence[float] | np.ndarray) -> dict[str, dict[str, float]]:
    """p50/p90/p95/p99 of answered requests' times, each with its batch interval."""
    cis = {name: batch_quantile_ci(values, 100 * q) for name, q in PERCENTILES}
    return {name: {"value": ci.mean, "ci95": ci.half_width} for name, ci in cis.items()}


def p50_p99(values: Sequence[float], digits: int | None = None) -> dict[str, float]:
    """The median and 99th percentile of `values`, rounded to `digits` when given; NaN
    for no values."""
    if not values:
        return {"p50": math.nan, "p99": math.nan}
    got = {"p50": float(np.percentile(values, 50)), "p99": float(np.percentile(values, 99))}
    return got if digits is None else {k: round(v, digits) for k, v in got.items()}


def replications_ci(means: Sequence[float]) -> MeanCI:
    """95 % interval across independent replications' means."""
    x = np.asarray([m for m in means if not math.isnan(m)], dtype=float)
    if len(x) == 0:
        return MeanCI(math.nan, math.nan, 0)
    if len(x) < 2:
        return MeanCI(float(x.mean()), math.inf, len(x))
    return MeanCI(float(x.mean()), _t_half(x), len(x))


@dataclass(frozen=True)
class ClassMetrics:
    count: int  # arrivals after warm-up
    ok: int
    blocked: int
    timeout: int
    lost: int
    W: float  # mean node sojourn (node_ms) of answered requests
    W_ci95: float
    W_e2e: float  # mean end-to-end response of answered requests
    W_e2e_ci95: float
    blocking: float
    timeout_prob: float
    lost_prob: float
    outage: float  # share of ALL arrivals not answered within the deadline (node sojourn)
    outage_e2e: float  # the same from the client's end-to-end response
    by_node: dict[str, int]
    # 95 % half-widths of the shares: batch means of each arrival's 0/1 indicator
    blocking_ci95: float = math.nan
    outage_ci95: float = math.nan
    # node sojourn percentiles of answered requests, {name: {value, ci95}} (batch
    # quantiles); empty where the rows were not kept (a streamed summary)
    percentiles: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def class_metrics(rows: Iterable[TraceRow], deadline_ms: float) -> ClassMetrics:
    rows = sorted(rows, key=lambda r: r.t_send)
    ok = [r for r in rows if r.outcome is Outcome.OK]
    blocked_ci = share_ci([float(r.outcome is Outcome.BLOCKED) for r in rows])
    late_ci = share_ci([float(not (r.outcome is Outcome.OK and r.node_ms <= deadline_ms))
                        for r in rows])
    return _class_metrics(
        {o.value: sum(1 for r in rows if r.outcome is o) for o in Outcome},
        batch_means_ci([r.node_ms for r in ok]), batch_means_ci([r.response_ms for r in ok]),
        sum(1 for r in ok if r.node_ms <= deadline_ms),
        sum(1 for r in ok if r.response_ms <= deadline_ms), dict(Counter(r.node for r in ok)),
        blocked_ci.half_width, late_ci.half_width, percentiles_ci([r.node_ms for r in ok]))


def _class_metrics(counts: dict[str, int], w: MeanCI, e2e: MeanCI, in_deadline: int,
                   in_deadline_e2e: int, by_node: dict[str, int], blocking_ci95: float,
                   outage_ci95: float, percentiles: dict[str, dict[str, float]] | None = None
                   ) -> ClassMetrics:
    """One class's metrics from its outcome counts (by Outcome value), the answered
    requests' means, and how many of them were answered within the deadline."""
    n = sum(counts.values())

    def share(k: int) -> float:
        return k / n if n else math.nan

    return ClassMetrics(
        count=n, ok=counts["ok"], blocked=counts["blocked"], timeout=counts["timeout"],
        lost=counts["lost"], W=w.mean, W_ci95=w.half_width, W_e2e=e2e.mean,
        W_e2e_ci95=e2e.half_width, blocking=share(counts["blocked"]),
        timeout_prob=share(counts["timeout"]), lost_prob=share(counts["lost"]),
        outage=share(n - in_deadline), outage_e2e=share(n - in_deadline_e2e),
        by_node=by_node, blocking_ci95=blocking_ci95, outage_ci95=outage_ci95,
        percentiles=percentiles or {})


@dataclass(frozen=True)
class NodeService:
    served: int
    achieved_service_ms: float
    nominal_service_ms: float

    @property
    def ratio(self) -> float:
        return self.achieved_service_ms / self.nominal_service_ms


def node_service(rows: Iterable[TraceRow]) -> dict[str, NodeService]:
    """Per node, the achieved mean service time beside the nominal one asked of it."""
    acc: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r.outcome is Outcome.OK and not math.isnan(r.service_ms):
            acc.setdefault(r.node, []).append((r.service_ms, r.nominal_ms))
    return {
        node: NodeService(
            len(v), float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v]))
        )
        for node, v in sorted(acc.items())
    }


def measured_summary(
    rows: Iterable[TraceRow], warmup_ms: float, deadline_ms: float
) -> dict[str, object]:
    """The `measured` block of summary.json: per class, then per node service."""
    kept = [r for r in rows if r.t_send >= warmup_ms]
    out: dict[str, object] = {cls: class_metrics([r for r in kept if r.cls == cls],
                                                 deadline_ms).to_dict() for cls in ("hp", "lp")}
    out["nodes"] = {k: asdict(v) | {"ratio": v.ratio} for k, v in node_service(kept).items()}
    return out


# -- streaming (constant memory) ------------------------------------------------------
# For runs too long to hold in a list: the same numbers as `measured_summary`, as the
# rows come (in the order given: for an engine's stream, about completion order).


class StreamingBatchMeans:
    """Mean and 95 % batch-means half-width of a stream, in O(batches) memory."""

    __slots__ = ("batches", "size", "means", "_sum", "_k", "total", "n")

    def __init__(self, batches: int = DEFAULT_BATCHES) -> None:
        self.batches = batches
        self.size = 1
        self.means: list[float] = []
        self._sum = 0.0
        self._k = 0
        self.total = 0.0
        self.n = 0

    def add(self, x: float) -> None:
        self.add_many((x,))

    def _close_batch(self) -> None:
        """Keep the batch's mean; at 2 x `batches` means, merge pairs and double the size."""
        self.means.append(self._sum / self.size)
        self._sum = 0.0
        self._k = 0
        if len(self.means) == 2 * self.batches:
            m = self.means
            self.means = [(m[j] + m[j + 1]) / 2.0 for j in range(0, len(m), 2)]
            self.size *= 2

    def add_many(self, values: Sequence[float]) -> None:
        """`add` for each value in order, summing whole batch slices at C speed."""
        i, n = 0, len(values)
        while i < n:
            take = min(self.size - self._k, n - i)
            s = math.fsum(values[i : i + take]) if take > 1 else values[i]
            self.total += s
            self.n += take
            self._sum += s
            self._k += take
            i += take
            if self._k == self.size:
                self._close_batch()

    def result(self) -> MeanCI:
        if self.n == 0:
            return MeanCI(math.nan, math.nan, 0)
        if len(self.means) < 2:
            return MeanCI(self.total / self.n, math.inf, self.n)
        return MeanCI(self.total / self.n, _t_half(np.asarray(self.means)), self.n)


class StreamingShare:
    """A share (hits over arrivals) with a 95 % batch-means half-width, from chunks.

    Chunks come as (arrivals, hits), a tallied block at a time (an engine's flush). At
    `2 * max_chunks` chunks neighbours merge, so memory stays bounded; the interval
    groups the chunks into `batches` consecutive batches of about equal arrivals and
    takes their ratios' spread."""

    __slots__ = ("batches", "max_chunks", "chunks")

    def __init__(self, batches: int = DEFAULT_BATCHES, max_chunks: int = 2048) -> None:
        self.batches, self.max_chunks = batches, max_chunks
        self.chunks: list[tuple[int, int]] = []

    def add_counts(self, arrivals: int, hits: int) -> None:
        if not arrivals:
            return
        self.chunks.append((arrivals, hits))
        if len(self.chunks) >= 2 * self.max_chunks:
            c = self.chunks
            self.chunks = [(c[i][0] + c[i + 1][0], c[i][1] + c[i + 1][1])
                           for i in range(0, len(c) - 1, 2)] + ([c[-1]] if len(c) % 2 else [])

    def half_width(self) -> float:
        chunks = self.chunks
        n = np.array([c[0] for c in chunks], dtype=float)
        h = np.array([c[1] for c in chunks], dtype=float)
        total = n.sum()
        if total == 0:
            return math.nan
        floor = binomial_half_width(int(total), int(h.sum()))
        b = min(self.batches, len(chunks))
        if b < 2:
            return math.inf
        # cut the cumulative arrivals into b nearly equal parts, at chunk boundaries
        cut = np.searchsorted(np.cumsum(n), total * np.arange(1, b) / b, side="left") + 1
        groups = np.split(np.arange(len(chunks)), cut)
        ratios = np.array([h[g].sum() / n[g].sum() for g in groups if n[g].sum() > 0])
        if ratios.size < 2:
            return math.inf
        return max(floor, _t_half(ratios))


class _ClassAccumulator:
    __slots__ = ("counts", "w", "e2e", "in_deadline", "in_deadline_e2e", "by_node",
                 "blocked", "late")

    def __init__(self) -> None:
        self.counts = {o.value: 0 for o in Outcome}
        self.w = StreamingBatchMeans()
        self.e2e = StreamingBatchMeans()
        self.blocked = StreamingShare()
        self.late = StreamingShare()
        self.in_deadline = 0
        self.in_deadline_e2e = 0
        self.by_node: dict[str, int] = {}

    def metrics(self) -> ClassMetrics:
        return _class_metrics(dict(self.counts), self.w.result(), self.e2e.result(),
                              self.in_deadline, self.in_deadline_e2e, dict(self.by_node),
                              self.blocked.half_width(), self.late.half_width())


class MeasuredAccumulator:
    """`measured_summary` a block of rows at a time: feed `add_aggregate`, then `summary()`."""

    def __init__(self, warmup_ms: float, deadline_ms: float) -> None:
        self.warmup_ms = warmup_ms
        self.deadline_ms = deadline_ms
        self.classes = {"hp": _ClassAccumulator(), "lp": _ClassAccumulator()}
        self._service: dict[str, list[float]] = {}  # node -> [served, sum achieved, sum nominal]

    def add_aggregate(
        self,
        cls: str,
        counts: Mapping[str, int],
        ok_node_ms: Sequence[float],
        ok_response_ms: Sequence[float],
        ok_by_node: Mapping[str, int],
        service: Mapping[str, tuple[int, float, float]] | None = None,
        on_time: tuple[int, int] | None = None,
    ) -> None:
        """Many rows of one class at once, already past warm-up and tallied by the caller
        (a fast engine's sink): outcome counts, answered rows' node and end-to-end times
        in order, answered rows per node, and per node (served, sum achieved service,
        sum nominal service) for rows with a measured service time. `on_time`: how many
        of the times are within the deadline (node, end to end), if the caller counted
        them (it saves a Python loop per row)."""
        acc = self.classes.get(cls)
        if acc is None:
            return
        for outcome, k in counts.items():
            acc.counts[outcome] += k
        acc.w.add_many(ok_node_ms)
        acc.e2e.add_many(ok_response_ms)
        d = self.deadline_ms
        if on_time is None:
            on_time = (sum(1 for x in ok_node_ms if x <= d),
                       sum(1 for x in ok_response_ms if x <= d))
        arrivals = sum(counts.values())
        acc.blocked.add_counts(arrivals, int(counts.get("blocked", 0)))
        acc.late.add_counts(arrivals, arrivals - on_time[0])
        acc.in_deadline += on_time[0]
        acc.in_deadline_e2e += on_time[1]
        for node, k in ok_by_node.items():
            if k:
                acc.by_node[node] = acc.by_node.get(node, 0) + k
        for node, (k, achieved, nominal) in (service or {}).items():
            if k:
                s = self._service.setdefault(node, [0.0, 0.0, 0.0])
                s[0] += k
                s[1] += achieved
                s[2] += nominal

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {c: a.metrics().to_dict() for c, a in self.classes.items()}
        services = {node: NodeService(int(k), achieved / k, nominal / k)
                    for node, (k, achieved, nominal) in sorted(self._service.items())}
        out["nodes"] = {k: asdict(v) | {"ratio": v.ratio} for k, v in services.items()}
        return out


def summary_table(summary: Mapping[str, Any]) -> str:
    """The per-class table printed at the end of a run."""
    m = summary["measured"]
    lines = [
        f"{'class':5} {'count':>6} {'ok':>6} {'W (node) ms':>20} {'W e2e ms':>20} "
        f"{'blocked':>8} {'timeout':>8} {'lost':>6} {'outage':>7}",
    ]
    for cls in ("hp", "lp"):
        c = m[cls]
        w = f"{c['W']:.3f} ± {c['W_ci95']:.3f}"
        e = f"{c['W_e2e']:.3f} ± {c['W_e2e_ci95']:.3f}"
        lines.append(
            f"{cls:5} {c['count']:6d} {c['ok']:6d} {w:>20} {e:>20} {c['blocking']:8.4f} "
            f"{c['timeout_prob']:8.4f} {c['lost_prob']:6.4f} {c['outage']:7.4f}")
    for node, s in m.get("nodes", {}).items():
        lines.append(f"node {node}: served {s['served']}, mean service "
                     f"{s['achieved_service_ms']:.4f} ms achieved vs {s['nominal_service_ms']:.4f}"
                     f" nominal (x{s['ratio']:.4f})")
    return "\n".join(lines)
