"""What every seed's claims table shares (pure): a metric's mean and 95 % interval over
replications, three-way outcomes and their verdicts, the deciding choice of a
one-switch ablation, and the presets' switch arithmetic. Seed 003's table
(`fogsdn.city.claims`) and seed 002a's (`fogsdn.measure.seed002a_claims`) both build on it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypeVar

Outcome = Literal["holds", "partly", "fails"]
Verdict = Literal["reproduced", "partly", "not"]
VERDICT: dict[Outcome, Verdict] = {"holds": "reproduced", "partly": "partly", "fails": "not"}

# two-sided 95 % Student t quantiles by degrees of freedom (1..30), normal beyond
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)

C = TypeVar("C")  # a presets' frozen dataclass of switches


@dataclass(frozen=True)
class Stat:
    """A metric over replications: mean and its 95 % interval (lo = hi = mean for n=1)."""

    mean: float
    lo: float
    hi: float
    n: int


def interval(values: Sequence[float]) -> Stat:
    """Mean and Student-t 95 % interval of the finite `values` (NaN if none)."""
    xs = [v for v in values if math.isfinite(v)]
    if not xs:
        return Stat(math.nan, math.nan, math.nan, 0)
    m = statistics.fmean(xs)
    if len(xs) == 1:
        return Stat(m, m, m, 1)
    t = _T95[len(xs) - 2] if len(xs) - 1 <= len(_T95) else 1.96
    half = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return Stat(m, m - half, m + half, len(xs))


def share(flags: Sequence[bool]) -> Outcome:
    """All true: holds; some: partly; none: fails."""
    if flags and all(flags):
        return "holds"
    return "partly" if any(flags) else "fails"


def deciding_choice(seed: Outcome, ours: Outcome, flipped: Mapping[str, Outcome]) -> str | None:
    """None when both presets agree; else the switches whose single flip (from ours
    toward the seed's) gives the seed preset's outcome; failing that, those that change
    ours at all; failing that, the switches act only together."""
    if seed == ours:
        return None
    exact = [s for s, o in flipped.items() if o == seed]
    if exact:
        return ", ".join(exact)
    moved = [s for s, o in flipped.items() if o != ours]
    if moved:
        return ", ".join(moved) + " (each moves it, none alone to the seed's outcome)"
    return "no single switch (only their combination)"


def fmt(stat: Mapping[str, float | int]) -> str:
    """A stat as 'mean [lo, hi]', all three with the decimals that give the mean three
    significant digits."""
    m, lo, hi = (float(stat[k]) for k in ("mean", "lo", "hi"))
    if not math.isfinite(m):
        return "n/a"
    places = 2 if m == 0 else min(6, max(0, 2 - math.floor(math.log10(abs(m)))))
    return f"{m:.{places}f}" if lo == hi else f"{m:.{places}f} [{lo:.{places}f}, {hi:.{places}f}]"


def differing(a: Any, b: Any) -> list[str]:
    """The switches (dataclass fields) whose values differ between `a` and `b`, in
    declaration order."""
    return [f.name for f in fields(a) if getattr(a, f.name) != getattr(b, f.name)]


def ablation(base: C, target: C) -> dict[str, C]:
    """For every switch that differs: `base` with that one switch set as in `target`."""
    return {s: replace(base, **{s: getattr(target, s)})  # type: ignore[type-var]
            for s in differing(base, target)}


__all__ = ["VERDICT", "Outcome", "Stat", "Verdict", "ablation", "deciding_choice", "differing",
           "fmt", "interval", "share"]
