"""compare_run on a synthetic run directory drawn from the model's own distribution."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fogsdn.core.scenario import load_scenario
from fogsdn.core.trace import Outcome, TraceRow, read_trace, write_trace
from fogsdn.exact.ctmc import predict
from fogsdn.exact.model_params import model_params_from_scenario
from fogsdn.measure.compare import compare_run
from fogsdn.measure.metrics import measured_summary

ROOT = Path(__file__).resolve().parents[1]


def _synthetic_run(tmp: Path, policy: str = "prioritized") -> Path:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(
        {"policy.name": policy})
    (tmp / "scenario.yaml").write_text(sc.to_yaml())
    rng = np.random.default_rng(7)
    rows: list[TraceRow] = []
    try:
        pr = predict(model_params_from_scenario(sc))
    except ValueError:
        pr = None
    grid = np.linspace(0, 200, 4001)
    cdfs = {c: pr.cdf(c, grid) for c in ("hp", "lp")} if pr is not None else {}
    t = sc.warmup_ms
    for i in range(4000):
        cls = "hp" if i % 8 < 3 else "lp"
        t += rng.exponential(1.0 / 0.8)
        if pr is not None:
            # inverse-transform sample from the exact CDF on a grid
            node_ms = float(np.interp(rng.uniform(), cdfs[cls], grid))
        else:
            node_ms = float(rng.exponential(3.0))
        rows.append(TraceRow(request_id=str(i), client="c1", cls=cls, size=1.0, t_send=t,
                             t_done=t + node_ms, node="fn", outcome=Outcome.OK,
                             response_ms=node_ms + 0.5, node_ms=node_ms))
    write_trace(tmp / "trace.csv", rows)
    summary = {"measured": measured_summary(read_trace(tmp / "trace.csv"), sc.warmup_ms,
                                            sc.deadline_ms)}
    (tmp / "summary.json").write_text(json.dumps(summary))
    return tmp


def test_compare_adds_prediction_and_plot(tmp_path: Path) -> None:
    run = _synthetic_run(tmp_path)
    text = compare_run(run)
    s = json.loads((run / "summary.json").read_text())
    assert s["predicted"]["hp"]["W"] > 0
    assert set(s["comparison"]) == {"hp", "lp"}
    w = s["comparison"]["hp"]["W"]
    assert abs(w["rel_gap"]) < 0.15  # 1500 samples from the exact distribution
    assert (run / "comparison.png").stat().st_size > 1000
    assert "HP" in text and "LP" in text
    assert "measured" in s  # kept


def test_compare_outside_model(tmp_path: Path) -> None:
    run = _synthetic_run(tmp_path, policy="nearest")
    text = compare_run(run)
    s = json.loads((run / "summary.json").read_text())
    assert s["predicted"] is None
    assert "policy" in s["outside_model"]
    assert "outside the model" in text


def test_a_broken_summary_is_one_line_naming_it_from_compare_and_the_replay(
        tmp_path: Path) -> None:
    """A summary.json cut short (a full disk, a killed writer) or not an object: compare.py
    and the view's replay say which file, in one line; nothing is rewritten."""
    import subprocess
    import sys

    import pytest

    from fogsdn.view.replay import ReplayError, ReplaySource

    run = _synthetic_run(tmp_path)
    for text, cause in (('{"measured": ', "not readable as JSON"),
                        ("[1, 2]", "a JSON object expected, got list")):
        (run / "summary.json").write_text(text)
        with pytest.raises(ValueError, match=f"summary.json: {cause}"):
            compare_run(run, plot=False)
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "compare.py"), str(run)],
                           capture_output=True, text=True, timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert str(run / "summary.json") in lines[0] and cause in lines[0]
        with pytest.raises(ReplayError, match="summary.json"):
            ReplaySource.of(run)
        assert (run / "summary.json").read_text() == text
