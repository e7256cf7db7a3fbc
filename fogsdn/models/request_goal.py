"""Seed 002a's goal as the paper states it, per request (pure): the request's measured
response time plus the network energy that request itself costs, in one unit.

The full paper (Fröhlich/Gelenbe et al., as cited in the seed) measured its switches
(Intel NUCs running Open vSwitch) at about 20 W idle and 30 W at peak, their power rising
with traffic; `PAPER_SWITCH_POWER` is that model in `fogsdn.models.power_model`'s terms.
Two figures here are OUR ASSUMPTIONS, not the paper's: that 30 W is reached at the full
load of one 1 Gb/s port (`capacity_mbps`), and the unit conversion of the goal,
`MS_PER_MJ` (one millisecond of response time weighs as much as one millijoule of
network energy). docs/seed002a-claims.md states both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fogsdn.core.scenario import SwitchPower
from fogsdn.models.network_power import PathOption

# the paper's measured switch: 20 W idle, 30 W at peak, linear in carried traffic, no
# sleep state, no per-port term; "peak = one 1 Gb/s port at full load" is our mapping
PAPER_SWITCH_POWER = SwitchPower(idle_w=20.0, peak_w=30.0, port_w=0.0, capacity_mbps=1000.0,
                                 port_hold_s=0.0, port_idle_w=0.0, sleep_w=None)
MS_PER_MJ = 1.0  # our assumption: the goal's price of a millijoule, in ms of response time


class GoalError(ValueError):
    """A goal parameter that cannot be used; the message names it."""


def traffic_mj(spec: SwitchPower, ports: int, nbytes: float) -> float:
    """Millijoules `nbytes` cost a switch of `ports` ports under `spec`'s traffic term: the
    watts between idle (plus ports) and peak, spread over `capacity_mbps`, for their bits."""
    if not (math.isfinite(nbytes) and nbytes >= 0):
        raise GoalError(f"bytes: must be finite and >= 0, got {nbytes!r}")
    span_w = max(0.0, spec.peak_w - spec.idle_w - spec.port_w * ports)
    return span_w * nbytes * 8.0 / (spec.capacity_mbps * 1e6) * 1000.0


@dataclass(frozen=True)
class RequestGoal:
    """G_r = T_r * time_scale + ms_per_mj * E_r: T_r the request's response time (model
    ms, so times time_scale gives real ms, as the paper measured), E_r its own network
    energy in mJ: its bytes' traffic term on every switch it crosses, plus what it keeps
    awake (a path's `wake_w` for one `hold_s`; 0 where switches neither sleep nor have
    port terms, as in the paper's model). Reward 1 / G_r."""

    time_scale: float
    mj_per_switch: Mapping[str, float] = field(default_factory=dict)
    hold_s: float = 0.0
    ms_per_mj: float = MS_PER_MJ

    def __post_init__(self) -> None:
        if not (self.time_scale > 0 and self.hold_s >= 0 and self.ms_per_mj >= 0):
            raise GoalError("goal: time_scale must be > 0, hold_s and ms_per_mj >= 0")

    def energy_mj(self, option: PathOption) -> float:
        """E_r: the network energy one request on this path costs."""
        moved = math.fsum(self.mj_per_switch.get(s, 0.0) for s in option.switches)
        return moved + option.wake_w * self.hold_s * 1000.0

    def value(self, response_ms: float, energy_mj: float) -> float:
        """G_r for a response time in model ms and an energy in mJ."""
        return response_ms * self.time_scale + self.ms_per_mj * energy_mj

    def to_params(self) -> dict[str, float | str]:
        """As a policy's params (scalars only: `mj_per_switch` as "s1=0.07;s2=0.07")."""
        per = ";".join(f"{k}={v:.12g}" for k, v in self.mj_per_switch.items())
        return {"time_scale": self.time_scale, "mj_per_switch": per,
                "hold_s": self.hold_s, "ms_per_mj": self.ms_per_mj}

    @staticmethod
    def from_params(params: Mapping[str, Any]) -> RequestGoal:
        """What `to_params` wrote (GoalError naming the field when it does not fit)."""
        try:
            text = str(params.get("mj_per_switch", ""))
            pairs = [p.split("=") for p in text.split(";") if p.strip()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError(f"mj_per_switch: want 'switch=mJ;...', got {text!r}")
            per = {k.strip(): float(v) for k, v in pairs}
            return RequestGoal(float(params.get("time_scale", 1.0)), per,
                               float(params.get("hold_s", 0.0)),
                               float(params.get("ms_per_mj", MS_PER_MJ)))
        except (TypeError, ValueError) as err:
            raise GoalError(f"policy.params (goal): {err}") from None


def request_goal(spec: SwitchPower, ports: Mapping[str, int], time_scale: float,
                 nbytes: float, ms_per_mj: float = MS_PER_MJ) -> RequestGoal:
    """The goal for a network of these switches (ports each) under `spec`, requests of
    `nbytes` each."""
    return RequestGoal(time_scale, {s: traffic_mj(spec, n, nbytes) for s, n in ports.items()},
                       spec.port_hold_s, ms_per_mj)


__all__ = ["MS_PER_MJ", "PAPER_SWITCH_POWER", "GoalError", "RequestGoal", "request_goal",
           "traffic_mj"]
