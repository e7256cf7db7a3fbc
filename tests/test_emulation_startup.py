"""A switch whose OpenFlow handshake stalled is made to connect again (fogsdn.live.live_network
`_reconnect`), against a real OVS bridge and a plain TCP listener standing in for the
controller (root, Open vSwitch)."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess

import pytest

from fogsdn.live.live_network import _reconnect

pytestmark = pytest.mark.emulation


def _vsctl(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


def test_a_reconnected_switch_opens_a_new_connection_with_the_same_settings() -> None:
    bridge = f"fzrc{secrets.token_hex(2)}"
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        srv.settimeout(15)
        target = f"tcp:127.0.0.1:{srv.getsockname()[1]}"
        _vsctl("add-br", bridge, "--", "set", "Bridge", bridge, "datapath_type=netdev",
               "fail_mode=secure", "--", "--id=@c", "create", "Controller",
               f"target={json.dumps(target)}", "max_backoff=1000", "--", "set", "Bridge",
               bridge, "controller=[@c]")
        try:
            first, _ = srv.accept()
            with first:
                _reconnect(bridge)
                second, _ = srv.accept()  # a new connection, the handshake from the start
                with second:
                    first.settimeout(10)
                    while first.recv(4096):  # the old one is closed by the switch
                        pass
                    assert second.recv(8)[1] == 0  # OFPT_HELLO opens the new one
            rows = json.loads(_vsctl("--format=json", "--columns=target,max_backoff", "list",
                                     "Controller", _vsctl("get", "Bridge", bridge,
                                                          "controller").strip("[]")))["data"]
            assert rows == [[target, 1000]]
        finally:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], timeout=10)
