"""Our Mininet nodes' shells end when Mininet stops them, under `nohup` too: the
controller's shell (Mininet's RemoteController.stop does nothing, so one shell was left
per network built, for as long as its builder lived) and the hosts', elements' and
switches' (their SIGHUP back to its default, `fogsdn.core.processes.hangup_default`)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.emulation

_CHILD = """
import signal, socket, sys, time
sys.path.insert(0, sys.argv[1])
signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
from mininet.node import RemoteController
from fogsdn.netem.mininet_net import ElementNode, FogHost, PlainRemoteController


def ended(shell):
    t = time.monotonic() + 5
    while shell.poll() is None and time.monotonic() < t:
        time.sleep(0.05)
    ok = shell.poll() is not None
    if not ok:
        shell.kill()
        shell.wait()
    return ok


tag = sys.argv[2]
listening = socket.create_server(("127.0.0.1", 0))
port = listening.getsockname()[1]
for cls in (RemoteController, PlainRemoteController):
    c = cls(f"{tag}c", ip="127.0.0.1", port=port)
    shell = c.shell
    c.stop()
    print(cls.__name__, ended(shell))
for n in (FogHost(f"{tag}h", inNamespace=True), ElementNode(f"{tag}e", inNamespace=False)):
    shell = n.shell
    n.terminate()
    print(type(n).__name__, ended(shell))
"""


def test_our_nodes_shells_end_when_mininet_stops_them_under_nohup() -> None:
    r = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), "fzhup"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # Mininet's own RemoteController shows what happened before: its shell lives on
    assert r.stdout.split() == ["RemoteController", "False", "PlainRemoteController", "True",
                                "FogHost", "True", "ElementNode", "True"], r.stdout
