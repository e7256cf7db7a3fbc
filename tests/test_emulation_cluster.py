"""Self-contained servers on this machine (tools/rigs/fake_cluster.py), the ground that
tests of one emulation over several servers stand on: each server has its own Open
vSwitch, processes and name, they reach each other and are reached over ssh on their
LAN, and nothing of them outlives the process that made them, even SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from tools.rigs.fake_cluster import FakeCluster, leftover_links

emulation = pytest.mark.emulation


@emulation
def test_each_server_has_its_own_switch_processes_and_name() -> None:
    host_bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                                  check=True).stdout
    with FakeCluster(2) as c:
        a, b = c.servers
        made = c.ssh(a, "ovs-vsctl add-br fzt0 -- set bridge fzt0 datapath_type=netdev "
                        "&& ovs-vsctl list-br && hostname")
        assert made.returncode == 0, made.stderr
        assert made.stdout.split() == ["fzt0", a.name]
        other = c.ssh(b, "ovs-vsctl list-br; hostname; ps -e -o pid= | wc -l")
        assert other.returncode == 0, other.stderr
        lines = other.stdout.split()
        assert lines[0] == b.name  # no bridge of a's on b
        assert int(lines[1]) < 20  # its own PID namespace: its init, OVS, sshd, this shell
        ping = c.ssh(a, f"ping -c 2 -W 2 {b.address}")
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                              check=True).stdout == host_bridges
    assert leftover_links(c.tag) == []
    assert not c.home.exists()


_HOLDER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tools.rigs.fake_cluster import FakeCluster
c = FakeCluster(2).start()
pids = [c.lan.pid] + [s.init_pid for s in c.servers] + [s.process.pid for s in c.servers]
print(json.dumps({"tag": c.tag, "pids": pids, "home": str(c.home)}), flush=True)
time.sleep(600)
"""


@emulation
def test_sigkill_of_its_maker_leaves_no_namespace_link_or_process(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(ROOT)], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None
        up = json.loads(holder.stdout.readline())
        assert leftover_links(up["tag"]), "the LAN's link on this machine"
        assert all(_alive(p) for p in up["pids"])
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    deadline = time.monotonic() + 15
    while (leftover_links(up["tag"]) or any(_alive(p) for p in up["pids"])) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftover_links(up["tag"]) == []
    assert [p for p in up["pids"] if _alive(p)] == []
    subprocess.run(["rm", "-rf", up["home"]], check=True)  # keys and configs: files only


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"
