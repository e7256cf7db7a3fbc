"""The live run's view source (issue 21): a thread that reads the running testbed four
times a second into the state the view serves, off the run's critical path
(docs/view.md, "Cost"); and the policy swap, checked, sent to the controller and
recorded as a new policy epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fogsdn.controller.learner_reports import CURVE_FILE
from fogsdn.controller.policy_swap import SWAPPED_POLICY_FILE, SwapError, checked_swap, swap_spec
from fogsdn.controller.registration import swap_policy
from fogsdn.core.local_rpc import unix_call
from fogsdn.core.scenario import Role, Scenario
from fogsdn.core.summary import json_float, json_int, json_object
from fogsdn.measure.comparison import comparison_block
from fogsdn.measure.policy_epochs import EpochLog
from fogsdn.models.power_model import server_count
from fogsdn.view.server import ViewServer, lower_priority
from fogsdn.view.state import (
    CURVE_ROWS,
    ClassRoutes,
    EpochTallies,
    NodeLive,
    RequestError,
    curve_points,
    event_lines,
    link_loads,
    parse_trace_lines,
    predicted_figures,
    run_timeline,
    split_complete,
    state_document,
    topology_document,
    utilisation,
)

TICK_S = 0.25
VIEW_NICE = 10  # the view's threads yield the CPU to the emulation's (issue 21: cost)
MARK_EVERY_S = 1.0  # a chart point per class each real second


@dataclass(frozen=True)
class ViewConfig:
    """`--view [PORT]` (0: any free port) and `--view-host ADDR`."""

    port: int = 8080
    host: str = "127.0.0.1"


def view_config(args: argparse.Namespace) -> ViewConfig | None:
    """`--view [PORT]` and `--view-host` as the run's view settings (None: no view)."""
    return None if args.view is None else ViewConfig(port=args.view, host=args.view_host)


def write_token(out: Path) -> str:
    """A fresh token, kept in the run folder as `api_token` (mode 0600)."""
    token = secrets.token_urlsafe(24)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "api_token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def read_client_counts(out: Path, clients: Iterable[str],
                       counts: dict[str, tuple[int, int]]) -> None:
    """Each client's (sent, answered) from the traffic engines' progress files
    (`load-<tag>.progress`, JSON {client: [sent, answered]}, written whole) into `counts`;
    a file not written yet, or unreadable, keeps the last reading, so totals never go back."""
    wanted = set(clients)
    for f in sorted(out.glob("load-*.progress")):
        try:
            got = json.loads(f.read_text())
            for name, (sent, answered) in got.items():
                if name in wanted:
                    counts[name] = (int(sent), int(answered))
        except (OSError, ValueError, TypeError, AttributeError):
            pass


class _TraceTail:
    """A file read as it grows (a client's trace, with its CSV header; an event log)."""

    def __init__(self, path: Path, header: bool = True) -> None:
        self.path = path
        self.offset = 0
        self.rest = ""
        self.header: list[str] | None = None
        self.has_header = header

    def read(self) -> list[str]:
        try:
            with open(self.path) as fh:
                fh.seek(self.offset)
                chunk = fh.read()
                self.offset = fh.tell()
        except OSError:
            return []
        lines, self.rest = split_complete(self.rest + chunk)
        if self.has_header and self.header is None and lines:
            self.header = lines.pop(0).split(",")
        return lines


def start_live_view(run: Any, config: ViewConfig) -> tuple[LiveView, ViewServer]:
    """Token written, reader and server started, address and token printed."""
    from fogsdn.live.live_network import EmulationError

    token = write_token(run.out)
    view = LiveView(run, token)
    try:
        server = ViewServer(view, config.port, config.host, nice=VIEW_NICE)
    except OSError as err:
        raise EmulationError(f"--view: cannot serve on {config.host}:{config.port}: "
                             f"{err.strerror or err}") from None
    view.start()
    server.start()
    print(f"[view] {server.url}  (writes: Authorization: Bearer {token}; also in "
          f"{run.out / 'api_token'})", flush=True)
    return view, server


class LiveView:
    """`ViewSource` over a running `fogsdn.live.queueing_run.QueueingRun` (`run`)."""

    def __init__(self, run: Any, token: str) -> None:
        self.run = run
        self.sc: Scenario = run.sc
        self.token = token
        self.epochs = EpochLog()
        self.epochs.start(self.sc.policy.name, self.sc.policy.model_dump(exclude_none=True), 0.0)
        self._lock = threading.Lock()
        self._swap_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tallies = EpochTallies(self.sc.warmup_ms)
        self._tallies.open(0.0)
        self._predictions: list[dict[str, object] | None] = []  # per epoch, once computed
        self._noted: set[str] = set()
        self._tails: dict[str, _TraceTail] = {}
        self._events = _TraceTail(run.out / "controller-events.jsonl", header=False)
        self._curve_tail = _TraceTail(run.out / CURVE_FILE)  # an online learner's, as it grows
        self._curve: list[dict[str, str | int | float]] = []
        self._routes = ClassRoutes()
        self._client_counts: dict[str, tuple[int, int]] = {}
        self._busy: dict[str, tuple[float, float]] = {}
        self._counts: dict[str, tuple[float, int]] = {}
        self._nodes: list[NodeLive] = []
        self._loads: dict[str, float] = {}
        self._topology = topology_document(run.live.graph)
        self._next_mark = 0.0

    # -- time -------------------------------------------------------------------------
    def _model_ms(self) -> float:
        epoch = self.run.epoch
        if not math.isfinite(epoch):
            return 0.0
        return max(0.0, self.sc.timebase.started(epoch).model_ms_at(time.monotonic()))

    # -- the reading thread --------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="view-reader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.epochs.close(min(self._model_ms(), self.sc.duration_ms))

    def _loop(self) -> None:
        lower_priority(VIEW_NICE)
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as err:  # the view never takes the run down
                note = f"view: {err.__class__.__name__}: {err}"
                if note not in self._noted:  # each problem noted once in summary.json
                    self._noted.add(note)
                    self.run.live.notes.append(note)
                self._stop.wait(1.0)
            self._stop.wait(TICK_S)

    def _predict(self) -> None:
        """The exact prediction for each epoch's policy (once, in this thread)."""
        from fogsdn.exact.model_params import exact_prediction
        from fogsdn.measure.policy_epochs import epoch_scenario

        while len(self._predictions) < len(self.epochs.epochs):
            spec = self.epochs.epochs[len(self._predictions)].spec
            try:
                pred: dict[str, object] | None = exact_prediction(
                    epoch_scenario(self.run.sc, spec)).to_dict()
            except Exception:  # OutsideModel, or a model that cannot be built
                pred = None
            with self._lock:
                self._predictions.append(pred)

    def _tick(self) -> None:
        self._predict()
        for name in list(self.run.clients):
            tail = self._tails.setdefault(name, _TraceTail(self.run.out / f"trace-{name}.csv"))
            lines = tail.read()
            if tail.header is not None and lines:
                records = parse_trace_lines(lines, tail.header)
                with self._lock:
                    for r in records:
                        self._tallies.add(r.cls, r.t_send, r.outcome, r.node_ms)
        read_client_counts(self.run.out, list(self.run.clients), self._client_counts)
        rows = self._curve_tail.read()
        if rows and self._curve_tail.header is not None:
            points = curve_points(rows, self._curve_tail.header)
            with self._lock:
                self._curve = (self._curve + points)[-CURVE_ROWS:]
        events = event_lines(self._events.read())
        if events:
            with self._lock:
                for ev in events:
                    self._routes.apply(ev)
        nodes, per_node = [], {}
        power = self._power_by_node()
        ofn_state = dict(self.run.progress.ofn_state)
        for n in self.sc.nodes:
            in_system, util, load = None, None, None
            try:
                st = unix_call(self.run.live.sock_dir / f"{n.name}.sock", {"cmd": "stats"},
                               timeout=0.3)
                in_system = json_int(st["in_system"])
                now = (json_float(st["t"]), json_float(st["busy_s"]))
                util = utilisation(self._busy.get(n.name), now, server_count(n))
                self._busy[n.name] = now
                done = json_int(st.get("admitted", 0))
                prev = self._counts.get(n.name)
                if prev is not None and now[0] > prev[0]:
                    load = (done - prev[1]) / self.sc.timebase.model_ms(now[0] - prev[0])
                self._counts[n.name] = (now[0], done)
            except (OSError, ValueError, KeyError, TypeError):
                pass
            up = ofn_state.get(n.name, True) if n.role is Role.OFN else True
            nodes.append(NodeLive(n.name, n.role.value, up, n.capacity, in_system, util,
                                  power.get(n.name), load))
            per_node[n.name] = load or 0.0
        t = self._model_ms()
        with self._lock:
            self._nodes = nodes
            self._loads = link_loads(self.run.live.graph, per_node)
            if time.monotonic() >= self._next_mark and math.isfinite(self.run.epoch):
                self._next_mark = time.monotonic() + MARK_EVERY_S
                self._tallies.mark(t)

    def _power_by_node(self) -> dict[str, float]:
        """Each element's latest power reading."""
        meter = self.run.power
        samples = meter.samples[-4 * (len(self.sc.nodes) + 4):] if meter is not None else []
        return {s.element: float(s.power_w) for s in samples}

    # -- ViewSource ---------------------------------------------------------------------
    def _epochs_with_predictions(self) -> list[dict[str, object]]:
        eps = self.epochs.to_list()
        for i, e in enumerate(eps):
            e["predicted"] = self._predictions[i] if i < len(self._predictions) else None
        return eps

    def state(self, t_ms: float | None = None) -> dict[str, object]:
        run = self.run
        with self._lock:
            epochs = self._epochs_with_predictions()
            total = run.power.last_total_w if run.power is not None else None
            # OFN state as the run applied it this instant (not at the last tick)
            ofn_state = dict(run.progress.ofn_state)
            faults = getattr(run, "faults", None)  # a run with a fault schedule
            nodes = [replace(n, up=ofn_state.get(n.name, n.up)) for n in self._nodes]
            return state_document(
                mode="live", t_model_ms=self._model_ms(), duration_ms=self.sc.duration_ms,
                running=math.isfinite(run.epoch) and not run.stop.is_set(),
                nodes=nodes, tallies=self._tallies.current(),
                prediction=epochs[-1]["predicted"], histories=self._tallies.histories(),
                links=dict(self._loads), policy=self.sc.policy.name,
                timeline=run_timeline(list(run.availability), epochs,
                                      faults.applied() if faults is not None else []),
                epochs=epochs, sent=sum(s for s, _ in self._client_counts.values()),
                answered=sum(a for _, a in self._client_counts.values()),
                total_power_w=total, routes=self._routes.document(),
                agent=self._routes.agent, learning_curve=list(self._curve))

    def topology(self) -> Mapping[str, object]:
        return self._topology

    def summary(self) -> dict[str, object]:
        """The running comparison: overall and per policy epoch so far."""
        with self._lock:
            epochs = self._epochs_with_predictions()
            for e, tallies in zip(epochs, self._tallies.tallies, strict=True):
                measured = e["measured"] = {c: t.figures() for c, t in tallies.items()}
                full = e["predicted"]
                e["predicted"] = predicted_figures(full)
                if full:  # W and blocking, each interval against the exact value
                    exact = json_object(full, "predicted")
                    e["comparison"] = {c: {k: v for k, v in comparison_block(
                        measured[c], json_object(exact[c], f"predicted.{c}")).items()
                        if k in ("W", "blocking")} for c in measured}
            return {"t_model_ms": self._model_ms(), "policy": self.sc.policy.name,
                    "policy_epochs": epochs}

    def swap_policy(self, request: dict[str, object]) -> dict[str, object]:
        """Check, send to the controller, record: one swap at a time; nothing changes
        unless the controller answered ok."""
        with self._swap_lock:
            try:
                spec = swap_spec(self.sc.policy, request, Path.cwd())
                sc, built = checked_swap(self.sc, spec)
            except SwapError as err:
                raise RequestError(400, str(err)) from None
            if not math.isfinite(self.run.epoch):
                raise RequestError(409, "the run has not started its load yet; try again")
            try:
                reply = swap_policy(self.run.live.sock_dir / "controller.sock",
                                    sc.policy.model_dump(exclude_none=True))
            except (OSError, ValueError) as err:
                raise RequestError(502, f"controller: {err.__class__.__name__}: {err}") from None
            if not reply.get("ok"):
                raise RequestError(400 if "error" in reply else 502,
                                   f"controller: {reply.get('error', reply)}")
            keep = self.run.live.sock_dir / SWAPPED_POLICY_FILE  # for a restarted controller
            tmp = keep.with_suffix(".tmp")
            tmp.write_text(sc.policy.model_dump_json(exclude_none=True))
            tmp.replace(keep)
            t = self._model_ms()
            with self._lock:
                self.sc = sc
                self.epochs.start(built.name, sc.policy.model_dump(exclude_none=True), t)
                self._tallies.open(self.epochs.epochs[-1].from_ms)
            return {"ok": True, "policy": built.name, "from_ms": t,
                    "installed": bool(reply.get("installed"))}

    def policy_epochs(self) -> list[dict[str, object]]:
        return self.epochs.to_list()
