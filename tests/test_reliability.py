"""Crash drills: what a hostile user did to the testbed, each kept as a test.

Emulation drills (root, Open vSwitch) kill the runner, the controller and workers
mid-run; process drills send oversized and trickled requests to a real worker process
on loopback; input drills feed absurd scenario files. docs/reliability.md lists them
with their measured results.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ROOT,
    assert_clean,
    footprint,
    free_ports,
    scenario_dict,
    start_runner,
    wait_for_run_to_die,
    wait_for_worker,
)

from fogsdn.core.local_rpc import recv_line
from fogsdn.core.scenario import ScenarioError, TaskClass, load_scenario, parse_scenario
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.core.workload import max_task_size
from fogsdn.live.cleanup import RunRecord, record_of_runner
from fogsdn.nodes.protocol import TaskRequest

RUN_TESTBED = str(ROOT / "scripts" / "run_testbed.py")
emulation = pytest.mark.emulation


def _record_of(runner_pid: int) -> RunRecord:
    rec = record_of_runner(runner_pid)
    assert rec is not None, f"no run record with clients for runner {runner_pid}"
    return rec


def _finish(p: subprocess.Popen[bytes], timeout: float = 120) -> str:
    out, _ = p.communicate(timeout=timeout)
    return out.decode(errors="replace")


def _assert_each_request_once(out: Path, summary: dict[str, Any]) -> list[Any]:
    rows = read_trace(out / "trace.csv")
    assert len(rows) == summary["requests"] > 0
    assert len({r.request_id for r in rows}) == len(rows)
    return rows


# -- the runner ---------------------------------------------------------------------

@emulation
def test_runner_sigkilled_five_times_leaves_nothing_after_the_next_run(
        tmp_path: Path) -> None:
    """Children die with the runner (parent-death signal); the next run removes the
    bridges and records the dead runs left, and says so; their traces still merge."""
    before = footprint()
    killed: list[tuple[RunRecord, Path]] = []
    for k in range(5):
        p, out = start_runner(tmp_path / f"k{k}", f"kill{k}", 0.5)
        rec = _record_of(p.pid)
        p.kill()
        text = _finish(p, 10)
        wait_for_run_to_die(rec)
        if killed:  # each run first removed the bridge the previous killed run left
            assert f"bridge {killed[-1][0].tag}s1" in text, text[-2000:]
        killed.append((rec, out))
    left = footprint()
    assert left["bridges"] - before["bridges"] == {f"{killed[-1][0].tag}s1"}
    # the next normal run removes what the dead runs left, and says so
    sc = parse_scenario(scenario_dict(name="after", time_scale=20.0, duration_ms=150,
                                      churn={"eta": 0, "xi": 0}))
    f = tmp_path / "after.yaml"
    f.write_text(sc.to_yaml())
    r = subprocess.run([sys.executable, RUN_TESTBED, "--scenario", str(f), "--out",
                        str(tmp_path / "after"), "--quiet"], capture_output=True, text=True,
                       timeout=180, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "removed what dead runs left behind" in r.stderr
    assert f"bridge {killed[-1][0].tag}s1" in r.stderr
    assert_clean(before)
    # a killed run's per-client traces are still merged by compare.py, marked crashed
    _, out = killed[0]
    c = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(out)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert c.returncode == 0, c.stdout + c.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crashed"] is True and summary["predicted"] is None
    assert "not compared" in c.stdout
    _assert_each_request_once(out, summary)


# instants (s after the runner's start) across its life: the interpreter's start, the
# imports and set-up, the controller and network build, the workers and clients, the load
STOP_INSTANTS_S = [0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5,
                   4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]


def _as_a_terminal_starts_it() -> None:
    """`preexec_fn`: SIGINT and SIGTERM at their default actions, as a shell in a terminal
    starts a command. A parent that ignores SIGINT (a non-interactive shell's background
    job, `nohup`, and so pytest under one: the fresh-machine run) passes the ignore on
    across exec, and the kernel discards a SIGINT that arrives before the script's first
    line installs its handler: no process can act on a signal it never receives
    (docs/reliability.md, "A stop at any instant")."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_handler_installed(pid: int) -> bool:
    """Whether `catch_stop_signals` has run in process `pid`: it catches SIGTERM after
    SIGINT, and nothing before it catches SIGTERM (Python's start-up catches only SIGINT),
    so the SIGTERM bit of /proc/PID/status's SigCgt marks the script's first statement
    done. A process that has gone reads as installed (its exit code then decides)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    caught = int(next(line.split()[1] for line in status.splitlines()
                      if line.startswith("SigCgt:")), 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


@contextmanager
def _cpu_hogs(n: int = 2) -> Iterator[None]:
    """`n` busy processes beside the run (a loaded machine's slower imports and build)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for h in hogs:  # ours, by PID
            h.kill()
            h.wait()


@emulation
def test_a_stop_signal_at_any_instant_of_start_up_and_load_ends_the_run(
        tmp_path: Path) -> None:
    """docs/reliability.md, "A stop at any instant": SIGINT and SIGTERM, alternately, at
    21 instants from 0 to 10 s into the default run (60 s of load), under CPU load; each
    run ends within 30 s of its signal with exit 130 and no traceback, and leaves nothing.
    Only a signal that arrives before the script's first statement has caught the stop
    signals (read from /proc just before it is sent; under two CPU hogs the interpreter's
    start can take more than 0.1 s) may end it by the signal's default action or Python's
    KeyboardInterrupt (nothing has started then)."""
    before = footprint()
    ended: list[str] = []
    with _cpu_hogs():
        for k, at_s in enumerate(STOP_INSTANTS_S):
            sig = signal.SIGINT if k % 2 == 0 else signal.SIGTERM
            t0 = time.monotonic()
            p = subprocess.Popen([sys.executable, RUN_TESTBED, "--out", str(tmp_path / f"s{k}"),
                                  "--quiet"], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT,
                                 preexec_fn=_as_a_terminal_starts_it)
            time.sleep(max(0.0, t0 + at_s - time.monotonic()))
            ours = _stop_handler_installed(p.pid)  # read first: it may be installed after
            p.send_signal(sig)
            try:
                text = _finish(p, 30)
            except subprocess.TimeoutExpired:
                p.kill()
                text = _finish(p, 30)
                pytest.fail(f"{sig.name} at {at_s} s was swallowed: the run went on for 30 s "
                            f"more\n{text[-2000:]}")
            where = f"{sig.name} at {at_s} s (rc {p.returncode})"
            if not ours and p.returncode in (-sig, 1):
                # before the script's first statement: Python's start-up, nothing started
                ended.append(f"{at_s}: rc {p.returncode}, in the interpreter's start")
                continue
            assert "Traceback" not in text, f"{where}:\n{text[-3000:]}"
            assert p.returncode == 130, f"{where}:\n{text[-3000:]}"
            ended.append(f"{at_s}: 130")
    assert len(ended) == len(STOP_INSTANTS_S) >= 20
    assert_clean(before)


# -- the controller -----------------------------------------------------------------

@emulation
@pytest.mark.parametrize(("churn", "per_request"), [(False, False), (True, False), (True, True)],
                         ids=["no-churn", "churn", "per-request"])
def test_controller_sigkilled_is_restarted_and_the_run_says_so(
        tmp_path: Path, churn: bool, per_request: bool) -> None:
    before = footprint()
    over: dict[str, Any] = {"duration_ms": 500}
    if not churn:
        over["churn"] = {"eta": 0, "xi": 0}
    if per_request:  # decided at the controller: the switches fall back to its routes
        over["policy"] = {"name": "threshold", "params": {"threshold": 1}}
    p, out = start_runner(tmp_path, f"ctl{int(churn)}{int(per_request)}", 1.5, **over)
    rec = _record_of(p.pid)
    pid, _ = rec.pids["controller"]
    os.kill(pid, signal.SIGKILL)
    text = _finish(p)
    assert p.returncode == 3, text[-3000:]
    assert "CRASH: controller" in text and "controller back after" in text, text[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["crashed"] is True and summary["predicted"] is None
    [inc] = [i for i in summary["incidents"] if i["process"] == "controller"]
    assert inc["exit"] == "killed by SIGKILL" and inc["outage_ms"] > 0
    assert (out / "availability.csv").exists()
    rows = _assert_each_request_once(out, summary)
    # proactive rules stayed in the switch, or a per-request policy's routes took over:
    # the data plane kept serving through the outage
    t_kill, t_back = inc["t_model_ms"], inc["t_model_ms"] + inc["outage_ms"] / 20.0
    during = [r for r in rows if t_kill < r.t_send < t_back]
    answered = (Outcome.OK, Outcome.BLOCKED)  # blocked: a full node said so, as modelled
    assert during and all(r.outcome in answered for r in during)
    assert sum(r.outcome in answered for r in rows) >= 0.95 * len(rows)
    if per_request:  # those were served with no decision, and the summary counts them
        fallback = summary["decisions"]["fallback_decided"]
        assert 0.5 * len(during) <= fallback <= len(rows) - summary["decisions"]["count"]
        assert "decided by the fallback" in text
    assert_clean(before)


# -- the workers --------------------------------------------------------------------

@emulation
@pytest.mark.parametrize("node", ["fn", "ofn1"])
def test_worker_sigkilled_is_reported_and_the_run_exits_non_zero(
        tmp_path: Path, node: str) -> None:
    before = footprint()
    p, out = start_runner(tmp_path, f"w{node}", 1.0, duration_ms=300,
                          churn={"eta": 0, "xi": 0, "initial": "available"})
    rec = _record_of(p.pid)
    pid, _ = rec.pids[f"worker {node}"]
    os.kill(pid, signal.SIGKILL)
    text = _finish(p)
    assert p.returncode == 3, text[-3000:]
    assert f"CRASH: worker {node}" in text and "not a measurement" in text
    assert "measured vs exact" not in text  # never beside the model
    summary = json.loads((out / "summary.json").read_text())
    [inc] = summary["incidents"]
    assert inc["process"] == f"worker {node}" and inc["exit"] == "killed by SIGKILL"
    assert summary["predicted"] is None and "comparison" not in summary
    assert "error" in summary["workers"][node]
    rows = _assert_each_request_once(out, summary)
    gone = [r for r in rows if r.t_send > inc["t_model_ms"] + 1.0
            and r.cls == ("hp" if node == "fn" else "lp")]
    assert gone and all(r.outcome in (Outcome.LOST, Outcome.TIMEOUT) for r in gone)
    assert_clean(before)


@emulation
def test_link_relay_sigkilled_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """A delayed link's relay is a process of the run like any other."""
    monkeypatch.setenv("FOGSDN_LINKS", "userspace")  # the runner's links: our relay, not netem
    before = footprint()
    p, out = start_runner(tmp_path, "relay", 1.0, duration_ms=300,
                          churn={"eta": 0, "xi": 0, "initial": "available"},
                          topology={"kind": "star", "link": {"delay_ms": 0.5}})
    rec = _record_of(p.pid)
    relays = sorted(label for label in rec.pids if label.startswith("linkem-"))
    assert relays, sorted(rec.pids)
    pid, _ = rec.pids[relays[0]]
    os.kill(pid, signal.SIGKILL)
    text = _finish(p)
    assert p.returncode == 3, text[-3000:]
    assert "CRASH: link relay" in text
    summary = json.loads((out / "summary.json").read_text())
    assert [i["process"] for i in summary["incidents"]] == [
        "link relay " + relays[0].removeprefix("linkem-")]
    assert summary["predicted"] is None
    _assert_each_request_once(out, summary)
    assert_clean(before)


# -- absurd input ---------------------------------------------------------------------

@emulation
def test_absurd_scenario_is_refused_before_anything_starts(tmp_path: Path) -> None:
    before = footprint()
    f = tmp_path / "absurd.yaml"
    f.write_text((ROOT / "scenarios" / "default.yaml").read_text()
                 .replace("lambda_hp: 0.3", "lambda_hp: 1e9"))
    r = subprocess.run([sys.executable, RUN_TESTBED, "--scenario", str(f), "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {f}: workload:") and "requests" in line
    assert not (tmp_path / "out").exists()
    assert_clean(before)


def test_absurd_scenario_is_refused_by_the_simulator_too(tmp_path: Path) -> None:
    from fogsdn.sim.runner import run_simulation

    sc = parse_scenario(scenario_dict(workload={"lambda_hp": 1e9}, duration_ms=12000))
    with pytest.raises(ScenarioError, match="expects 1.2e\\+13 requests"):
        run_simulation(sc, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("name: a\nname: b\n", "line 2: duplicate key 'name' (first on line 1)"),
    ("name: x\nworkload:\n  lambda_hp 0.3\n  lambda_lp: 0.5\n",
     "line 3: mapping values are not allowed here (is a ':' missing after 'lambda_hp'?)"),
    ("name: x\nworkload: {lambda_hp: 1, lambda_lp: 1\nnodes: []\n",
     "line 3: expected ',' or '}', but got ':' "
     "(while parsing a flow mapping that starts on line 2)"),
    (None, "nodes.0.capacity: Input should be less than or equal to 100000"),
    ("\xff\xfe", "not a text file"),
])
def test_scenario_file_errors_name_the_line_and_field(
        tmp_path: Path, text: str | None, message: str) -> None:
    f = tmp_path / "s.yaml"
    if text is None:  # YAML 1.1 reads 1e9 as a string; ours reads it as the number it is
        text = (ROOT / "scenarios" / "default.yaml").read_text().replace(
            "capacity: 20", "capacity: 1e9")
    f.write_bytes(text.encode("latin-1"))
    with pytest.raises(ScenarioError) as err:
        load_scenario(f)
    assert str(err.value).startswith(str(f)) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_yaml_numbers_without_a_dot_are_numbers(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text((ROOT / "scenarios" / "default.yaml").read_text()
                 .replace("capacity: 20", "capacity: 2e1"))
    assert load_scenario(f).node("fn").capacity == 20


# -- a real worker process on loopback: oversized, trickled and piled-up requests -------

PATIENT_READ_S = 3.0


@contextmanager
def _running_worker(tmp_path: Path, read_timeout_s: float
                    ) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port, ctl = free_ports(1), tmp_path / "w.sock"
    max_size = max_task_size(parse_scenario(scenario_dict()).workload.size)
    p = subprocess.Popen(
        [sys.executable, "-m", "fogsdn.nodes.worker", "--name", "fn", "--host", "127.0.0.1",
         "--port", str(port), "--mu", "1", "--capacity", "4", "--time-scale", "10",
         "--control", str(ctl), "--max-size", repr(max_size),
         "--read-timeout", repr(read_timeout_s)], cwd=ROOT, stderr=subprocess.PIPE)
    try:
        wait_for_worker(p, ctl)
        yield port, p
    finally:
        p.terminate()
        p.wait(5)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A worker that cuts off a request line not complete within 1 s."""
    with _running_worker(tmp_path, 1.0) as w:
        yield w


@pytest.fixture
def patient_worker(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A worker whose read deadline (3 s) outlasts opening a few hundred connections
    on a busy machine, so that no reading slot frees itself before they are all in."""
    with _running_worker(tmp_path, PATIENT_READ_S) as w:
        yield w


def _ask(port: int, data: bytes, timeout: float = 5.0) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return dict(json.loads(recv_line(s)))


def _req(rid: str, size: float) -> bytes:
    return TaskRequest(rid, TaskClass.HP, size, "c").encode()


def test_oversized_requests_are_refused_and_the_worker_keeps_serving(worker: tuple) -> None:
    port, p = worker
    for size in (1e300, 1e6, 51.0):
        reply = _ask(port, _req(f"big{size:g}", size))
        assert reply["status"] == "error" and "maximum task size 50" in str(reply["error"])
    for k in range(5):
        assert _ask(port, _req(f"ok{k}", 0.5))["status"] == "ok"
    assert p.poll() is None


def test_a_trickling_client_is_cut_off_for_the_whole_request(worker: tuple) -> None:
    """The read timeout covers the whole request line, not each read."""
    port, p = worker
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        reply = b""
        for byte in _req("slow", 0.1)[:-1]:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                break
            s.settimeout(0.3)
            try:
                reply = recv_line(s)
                break
            except TimeoutError:
                continue
    held = time.monotonic() - t0
    # cut off at 1 s whatever the machine's load; a timeout per read would have held it
    # for as long as the trickle lasts (a byte every 0.3 s: about 15 s)
    assert b"not complete within 1 s" in reply and 1.0 <= held < 6.0, (reply, held)
    assert _ask(port, _req("after", 0.1))["status"] == "ok"


def test_open_connections_are_capped_and_freed(patient_worker: tuple) -> None:
    """Past MAX_READING connections whose request line is still being read, each new
    one is answered `busy` at once; the others are cut off at the read deadline, which
    gives their slots back while the connections are still open."""
    from fogsdn.nodes.task_server import MAX_READING

    port, p = patient_worker
    over = 20
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10)
            for _ in range(MAX_READING + over)]
    try:
        replies: list[bytes] = []
        waiting = list(idle)
        deadline = time.monotonic() + PATIENT_READ_S + 30
        while waiting and time.monotonic() < deadline:
            for s in select.select(waiting, [], [], 0.5)[0]:
                replies.append(recv_line(s))
                waiting.remove(s)
        assert not waiting, f"{len(waiting)} connections got no reply"
        busy = [r for r in replies if b"busy" in r]
        cut = [r for r in replies if f"not complete within {PATIENT_READ_S:g} s".encode() in r]
        assert (len(busy), len(cut)) == (over, MAX_READING), replies[:3]
        assert _ask(port, _req("after", 0.1))["status"] == "ok"  # the slots are back
    finally:
        for s in idle:
            s.close()
    assert p.poll() is None


def test_a_worker_whose_internal_thread_dies_exits() -> None:
    code = ("import sys; from fogsdn.nodes.task_server import Worker;"
            "from fogsdn.core.scenario import Servers;"
            "w = Worker('fn', 1.0, 2, Servers.SINGLE, 10.0);"
            "w.guarded(lambda: 1 / 0); sys.exit(0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 70 and "thread died: ZeroDivisionError" in r.stderr
