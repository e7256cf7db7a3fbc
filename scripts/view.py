#!/usr/bin/env python3
"""Replay a finished run in the browser: the live view's page over its results folder,
with a time slider (docs/view.md).

    python scripts/view.py results/RUN [--port 8080] [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a results folder (scenario.yaml, trace.csv, ...)")
    ap.add_argument("--port", type=int, default=8080, help="0: any free port")
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args(argv)
    from fogsdn.core.scenario import ScenarioError
    from fogsdn.view.replay import ReplayError, ReplaySource
    from fogsdn.view.server import ViewServer

    run = Path(a.run)
    for need in ("scenario.yaml", "trace.csv"):
        if not (run / need).is_file():
            return bootstrap.fail(f"view.py: error: {run / need} not found")
    try:
        source = ReplaySource.of(run)
    except (ReplayError, ScenarioError) as err:
        return bootstrap.fail(f"view.py: error: {str(err).splitlines()[0]}")
    try:
        server = ViewServer(source, a.port, a.host)
    except OSError as err:
        return bootstrap.fail(f"view.py: error: cannot serve on {a.host}:{a.port}: {err}", 1)
    server.start()
    print(f"[view] {server.url}  (replay of {run}; Ctrl-C ends)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
