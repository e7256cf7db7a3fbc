"""Sinks that turn the engine's row tuples into the shared trace CSV and a summary.

`TraceCsvSink` writes exactly the bytes `fogsdn.trace.TraceWriter` would write for
the same rows (same columns, `%.6f` floats, empty NaN, CRLF line ends), but formats a
whole row with one `%` per outcome instead of a dataclass and the csv module per
row: at millions of rows that is most of the difference between a fast and a slow
simulator. Simulation has no network, so response_ms = node_ms.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from analysis.metrics import MeasuredAccumulator
from fogsdn.scenario import Scenario
from fogsdn.trace import COLUMNS
from sim.engine import (
    BLOCKED,
    CLASSES,
    OK,
    OUTCOME_NAMES,
    TIMEOUT,
    Row,
    client_names,
    node_names,
)

_EOL = "\r\n"  # csv.writer's default, which TraceWriter uses
_F = "%.6f"
# columns: request_id, client, cls, size, t_send, t_done, node, outcome, response_ms,
# node_ms, wait_ms, service_ms, nominal_ms, error
HEADER = ",".join(COLUMNS) + _EOL
# rows tallied into the accumulator at a time (a flush brings FLUSH_ROWS)
TALLY_ROWS = 1024


class TraceCsvSink:
    """Row sink for `sim.engine.simulate`: CSV to `path` (None: no file), outcome counts,
    and an optional streaming summary (`analysis.metrics.MeasuredAccumulator`), tallied
    here per batch so the accumulator is not called once per row."""

    def __init__(
        self,
        path: Path | str | None,
        scenario: Scenario,
        accumulator: MeasuredAccumulator | None = None,
    ) -> None:
        self._fh: IO[str] | None = open(path, "w", newline="") if path is not None else None  # noqa: SIM115
        if self._fh is not None:
            self._fh.write(HEADER)
        self.clients = client_names(scenario)
        self.nodes = node_names(scenario)
        self.classes = tuple(str(c) for c in CLASSES)
        self.accumulator = accumulator
        self.warmup_ms = accumulator.warmup_ms if accumulator is not None else 0.0
        self.counts = dict.fromkeys(OUTCOME_NAMES, 0)
        self.rows = 0
        # one format per (client, class, node) and outcome, constant fields baked in
        self._fmt: list[tuple[str, str, str, str, str]] = []
        for client in self.clients:
            for cls in self.classes:
                for node in self.nodes:
                    head = f"{client}-%07d,{client},{cls},{_F},{_F},{_F},{node},"
                    self._fmt.append((
                        head + f"ok,{_F},{_F},{_F},{_F},{_F},%s{_EOL}",
                        head + f"blocked,0.000000,,,,,%s{_EOL}",
                        head + f"timeout,,,,,{_F},%s{_EOL}",
                        head + f"lost,,,,,{_F},%s{_EOL}",
                        head + f"lost,,,,,,%s{_EOL}",
                    ))

    def __call__(self, rows: list[Row]) -> None:
        # tally in slices: the accumulator's share intervals need enough chunks
        for start in range(0, len(rows), TALLY_ROWS):
            self._slice(rows[start:start + TALLY_ROWS] if len(rows) > TALLY_ROWS else rows)

    def _slice(self, rows: list[Row]) -> None:
        nn, ncls = len(self.nodes), len(self.classes)
        fmts = self._fmt
        warm = self.warmup_ms
        tally = self.accumulator is not None
        counts = [0] * (ncls * 4)  # after warm-up, by class and outcome
        all_counts = [0, 0, 0, 0]
        ok_ms: list[list[float]] = [[] for _ in range(ncls)]
        by_node = [0] * (ncls * nn)
        svc_n, svc_s, nom_s = [0] * nn, [0.0] * nn, [0.0] * nn
        lines: list[str] = []
        push = lines.append
        for r in rows:
            t_done, outcome, seq, c, cls, size, t_send, k = r[:8]
            f = fmts[(c * ncls + cls) * nn + k]
            note = r[10] if len(r) > 10 else ""
            all_counts[outcome] += 1
            if outcome == OK:
                node_ms = t_done - t_send
                svc = r[8]
                wait = node_ms - svc
                if wait < 0.0:
                    wait = 0.0
                push(f[0] % (seq, size, t_send, t_done, node_ms, node_ms, wait, svc, r[9], note))
                if tally and t_send >= warm:
                    counts[cls * 4] += 1
                    ok_ms[cls].append(node_ms)
                    by_node[cls * nn + k] += 1
                    svc_n[k] += 1
                    svc_s[k] += svc
                    nom_s[k] += r[9]
                continue
            if outcome == BLOCKED:
                push(f[1] % (seq, size, t_send, t_done, note))
            elif outcome == TIMEOUT:
                push(f[2] % (seq, size, t_send, t_done, r[9], note))
            elif r[9] == r[9]:
                push(f[3] % (seq, size, t_send, t_done, r[9], note))
            else:
                push(f[4] % (seq, size, t_send, t_done, note))
            if tally and t_send >= warm:
                counts[cls * 4 + outcome] += 1
        if self._fh is not None:
            self._fh.write("".join(lines))
        for i, name in enumerate(OUTCOME_NAMES):
            self.counts[name] += all_counts[i]
        self.rows += len(rows)
        if self.accumulator is not None:
            for ci, cname in enumerate(self.classes):
                # simulation has no network: end-to-end response = node sojourn
                self.accumulator.add_aggregate(
                    cname,
                    {o: counts[ci * 4 + i] for i, o in enumerate(OUTCOME_NAMES)},
                    ok_ms[ci],
                    ok_ms[ci],
                    {self.nodes[k]: by_node[ci * nn + k] for k in range(nn)},
                    {self.nodes[k]: (svc_n[k], svc_s[k], nom_s[k]) for k in range(nn)}
                    if ci == 0 else None,
                )

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TraceCsvSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AvailabilityCsv:
    """availability.csv: `t,node,state` per transition, the initial states at t = 0."""

    def __init__(self, path: Path | str) -> None:
        self._fh: IO[str] = open(path, "w", newline="")  # noqa: SIM115
        self._fh.write("t,node,state\n")
        self.rows = 0

    def __call__(self, t: float, node: str, available: bool) -> None:
        self._fh.write(f"{t:.6f},{node},{'available' if available else 'unavailable'}\n")
        self.rows += 1

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> AvailabilityCsv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def collect(rows_out: list[Row]) -> Callable[[list[Row]], None]:
    """A sink that keeps every row in memory (tests and small runs only)."""
    return rows_out.extend


__all__ = ["HEADER", "AvailabilityCsv", "TraceCsvSink", "collect"]
