"""The simulator's side of the fault schedule: what the simulated faults cost, from its
rows, in the live run's report form (fogsdn.core.faults), so the two engines' `faults`
blocks read alike. Kinds the model lacks are listed, marked `simulated: false`."""

from __future__ import annotations

import math

from fogsdn.core.faults import SIMULATED_KINDS, FaultRecord, ServedRequest, fault_cost
from fogsdn.core.scenario import Scenario
from fogsdn.sim.rows import CLASSES, OUTCOME_NAMES, Row, node_names


class FaultRows:
    """A row sink keeping what the cost count reads of each row (a run with faults only)."""

    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        self.names = node_names(scenario)
        self.served: list[ServedRequest] = []

    def __call__(self, rows: list[Row]) -> None:
        timeout = self.sc.timeout_ms
        for r in rows:  # (t_done, outcome, seq, client, cls, size, t_send, node, ...)
            t_done, t_send = float(r[0]), float(r[6])
            end = t_done if math.isfinite(t_done) else t_send + timeout
            node = self.names[r[7]] if isinstance(r[7], int) and r[7] >= 0 else ""
            self.served.append(ServedRequest(str(CLASSES[r[4]]), t_send, end, node,
                                             OUTCOME_NAMES[r[1]]))

    def report(self, run_end_ms: float) -> list[FaultRecord]:
        out: list[FaultRecord] = []
        for i, f in enumerate(self.sc.faults):
            simulated = f.kind in SIMULATED_KINDS
            rec: FaultRecord = {"fault": i, "kind": f.kind.value, "node": f.node,
                                "t_ms": f.t_ms, "simulated": simulated}
            if simulated:
                rec["cost"] = fault_cost(f, self.served, run_end_ms)
            else:
                rec["note"] = "live only: the simulator's model has no such fault"
            out.append(rec)
        return out
