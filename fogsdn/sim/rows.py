"""The simulator's row: what `fogsdn.sim.engine.simulate` hands its sink, and what the sinks
(trace and summary writers, power, learning environments) read. No engine needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fogsdn.core.scenario import Scenario, TaskClass

OK, BLOCKED, TIMEOUT, LOST = 0, 1, 2, 3
OUTCOME_NAMES: tuple[str, ...] = ("ok", "blocked", "timeout", "lost")
CLASSES: tuple[TaskClass, ...] = (TaskClass.HP, TaskClass.LP)

# A row is a plain tuple: (t_done, outcome, seq, client, cls, size, t_send, node,
# service, nominal[, note[, hosts, wasted]]). client/cls/node are indices into
# client_names() (fogsdn.core.workload), CLASSES and node_names(); seq counts per client;
# service is the achieved service time at the final node (NaN if never served), nominal
# what was asked of it; the optional note (no commas) explains blocked/lost/timeout/
# handoff rows; hosts and wasted come with a policy that has stages (fogsdn.sim.engine).
Row = tuple[Any, ...]
RowSink = Callable[[list[Row]], None]
AvailabilitySink = Callable[[float, str, bool], None]


def node_names(scenario: Scenario) -> tuple[str, ...]:
    """The scenario's node names, in the order a row's `node` index counts them."""
    return tuple(n.name for n in scenario.nodes)
