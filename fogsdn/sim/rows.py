"""The simulator's row: what `fogsdn.sim.engine.simulate` hands its sink, and what the sinks
(trace and summary writers, power, learning environments) read. No engine needed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import starmap
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

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


# a row's first ten fields as 8-byte numbers, for the sinks that take a batch as columns
_PACK = struct.Struct("<dqqqqddqdd").pack
_FIRST10 = itemgetter(slice(10))
ROW_FLOATS = [0, 5, 6, 8, 9]  # t_done, size, t_send, service, nominal
ROW_INTS = [1, 2, 3, 4, 7]  # outcome, seq, client, class, node


def row_columns(rows: list[Row]) -> npt.NDArray[np.float64]:
    """The rows' first ten fields as columns (10 x rows; those in ROW_INTS hold int64
    bits: `.view(np.int64)`), packed as bytes, which reads each field once where numpy's
    own conversion reads it twice."""
    try:
        raw = b"".join(starmap(_PACK, map(_FIRST10, rows)))
    except struct.error:  # an integer field that is not an int: numpy converts it
        a = np.array([r[:10] for r in rows], dtype=np.float64)
        out = a.T.copy()
        out[ROW_INTS] = a.T[ROW_INTS].astype(np.int64).view(np.float64)
        return out
    return np.frombuffer(raw, dtype=np.float64).reshape(len(rows), 10).T.copy()


def node_names(scenario: Scenario) -> tuple[str, ...]:
    """The scenario's node names, in the order a row's `node` index counts them."""
    return tuple(n.name for n in scenario.nodes)
