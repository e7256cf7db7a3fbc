"""The trace's text laid out by numpy (fogsdn/sim/trace_text.py) is `%`'s, byte for byte.

The sink formats plain rows with numpy and the others one `%` at a time; both must give
the bytes the trace always had. Speed is scripts/bench_sim.py's, not a test's.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

from fogsdn.core.latency import request_network
from fogsdn.core.scenario import Scenario, load_scenario
from fogsdn.measure.metrics import MeasuredAccumulator
from fogsdn.sim import output
from fogsdn.sim.engine import simulate
from fogsdn.sim.output import TraceCsvSink
from fogsdn.sim.rows import BLOCKED, LOST, OK, TIMEOUT, Row
from fogsdn.sim.trace_text import LIMIT, fixed6_words, int_words

NAN = math.nan


def _texts(words: list[np.ndarray]) -> list[bytes]:
    m = np.column_stack(words)
    return [row.tobytes().translate(None, b"\0") for row in m]


EDGES = [0.0, 1e-7, 4e-7, 4.9999e-7, 5.0001e-7, 0.5, 0.9999994, 0.9999996, 1.0, 9.9999995,
         123.4565, 99_999_999.999_999_7, 1e8, 123_456_789.123_456, 999_999_999_999.9,
         1 / 3, 2 / 3, 1e-300, 5e-324]


def test_fixed6_is_percent_f_where_it_says_ok() -> None:
    rng = random.Random(7)
    for scale in (1.0, 10.0, 1e3, 1e5, 1e7, 9e7, 1e11):
        xs = EDGES + [rng.expovariate(1.0) * scale for _ in range(5000)]
        words, ok = fixed6_words(np.array(xs))
        assert ok.mean() > 0.99
        for x, fine, text in zip(xs, ok.tolist(), _texts(words), strict=True):
            if fine:
                assert text == f"{x:.6f},".encode(), x


def test_ties_and_values_it_cannot_write_are_not_ok() -> None:
    # exact ties (k / 2**7 has a 5 in the 7th decimal), out of range, NaN, negative, -0.0
    xs = [1 / 128, 3 / 128, 1 + 1 / 128, 2.0**-7 * 1001, LIMIT, 2e12, NAN, -1.0, -0.0,
          float("inf")]
    _, ok = fixed6_words(np.array(xs))
    assert not ok.any()
    # and the same values in a block with plain ones do not disturb those
    words, ok = fixed6_words(np.array([*xs, 1.25, 7.0]))
    assert ok.tolist()[-2:] == [True, True]
    assert _texts(words)[-2:] == [b"1.250000,", b"7.000000,"]


@pytest.mark.parametrize("top", [9, 9_999, 10_000, 99_999_999, 10**8, 10**15])
def test_int_words_are_percent_d_and_percent_07d(top: int) -> None:
    rng = random.Random(top)
    vs = sorted({0, 1, 9, 10, 999, 1000, 9_999, 10_000, 1_234_567, 9_999_999, 10**7, top}
                | {rng.randint(0, top) for _ in range(3000)})
    vs = [v for v in vs if v <= top]
    v = np.array(vs, dtype=np.int64)
    assert _texts(int_words(v)) == [b"%d" % x for x in vs]
    assert _texts(int_words(v, 7)) == [b"%07d" % x for x in vs]


def _python_only(monkeypatch: pytest.MonkeyPatch, sink: TraceCsvSink) -> None:
    """The sink with every row formatted by `%` (its path for rows numpy does not lay out)."""
    monkeypatch.setattr(sink, "_words", False)


def _both(sc: Scenario, tmp: Path, monkeypatch: pytest.MonkeyPatch,
          feed: Callable[[TraceCsvSink], object], **kw: Any) -> tuple[bytes, bytes, str, str]:
    """The trace and summary (as JSON: NaN is text) numpy's way and `%`'s."""
    out = []
    for name, python in (("numpy", False), ("python", True)):
        acc = MeasuredAccumulator(sc.warmup_ms, sc.deadline_ms)
        with TraceCsvSink(tmp / f"{name}.csv", sc, acc, **kw) as sink:
            if python:
                _python_only(monkeypatch, sink)
            feed(sink)
        out.append(((tmp / f"{name}.csv").read_bytes(),
                    json.dumps(acc.summary(), sort_keys=True)))
    return out[0][0], out[1][0], out[0][1], out[1][1]


@pytest.mark.parametrize("overrides", [
    {},  # answered and blocked rows, drain churn
    {"churn.leave": "drop", "timeout_ms": 15.0},  # lost rows with notes, timeouts
    {"churn.leave": "handoff", "timeout_ms": 25.0},  # handoff notes
    {"policy.name": "tags", "churn.leave": "handoff", "timeout_ms": 40.0},  # hosts, wasted
    {"nodes.fn.servers": "multi", "timeout_ms": 20.0},
])
def test_the_sink_writes_what_percent_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             overrides: dict[str, object]) -> None:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(overrides)
    a, b, sa, sb = _both(sc, tmp_path, monkeypatch,
                         lambda sink: simulate(sc, sink, requests=6000))
    assert a.count(b"\n") == 6001
    assert a == b
    assert sa == sb


@pytest.mark.parametrize("link", [{"delay_ms": 2.0},  # a fixed network time, timeouts
                                  {"delay_ms": 2.0, "jitter_ms": 1.0, "loss": 0.01}])
def test_the_sink_with_a_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 link: dict[str, float]) -> None:
    sc = load_scenario(ROOT / "scenarios" / "default_delay.yaml").with_overrides(
        {"topology.link": link, "timeout_ms": 25.0})
    a, b, sa, sb = _both(sc, tmp_path, monkeypatch,
                         lambda sink: simulate(sc, sink, requests=6000),
                         network=request_network(sc), seed=3)
    assert b",timeout," in a
    assert a == b
    assert sa == sb


def test_odd_rows_fall_back_and_keep_their_place(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties, huge times, every outcome and fields of other types (numpy integers; a float
    seq, which the sink cannot pack as an integer), in a block."""
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    rows: list[Row] = [
        (2.5, OK, 0, 0, 0, 1.0, 1.5, 0, 1.0, 1.0),
        (1 + 1 / 128, OK, 1, 1, 1, 1 / 128, 1.0, 1, 1 / 128, 1 / 128),  # ties: %'s rounding
        (3e12, OK, 2, 0, 1, 1.0, 3e12 - 2.0, 0, 1.0, 1.0),  # past LIMIT
        (4.0, BLOCKED, 3, 1, 0, 0.5, 4.0, 1, NAN, NAN),
        (5.0, BLOCKED, 4, 0, 0, 0.5, 5.0, 1, NAN, NAN, "node unavailable"),
        (9.0, TIMEOUT, 5, 0, 1, 2.0, 1.0, 0, 2.0, 2.0, "node finished at 600.000000"),
        (7.0, LOST, 6, 1, 1, 2.0, 6.0, 1, NAN, 2.0, "ofn1 left (drop)"),
        (7.0, LOST, 7, 1, 1, 2.0, 6.0, 1, NAN, NAN, "x"),
        (8.0, OK, 10**8, 0, 0, 3.0, 5.0, 0, 3.0, 3.0),  # seq past %07d's width
        (9.5, OK, 9, 1, 0, 0.25, 9.0, 0, 0.25, 0.3, "", "fn>ofn1", 0.5),  # hosts
    ]
    blocks = [rows, [*rows[:1], *rows],
              [tuple(np.int64(v) if isinstance(v, int) else v for v in rows[0]),
               (2.5, OK, 11.0, 0, 0, 1.0, 1.5, 0, 1.0, 1.0)]]

    def feed(sink: TraceCsvSink) -> None:
        for b in blocks:
            sink(list(b))

    a, b, sa, sb = _both(sc, tmp_path, monkeypatch, feed)
    assert a == b
    assert sa == sb
    lines = a.decode().splitlines()
    assert lines[2].startswith("c2-0000001,c2,lp,0.007812,1.000000,1.007812,ofn1,ok,")
    assert lines[9] == "c1-100000000,c1,hp,3.000000,5.000000,8.000000,fn,ok," \
                       "3.000000,3.000000,0.000000,3.000000,3.000000,,,,"


def test_blocks_of_any_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sink cuts a batch into blocks: the bytes and tallies do not depend on where."""
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    texts = []
    for block in (1024, 4096, 100_000):
        monkeypatch.setattr(output, "BLOCK_ROWS", block)
        acc = MeasuredAccumulator(sc.warmup_ms, sc.deadline_ms)
        with TraceCsvSink(tmp_path / "t.csv", sc, acc) as sink:
            simulate(sc, sink, requests=20_000, flush_rows=10_000)
        texts.append(((tmp_path / "t.csv").read_bytes(), acc.summary()))
    assert texts[0] == texts[1] == texts[2]
