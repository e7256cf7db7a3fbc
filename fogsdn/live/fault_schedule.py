"""A live run's fault schedule: the steps of `fogsdn.core.faults` applied at their model
instants from the churn replay loop (the main thread, which starts processes in hosts),
each recorded with when it was applied and what it cost.

A scheduled kill is announced to the supervisor first, so the death is the fault's, not
a crash: the run stays a measurement and exits 0.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

from fogsdn.core.faults import (
    SIMULATED_KINDS,
    ActionKind,
    FaultAction,
    FaultKind,
    FaultRecord,
    ServedRequest,
    fault_actions,
    fault_cost,
)
from fogsdn.core.processes import ours_alive
from fogsdn.core.topology import link_params
from fogsdn.core.trace import TraceRow
from fogsdn.live.live_network import EmulationError
from fogsdn.nodes.worker import control_request


class LiveFaults:
    """The schedule of one `QueueingRun`: `check()` before the load, `apply_due()` and
    `poll()` from the replay loop, `report()` for summary.json."""

    def __init__(self, run: Any) -> None:
        """`run`: the `fogsdn.live.queueing_run.QueueingRun` (not imported: it imports
        this module)."""
        self.run = run
        self.faults = run.sc.faults
        self.pending: list[FaultAction] = fault_actions(self.faults)
        self.records: list[FaultRecord] = [
            {"fault": i, "kind": f.kind.value, "node": f.node, "t_ms": f.t_ms,
             "steps": []} for i, f in enumerate(self.faults)]
        # fault index -> (when the worker was started again, its readiness check)
        self.coming_back: dict[int, tuple[float, Callable[[], bool]]] = {}

    def check(self) -> None:
        """Refuse, before anything starts, a schedule this network cannot apply."""
        live = self.run.live
        if self.faults and live.cluster is not None:
            raise EmulationError("faults: a run over several servers takes no fault "
                                 "schedule yet (a crash there is its wrapper's SIGTERM, "
                                 "not a SIGKILL)")
        for i, f in enumerate(self.faults):
            if f.kind is FaultKind.LOSS_BURST and f.node is not None:
                sw = live.graph.nodes[f.node]["switch"]
                if not link_params(live.graph, f.node, sw).shaped:
                    raise EmulationError(
                        f"faults.{i}: loss_burst on {f.node}'s link needs a link element; "
                        "give the link a delay, jitter or loss (topology) so it has one")

    def next_due_ms(self) -> float:
        """The next step's model instant (inf: none left)."""
        return self.pending[0].t_ms if self.pending else math.inf

    def apply_due(self, model_now_ms: float) -> None:
        while self.pending and self.pending[0].t_ms <= model_now_ms:
            step = self.pending.pop(0)
            rec = self.records[step.fault]
            t_call = self.run.supervisor.model_now()
            try:
                what = self._apply(step, rec)
            except (OSError, EmulationError, ValueError, KeyError) as err:
                what = f"failed: {err.__class__.__name__}: {err}"
                rec["error"] = what
            rec["steps"].append({"step": what, "t_applied_ms": round(t_call, 3)})
            print(f"[run] fault {self.faults[step.fault].label()}: {what} (model "
                  f"t={t_call:.1f} ms)", flush=True)

    def _apply(self, step: FaultAction, rec: FaultRecord) -> str:
        live, run = self.run.live, self.run
        node = step.node or ""
        if step.kind is ActionKind.LINK:
            live.set_host_link(node, up=step.up)
            return f"{node}'s link {'up' if step.up else 'down'}"
        if step.kind is ActionKind.LOSS:
            sw = live.graph.nodes[node]["switch"]
            spec = link_params(live.graph, node, sw)
            loss = step.loss if step.loss > 0 else spec.loss
            live.update_link(live.host_link(node), spec.model_copy(update={"loss": loss}))
            return f"{node}'s link loss {loss:g}"
        if step.kind is ActionKind.KILL_WORKER:
            self._kill(f"worker {node}", rec)
            return f"worker {node} killed"
        if step.kind is ActionKind.START_WORKER:
            run._start_worker(run.sc.node(node))
            sock = live.sock_dir / f"{node}.sock"

            def serves() -> bool:
                try:
                    control_request(sock, "stats", timeout=0.2)
                except (OSError, ValueError):
                    return False
                return True

            self.coming_back[step.fault] = (time.monotonic(), serves)
            return f"worker {node} started again"
        self._kill("controller", rec)
        return "controller killed"

    def _kill(self, label: str, rec: FaultRecord) -> None:
        sup = self.run.supervisor
        pid, start = sup.record.pids[label]
        if not ours_alive(pid, start):
            raise EmulationError(f"{label} is not running")
        sup.expect_death(label, rec)  # first: the watcher must not see a crash
        os.kill(pid, signal.SIGKILL)

    def applied(self) -> list[FaultRecord]:
        """The faults begun so far (the view's timeline); `cut_ofn` shows as churn."""
        return [r for r in self.records if r["steps"]]

    def poll(self) -> None:
        """Note when a worker started again answers (its outage ends)."""
        for i, (t0, serves) in list(self.coming_back.items()):
            if serves():
                del self.coming_back[i]
                self.records[i]["back_after_start_ms"] = round((time.monotonic() - t0) * 1e3, 1)

    def report(self, rows: Sequence[TraceRow], run_end_ms: float) -> list[FaultRecord]:
        """Each fault with its steps and its cost (fogsdn.core.faults.fault_cost)."""
        timeout = self.run.sc.timeout_ms
        ms_real = self.run.sc.time_scale
        served = [ServedRequest(r.cls, r.t_send,
                                r.t_done if math.isfinite(r.t_done) else r.t_send + timeout,
                                r.node, str(r.outcome)) for r in rows]
        out: list[FaultRecord] = []
        for f, rec in zip(self.faults, self.records, strict=True):
            measured_end: float | None = None
            if "outage_ms" in rec:  # the controller: until it was back
                rec["outage_model_ms"] = round(rec["outage_ms"] / ms_real, 3)
                measured_end = f.t_ms + rec["outage_model_ms"]
            elif f.kind is FaultKind.KILL_CONTROLLER:
                rec.setdefault("note", "the controller was not back before the run ended")
                measured_end = run_end_ms
            if "back_after_start_ms" in rec:  # a worker started again: until it answered
                measured_end = f.end_ms + rec["back_after_start_ms"] / ms_real
            out.append({**rec, "cost": fault_cost(f, served, run_end_ms, measured_end),
                        "simulated": f.kind in SIMULATED_KINDS})
        return out
