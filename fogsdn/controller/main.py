"""Controller process: os-ken's app manager running `fogsdn.controller.app`, owned by the runner.

os-ken 4.x has no `osken-manager`; options are set with `cfg.CONF.set_override`
(echo settings included, or the native hub misses disconnects: docs/architecture.md).

    FOGSDN_CONTROLLER_CONFIG=RUN/controller.json python -m fogsdn.controller.main --port 6653
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys

SWITCH_INTERVAL_S = 0.0005  # the controller's GIL switch interval (Python's default: 5 ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=6653)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--app", action="append", default=None,
                    help="os-ken app module(s) to run (default: fogsdn.controller.app)")
    ap.add_argument("--realtime", action="store_true",
                    help="run SCHED_FIFO (root): a churn change reaches the switch without "
                         "waiting for the CPU (docs/emulation.md)")
    a = ap.parse_args(argv)

    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    cfg.CONF(args=[], project="os_ken")
    cfg.CONF.set_override("ofp_listen_host", a.host)
    cfg.CONF.set_override("ofp_tcp_listen_port", a.port)
    cfg.CONF.set_override("echo_request_interval", 1.0)
    cfg.CONF.set_override("maximum_unreplied_echo_requests", 5)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    def _term(signum: int, frame: object) -> None:
        # os-ken's native hub threads cannot be killed (run_apps' own cleanup raises
        # AttributeError on them); nothing is buffered (events are flushed per line)
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, _term)
    # every thread's stack into controller.log on SIGUSR1: the runner asks for it when a
    # switch gets no rules in time, so that a hung start-up says where it hung
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # a barrier reply crosses three threads (os-ken's receive loop, the app's event loop,
    # the waiting registration); with Python's 5 ms switch interval each hand-over could
    # wait for the interpreter: OFN change to barrier p50 / p99 2.25 / 5.5 ms, 1.2 / 2.1
    # ms at 0.5 ms (docs/emulation.md)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if a.realtime:  # before os-ken starts its threads, so that all inherit it
        from fogsdn.core.realtime import go_realtime

        logging.info("SCHED_FIFO %s", "granted" if go_realtime() else "refused")
    apps = a.app or ["fogsdn.controller.app"]
    AppManager.run_apps(["os_ken.controller.ofp_handler", *apps])
    return 0


if __name__ == "__main__":
    sys.exit(main())
