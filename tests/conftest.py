"""Shared fixtures. Emulation tests need root and Open vSwitch; in CI they must run."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fogsdn.live.cleanup import RunRecord

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tools/rigs/ (fakes and probes for tests) is not installed
sys.path.insert(0, str(ROOT / "scripts"))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one pytest-xdist worker per core: each keeps its numeric libraries (torch, BLAS) on
    # one thread, or two workers' thread pools fight over two cores (the DQN test ran 7x
    # slower). Set before any test module imports them.
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")


def _ovs_running() -> bool:
    if shutil.which("ovs-vsctl") is None:
        return False
    return subprocess.run(["ovs-vsctl", "--timeout=2", "show"], capture_output=True).returncode == 0


def emulation_unavailable() -> str | None:
    """Why emulation tests cannot run here (None when they can)."""
    if os.geteuid() != 0:
        return "emulation tests need root (Mininet, Open vSwitch)"
    if not _ovs_running():
        return "emulation tests need a running Open vSwitch (ovs-vsctl show failed)"
    return None


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Emulation tests skip on a developer's machine without root or OVS; under CI they
    FAIL, so a CI run that could not emulate never reads as green."""
    if "emulation" not in item.keywords:
        return
    why = emulation_unavailable()
    if why is None:
        return
    if under_ci():
        pytest.fail(f"CI: {why}", pytrace=False)
    pytest.skip(why)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Under CI a skip is a failure, wherever it comes from (a `skipif`, a `pytest.skip`
    or `importorskip` in the body), unless the test carries `@pytest.mark.allow_skip(why)`:
    CI installs every extra, so a test that did not run there is a test that did not run."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not under_ci():
        return
    allowed = item.get_closest_marker("allow_skip")
    if allowed is not None and allowed.args and str(allowed.args[0]).strip():
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = (f"CI: skipped without @pytest.mark.allow_skip(reason): {reason}"
                       if allowed is None else
                       f"CI: @pytest.mark.allow_skip needs a reason; skipped: {reason}")


# -- waiting on real processes: poll with a deadline generous for a loaded 2-core machine --

READY_TIMEOUT_S = 30.0


def free_ports(n: int = 1) -> int:
    """The first of `n` consecutive loopback TCP ports free now, below the kernel's
    ephemeral range: a port that bind(0) hands out is one the kernel may give to any
    connecting socket (another test's, another program's) before our process binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.SystemRandom()
    for _ in range(200):
        base = rng.randrange(10_000, low - n)
        probes: list[socket.socket] = []
        try:
            for port in range(base, base + n):
                probes.append(s := socket.socket())
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in probes:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports below {low}")


def wait_until(ready: Callable[[], bool], what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll `ready` until it holds; fail naming `what` after `timeout_s`. Tests wait for
    states this way, never with a fixed sleep that a busy machine can outrun."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.01)


def wait_for_worker(proc: subprocess.Popen[Any], control: Path) -> None:
    """A worker process is serving once its control socket answers `stats` (its TCP
    port listens before that); fail at once if it exited instead."""
    from fogsdn.nodes.worker import control_request

    def answers() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"worker exited (rc {proc.returncode}) before it was ready")
        try:
            control_request(control, "stats")
        except OSError:
            return False
        return True

    wait_until(answers, f"worker control socket {control.name}")


def call_main(main: Callable[[list[str]], int], argv: list[str],
              capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a command's `main(argv)` called in this process:
    the command's own code path without a Python start-up and its imports (seconds) per
    call. Each command keeps one test that runs it as a real process."""
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own errors, sys.exit("message")
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return rc, out, err


# the longest tests, started first so that under pytest-xdist no worker is left with one
# of them at the end while the others idle (the order does not matter otherwise)
LONGEST_FIRST = ("test_static.py::test_packages_type_check",  # mypy, cold in CI
                 "test_sweep.py::test_ray_sweep_on_a_private_local_ray",
                 "test_size_based.py::test_sita_e_simulated_mean_response_matches_pk")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        node = item.nodeid.split("[", 1)[0]
        return next((i for i, p in enumerate(LONGEST_FIRST) if node.endswith(p)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


def merged(data: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`data` with `over` applied: mappings merge one level deep, anything else replaces."""
    out = dict(data)
    for k, v in over.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def scenario_dict(**over: Any) -> dict[str, Any]:
    """A small valid scenario as a dict; keyword arguments override (mappings merge)."""
    base: dict[str, Any] = {
        "name": "t",
        "seed": 3,
        "duration_ms": 200,
        "warmup_ms": 0,
        "time_scale": 10,
        "deadline_ms": 30,
        "timeout_ms": 400,
        "workload": {"lambda_hp": 0.3, "lambda_lp": 0.5, "clients": 2},
        "nodes": [
            {"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
            {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10},
        ],
        "churn": {"eta": 1 / 3, "xi": 1 / 3, "leave": "drain"},
        "policy": {"name": "prioritized", "alpha": 0.5},
    }
    return merged(base, over)


# -- emulation helpers: what a run could leave behind, and a runner in the background --

def footprint() -> dict[str, set[str]]:
    """What could be left behind: OVS bridges, network namespaces, root-ns interfaces."""
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    netns = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                netns.add(os.readlink(p / "ns" / "net"))
            except OSError:
                pass
    runs = _runs_dir()
    return {"bridges": set(bridges.split()), "netns": netns,
            "links": set(os.listdir("/sys/class/net")),
            "records": {f.name for f in runs.glob("*.json")} if runs.exists() else set(),
            "sockdirs": {p.name for p in runs.parent.glob("fz*")}}


def assert_clean(before: dict[str, set[str]]) -> None:
    after = footprint()
    for key in ("bridges", "links", "records", "sockdirs"):
        assert after[key] - before[key] == set(), f"left behind: {key} {after[key] - before[key]}"
    # other processes on the machine may create namespaces; ours are gone if none we
    # could have made survives: every namespace now present existed before or is not ours
    extra = after["netns"] - before["netns"]
    assert len(extra) == 0, f"new network namespaces remain: {extra}"


def start_runner(tmp_path: Path, name: str, load_s: float, *args: str, **over: Any
                 ) -> tuple[subprocess.Popen[bytes], Path]:
    """`run_testbed.py` on a 40 s scenario (time scale 20; `over` overrides it), returned
    once its clients have sent for `load_s` seconds."""
    from fogsdn.core.scenario import parse_scenario

    base: dict[str, Any] = {"time_scale": 20.0, "duration_ms": 2000}
    sc = parse_scenario(scenario_dict(name=name, **(base | over)))
    tmp_path.mkdir(parents=True, exist_ok=True)
    f = tmp_path / f"{name}.yaml"
    f.write_text(sc.to_yaml())
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "run_testbed.py"),
                          "--scenario", str(f), "--out", str(out), "--quiet", *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_until(lambda: p.poll() is not None or any(out.glob("load-*.progress")),
               f"{name}: the clients' first request", timeout_s=60)
    if p.poll() is not None:
        text = p.stdout.read().decode(errors="replace") if p.stdout else ""
        pytest.fail(f"{name}: the runner exited (rc {p.returncode}) before its clients "
                    f"sent:\n{text[-2000:]}")
    time.sleep(load_s)
    return p, out


def wait_for_run_to_die(rec: RunRecord) -> None:
    """Every process of a run (a `RunRecord`) whose runner was killed has gone: clients
    get INTERRUPT_GRACE_S (2 s) to record what they had in flight; one left after 15 s
    did not die with the runner."""
    from fogsdn.live.cleanup import ours_alive

    def alive() -> list[str]:
        return [label for label, (pid, st) in rec.pids.items() if ours_alive(pid, st)]

    wait_until(lambda: not alive(), f"run {rec.tag}: its processes to die with it", 15.0)


def _runs_dir() -> Path:
    from fogsdn.live.cleanup import RUNS_DIR

    return RUNS_DIR
