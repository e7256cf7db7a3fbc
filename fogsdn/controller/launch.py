"""Starting the controller process (`python -m fogsdn.controller.main`): one way for
every caller."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fogsdn.controller.config import CONFIG_ENV, ControllerConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def start_controller(config: ControllerConfig, config_path: Path, port: int, log_path: Path,
                     *, apps: Sequence[str] = (), env: dict[str, str] | None = None,
                     preexec_fn: Callable[[], object] | None = None,
                     python: str = sys.executable,
                     realtime: bool = False, host: str = "127.0.0.1"
                     ) -> subprocess.Popen[bytes]:
    """Write `config` to `config_path` and start the controller on `host`:`port`
    (loopback unless switches on other servers must reach it),
    its output appended to `log_path`, in a session of its own (stopped by PID);
    `realtime`: it runs SCHED_FIFO."""
    config.write(config_path)
    cmd = [python, "-m", "fogsdn.controller.main", "--port", str(port), "--host", host]
    for app in apps:
        cmd += ["--app", app]
    if realtime:
        cmd.append("--realtime")
    base = dict(os.environ) if env is None else dict(env)
    base.setdefault("PYTHONPATH", str(PROJECT_ROOT))
    base["PYTHONUNBUFFERED"] = "1"
    base[CONFIG_ENV] = str(config_path)
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=base, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=preexec_fn)
