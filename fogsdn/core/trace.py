"""The trace contract: one row per request, every request exactly once.

Both engines write it (streamed, so an interrupted run keeps what it collected)
and `analysis` reads it. Times are model milliseconds from the run's epoch.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import IO


class Outcome(StrEnum):
    OK = "ok"
    BLOCKED = "blocked"
    TIMEOUT = "timeout"
    LOST = "lost"


REQUIRED_COLUMNS: tuple[str, ...] = (
    "request_id", "client", "cls", "size", "t_send", "t_done",
    "node", "outcome", "response_ms", "node_ms",
)


@dataclass
class TraceRow:
    request_id: str
    client: str
    cls: str
    size: float
    t_send: float
    t_done: float = math.nan
    node: str = ""
    outcome: Outcome = Outcome.TIMEOUT
    response_ms: float = math.nan  # end to end, as the client saw it
    node_ms: float = math.nan  # wait plus service at the serving node
    wait_ms: float = math.nan
    service_ms: float = math.nan  # achieved
    nominal_ms: float = math.nan  # size / mu, what the scenario asked for
    error: str = ""
    # size-based assignment (TAGS): every host the request visited ("h1>h2"), and the
    # model ms of service killed at hosts before the last
    hosts: str = ""
    wasted_ms: float = math.nan
    # live runs: the client's own TCP port of each connection ("p1>p2" across stages), by
    # which the controller's measurement of the same connection is found
    ports: str = ""


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TraceRow))
assert COLUMNS[: len(REQUIRED_COLUMNS)] == REQUIRED_COLUMNS
_FLOATS = {f.name for f in fields(TraceRow) if f.type in ("float", float)}


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6f}"
    return str(v)


class TraceWriter:
    """Streams rows to CSV, flushing every `flush_every` rows."""

    def __init__(self, path: Path | str, flush_every: int = 50) -> None:
        self._fh: IO[str] = open(path, "w", newline="")  # noqa: SIM115
        self._w = csv.writer(self._fh)
        self._w.writerow(COLUMNS)
        self._pending = 0
        self._flush_every = flush_every
        self.rows = 0

    def write(self, row: TraceRow) -> None:
        self._w.writerow([_fmt(v) for v in asdict(row).values()])
        self.rows += 1
        self._pending += 1
        if self._pending >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        self._fh.flush()
        self._pending = 0

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse(rec: dict[str, str]) -> TraceRow:
    kw: dict[str, object] = {}
    for name in COLUMNS:
        raw = rec.get(name, "")
        if name in _FLOATS:
            kw[name] = float(raw) if raw not in ("", None) else math.nan
        elif name == "outcome":
            kw[name] = Outcome(raw)
        else:
            kw[name] = raw or ""
    return TraceRow(**kw)  # type: ignore[arg-type]


def read_trace(path: Path | str) -> list[TraceRow]:
    return list(iter_trace(path))


def iter_trace(path: Path | str) -> Iterator[TraceRow]:
    """The rows of a trace file; ValueError naming the line (or the missing columns) for
    a file that is not one (an empty file has none)."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        head = reader.fieldnames
        if head is None:
            return
        missing = [c for c in REQUIRED_COLUMNS if c not in head]
        if missing:
            raise ValueError(f"not a trace: no column {', '.join(missing)}")
        for r in reader:
            try:
                yield _parse(r)
            except ValueError as err:
                raise ValueError(f"line {reader.line_num}: {err}") from None


def write_trace(path: Path | str, rows: Iterable[TraceRow]) -> int:
    with TraceWriter(path, flush_every=10_000) as w:
        for r in rows:
            w.write(r)
        return w.rows
