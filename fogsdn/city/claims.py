"""Seed 003's findings for Figs. 4-7 as checkable claims (pure).

Each `Claim` is one finding the paper states, with a predicate over the aggregated
results (mean and 95 % interval per selector and ratio) that says "holds", "partly" or
"fails"; predicates compare means, and "low"/"high" are the smallest/largest ratio run.
`deciding_choice` names the switch whose single flip moves our outcome to the seed's;
`decided_by` names, for a claim a preset does not reproduce, the switches whose single
flip (to the other preset's value) changes that preset's verdict, or says none does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

# the generic part, shared with seed 002a's table (re-exported: callers import it from here)
from fogsdn.measure.claim_stats import (
    VERDICT,
    Outcome,
    Stat,
    Verdict,
    deciding_choice,
    fmt,
    interval,
    share,
)


class Results:
    """Aggregated results: a `Stat` per (selector, ratio, metric)."""

    def __init__(self, stats: Mapping[tuple[str, float, str], Stat]) -> None:
        self.stats = dict(stats)
        self.ratios = sorted({r for _s, r, _m in self.stats})
        self.selectors = sorted({s for s, _r, _m in self.stats})

    @staticmethod
    def from_rows(rows: Iterable[Mapping[str, Any]], metrics: Sequence[str]) -> Results:
        """Rows as the simulator gives them (one per selector, ratio and replication)."""
        groups: dict[tuple[str, float, str], list[float]] = {}
        for r in rows:
            for m in metrics:
                groups.setdefault((str(r["selector"]), float(r["ratio"]), m), []).append(
                    float(r[m]))
        return Results({k: interval(v) for k, v in groups.items()})

    def get(self, selector: str, ratio: float, metric: str) -> Stat:
        return self.stats[(selector, ratio, metric)]

    def mean(self, selector: str, ratio: float, metric: str) -> float:
        return self.get(selector, ratio, metric).mean

    @property
    def low(self) -> float:
        return self.ratios[0]

    @property
    def high(self) -> float:
        return self.ratios[-1]


def _grows(res: Results, sel: str, metric: str) -> bool:
    return res.mean(sel, res.high, metric) > res.mean(sel, res.low, metric)


def _grows_all(metric: str, selectors: Sequence[str]) -> Callable[[Results], Outcome]:
    return lambda res: share([_grows(res, s, metric) for s in selectors])


def _above(metric: str, upper: Sequence[str], lower: Sequence[str]
           ) -> Callable[[Results], Outcome]:
    """Each of `upper` above each of `lower` on `metric`, at every ratio."""
    return lambda res: share([res.mean(a, x, metric) > res.mean(b, x, metric)
                              for x in res.ratios for a in upper for b in lower])


def _most(res: Results, sel: str, ratio: float, metric: str, among: Sequence[str],
          least: bool = False) -> bool:
    mine = res.mean(sel, ratio, metric)
    others = [res.mean(o, ratio, metric) for o in among if o != sel]
    return all(mine < o for o in others) if least else all(mine > o for o in others)


@dataclass(frozen=True)
class Claim:
    id: str
    figure: str
    claim: str
    metric: str
    shows: tuple[str, ...]  # the selectors whose values the table reports
    at: Literal["low", "high", "both"]  # the ratios whose values the table reports
    predicate: Callable[[Results], Outcome]
    paper_value: str | None = None


ALL = ("optimal", "random", "vivaldi", "meridian")
NCS = ("vivaldi", "meridian")


def _linear(res: Results) -> Outcome:
    """Monotone growth and a straight-line fit (R^2 >= 0.95) for every selector: holds;
    growth from low to high for some or all without that: partly."""
    flags_lin, flags_grow = [], []
    for s in ALL:
        ys = [res.mean(s, r, "node_total") for r in res.ratios]
        flags_grow.append(ys[-1] > ys[0])
        mono = all(b > a for a, b in zip(ys, ys[1:], strict=False))
        flags_lin.append(mono and _r2(res.ratios, ys) >= 0.95)
    if all(flags_lin):
        return "holds"
    return "partly" if any(flags_grow) else "fails"


def _r2(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 3:
        return 1.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    return 1.0 if syy == 0 else sxy * sxy / (sxx * syy)


CLAIMS: tuple[Claim, ...] = (
    Claim("4a-grow", "4a", "total messages per client grow with the client ratio",
          "client_messages", ALL, "both", _grows_all("client_messages", ALL)),
    Claim("4a-baseline-most", "4a", "the baseline sends the most messages per client",
          "client_messages", ALL, "both",
          lambda r: share([_most(r, "optimal", x, "client_messages", ALL) for x in r.ratios])),
    Claim("4a-meridian-scales", "4a",
          "Meridian sends more messages than Vivaldi and the baseline at low ratios, "
          "fewer at high ratios", "client_messages", ("optimal", "vivaldi", "meridian"),
          "both",
          lambda r: share([
              _most(r, "meridian", r.low, "client_messages", ("optimal", "vivaldi", "meridian")),
              _most(r, "meridian", r.high, "client_messages", ("optimal", "vivaldi", "meridian"),
                    least=True)])),
    Claim("4b-grow", "4b", "lost messages per client grow with the client ratio",
          "client_lost", ALL, "both", _grows_all("client_lost", ALL)),
    Claim("4b-vivaldi-baseline-lose", "4b",
          "Vivaldi and the baseline lose more messages than Meridian and random",
          "client_lost", ALL, "high",
          _above("client_lost", ("optimal", "vivaldi"), ("meridian", "random"))),
    Claim("4c-grow", "4c", "reconnections per client grow with the client ratio",
          "client_reconnections", ALL, "both", _grows_all("client_reconnections", ALL)),
    Claim("4c-meridian-least", "4c",
          "Meridian needs the fewest reconnections at high ratios",
          "client_reconnections", ALL, "high",
          lambda r: share([_most(r, "meridian", r.high, "client_reconnections", ALL,
                                 least=True)])),
    Claim("5-linear", "5", "messages per fog node grow linearly with the client ratio, "
          "for every selector", "node_total", ALL, "both", _linear),
    Claim("6a-baseline-100", "6a", "the baseline selects the optimal node 100 % of the time",
          "optimal_rate", ("optimal",), "both",
          lambda r: share([r.mean("optimal", x, "optimal_rate") >= 0.99 for x in r.ratios]),
          paper_value="100 %"),
    Claim("6a-others-under-10", "6a",
          "every other selector, random included, selects the optimal node < 10 % of the time",
          "optimal_rate", ("random", "vivaldi", "meridian"), "both",
          lambda r: share([r.mean(s, x, "optimal_rate") < 0.10
                           for s in ("random", "vivaldi", "meridian") for x in r.ratios]),
          paper_value="< 10 %"),
    Claim("6b-ncs-beat-random", "6b",
          "both NCS have a lower selection error than random, especially at high ratios",
          "selection_rmse_ms", ("random", "vivaldi", "meridian"), "both",
          lambda r: "holds" if all(r.mean(s, x, "selection_rmse_ms")
                                   < r.mean("random", x, "selection_rmse_ms")
                                   for s in NCS for x in r.ratios)
          else share([r.mean(s, r.high, "selection_rmse_ms")
                      < r.mean("random", r.high, "selection_rmse_ms") for s in NCS])),
    Claim("6b-vivaldi-beats-meridian", "6b",
          "Vivaldi has a lower selection error than Meridian", "selection_rmse_ms", NCS,
          "both", _above("selection_rmse_ms", ("meridian",), ("vivaldi",))),
    Claim("6c-random-most", "6c", "random has the most unique selections per step",
          "unique_per_step", ALL, "both",
          lambda r: share([_most(r, "random", x, "unique_per_step", ALL) for x in r.ratios])),
    Claim("6c-ncs-between", "6c",
          "Vivaldi's and Meridian's unique selections lie between the baseline's (fewest) "
          "and random's", "unique_per_step", ALL, "both",
          lambda r: share([r.mean("optimal", x, "unique_per_step")
                           < r.mean(s, x, "unique_per_step")
                           < r.mean("random", x, "unique_per_step")
                           for s in NCS for x in r.ratios])),
    Claim("6c-vivaldi-low-meridian-grows", "6c",
          "Vivaldi has more unique selections than Meridian at low ratios; Meridian's grow "
          "with the ratio", "unique_per_step", NCS, "both",
          lambda r: share([r.mean("vivaldi", r.low, "unique_per_step")
                           > r.mean("meridian", r.low, "unique_per_step"),
                           _grows(r, "meridian", "unique_per_step")])),
    Claim("7a-grow", "7a", "mean latency grows with the client ratio", "mean_latency_ms",
          ALL, "both", _grows_all("mean_latency_ms", ALL)),
    Claim("7a-random-best-low", "7a", "random has the lowest mean latency at low ratios",
          "mean_latency_ms", ALL, "low",
          lambda r: share([_most(r, "random", r.low, "mean_latency_ms", ALL, least=True)])),
    Claim("7a-meridian-best-high", "7a", "Meridian has the lowest mean latency at high ratios",
          "mean_latency_ms", ALL, "high",
          lambda r: share([_most(r, "meridian", r.high, "mean_latency_ms", ALL, least=True)])),
    Claim("7a-baseline-vivaldi-higher", "7a",
          "the baseline and Vivaldi have a higher mean latency than Meridian and random",
          "mean_latency_ms", ALL, "both",
          _above("mean_latency_ms", ("optimal", "vivaldi"), ("meridian", "random"))),
    Claim("7b-vivaldi-highest", "7b",
          "Vivaldi has the highest connection error, especially at high ratios",
          "connection_error_ms", ALL, "both",
          lambda r: "holds" if all(_most(r, "vivaldi", x, "connection_error_ms", ALL)
                                   for x in r.ratios)
          else share([_most(r, "vivaldi", r.high, "connection_error_ms", ALL)])),
    Claim("7b-others-converge", "7b",
          "the other selectors' connection errors differ at low ratios and converge at high",
          "connection_error_ms", ("optimal", "random", "meridian"), "both",
          lambda r: share([_spread(r, r.high) < _spread(r, r.low)])),
)


def _spread(res: Results, ratio: float) -> float:
    ys = [res.mean(s, ratio, "connection_error_ms") for s in ("optimal", "random", "meridian")]
    return max(ys) - min(ys)


def evaluate(claim: Claim, res: Results) -> Outcome:
    return claim.predicate(res)


def values(claim: Claim, res: Results) -> dict[str, dict[str, dict[str, float | int]]]:
    """The claim's metric per shown selector at its ratios: {selector: {ratio: stat}}."""
    ratios = {"low": [res.low], "high": [res.high], "both": [res.low, res.high]}[claim.at]
    return {s: {f"{x:g}": asdict(res.get(s, x, claim.metric)) for x in ratios}
            for s in claim.shows}


def deciding_switches(verdict: Verdict, flipped: Mapping[str, Verdict]) -> list[str]:
    """The switches whose single flip gives a verdict other than `verdict`."""
    return [s for s, v in flipped.items() if v != verdict]


def decided_by(verdict: Verdict, flipped: Mapping[str, Verdict],
               not_run: Sequence[str] = ()) -> str | None:
    """None for a reproduced claim; else each switch whose single flip changes the
    verdict, with the verdict it gives ('backhaul → partly'), or, when none does, that
    none of the switches tried decides it, naming them (and those `not_run`)."""
    if verdict == "reproduced":
        return None
    moved = deciding_switches(verdict, flipped)
    if moved:
        return ", ".join(f"{s} → {flipped[s]}" for s in moved)
    text = "none of the switches decides it (tried: " + (", ".join(flipped) or "none") + ")"
    return text + (f"; not run: {', '.join(not_run)}" if not_run else "")


__all__ = ["CLAIMS", "VERDICT", "Claim", "Outcome", "Results", "Stat", "Verdict",
           "decided_by", "deciding_choice", "deciding_switches", "evaluate", "fmt",
           "interval", "share", "values"]
