"""Command-line arguments every CLI shares, so that they mean the same everywhere."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from fogsdn.core.timebase import Timebase  # standard library only, as this module: the

# scripts import it before their set-up


class ArgumentError(ValueError):
    """A command-line value refused; the message names the flag."""


def add_view_arguments(ap: argparse.ArgumentParser) -> None:
    """`--view [PORT]` and `--view-host` (the run command's and the study command's)."""
    ap.add_argument("--view", nargs="?", type=int, const=8080, metavar="PORT",
                    help="emulate: serve the run's page and REST API on 127.0.0.1:PORT "
                         "(default 8080; 0: any free port; docs/view.md)")
    ap.add_argument("--view-host", metavar="ADDR", default="127.0.0.1",
                    help="with --view: the address to serve on (anything but loopback is "
                         "reachable from other machines: a warning is printed)")


def add_span_arguments(ap: argparse.ArgumentParser, per: str = "") -> None:
    """`--duration SECONDS` (of live load, as in every CLI) or `--model-ms MS`."""
    span = ap.add_mutually_exclusive_group()
    span.add_argument("--model-ms", type=float, metavar="MS",
                      help=f"model ms of arrivals{per}")
    span.add_argument("--duration", type=float, metavar="SECONDS",
                      help=f"seconds of live load{per}: SECONDS * 1000 / time_scale model ms, "
                           "the same span in every engine")


def span_ms(args: argparse.Namespace, time_scale: float) -> float | None:
    """The model-time span the arguments ask for (None: the scenario's); ArgumentError when
    it is not positive."""
    if args.duration is not None:
        return duration_span_ms(args.duration, time_scale)
    if args.model_ms is not None and args.model_ms <= 0:
        raise ArgumentError("--model-ms: must be > 0")
    return None if args.model_ms is None else float(args.model_ms)


def duration_span_ms(seconds: float, time_scale: float) -> float:
    """The model ms that `seconds` of live load span at `time_scale`; ArgumentError when
    `seconds` is not positive."""
    if seconds <= 0:
        raise ArgumentError("--duration: must be > 0 seconds")
    return Timebase(time_scale).model_ms(float(seconds))


def command_after_dashes(remainder: list[str]) -> list[str]:
    """A wrapper's command from its `nargs=REMAINDER` argument, without the `--` that
    separates it from the wrapper's own options."""
    return remainder[1:] if remainder[:1] == ["--"] else remainder


def require_count(flag: str, value: int | None) -> None:
    """ArgumentError naming `flag` when a count was given and is below 1."""
    if value is not None and value < 1:
        raise ArgumentError(f"{flag} must be >= 1")


def fail(message: object, code: int = 2) -> int:
    """Print a script's one-line error on stderr; returns the exit status to return."""
    print(message, file=sys.stderr)
    return code


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line, `PROG: error: ...`, exit 2, like the scripts' own
    errors (argparse prints the whole usage first); give `prog`, the script's name."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)
