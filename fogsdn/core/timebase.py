"""Model time against real time: the one place that converts between them.

A scenario runs in model time; a live run stretches it so that one model millisecond
lasts `time_scale` real milliseconds (the simulator needs no stretch, and the exact model
none at all). Every engine, process and report converts through a `Timebase`, so that a
conversion is written once and its unit is in its name: `real_s(model_ms)`,
`model_ms(real_s)`. An `epoch` (time.monotonic() at the load's start, NaN before it)
gives the model time of a real instant. Pure: no I/O (docs/architecture.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class TimebaseError(ValueError):
    """A time scale that cannot stretch time (zero, negative, or not finite)."""


@dataclass(frozen=True)
class Timebase:
    """`time_scale` real ms per model ms; `epoch`, the real (monotonic) s at model time 0."""

    time_scale: float
    epoch: float = math.nan

    def __post_init__(self) -> None:
        scale = self.time_scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) \
                or not math.isfinite(scale) or scale <= 0:
            raise TimebaseError(f"time_scale must be a finite number > 0, got {scale!r}")

    # model -> real
    def real_ms(self, model_ms: float) -> float:
        """Real ms that `model_ms` of model time lasts (a link's delay, a timeout)."""
        return model_ms * self.time_scale

    def real_s(self, model_ms: float) -> float:
        """Real seconds that `model_ms` of model time lasts (a sleep, a socket timeout)."""
        return model_ms * self.time_scale / 1000.0

    @property
    def real_s_per_model_ms(self) -> float:
        return self.time_scale / 1000.0

    # real -> model
    def model_ms(self, real_s: float) -> float:
        """Model ms that `real_s` real seconds stand for (a live duration, a period)."""
        return real_s * 1000.0 / self.time_scale

    def model_ms_of_real_ms(self, real_ms: float) -> float:
        """Model ms that `real_ms` real milliseconds stand for (a measured round trip)."""
        return real_ms / self.time_scale

    def model_rate_per_ms(self, per_real_s: float) -> float:
        """A rate per real second as a rate per model ms."""
        return per_real_s * self.time_scale / 1000.0

    def real_rate_per_s(self, per_model_ms: float) -> float:
        """A rate per model ms as a rate per real second (what the network carries)."""
        return per_model_ms * 1000.0 / self.time_scale

    # instants
    def started(self, epoch: float) -> Timebase:
        """This timebase with the load's start fixed at `epoch` (monotonic seconds)."""
        return Timebase(self.time_scale, epoch)

    def model_ms_at(self, now: float) -> float:
        """Model ms since the epoch at real (monotonic) instant `now`; NaN before a start."""
        return (now - self.epoch) * 1000.0 / self.time_scale
