"""Hostile trace files against the mobility-trace converters (issue 40): random bytes,
truncated and garbled SUMO FCD, BonnMotion and ONE files, huge, NaN and negative
coordinates, wrong column counts, empty files, under hostile placement options. Each is
either refused in one line naming the file (and the line where there is one) or
converted into a position trace whose every position is finite and inside the square
(seeded, bounded: hypothesis)."""

from __future__ import annotations

import gzip
import math
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fogsdn.city.layout import LayoutError, parse_trace, read_position_trace
from fogsdn.city.mobility_traces import (
    FORMATS,
    ConvertOptions,
    Placement,
    TraceError,
    TraceFormat,
    convert_file,
)

DATA = ROOT / "tests" / "data"
SAMPLES: dict[TraceFormat, bytes] = {
    "sumo-fcd": (DATA / "trace_sumo_fcd.xml").read_bytes(),
    "bonnmotion": (DATA / "trace_bonnmotion.movements").read_bytes(),
    "one": (DATA / "trace_one.txt").read_bytes(),
}
SCRIPT = ROOT / "scripts" / "convert_trace.py"

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["1e308", "-1e308", "1e400", "nan", "-inf", "0", "-0", "1_0", "0x10",
                     "", "x", "1,5", "٣"]),
)


@st.composite
def text_lines(draw: st.DrawFn) -> bytes:
    """Lines of whitespace-separated tokens: numbers (some hostile), ids, comments."""
    lines = draw(st.lists(st.lists(st.one_of(NUMBERS, st.sampled_from(["a", "b", "#", "c,d"])),
                                   max_size=12).map(" ".join), max_size=12))
    return "\n".join(lines).encode()


# finite numbers, the huge ones included: well-formed files whose numbers overflow
COORDS = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([0.0, -0.0, 5.0, 1500.0, 1e9, 1e10, 1e300, -1e308, 5e-324]))
TIMES = st.lists(COORDS, min_size=1, max_size=4, unique=True).map(sorted)


@st.composite
def bonnmotion(draw: st.DrawFn) -> bytes:
    """Well-formed BonnMotion: each node's (t x y) triples in time order."""
    nodes = [" ".join(f"{t!r} {draw(COORDS)!r} {draw(COORDS)!r}" for t in draw(TIMES))
             for _ in range(draw(st.integers(1, 3)))]
    return "\n".join(nodes).encode()


@st.composite
def one_movements(draw: st.DrawFn) -> bytes:
    """Well-formed ONE: a header, then `time id x y` lines in time order."""
    lo, hi = sorted(draw(st.lists(COORDS, min_size=2, max_size=2)))
    lines = [f"{lo!r} {hi!r} {lo!r} {hi!r} {lo!r} {hi!r}"]
    lines += [f"{t!r} {draw(st.sampled_from('ab'))} {draw(COORDS)!r} {draw(COORDS)!r}"
              for t in draw(TIMES)]
    return "\n".join(lines).encode()


@st.composite
def fcd_xml(draw: st.DrawFn) -> bytes:
    steps = []
    for _ in range(draw(st.integers(0, 4))):
        kids = "".join(
            f'<{draw(st.sampled_from(["vehicle", "person", "container", "x"]))} '
            f'id="{draw(st.sampled_from(["v0", "v1", "", "a,b"]))}" x="{draw(NUMBERS)}" '
            f'y="{draw(NUMBERS)}"/>' for _ in range(draw(st.integers(0, 3))))
        steps.append(f'<timestep time="{draw(NUMBERS)}">{kids}</timestep>')
    return f'<fcd-export>{"".join(steps)}</fcd-export>'.encode()


@st.composite
def garbled(draw: st.DrawFn, fmt: TraceFormat) -> bytes:
    """A real sample cut short, or with some bytes overwritten."""
    data = bytearray(SAMPLES[fmt])
    for _ in range(draw(st.integers(0, 3))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data[:draw(st.integers(0, len(data)))])


@st.composite
def trace_file(draw: st.DrawFn) -> tuple[TraceFormat, bytes]:
    fmt: TraceFormat = draw(st.sampled_from(FORMATS))
    body = draw(st.one_of(st.binary(max_size=300), text_lines(), fcd_xml(), garbled(fmt),
                          bonnmotion(), one_movements(), st.just(b"")))
    return fmt, body


PLACEMENTS = st.sampled_from([
    {}, {"fit": True}, {"anchor": (0.0, 0.0)}, {"anchor": (1e308, -1e308)},
    {"anchor": (0.0, 0.0), "anchor_is_center": True}, {"scale": 1e300}, {"scale": 1e-300},
    {"geo": True}, {"side_m": 1e-9}, {"side_m": 1e300}, {"anchor": (math.nan, 0.0)},
])
OPTIONS = st.sampled_from([
    {}, {"step_s": 0.5}, {"step_s": 0.001}, {"clients": 2}, {"begin_s": math.nan},
    {"begin_s": 0.0, "end_s": 1e300},
    {"begin_s": -1e300, "end_s": 1.0}, {"min_span_s": 1e300}, {"rename": "c"},
])


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """A hang is a failure of the test, not of CI's patience."""
    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"still converting after {seconds:g} s")

    was = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, was)


def _one_line(msg: str) -> None:
    assert msg and "\n" not in msg, msg


@seed(40)
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=trace_file(), placement=PLACEMENTS, options=OPTIONS, gz=st.booleans())
def test_a_hostile_trace_file_is_converted_inside_the_square_or_named_in_one_line(
        case: tuple[TraceFormat, bytes], placement: dict[str, Any],
        options: dict[str, Any], gz: bool,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    fmt, body = case
    tmp = tmp_path_factory.mktemp("trace", numbered=True)
    path = tmp / ("in.gz" if gz else "in.txt")
    path.write_bytes(gzip.compress(body) if gz else body)
    try:
        opts = ConvertOptions(Placement(**placement), **options)
    except TraceError as err:  # a hostile option: one line naming it
        _one_line(str(err))
        return
    try:
        with _deadline(20.0):
            _, lines = convert_file(fmt, path, opts)
    except TraceError as err:
        msg = str(err)
        _one_line(msg)
        assert msg.startswith(f"{path.name}:"), msg  # the file, then the place in it
        return
    side = opts.placement.side_m
    trace = parse_trace(lines, side_m=side)  # what the city study reads back
    for fixes in trace.fixes.values():
        for t, (x, y) in fixes:
            assert all(math.isfinite(v) for v in (t, x, y)) and 0 <= x <= side and 0 <= y <= side


@seed(40)
@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=200), text_lines().map(lambda b: b"t_s,client,x_m,y_m\n"
                                                             + b.replace(b" ", b","))))
def test_a_hostile_position_trace_is_read_or_named_in_one_line(
        body: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The city study's own CSV (`mobility.trace`), as the simulated and live runs read it."""
    path = tmp_path_factory.mktemp("pos", numbered=True) / "walks.csv"
    path.write_bytes(body)
    try:
        trace = read_position_trace(path, 1500.0)
    except LayoutError as err:
        _one_line(str(err))
        assert str(err).startswith(f"{path}:"), err
        return
    for fixes in trace.fixes.values():
        assert all(math.isfinite(t) and 0 <= x <= 1500 and 0 <= y <= 1500
                   for t, (x, y) in fixes)


@seed(40)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=trace_file())
def test_the_converter_command_never_prints_a_traceback(
        case: tuple[TraceFormat, bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    """The command itself (a few examples: each is a process): exit 0, or 1 with one line."""
    fmt, body = case
    tmp = tmp_path_factory.mktemp("cli", numbered=True)
    (tmp / "in.txt").write_bytes(body)
    r = subprocess.run([sys.executable, str(SCRIPT), "--format", fmt, str(tmp / "in.txt"),
                        str(tmp / "out.csv"), "--fit"], capture_output=True, text=True,
                       timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        parse_trace((tmp / "out.csv").read_text().splitlines(), side_m=1500.0)
    else:
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("convert_trace.py: in.txt:"), r.stderr


# -- what the generated traces found, each kept by a plain test -----------------------------
def _convert(tmp_path: Path, fmt: TraceFormat, body: bytes, **options: object) -> list[str]:
    path = tmp_path / "in.txt"
    path.write_bytes(body)
    return convert_file(fmt, path, ConvertOptions(**options))[1]  # type: ignore[arg-type]


def test_a_huge_coordinate_is_refused_naming_its_line_and_field(tmp_path: Path) -> None:
    """1e308 is finite, but its differences overflow: the result had NaN positions (the
    read-back refused them without naming the file) or the resampling raised
    OverflowError with a traceback."""
    with pytest.raises(TraceError) as err:
        _convert(tmp_path, "bonnmotion", b"0 0 0 8.9885e307 0 0\n", step_s=0.5)
    assert str(err.value) == "in.txt: line 1: field 4 '8.9885e307' is beyond ±1e+09"


def test_resampling_a_long_span_finely_is_refused_not_a_hang(tmp_path: Path) -> None:
    """10^12 samples: the resampler ran for ever."""
    with pytest.raises(TraceError, match=r"^in.txt: step: 0.001 s over 9e\+08 s is more than"):
        with _deadline(20.0):
            _convert(tmp_path, "bonnmotion", b"0 5 5 900000000 6 6\n",
                     placement=Placement(anchor=(0.0, 0.0)), step_s=0.001)


@pytest.mark.parametrize(("options", "why"), [
    ({"begin_s": math.nan}, "begin: must be a number in"),
    ({"min_span_s": math.inf}, "min span: must be a number in [0, 1e+09]"),
    ({"anchor": (math.nan, 0.0)}, "origin/center: must be a number"),
    ({"scale": 1e300}, "scale: must be a number in [1e-09, 1e+09]"),
])
def test_a_non_finite_or_huge_option_is_refused(options: dict[str, Any], why: str) -> None:
    """NaN options were taken: an empty window, or NaN positions, said as something else."""
    with pytest.raises(TraceError, match=re.escape(why)):
        if "anchor" in options or "scale" in options:
            Placement(**options)
        else:
            ConvertOptions(**options)


def test_a_binary_position_trace_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """The city study read its `mobility.trace` with read_text(): a binary file ended the
    study with UnicodeDecodeError's traceback, a bad row without naming the file."""
    path = tmp_path / "walks.csv"
    path.write_bytes(b"t_s,client,x_m,y_m\n\xff\xfe\n")
    with pytest.raises(LayoutError, match=rf"^{re.escape(str(path))}: not UTF-8 text"):
        read_position_trace(path, 1500.0)
    path.write_text("t_s,client,x_m,y_m\n0,a,nan,1\n")
    with pytest.raises(LayoutError) as err:
        read_position_trace(path, 1500.0)
    assert str(err.value) == f"{path}: trace line 2: values must be finite"
    with pytest.raises(LayoutError, match="cannot read"):
        read_position_trace(tmp_path / "absent.csv")


def test_the_converter_names_the_file_when_nothing_in_it_is_usable(tmp_path: Path) -> None:
    """`trace: no fixes` did not say which file."""
    with pytest.raises(TraceError) as err:
        _convert(tmp_path, "bonnmotion", b"# only a comment\n")
    assert str(err.value) == "in.txt: trace: no fixes"
