"""One driver for every study (a `Study` plug-in): its points run on one executor, one
progress line per point, then its tables and figures.

Points are independent runs, so they fan out on a process pool or Ray
(docs/scale-out.md); a failed point is reported and the others go on; Ctrl-C keeps the
finished points. `fogsdn.cli.study_command` builds the plug-in a file declares.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, NotRequired, Protocol, TypedDict, TypeVar

Engine = Literal["simulate", "emulate"]
Executor = Literal["process", "ray", "serial"]
Row = dict[str, Any]
# one point's row: a study's own (a TypedDict, as `fogsdn.studies.sweep.SweepRow`) or a Row
RowT = TypeVar("RowT")


class StudyError(RuntimeError):
    """A study that cannot run at all (as opposed to one failed point)."""


class LivePointFailed(RuntimeError):
    """A live point whose run crashed or failed: its numbers are not a measurement, so
    the point is reported failed (and the command exits non-zero), never kept as a row."""


def live_point_verdict(summary: Mapping[str, object], run_dir: Path) -> Mapping[str, object]:
    """The framework's verdict on one live point's run (`summary.json`'s content): an
    interrupted run stops the study (KeyboardInterrupt: the finished points are kept), a
    crashed or failed one fails the point (LivePointFailed); else the summary."""
    if summary.get("interrupted"):
        raise KeyboardInterrupt  # the live run tore down; the study keeps its points
    if summary.get("crashed") or summary.get("failure"):
        incidents = summary.get("incidents")
        what = "; ".join(f"{i.get('process')} {i.get('exit')}"
                         for i in (incidents if isinstance(incidents, list) else [])
                         if isinstance(i, dict)) or summary.get("failure")
        raise LivePointFailed(f"the live run crashed ({what}): not a measurement ({run_dir})")
    return summary


class Study(Protocol[RowT]):
    """A study: `plan` gives its points (each with a `label()`); `job(point, *job_args)`,
    module-level so that processes and Ray tasks can take it, runs one and gives its
    rows; `record` says what a finished point found; `finish` writes tables and figures."""

    name: str
    engine: Engine
    job: Callable[..., list[RowT]]
    job_args: tuple[Any, ...]
    # a study run live as one supervised run (the city) writes its summary.json here;
    # its verdict (3 crashed, 130 interrupted) is the command's exit status
    live_summary: Path | None

    def plan(self) -> Sequence[Any]: ...

    def record(self, point: Any, rows: list[RowT]) -> str: ...

    def finish(self, rows: list[RowT], failures: list[tuple[Any, str]]) -> list[Path]: ...


@dataclass
class StudyResult(Generic[RowT]):
    rows: list[RowT] = field(default_factory=list)
    failures: list[tuple[Any, str]] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)


# -- the live point ----------------------------------------------------------------------

LOCK = Path("/tmp/fogsdn-emulation.lock")  # one emulation per host at a time


def lock_holders(proc_locks: str, inode: int) -> set[int]:
    """The PIDs that hold a FLOCK on the file with this inode, from /proc/locks's text
    (`1: FLOCK  ADVISORY  WRITE 4242 fe:00:1474595 0 EOF`; blocked waiters, `->`, aside)."""
    holders = set()
    for line in proc_locks.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] \
                == str(inode):
            holders.add(int(fields[4]))
    return holders


def ancestors(pid: int) -> set[int]:
    """`pid`'s parent, its parent's parent, ... up to PID 1."""
    found: set[int] = set()
    while pid > 1 and pid not in found:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        found.add(pid)
    return found


@contextmanager
def emulation_lock(path: Path = LOCK, say: Callable[[str], None] | None = None
                   ) -> Iterator[None]:
    """The host's emulation lock (flock) for one live run; already ours where an
    ancestor holds it (`sudo flock /tmp/fogsdn-emulation.lock python scripts/...`, as
    the docs run the long live studies), so that wrapping does not deadlock."""
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = lock_holders(Path("/proc/locks").read_text(), os.fstat(fh.fileno()).st_ino)
            if not holders & ancestors(os.getpid()):
                if say is not None:
                    say(f"waiting for the emulation lock {path} (held by PID "
                        f"{', '.join(map(str, sorted(holders))) or '?'})")
                fcntl.flock(fh, fcntl.LOCK_EX)  # given back when the file closes
        yield


def run_live_point(scenario: Any, run_dir: Path) -> Mapping[str, object]:
    """One live point, as every study runs it: under the host's emulation lock, then
    the framework's verdict on it (`live_point_verdict`); returns summary.json's content."""
    from fogsdn.live.queueing_run import run_emulation

    with emulation_lock(say=lambda s: print(f"[study] {s}", file=sys.stderr, flush=True)):
        summary = run_emulation(scenario, run_dir, show_progress=False)
    return live_point_verdict(summary, run_dir)


# -- executors -------------------------------------------------------------------------

Outcome = tuple[Any, list[RowT] | None, str | None]  # point, its rows or its error


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".replace("\n", " ")[:500]


def _serial(points: Sequence[Any], job: Callable[..., list[RowT]], args: tuple[Any, ...]
            ) -> Iterator[Outcome[RowT]]:
    for p in points:
        try:
            yield p, job(p, *args), None
        except Exception as err:  # noqa: BLE001 - report the point, keep the others
            yield p, None, error_text(err)


def _process(points: Sequence[Any], workers: int, job: Callable[..., list[RowT]],
             args: tuple[Any, ...]) -> Iterator[Outcome[RowT]]:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: dict[Future[list[RowT]], Any] = {pool.submit(job, p, *args): p for p in points}
        for fut in as_completed(futures):
            p = futures[fut]
            try:
                yield p, fut.result(), None
            except Exception as err:  # noqa: BLE001
                yield p, None, error_text(err)


RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# A Ray node that can emulate offers one unit of this resource (`ray start --resources
# '{"fogsdn_emulation": 1}'`, as root, with Open vSwitch); a live point takes the unit,
# so each node runs one emulation at a time while the nodes run theirs in parallel.
EMULATION_RESOURCE = "fogsdn_emulation"


class RayOptions(TypedDict):
    """`ray.remote`'s options for a point's task."""

    num_cpus: int
    resources: NotRequired[dict[str, float]]


def _ray(points: Sequence[Any], workers: int, address: str | None,
         job: Callable[..., list[RowT]], args: tuple[Any, ...],
         options: RayOptions, local_resources: dict[str, float] | None = None,
         need: str | None = None) -> Iterator[Outcome[RowT]]:
    """Ray tasks `job(point, *args)`: on a private local Ray (started and shut down here)
    or, with an address, on an existing cluster. Never `ray stop`: it kills by name
    machine-wide. `need`: a custom resource some node must offer, or a one-line error."""
    try:
        import ray
    except ImportError:
        raise StudyError(
            "--executor ray needs Ray: .venv/bin/pip install 'fogsdn[sweep]'"
        ) from None
    started = not ray.is_initialized()
    saved_env: dict[str, str | None] = {}
    tmp: str | None = None
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            # a bare ray.init() would silently join any running cluster: always say 'local'
            tmp = tempfile.mkdtemp(prefix="fogsdn-ray-")
            env = RAY_ENV | {"RAY_TMPDIR": tmp}
            saved_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            ray.init(address="local", num_cpus=workers, include_dashboard=False,
                     log_to_driver=False, resources=local_resources or None)
    try:
        if need is not None and ray.cluster_resources().get(need, 0) < 1:
            raise StudyError(
                f"no Ray node offers the {need!r} resource: start each host that can "
                f"emulate with `ray start --resources='{{\"{need}\": 1}}'` (as root)")
        task = ray.remote(max_retries=0, **options)(job)
        pending = {task.remote(p, *args): p for p in points}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                p = pending.pop(ref)
                try:
                    yield p, ray.get(ref), None
                except Exception as err:  # noqa: BLE001 - RayTaskError wraps the cause
                    cause = getattr(err, "cause", None) or err
                    yield p, None, error_text(cause)
    finally:
        if started:
            ray.shutdown()
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


def execute(points: Sequence[Any], job: Callable[..., list[RowT]], args: tuple[Any, ...], *,
            live: bool = False, executor: Executor = "process", workers: int | None = None,
            ray_address: str | None = None) -> tuple[Iterator[Outcome[RowT]], str]:
    """The outcomes of `job(point, *args)` for every point as they finish, and how they
    run (for the progress line)."""
    workers = workers or min(len(points), os.cpu_count() or 1) or 1
    if live and executor == "ray":
        return (_ray(points, workers, ray_address, job, args,
                     {"num_cpus": 1, "resources": {EMULATION_RESOURCE: 1}},
                     local_resources={EMULATION_RESOURCE: 1}, need=EMULATION_RESOURCE),
                f"live on Ray ({ray_address or 'local'}), one emulation per node at a time")
    if live:
        return _serial(points, job, args), "live, one point at a time"
    if executor == "ray":
        return (_ray(points, workers, ray_address, job, args, {"num_cpus": 1}),
                f"Ray ({ray_address or f'local, {workers} CPUs'})")
    if executor == "serial" or workers == 1:
        return _serial(points, job, args), "in this process"
    return _process(points, workers, job, args), f"process pool of {workers}"


# -- the driver -------------------------------------------------------------------------


def run_study(study: Study[RowT], out_dir: Path, *, executor: Executor = "process",
              workers: int | None = None, ray_address: str | None = None,
              log: Callable[[str], None] | None = None) -> StudyResult[RowT]:
    """Run every point of `study` (`out_dir` is where it said it writes), then its
    tables and figures."""
    say = log or (lambda s: print(s, file=sys.stderr, flush=True))
    if study.engine == "emulate" and study.live_summary is None:
        with sigterm_as_ctrl_c():  # a live point tears down as on Ctrl-C; points kept
            return _run_study(study, out_dir, executor, workers, ray_address, say)
    return _run_study(study, out_dir, executor, workers, ray_address, say)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt meanwhile (in the main thread), as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run_study(study: Study[RowT], out_dir: Path, executor: Executor, workers: int | None,
               ray_address: str | None, say: Callable[[str], None]) -> StudyResult[RowT]:
    points = study.plan()
    outcomes, how = execute(points, study.job, study.job_args, live=study.engine == "emulate",
                            executor=executor, workers=workers, ray_address=ray_address)
    say(f"[{study.name}] {len(points)} points ({study.engine}, {how}) -> {out_dir}")
    result: StudyResult[RowT] = StudyResult()
    t0 = time.perf_counter()
    done = 0
    try:
        for k, (p, rows, err) in enumerate(outcomes, 1):
            head = f"[{study.name} {k}/{len(points)} {time.perf_counter() - t0:6.1f}s] {p.label()}"
            if rows is None:
                assert err is not None
                result.failures.append((p, err))
                say(f"{head}: FAILED: {err}")
                continue
            result.rows.extend(rows)
            done += 1
            say(f"{head}: {study.record(p, rows)}")
    except KeyboardInterrupt:
        say(f"[{study.name}] interrupted: keeping the finished points")
    try:
        result.outputs = study.finish(result.rows, result.failures)
    except Exception as err:  # noqa: BLE001 - the numbers are kept even if plotting fails
        say(f"[{study.name}] could not draw the figures: {error_text(err)}")
        traceback.print_exc()
    for path in result.outputs:
        say(f"[{study.name}] wrote {path}")
    say(f"[{study.name}] {done} of {len(points)} points done, {len(result.failures)} "
        f"failed, {time.perf_counter() - t0:.1f} s")
    return result
