"""Sinks that turn the engine's row tuples into the shared trace CSV and a summary.

`TraceCsvSink` writes exactly the bytes `fogsdn.core.trace.TraceWriter` would, but formats
a whole row with one `%` per outcome: at millions of rows that is most of the
simulator's speed. The network's share (`fogsdn.core.latency`) is added here to the node's
sojourn to give response_ms; a response over the timeout becomes a `timeout` row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Self

import numpy as np

from fogsdn.core.latency import RequestNetwork
from fogsdn.core.scenario import Scenario
from fogsdn.core.trace import COLUMNS
from fogsdn.core.workload import client_names
from fogsdn.measure.metrics import MeasuredAccumulator
from fogsdn.models.network_power import PathOption
from fogsdn.sim.rows import BLOCKED, CLASSES, OK, OUTCOME_NAMES, TIMEOUT, Row, node_names

NETWORK_STREAM = 100  # spawn key of the network's draws (fogsdn.core.streams uses 0-7)
_EOL = "\r\n"  # csv.writer's default, which TraceWriter uses
_F = "%.6f"
_ZERO = "0.000000"
_ROUNDS_TO_ZERO = 4e-7  # below this (a negative wait is 0) %.6f writes _ZERO
# columns: request_id, client, cls, size, t_send, t_done, node, outcome, response_ms,
# node_ms, wait_ms, service_ms, nominal_ms, error, hosts, wasted_ms, ports
HEADER = ",".join(COLUMNS) + _EOL
# the last column, `ports` (a live connection's client port), is empty here
_NO_PORTS = "," + _EOL
# rows tallied into the accumulator at a time (a flush brings FLUSH_ROWS)
TALLY_ROWS = 1024


def _hosts_columns(r: Row) -> str:
    """The trace's hosts and wasted_ms columns of a row (empty without them)."""
    return f",{r[11]},{r[12]:.6f}" if len(r) > 12 else ",,"


class _FileSink:
    """A sink that owns its file: close it, or use it as a context manager."""

    _fh: IO[str] | None

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceCsvSink(_FileSink):
    """Row sink for `fogsdn.sim.engine.simulate`: CSV to `path` (None: no file), outcome counts,
    and an optional streaming summary (`fogsdn.measure.metrics.MeasuredAccumulator`), tallied
    here per batch so the accumulator is not called once per row."""

    def __init__(
        self,
        path: Path | str | None,
        scenario: Scenario,
        accumulator: MeasuredAccumulator | None = None,
        network: RequestNetwork | None = None,
        seed: int = 0,
        paths: Mapping[tuple[int, int], PathOption] | None = None,
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
        self.timeout_ms = scenario.timeout_ms
        # the network's share per (client, node), indexed like the formats below
        net = network if network is not None and not network.zero else None
        self._net_fixed = [net.fixed_ms(c, n) if net else 0.0
                           for c in self.clients for n in self.nodes]
        self._net_paths = [net.paths[(c, n)] for c in self.clients
                           for n in self.nodes] if net and net.random else []
        self._net_scale = scenario.time_scale
        # a policy that chooses paths: each request's own (by client index and seq)
        self._chosen = paths
        self._no_net = net is None and paths is None  # response_ms = node_ms: the fast path
        # its own stream: the network's draws never shift the engine's
        self._net_rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence(seed, spawn_key=(NETWORK_STREAM,))))
        # one format per (client, class, node) and outcome, constant fields baked in;
        # `_plain`: an answered row without error, hosts or wasted_ms (most rows)
        self._fmt: list[tuple[str, str, str, str, str]] = []
        self._plain: list[str] = []
        for client in self.clients:
            for cls in self.classes:
                for node in self.nodes:
                    head = f"{client}-%07d,{client},{cls},{_F},{_F},{_F},{node},"
                    self._plain.append(f"{client}-%07d,{client},{cls},%s,{_F},{_F},{node},"
                                       "ok,%s,%s,%s,%s,%s,,," + _NO_PORTS)
                    self._fmt.append((
                        head + f"ok,{_F},{_F},{_F},{_F},{_F},%s" + _NO_PORTS,
                        head + "blocked,0.000000,,,,,%s" + _NO_PORTS,
                        head + f"timeout,,,,,{_F},%s" + _NO_PORTS,
                        head + f"lost,,,,,{_F},%s" + _NO_PORTS,
                        head + "lost,,,,,,%s" + _NO_PORTS,
                    ))

    def __call__(self, rows: list[Row]) -> None:
        # tally in slices: the accumulator's share intervals need enough chunks
        for start in range(0, len(rows), TALLY_ROWS):
            self._slice(rows[start:start + TALLY_ROWS] if len(rows) > TALLY_ROWS else rows)

    def _slice(self, rows: list[Row]) -> None:
        nn, ncls = len(self.nodes), len(self.classes)
        fmts, plain = self._fmt, self._plain
        no_net = self._no_net
        # rows sent from here on are tallied (none without an accumulator)
        warm = self.warmup_ms if self.accumulator is not None else math.inf
        counts = [0] * (ncls * 4)  # after warm-up, by class and outcome (ok: len(ok_ms))
        all_counts = [0, 0, 0, 0]
        ok_ms: list[list[float]] = [[] for _ in range(ncls)]
        # without a network the response is the node's time: one list serves both
        e2e_ms: list[list[float]] = ok_ms if no_net else [[] for _ in range(ncls)]
        fixed, paths, rng, scale = self._net_fixed, self._net_paths, self._net_rng, self._net_scale
        chosen = self._chosen
        tmo = self.timeout_ms
        by_node = [0] * (ncls * nn)
        svc_s, nom_s = [0.0] * nn, [0.0] * nn
        lines: list[str] = []
        push = lines.append
        for r in rows:
            if no_net and len(r) == 10 and r[1] == OK:  # the fast path: most rows
                t_done, _, seq, c, cls, size, t_send, k, svc, nominal = r
                node_ms = t_done - t_send
                if node_ms <= tmo:
                    # formatting a float is most of a row's cost: each value once
                    # (response = node time; service = size where mu = 1, nominal
                    # mostly = service; wait often 0)
                    wait = node_ms - svc
                    size_txt, node_txt = _F % size, _F % node_ms
                    svc_txt = size_txt if svc == size else _F % svc
                    push(plain[(c * ncls + cls) * nn + k] % (
                        seq, size_txt, t_send, t_send + node_ms, node_txt, node_txt,
                        _ZERO if wait < _ROUNDS_TO_ZERO else _F % wait, svc_txt,
                        svc_txt if nominal == svc else _F % nominal))
                    if t_send >= warm:
                        ok_ms[cls].append(node_ms)
                        by_node[cls * nn + k] += 1
                        svc_s[k] += svc
                        nom_s[k] += nominal
                    continue
            t_done, outcome, seq, c, cls, size, t_send, k = r[:8]
            f = fmts[(c * ncls + cls) * nn + k]
            # the error column, then hosts and wasted_ms (a policy with stages: SITA,
            # TAGS), else empty; most rows have neither
            note = ",," if len(r) == 10 else r[10] + _hosts_columns(r)
            all_counts[outcome] += 1
            if outcome == OK:
                node_ms = t_done - t_send
                i = c * nn + k
                resp = node_ms + (chosen[c, seq].delay_ms if chosen is not None
                                  else paths[i].sample_ms(rng, scale) if paths else fixed[i])
                if resp > tmo:  # the client gave up (the node still served it)
                    all_counts[OK] -= 1
                    all_counts[TIMEOUT] += 1
                    push(f[2] % (seq, size, t_send, t_send + tmo, r[9],
                                 f"network: response {resp:.6f}" + _hosts_columns(r)))
                    if t_send >= warm:
                        counts[cls * 4 + TIMEOUT] += 1
                    continue
                svc = r[8]
                wait = node_ms - svc
                if wait < 0.0:
                    wait = 0.0
                push(f[0] % (seq, size, t_send, t_send + resp, resp, node_ms, wait, svc, r[9],
                             note))
                if t_send >= warm:
                    ok_ms[cls].append(node_ms)
                    if not no_net:
                        e2e_ms[cls].append(resp)
                    by_node[cls * nn + k] += 1
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
            if t_send >= warm:
                counts[cls * 4 + outcome] += 1
        if self._fh is not None:
            self._fh.write("".join(lines))
        all_counts[OK] += len(rows) - sum(all_counts)  # the fast path's rows
        for i, name in enumerate(OUTCOME_NAMES):
            self.counts[name] += all_counts[i]
        self.rows += len(rows)
        if self.accumulator is not None:
            svc_n = [sum(by_node[ci * nn + k] for ci in range(ncls)) for k in range(nn)]
            for ci, cname in enumerate(self.classes):
                counts[ci * 4 + OK] = len(ok_ms[ci])
                self.accumulator.add_aggregate(
                    cname,
                    {o: counts[ci * 4 + i] for i, o in enumerate(OUTCOME_NAMES)},
                    ok_ms[ci],
                    e2e_ms[ci],
                    {self.nodes[k]: by_node[ci * nn + k] for k in range(nn)},
                    {self.nodes[k]: (svc_n[k], svc_s[k], nom_s[k]) for k in range(nn)}
                    if ci == 0 else None,
                )


class AvailabilityCsv(_FileSink):
    """availability.csv: `t,node,state` per transition, the initial states at t = 0."""

    def __init__(self, path: Path | str) -> None:
        self._fh: IO[str] = open(path, "w", newline="")  # noqa: SIM115
        self._fh.write("t,node,state\n")
        self.rows = 0

    def __call__(self, t: float, node: str, available: bool) -> None:
        self._fh.write(f"{t:.6f},{node},{'available' if available else 'unavailable'}\n")
        self.rows += 1


__all__ = ["HEADER", "AvailabilityCsv", "TraceCsvSink"]
