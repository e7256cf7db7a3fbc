"""Sinks that turn the engine's row tuples into the shared trace CSV and a summary.

`TraceCsvSink` writes exactly the bytes `fogsdn.core.trace.TraceWriter` would, but a
block of rows at a time, as columns: at millions of rows formatting is most of the
simulator's cost, so numpy lays the plain rows out (`fogsdn.sim.trace_text`) and `%`,
one per row, writes only the others (docs/simulator.md, "How fast, how big"). The
network's share (`fogsdn.core.latency`) is added here to the node's sojourn to give
response_ms; a response over the timeout becomes a `timeout` row.
"""

from __future__ import annotations

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
from fogsdn.sim.rows import (
    BLOCKED,
    CLASSES,
    OK,
    OUTCOME_NAMES,
    ROW_FLOATS,
    ROW_INTS,
    TIMEOUT,
    Row,
    node_names,
    row_columns,
)
from fogsdn.sim.trace_text import LIMIT, MARK, Bools, Floats, Ints, PlainLines, join_lines

NETWORK_STREAM = 100  # spawn key of the network's draws (fogsdn.core.streams uses 0-7)
_EOL = "\r\n"  # csv.writer's default, which TraceWriter uses
_F = "%.6f"
# columns: request_id, client, cls, size, t_send, t_done, node, outcome, response_ms,
# node_ms, wait_ms, service_ms, nominal_ms, error, hosts, wasted_ms, ports
HEADER = ",".join(COLUMNS) + _EOL
# the last column, `ports` (a live connection's client port), is empty here
_NO_PORTS = "," + _EOL
# rows tallied into the accumulator at a time (a flush brings FLUSH_ROWS)
TALLY_ROWS = 1024
# rows turned into text at a time: a multiple of TALLY_ROWS, small enough for the cache
BLOCK_ROWS = 2048
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
    here per batch so the accumulator is not called once per row.

    A batch is handled as columns (numpy): the plain rows (answered or blocked, without
    note, hosts or network timeout) are laid out as text by `fogsdn.sim.trace_text`, the
    rest formatted one `%` per row, in their places; the tallies are counted, not looped."""

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
        # bytes go to the text file's buffer (newline="": nothing to translate), in its
        # encoding; the text layer is never written, so nothing waits in it
        self._out: IO[bytes] | None = self._fh.buffer if self._fh is not None else None  # type: ignore[assignment]
        self._enc = self._fh.encoding if self._fh is not None else "utf-8"
        if self._out is not None:
            self._out.write(HEADER.encode(self._enc))
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
        self._net_fixed = np.array([net.fixed_ms(c, n) if net else 0.0
                                    for c in self.clients for n in self.nodes])
        self._net_paths = [net.paths[(c, n)] for c in self.clients
                           for n in self.nodes] if net and net.random else []
        self._net_scale = scenario.time_scale
        # a policy that chooses paths: each request's own (by client index and seq)
        self._chosen = paths
        self._no_net = net is None and paths is None  # response_ms = node_ms
        # its own stream: the network's draws never shift the engine's
        self._net_rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence(seed, spawn_key=(NETWORK_STREAM,))))
        # one format per (client, class, node) and outcome, constant fields baked in:
        # the rows left to Python
        self._fmt: list[tuple[str, str, str, str, str]] = []
        for client in self.clients:
            for cls in self.classes:
                for node in self.nodes:
                    head = f"{client}-%07d,{client},{cls},{_F},{_F},{_F},{node},"
                    self._fmt.append((
                        head + f"ok,{_F},{_F},{_F},{_F},{_F},%s" + _NO_PORTS,
                        head + "blocked,0.000000,,,,,%s" + _NO_PORTS,
                        head + f"timeout,,,,,{_F},%s" + _NO_PORTS,
                        head + f"lost,,,,,{_F},%s" + _NO_PORTS,
                        head + "lost,,,,,,%s" + _NO_PORTS,
                    ))
        # the plain rows' constant pieces, as words (fogsdn.sim.trace_text): a line is
        # "<client>-" seq ",<client>,<class>," size, t_send, t_done, "<node>,ok," and five
        # times, ",,,\r\n" (each time's words end in its comma); a blocked row ends at
        # its node's piece. Only where the names are plain ASCII in the file's encoding
        names = (*self.clients, *self.nodes)
        probe = "".join(names) + HEADER
        self._words = (all(n.isascii() and n.isprintable() for n in names)
                       and probe.encode(self._enc) == probe.encode("ascii"))
        if self._words:
            self._plain = PlainLines(
                [f"{client}-" for client in self.clients],
                [f",{client},{cls}," for client in self.clients for cls in self.classes],
                [f"{node},ok," for node in self.nodes]
                + [f"{node},blocked,0.000000,,,,,,,,{_EOL}" for node in self.nodes],
                ",,," + _EOL)

    def __call__(self, rows: list[Row]) -> None:
        # a block at a time: its columns and words stay in the CPU's cache
        for start in range(0, len(rows), BLOCK_ROWS):
            self._block(rows[start:start + BLOCK_ROWS] if len(rows) > BLOCK_ROWS else rows)

    def _block(self, rows: list[Row]) -> None:
        n = len(rows)
        cols = row_columns(rows)
        t_done, size, t_send, svc, nominal = cols[ROW_FLOATS]
        outcome, seq, c, cls, k = cols[ROW_INTS].view(np.int64)
        ok = outcome == OK
        node_ms = t_done - t_send
        resp = self._response(rows, ok, c, k, node_ms)
        late = ok & (resp > self.timeout_ms)  # the client gave up (the node still served it)
        final = np.where(late, TIMEOUT, outcome)
        if self._out is not None:
            blocked = outcome == BLOCKED
            plain = (ok & ~late) | blocked
            if self._words and plain.any():
                plain &= np.fromiter(map(len, rows), np.intp, n) == 10  # no note, no hosts
                plain &= seq < LIMIT
                # t_done is t_send + response_ms for an answered row; a negative wait is 0;
                # each distinct time once (response_ms is node_ms without a network,
                # nominal mostly the service time)
                times = [size, t_send, np.where(ok, t_send + resp, t_done), node_ms,
                         np.maximum(node_ms - svc, 0.0), svc]
                tail = [3, 3, 4, 5, 5]
                if resp is not node_ms:
                    tail[0] = len(times)
                    times.append(resp)
                if not np.array_equal(nominal, svc, equal_nan=True):
                    tail[4] = len(times)
                    times.append(nominal)
                buf, words, exact = self._plain.words(
                    c, seq, c * len(self.classes) + cls,
                    np.where(blocked, k + len(self.nodes), k), np.stack(times), [0, 1, 2], tail,
                    blocked)
                plain &= exact
                other = np.flatnonzero(~plain)
                words[other] = 0
                words[other, 0] = MARK
                enc = self._enc
                self._out.write(b"".join(join_lines(
                    buf, {i: self._line(rows[i], x).encode(enc)
                          for i, x in zip(other.tolist(), resp[other].tolist(), strict=True)})))
            else:
                self._out.write("".join(self._line(r, x) for r, x in zip(
                    rows, resp.tolist(), strict=True)).encode(self._enc))
        for name, m in zip(OUTCOME_NAMES, np.bincount(final, minlength=4).tolist(), strict=True):
            self.counts[name] += m
        self.rows += n
        if self.accumulator is not None:
            self._tally(final, cls, k, t_send, node_ms, resp, svc, nominal)

    def _response(self, rows: list[Row], ok: Bools, c: Ints, k: Ints, node_ms: Floats) -> Floats:
        """Each answered row's response_ms: its node time plus the network's share (a
        path's draws in row order, from the sink's own stream)."""
        if self._no_net:
            return node_ms
        nn = len(self.nodes)
        chosen, paths = self._chosen, self._net_paths
        if chosen is None and not paths:
            return node_ms + self._net_fixed[c * nn + k]
        extra = np.zeros(len(rows))
        idx = np.flatnonzero(ok)
        if chosen is not None:
            extra[idx] = [chosen[rows[i][3], rows[i][2]].delay_ms for i in idx.tolist()]
        else:
            rng, scale = self._net_rng, self._net_scale
            extra[idx] = [paths[rows[i][3] * nn + rows[i][7]].sample_ms(rng, scale)
                          for i in idx.tolist()]
        return node_ms + extra

    def _line(self, r: Row, resp: float) -> str:
        """One row's line by Python's `%` (a row with a note, hosts or a network timeout,
        or any row where the names are not plain ASCII); `resp` its response_ms if answered."""
        t_done, outcome, seq, c, cls, size, t_send, k = r[:8]
        f = self._fmt[(c * len(self.classes) + cls) * len(self.nodes) + k]
        # the error column, then hosts and wasted_ms (a policy with stages: SITA, TAGS)
        note = ",," if len(r) == 10 else r[10] + _hosts_columns(r)
        if outcome == OK:
            if resp > self.timeout_ms:  # the client gave up (the node still served it)
                return f[2] % (seq, size, t_send, t_send + self.timeout_ms, r[9],
                               f"network: response {resp:.6f}" + _hosts_columns(r))
            node_ms = t_done - t_send
            wait = node_ms - r[8]
            if wait < 0.0:
                wait = 0.0
            return f[0] % (seq, size, t_send, t_send + resp, resp, node_ms, wait, r[8], r[9],
                           note)
        if outcome == BLOCKED:
            return f[1] % (seq, size, t_send, t_done, note)
        if outcome == TIMEOUT:
            return f[2] % (seq, size, t_send, t_done, r[9], note)
        if r[9] == r[9]:
            return f[3] % (seq, size, t_send, t_done, r[9], note)
        return f[4] % (seq, size, t_send, t_done, note)

    def _tally(self, final: Ints, cls: Ints, k: Ints, t_send: Floats, node_ms: Floats,
               resp: Floats, svc: Floats, nominal: Floats) -> None:
        """The accumulator's share of a batch, TALLY_ROWS rows at a time (its share
        intervals need enough chunks): the rows sent after warm-up, in row order."""
        acc = self.accumulator
        assert acc is not None
        n, nn, ncls = len(final), len(self.nodes), len(self.classes)
        parts = -(-n // TALLY_ROWS)
        part = np.arange(n) // TALLY_ROWS
        kept = t_send >= self.warmup_ms
        answered = kept & (final == OK)
        group = part * ncls + cls
        counts = np.bincount((group * 4 + final)[kept],
                             minlength=parts * ncls * 4).reshape(parts, ncls, 4).tolist()
        by_node = np.bincount((group * nn + k)[answered],
                              minlength=parts * ncls * nn).reshape(parts, ncls, nn)
        served = by_node.sum(axis=1).tolist()
        by_node_l = by_node.tolist()
        d = acc.deadline_ms
        on_time = np.bincount(group[answered & (node_ms <= d)],
                              minlength=parts * ncls).reshape(parts, ncls).tolist()
        on_time_e2e = on_time if resp is node_ms else np.bincount(
            group[answered & (resp <= d)], minlength=parts * ncls).reshape(parts, ncls).tolist()
        svc_s, nom_s = _running_sums(part * nn + k, answered, np.stack((svc, nominal)),
                                     parts * nn)
        cuts = np.arange(TALLY_ROWS, n, TALLY_ROWS)
        ok_ms: list[list[list[float]]] = []  # by class, then part: the answered rows' times
        e2e_ms: list[list[list[float]]] = []
        for ci in range(ncls):
            sel = np.flatnonzero(answered & (cls == ci))
            bounds = [0, *np.searchsorted(sel, cuts).tolist(), len(sel)]
            for times, into in ((node_ms, ok_ms), (resp, e2e_ms)):
                if into is e2e_ms and resp is node_ms:  # no network: the same times
                    into.append(ok_ms[-1])
                    continue
                xs = times[sel].tolist()
                into.append([xs[bounds[p]:bounds[p + 1]] for p in range(parts)])
        for p in range(parts):
            for ci, cname in enumerate(self.classes):
                acc.add_aggregate(
                    cname,
                    dict(zip(OUTCOME_NAMES, counts[p][ci], strict=True)),
                    ok_ms[ci][p],
                    e2e_ms[ci][p],
                    dict(zip(self.nodes, by_node_l[p][ci], strict=True)),
                    {self.nodes[j]: (served[p][j], svc_s[p * nn + j], nom_s[p * nn + j])
                     for j in range(nn)} if ci == 0 else None,
                    on_time=(on_time[p][ci], on_time_e2e[p][ci]),
                )


def _running_sums(key: Ints, where: Bools, xs: Floats, size: int) -> list[list[float]]:
    """Per row of xs and per key (0..size-1), the sum of the row's values where `where`,
    added one at a time in row order from 0.0 as a `+=` loop would (np.cumsum is that
    loop), so the summary's service means stay what they were."""
    out = [[0.0] * size for _ in xs]
    keys = key[where]
    if not len(keys):
        return out
    order = np.argsort(keys, kind="stable")
    keys, vals = keys[order], xs[:, where][:, order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    for key_, a, b in zip(keys[first].tolist(), first.tolist(),
                          [*first[1:].tolist(), len(keys)], strict=True):
        for row, total in zip(out, np.cumsum(vals[:, a:b], axis=1)[:, -1].tolist(), strict=True):
            row[key_] = total
    return out


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
