"""Which switch ports carry connections lately, and what a path choice adds to network power (pure).

Seed 002a trades response time against network power per connection path; a path's cost
depends on what else is awake, priced as `fogsdn.models.power_model.switch_power_w` does. The
traffic term is left out: at fog loads it is hundredths of a watt (docs/power.md). Ports
are named by the neighbour they lead to, as `fogsdn.sim.power.PowerAccount` names them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fogsdn.core.scenario import SwitchPower
from fogsdn.models.power_model import switch_power_w

Hop = tuple[str, str, str]  # (switch, neighbour a packet comes from, neighbour it goes to)


@dataclass(frozen=True)
class PathOption:
    """One candidate connection path between a client and a serving node."""

    switches: tuple[str, ...]  # from the client's switch to the node's
    hops: tuple[Hop, ...]  # each switch with the two ports the path uses there
    delay_ms: float  # the network's share of a request on it (core.latency.PathTiming.fixed_ms)
    wake_w: float = 0.0  # estimated network watts choosing it adds (PortActivity.wake_w)


@dataclass(frozen=True)
class PathMenu:
    """What a policy chooses a path from: the options (shortest by delay first) and the
    network's estimated power now."""

    options: tuple[PathOption, ...]
    network_w: float


def path_hops(path: Sequence[str], switches: Mapping[str, int]) -> tuple[Hop, ...]:
    """The hops of a host-to-host node path (client, switches..., node)."""
    return tuple((path[i], path[i - 1], path[i + 1]) for i in range(1, len(path) - 1)
                 if path[i] in switches)


class PortActivity:
    """Each switch port's last use (model ms); a port is awake for `hold_ms` after it."""

    def __init__(self, power: SwitchPower, ports: Mapping[str, int], hold_ms: float) -> None:
        self.power = power
        self.ports = dict(ports)  # switch -> how many ports it has
        self.hold_ms = hold_ms
        self.last: dict[str, dict[str, float]] = {s: {} for s in ports}
        # waking a sleeping switch (to its chassis and idle ports); waking one idle port
        self.chassis_w = {s: 0.0 if power.sleep_w is None else
                          power.idle_w + power.port_idle_w * n - power.sleep_w
                          for s, n in ports.items()}
        self.port_w = power.port_w - power.port_idle_w

    def awake(self, switch: str, t_ms: float) -> int:
        return sum(1 for t in self.last[switch].values() if t_ms - t < self.hold_ms)

    def network_w(self, t_ms: float) -> float:
        """Every switch's estimated power now."""
        return sum(switch_power_w(self.power, self.awake(s, t_ms), n, 0.0)
                   for s, n in self.ports.items())

    def _share(self, last: float | None, t_ms: float) -> float:
        """The share of a hold period by which a use now extends what `last` kept awake."""
        if last is None or self.hold_ms <= 0:
            return 1.0
        return min(1.0, (t_ms - last) / self.hold_ms)

    def wake_w(self, hops: Sequence[Hop], t_ms: float) -> float:
        """The watts using these hops now adds, averaged over one hold period: each
        switch and port it keeps awake, times the share of the hold by which it extends
        that (a whole hold for what sleeps now, nothing for what was used this instant)."""
        extra = 0.0
        for switch, a, b in hops:
            last = self.last[switch]
            extra += self.chassis_w[switch] * self._share(max(last.values(), default=None), t_ms)
            extra += self.port_w * (self._share(last.get(a), t_ms) + self._share(last.get(b), t_ms))
        return extra

    def use(self, hops: Sequence[Hop], t_ms: float) -> None:
        for switch, a, b in hops:
            self.last[switch][a] = self.last[switch][b] = t_ms


__all__ = ["Hop", "PathMenu", "PathOption", "PortActivity", "path_hops"]
