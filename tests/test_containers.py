"""Containers: cgroup layouts (fakes), the launcher's limits on this machine, the OOM path.

Unit tests run anywhere (fake cgroup trees in tmp_path). The `emulation` ones need
root and this machine's cgroups: the launcher's CPU quota and memory limit hold for a
real process, and a worker killed live for exceeding memory_mb is reported with that
cause while the run goes on.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, assert_clean, footprint, start_runner, wait_for_run_to_die

from fogsdn.core.scenario import ScenarioError, parse_scenario
from fogsdn.live.cgroups import (
    RT_PERIOD_US,
    CgroupError,
    Layout,
    NodeCgroup,
    cpu_quota_us,
    remove_cgroup,
    rt_share,
)
from fogsdn.nodes.container import in_cgroup, kept_under_private, needed_dirs

V1_SELF = "4:memory:/sandbox/x\n3:cpuacct:/\n2:cpu:/\n1:name=systemd:/\n0::/\n"


def _v1_tree(root: Path) -> None:
    for ctrl, own in (("cpu", ""), ("cpuacct", ""), ("memory", "sandbox/x")):
        d = root / ctrl / own
        d.mkdir(parents=True)
        (root / ctrl / "cgroup.procs").write_text("")


def test_layout_v1_nests_below_the_runners_own_groups(tmp_path: Path) -> None:
    _v1_tree(tmp_path)
    lay = Layout.detect(tmp_path, V1_SELF)
    assert (lay.version, lay.cpu, lay.cpuacct) == (1, tmp_path / "cpu", tmp_path / "cpuacct")
    assert lay.memory == tmp_path / "memory" / "sandbox" / "x"
    cg = NodeCgroup(lay, "fogsdn-t-fn")
    cg.create(cpu=0.5, memory_mb=64)
    assert (cg.cpu_dir / "cpu.cfs_quota_us").read_text() == "50000"
    assert (cg.cpu_dir / "cpu.cfs_period_us").read_text() == "100000"
    assert (cg.mem_dir / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert len(cg.procs_files()) == 3
    (cg.mem_dir / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (cg.acct_dir / "cpuacct.usage").write_text("1500000000\n")
    assert cg.oom_kills() == 2 and cg.cpu_usage_s() == pytest.approx(1.5)


def test_v1_real_time_budget_is_set_where_the_kernel_groups_it(tmp_path: Path) -> None:
    """cgroup v1 with real-time group scheduling gives a child group no real-time time,
    so a worker's SCHED_FIFO request would be refused: the group gets its share."""
    _v1_tree(tmp_path)
    lay = Layout.detect(tmp_path, V1_SELF)
    plain = NodeCgroup(lay, "fogsdn-t-plain")
    plain.create(cpu=None, memory_mb=None, rt_share=0.3)  # no rt files: nothing written
    assert not (plain.cpu_dir / "cpu.rt_runtime_us").exists()
    cg = NodeCgroup(lay, "fogsdn-t-fn")
    cg.cpu_dir.mkdir()
    (cg.cpu_dir / "cpu.rt_runtime_us").write_text("0")  # as the kernel makes it
    (cg.cpu_dir / "cpu.rt_period_us").write_text("1000000")
    cg.create(cpu=None, memory_mb=None, rt_share=rt_share(2))
    assert (cg.cpu_dir / "cpu.rt_period_us").read_text() == str(RT_PERIOD_US)
    assert (cg.cpu_dir / "cpu.rt_runtime_us").read_text() == str(round(0.3 * RT_PERIOD_US))
    # all groups together stay within 60 % of the kernel's budget for real-time tasks
    assert rt_share(1) == rt_share(2) == 0.3 and rt_share(10) * 10 == pytest.approx(0.6)


def test_layout_v2_uses_cpu_max_and_memory_max(tmp_path: Path) -> None:
    (tmp_path / "user.slice").mkdir()
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    lay = Layout.detect(tmp_path, "0::/user.slice\n")
    assert lay.version == 2 and lay.cpu == lay.memory == tmp_path / "user.slice"
    cg = NodeCgroup(lay, "fogsdn-t-fn")
    cg.create(cpu=1.5, memory_mb=128)
    assert (cg.cpu_dir / "cpu.max").read_text() == "150000 100000"
    assert (cg.mem_dir / "memory.max").read_text() == str(128 << 20)
    assert cg.procs_files() == [str(cg.cpu_dir / "cgroup.procs")]
    (cg.mem_dir / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    (cg.acct_dir / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert (cg.oom_kills(), cg.memory_failcnt(), cg.cpu_usage_s()) == (1, 7, 2.5)


def test_no_usable_hierarchy_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    with pytest.raises(CgroupError, match="no cgroup hierarchy"):
        Layout.detect(tmp_path, "0::/\n")


def test_quota_and_limits_are_validated() -> None:
    assert cpu_quota_us(2) == 200_000 and cpu_quota_us(0.001) == 1000
    with pytest.raises(CgroupError):
        cpu_quota_us(0)
    base = {"name": "c", "duration_ms": 10, "workload": {"lambda_hp": 1, "lambda_lp": 0}}
    with pytest.raises(ScenarioError, match="memory_mb"):
        parse_scenario(base | {"nodes": [{"name": "fn", "role": "fn", "mu": 1, "capacity": 1,
                                          "memory_mb": 4}]})
    sc = parse_scenario(base | {"nodes": [{"name": "fn", "role": "fn", "mu": 1,
                                           "capacity": 1}]})
    assert sc.containers and sc.nodes[0].cpu is None and sc.nodes[0].memory_mb is None


def test_launcher_helpers() -> None:
    assert in_cgroup("4:memory:/a/fogsdn-x-fn\n2:cpu:/fogsdn-x-fn\n0::/\n", "fogsdn-x-fn") == 2
    assert in_cgroup("2:cpu:/fogsdn-x-fn2\n", "fogsdn-x-fn") == 0
    assert kept_under_private(["/run/fogsdn/fz1", "/tmp/a/b", "/work/x", "/runx"]) == [
        "/run/fogsdn/fz1", "/tmp/a/b"]
    # nested ones come along with the outermost
    assert kept_under_private(["/tmp/a/b/.venv", "/tmp/a/b", "/tmp/a/bc"]) == [
        "/tmp/a/b", "/tmp/a/bc"]


# -- this machine's cgroups: the limits hold ------------------------------------------

def _node_cgroup(name: str, cpu: float | None, memory_mb: int | None) -> NodeCgroup:
    try:
        lay = Layout.detect()
    except (CgroupError, OSError) as err:
        pytest.fail(f"no usable cgroups here: {err}")
    cg = NodeCgroup(lay, f"fogsdn-test{os.getpid()}-{name}")
    cg.create(cpu, memory_mb)
    return cg


def _launch(cg: NodeCgroup, code: str, keep: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    joins = [a for f in cg.procs_files() for a in ("--join", f)]
    keeps = ["--keep", str(keep)] if keep else []
    return subprocess.run([sys.executable, "-m", "fogsdn.nodes.container", "--name", "box", *joins,
                           *keeps, "--", sys.executable, "-c", code],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.emulation
def test_container_namespaces_and_cpu_quota(tmp_path: Path) -> None:
    """Two threads hash (GIL released) for 2 s under a 0.3-core quota: they would use
    far more than 0.6 CPU s even on this loaded machine, the quota stops them there."""
    cg = _node_cgroup("cpu", cpu=0.3, memory_mb=None)
    keep = Path("/run/fogsdn") / f"test{os.getpid()}"
    keep.mkdir(parents=True, exist_ok=True)
    try:
        code = ("import os, socket, threading, time\n"
                "from fogsdn.nodes.cpu_work import kernel\n"
                "print(os.getpid(), socket.gethostname(), sorted(os.listdir('/run')),\n"
                "      os.listdir('/tmp'), flush=True)\n"
                f"open('{keep}/mark', 'w').write('x')\n"
                "t0 = time.monotonic(); c0 = time.process_time()\n"
                "def spin():\n"
                "    while time.monotonic() - t0 < 2.0: kernel(1 << 20)\n"
                "ts = [threading.Thread(target=spin) for _ in range(2)]\n"
                "[t.start() for t in ts]; [t.join() for t in ts]\n"
                "print(time.process_time() - c0, time.monotonic() - t0, flush=True)\n")
        r = _launch(cg, code, keep)
        assert r.returncode == 0, r.stderr
        head, tail = r.stdout.splitlines()
        # PID 1, own hostname, private /run and /tmp: /tmp holds only the checkout itself
        # where it lies under /tmp (as in CI), which the container keeps visible
        os.chdir(ROOT)
        in_tmp = sorted({Path(p).parts[2] for p in kept_under_private(needed_dirs(
            [sys.executable])) if p.startswith("/tmp/")})
        assert head == f"1 box ['fogsdn'] {in_tmp}"
        assert (keep / "mark").read_text() == "x"  # the kept folder is the host's
        cpu, wall = (float(x) for x in tail.split())
        assert cpu < 0.3 * wall + 0.15, (cpu, wall)  # the quota held
        assert cg.cpu_usage_s() < 0.3 * (wall + 1.0) + 0.15  # the group's own accounting
        stat = dict(line.split() for line in (cg.cpu_dir / "cpu.stat").read_text().splitlines())
        assert int(stat["nr_throttled"]) > 0  # and it was the quota that held it
    finally:
        for d in cg.dirs:
            remove_cgroup(d)
        for f in keep.iterdir():
            f.unlink()
        keep.rmdir()
    assert not any(d.exists() for d in cg.dirs)


@pytest.mark.emulation
def test_a_thread_in_a_node_group_may_run_sched_fifo() -> None:
    """What a worker's completion thread asks for (fogsdn/core/realtime.py), granted inside its
    node's group on this machine's cgroups, and refused without the group's budget where
    the kernel groups real-time time."""
    code = ("from fogsdn.core.realtime import go_realtime; import os\n"
            "print(go_realtime(), os.sched_getscheduler(0) == os.SCHED_FIFO)")
    lay = Layout.detect()
    cg = NodeCgroup(lay, f"fogsdn-test{os.getpid()}-rt")
    try:
        cg.create(None, None, rt_share(2))
        r = _launch(cg, code)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["True", "True"]
        if (cg.cpu_dir / "cpu.rt_runtime_us").exists():  # v1 with RT groups, as here
            (cg.cpu_dir / "cpu.rt_runtime_us").write_text("0")
            r = _launch(cg, code)
            assert r.stdout.split() == ["False", "False"], r.stdout
    finally:
        for d in cg.dirs:
            remove_cgroup(d)


@pytest.mark.emulation
def test_container_memory_is_stopped_at_its_limit() -> None:
    cg = _node_cgroup("mem", cpu=None, memory_mb=64)
    try:
        code = ("b = bytearray(200 * 1024 * 1024)\n"
                "for i in range(0, len(b), 4096): b[i] = 1\n"
                "print('allocated')\n")
        r = _launch(cg, code)
        assert r.returncode == -9 and "allocated" not in r.stdout  # SIGKILL by the OOM killer
        assert cg.oom_kills() >= 1
        small = _launch(cg, "b = bytearray(16 * 1024 * 1024)\nprint('ok')\n")
        assert small.returncode == 0 and small.stdout.strip() == "ok"  # under the limit: fine
    finally:
        for d in cg.dirs:
            remove_cgroup(d)


def _fogsdn_cgroups() -> set[str]:
    try:
        lay = Layout.detect()
    except (CgroupError, OSError):
        return set()
    return {str(p) for base in {lay.cpu, lay.cpuacct, lay.memory}
            for p in base.glob("fogsdn-fz*")}


@pytest.mark.emulation
def test_worker_out_of_memory_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    """The OFN (memory_mb 120) is told to hold 300 MB: the kernel kills it, the run
    names it and the cause, its requests are lost, the FN keeps answering, and the
    cgroups are gone afterwards."""
    from fogsdn.core.trace import Outcome, read_trace
    from fogsdn.live.cleanup import RUNS_DIR, RunRecord
    from fogsdn.nodes.worker import control_request

    before, groups_before = footprint(), _fogsdn_cgroups()
    nodes = [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
             {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10, "memory_mb": 120}]
    p, out = start_runner(tmp_path, "oom", 1.0, nodes=nodes, duration_ms=300,
                          churn={"eta": 0, "xi": 0, "initial": "available"})
    [rec] = [RunRecord.load(f) for f in RUNS_DIR.glob("*.json")
             if RunRecord.load(f).owner and RunRecord.load(f).owner[0] == p.pid]
    assert any("fogsdn-" in c for c in rec.cgroups)
    with pytest.raises((OSError, ValueError)):
        control_request(f"/run/fogsdn/{rec.tag}/ofn1.sock", "ballast", timeout=10, mb=300)
    t_kill = time.monotonic()
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 3, text.decode()[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    [inc] = summary["incidents"]
    assert inc["process"] == "worker ofn1"
    assert inc["cause"] == "out of memory (memory_mb 120)"
    assert "out of memory" in text.decode()
    rows = read_trace(out / "trace.csv")
    late = [r for r in rows if r.t_send > inc["t_model_ms"] + 1.0]
    assert any(r.node == "fn" and r.outcome is Outcome.OK for r in late)  # the run went on
    assert all(r.outcome in (Outcome.LOST, Outcome.TIMEOUT)
               for r in late if r.cls == "lp")  # the OFN's share is lost
    assert time.monotonic() - t_kill < 120
    # the power account goes on too: every second, every node and the switch
    power = summary["power"]
    assert set(power["nodes"]) == {"fn", "ofn1"} and set(power["switches"]) == {"s1"}
    assert power["energy_J"] > 0 and power["total_W"] > power["servers_W"] > 0
    kinds = [line.split(",")[3] for line in (out / "power.csv").read_text().splitlines()[1:]]
    assert kinds.count("switch") >= 3 and kinds.count("server") >= kinds.count("switch")
    acct = summary["containers"]["accounting"]
    assert acct["ofn1"]["oom_kills"] >= 1 and acct["fn"]["oom_kills"] == 0
    assert acct["fn"]["cpu_s"] > 0
    assert _fogsdn_cgroups() - groups_before == set()
    assert_clean(before)


@pytest.mark.emulation
def test_a_killed_runs_cgroups_are_removed_by_clean(tmp_path: Path) -> None:
    """SIGKILL the runner: its workers die with it (parent-death signals through the
    launcher), its cgroups stay recorded, and `--clean` removes them."""
    from fogsdn.live.cleanup import RUNS_DIR, RunRecord

    before, groups_before = footprint(), _fogsdn_cgroups()
    p, _ = start_runner(tmp_path, "killcg", 0.5)
    [rec] = [RunRecord.load(f) for f in RUNS_DIR.glob("*.json")
             if RunRecord.load(f).owner and RunRecord.load(f).owner[0] == p.pid]
    p.kill()
    p.communicate(timeout=10)
    wait_for_run_to_die(rec)
    left = _fogsdn_cgroups() - groups_before
    assert left and all(rec.tag in g for g in left)  # recorded, still there
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--clean"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cgroup" in r.stdout + r.stderr
    assert _fogsdn_cgroups() - groups_before == set()
    assert_clean(before)


def test_real_time_budget_waits_for_a_removed_group_to_return_its_share(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel frees a removed group's real-time budget some ms after the rmdir, and
    refuses (EINVAL) a new group's meanwhile: the write is retried, not failed."""
    from fogsdn.live import cgroups
    d = tmp_path / "fogsdn-t-fn"
    d.mkdir()
    (d / "cpu.rt_runtime_us").write_text("0")
    refusals = [2]
    real_write = Path.write_text

    def kernel_write(self: Path, data: str, *a: object, **k: object) -> int:
        if self.name == "cpu.rt_runtime_us" and refusals[0] > 0:
            refusals[0] -= 1
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_text", kernel_write)
    cgroups._write_rt_runtime(d, 30000, wait_s=2.0)
    assert refusals == [0] and (d / "cpu.rt_runtime_us").read_text() == "30000"


def test_real_time_budget_still_taken_names_the_groups_holding_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fogsdn.live import cgroups
    holder = tmp_path / "fogsdn-old-fn"
    holder.mkdir()
    (holder / "cpu.rt_runtime_us").write_text("70000")
    d = tmp_path / "fogsdn-t-fn"
    d.mkdir()
    (d / "cpu.rt_runtime_us").write_text("0")
    real_write = Path.write_text

    def refuse(self: Path, data: str, *a: object, **k: object) -> int:
        if self == d / "cpu.rt_runtime_us":
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(CgroupError, match=r"budget held by: fogsdn-old-fn=70000"):
        cgroups._write_rt_runtime(d, 30000, wait_s=0.05)
