"""First-run set-up, standard library only: apt packages, the virtual environment, OVS.

Imported by every script first, so that one command works on a fresh Debian machine; puts
the project root on sys.path. Each step checks first: running it again does nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fogsdn.core.cli_args import OneLineParser, fail  # noqa: E402,F401 (standard library only)
from fogsdn.core.processes import (  # noqa: E402 (standard library only)
    STOP_REQUESTED,
    exec_with_stop_signals_held,
    stop_signals_caught,
)

VENV = ROOT / ".venv"
VENV_PY = VENV / "bin" / "python"
STAMP = VENV / ".fogsdn-installed"
STATE_DIR = Path("/run/fogsdn")
OVS_RUN = Path("/var/run/openvswitch")
OVS_DB = Path("/etc/openvswitch/conf.db")
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")

# binary -> Debian package that provides it
APT_NEEDS = {
    "ovs-vswitchd": "openvswitch-switch",
    "mnexec": "mininet",
    "ethtool": "ethtool",
    "ip": "iproute2",
    "ping": "iputils-ping",
    "gcc": "gcc",  # builds the link relay (fogsdn/netem/linkem_relay.c) where there is no netem
}
# file -> Debian package that provides it: the C headers the link relay includes (gcc
# only recommends the C library's, and apt-get here installs no recommends)
APT_FILES = {
    "/usr/include/arpa/inet.h": "libc6-dev",
    "/usr/include/linux/virtio_net.h": "linux-libc-dev",
    # the servers of a cluster run (docs/scale-out.md) are reached over ssh; the tests'
    # self-contained servers (tools/rigs/fake_cluster.py) each run their own sshd
    "/usr/sbin/sshd": "openssh-server",
}
# Debian's way to keep a package's install from starting its service: installing
# openssh-server would otherwise start a machine-wide sshd that nothing here wants
POLICY_RC = Path("/usr/sbin/policy-rc.d")

# file -> Debian package: what the run view's browser tests drive (tests/test_emulation_view.py
# through Playwright, the `browser` extra); installed for the test command only
APT_BROWSER = {"/usr/bin/chromium": "chromium"}


def say(msg: str) -> None:
    print(f"[setup] {msg}", flush=True)


def _stop_requested() -> bool:
    """A Ctrl-C or SIGTERM noted by a script that catches them from its first line
    (fogsdn.core.processes.catch_stop_signals); others stop by KeyboardInterrupt as usual."""
    return STOP_REQUESTED.is_set()


def _interrupted() -> NoReturn:
    say("interrupted; nothing was running")
    raise SystemExit(130)


def _run(cmd: list[str], **kw: object) -> None:
    """`cmd` to its end, or until a noted stop signal: then it is stopped and so are we."""
    with subprocess.Popen(cmd, **kw) as proc:  # type: ignore[call-overload]
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if _stop_requested():
                    proc.terminate()
                    proc.wait()
                    _interrupted()
    if rc:
        raise subprocess.CalledProcessError(rc, cmd)


def _has_venv_module() -> bool:
    """Debian's own python3 needs python3-venv for `python -m venv` (ensurepip)."""
    import importlib.util

    return importlib.util.find_spec("ensurepip") is not None


def missing_apt_packages(which: Callable[[str], str | None] = shutil.which,
                         exists: Callable[[str], bool] = os.path.exists,
                         browser: bool = False) -> list[str]:
    """The Debian packages of APT_NEEDS and APT_FILES (and APT_BROWSER with `browser`)
    that this machine lacks."""
    missing = {pkg for exe, pkg in APT_NEEDS.items() if which(exe) is None}
    files = {**APT_FILES, **(APT_BROWSER if browser else {})}
    missing |= {pkg for path, pkg in files.items() if not exists(path)}
    return sorted(missing)


def ensure_apt(browser: bool = False) -> None:
    missing = missing_apt_packages(browser=browser)
    if not VENV_PY.exists() and not _has_venv_module():
        missing.append("python3-venv")
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit(f"[setup] need root to install {' '.join(missing)}: run with sudo")
    say(f"installing Debian packages: {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update", "-qq"], env=env)
    ours = not POLICY_RC.exists()
    if ours:  # no service starts during the install; removed after, as it was not there
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n")
        POLICY_RC.chmod(0o755)
    try:
        _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    finally:
        if ours:
            POLICY_RC.unlink(missing_ok=True)


def _digest() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()


def _installed_extras() -> set[str] | None:
    """Extras installed for the current pyproject.toml, None if it changed since."""
    try:
        digest, _, extras = STAMP.read_text().strip().partition(" ")
    except OSError:
        return None
    return set(filter(None, extras.split(","))) if digest == _digest() else None


def ensure_venv(extras: str = "test") -> None:
    """The venv with the project and the extras asked for (plus those already there)."""
    wanted = set(filter(None, extras.split(",")))
    have = _installed_extras()
    if have is not None and wanted <= have:
        return
    union = sorted(wanted | (have or set()))
    if not VENV_PY.exists():
        say(f"creating the virtual environment {VENV}")
        _run([sys.executable, "-m", "venv", str(VENV)])
    spec = f"{ROOT}[{','.join(union)}]" if union else str(ROOT)
    say(f"installing Python dependencies into {VENV} (pip install -e '{spec}')")
    _run([str(VENV_PY), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", spec])
    STAMP.write_text(f"{_digest()} {','.join(union)}\n")


def _ovs_ok(what: str) -> bool:
    probe = {
        "db": ["ovs-vsctl", "--timeout=2", "show"],
        "switchd": ["ovs-appctl", "--timeout=2", "-t", "ovs-vswitchd", "version"],
    }[what]
    return subprocess.run(probe, capture_output=True).returncode == 0


def ensure_ovs() -> None:
    """Start ovsdb-server and ovs-vswitchd when not running; note which ones we started."""
    if _ovs_ok("db") and _ovs_ok("switchd"):
        return
    if os.geteuid() != 0:
        sys.exit("[setup] Open vSwitch is not running and starting it needs root: use sudo")
    OVS_RUN.mkdir(parents=True, exist_ok=True)
    Path("/var/log/openvswitch").mkdir(parents=True, exist_ok=True)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    if not _ovs_ok("db"):
        if not OVS_DB.exists():
            say(f"creating the OVS database {OVS_DB}")
            OVS_DB.parent.mkdir(parents=True, exist_ok=True)
            _run(["ovsdb-tool", "create", str(OVS_DB), str(OVS_SCHEMA)])
        say("starting ovsdb-server")
        _run(["ovsdb-server", str(OVS_DB), f"--remote=punix:{OVS_RUN}/db.sock",
              f"--pidfile={OVS_RUN}/ovsdb-server.pid", "--detach", "--log-file"])
        (STATE_DIR / "started-ovsdb-server").write_text(f"{OVS_RUN}/ovsdb-server.pid\n")
        _run(["ovs-vsctl", "--no-wait", "init"])
    if not _ovs_ok("switchd"):
        say("starting ovs-vswitchd (userspace datapath: this kernel has no OVS module)")
        _run(["ovs-vswitchd", f"--pidfile={OVS_RUN}/ovs-vswitchd.pid", "--detach", "--log-file"])
        (STATE_DIR / "started-ovs-vswitchd").write_text(f"{OVS_RUN}/ovs-vswitchd.pid\n")
    for _ in range(50):
        if _ovs_ok("db") and _ovs_ok("switchd"):
            return
        time.sleep(0.1)
    sys.exit("[setup] Open vSwitch did not come up; see /var/log/openvswitch/")


def stop_ovs_we_started() -> None:
    """Stop only the OVS daemons this project started (by their pid files)."""
    for name in ("ovs-vswitchd", "ovsdb-server"):
        marker = STATE_DIR / f"started-{name}"
        if not marker.exists():
            continue
        pidfile = Path(marker.read_text().strip())
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 15)
            say(f"stopped {name} (pid {pid}), which fogsdn had started")
        except (OSError, ValueError):
            pass
        marker.unlink(missing_ok=True)


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def bootstrap(needs_network_stack: bool = True, extras: str = "test",
              browser: bool = False) -> None:
    """Make the machine ready, then re-exec the calling script inside the venv;
    `browser`: also Debian's chromium (the view's browser tests)."""
    if not in_venv():
        if needs_network_stack:
            ensure_apt(browser)
        ensure_venv(extras)
        if needs_network_stack:
            ensure_ovs()
        if _stop_requested():
            _interrupted()
        # orig_argv keeps `-m module` and interpreter flags, so `python -m fogsdn.sim` works too
        argv = [str(VENV_PY), *sys.orig_argv[1:]]
        if stop_signals_caught():  # the script catches them again at its first line
            exec_with_stop_signals_held(str(VENV_PY), argv)
        os.execv(str(VENV_PY), argv)
    elif needs_network_stack:
        ensure_ovs()
    if _stop_requested():
        _interrupted()


def require(module: str, extra: str) -> None:
    """A one-line error, not an ImportError's traceback, when `module` (of the `extra`)
    is missing: a script run with the venv's own python skips set-up's install."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        print(f"{Path(sys.argv[0]).name}: error: {module} is not installed in {sys.prefix}: "
              f"run the script with the system python3 (set-up installs the '{extra}' extra) "
              f"or pip install -e '{ROOT}[{extra}]'", file=sys.stderr)
        raise SystemExit(2)


def free_memory() -> float | None:
    """Bytes this machine can still give (MemAvailable), None where unknown: the
    optimiser's refusal compares its estimate with it."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


