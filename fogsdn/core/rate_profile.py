"""A time-varying arrival rate: phases of given length, each scaling the base rates (pure).

Arrivals are a non-homogeneous Poisson process by time change, so the class, client and
size streams stay those of the stationary run and every engine draws the same instants
(docs/simulator.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


class ProfileError(ValueError):
    """A profile that cannot describe a rate; the message names the field."""


@dataclass(frozen=True)
class RateProfile:
    durations_ms: tuple[float, ...]
    factors: tuple[float, ...]
    repeat: bool = True

    def __post_init__(self) -> None:
        if not self.durations_ms or len(self.durations_ms) != len(self.factors):
            raise ProfileError("workload.profile.phases: one or more phases, each with "
                               "duration_ms and factor")
        for i, (d, f) in enumerate(zip(self.durations_ms, self.factors, strict=True)):
            if not (math.isfinite(d) and d > 0):
                raise ProfileError(f"workload.profile.phases[{i}].duration_ms must be > 0")
            if not (math.isfinite(f) and f >= 0):
                raise ProfileError(f"workload.profile.phases[{i}].factor must be >= 0")
        if not self.repeat and self.factors[-1] <= 0:
            raise ProfileError("workload.profile: without repeat the last phase lasts "
                               "forever, so its factor must be > 0")
        if self.repeat and sum(self.factors) <= 0:
            raise ProfileError("workload.profile: every factor is 0 (no arrivals ever)")

    @property
    def period_ms(self) -> float:
        return sum(self.durations_ms)

    @property
    def peak(self) -> float:
        return max(self.factors)

    def _starts(self) -> np.ndarray:
        return np.concatenate(([0.0], np.cumsum(self.durations_ms)))

    def phases_at(self, t_ms: np.ndarray) -> np.ndarray:
        """The phase (index into `factors`) that holds each model instant."""
        t = np.asarray(t_ms, dtype=float)
        if self.repeat:
            t = np.fmod(t, self.period_ms)
        i = np.searchsorted(self._starts(), t, side="right") - 1
        return np.clip(i, 0, len(self.factors) - 1)

    def phase_spans(self, until_ms: float) -> list[tuple[int, float, float]]:
        """(phase, start, end) of every phase interval that begins before `until_ms`."""
        out: list[tuple[int, float, float]] = []
        starts = self._starts()
        base = 0.0
        while base < until_ms:
            for i in range(len(self.factors)):
                lo = base + starts[i]
                hi = base + starts[i + 1] if (self.repeat or i + 1 < len(self.factors)) \
                    else math.inf
                if lo >= until_ms:
                    return out
                out.append((i, lo, min(hi, until_ms)))
            if not self.repeat:
                break
            base += self.period_ms
        return out

    def exposure_ms(self, start_ms: float, until_ms: float) -> list[float]:
        """Per phase, how much of [start, until) it holds (model ms)."""
        out = [0.0] * len(self.factors)
        for i, lo, hi in self.phase_spans(until_ms):
            out[i] += max(0.0, float(hi) - max(float(lo), start_ms))
        return out

    def warp(self, u: np.ndarray) -> np.ndarray:
        """Real instants t with Lambda(t) = u, for nondecreasing operational times u."""
        d = np.asarray(self.durations_ms, dtype=float)
        f = np.asarray(self.factors, dtype=float)
        starts = self._starts()
        cum = np.concatenate(([0.0], np.cumsum(d * f)))  # Lambda at each phase start
        u = np.asarray(u, dtype=float)
        if self.repeat:
            per = cum[-1]
            k = np.floor(u / per)
            r = u - k * per
            base = k * self.period_ms
        else:
            r, base = u, np.zeros_like(u)
        # the phase whose Lambda range holds r; a zero-factor phase holds none
        i = np.searchsorted(cum[1:], r, side="left")
        i = np.minimum(i, len(f) - 1)
        fi = f[i]
        within = np.where(fi > 0, (r - cum[i]) / np.where(fi > 0, fi, 1.0), 0.0)
        return base + starts[i] + within
