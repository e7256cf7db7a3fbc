"""A time-varying workload (workload.profile): the time change, the scenario field, the
arrival stream every engine draws, and the per-phase comparison."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, poisson

from fogsdn.core.rate_profile import ProfileError, RateProfile
from fogsdn.core.scenario import ScenarioError, load_scenario
from fogsdn.core.workload import arrivals
from fogsdn.exact.model_params import OutsideModel, exact_prediction
from fogsdn.live.queueing_run import check_live_limits
from fogsdn.measure.comparison import compare_phases, phase_scenario
from fogsdn.sim.runner import run_simulation

ROOT = Path(__file__).resolve().parents[1]
PHASES = {"phases": [{"duration_ms": 1000, "factor": 0.5}, {"duration_ms": 500, "factor": 0.0},
                     {"duration_ms": 1500, "factor": 2.0}]}


def _scenario(profile: dict | None = PHASES, **top: object):  # type: ignore[no-untyped-def]
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    return sc.with_overrides({"workload.profile": profile, **top})


def test_warp_inverts_the_cumulative_rate() -> None:
    p = RateProfile((1000.0, 500.0, 1500.0), (0.5, 0.0, 2.0))
    # Lambda: 0..500 over phase 0, flat over phase 1, 500..3500 over phase 2; period 3500
    u = np.array([0.0, 250.0, 500.0, 501.0, 3500.0, 3750.0])
    assert p.warp(u).tolist() == pytest.approx([0.0, 500.0, 1000.0, 1500.5, 3000.0, 3500.0])
    assert p.phases_at(np.array([0.0, 999.9, 1000.0, 1499.0, 1500.0, 3000.0, 4100.0])
                       ).tolist() == [0, 0, 1, 1, 2, 0, 1]
    once = RateProfile((1000.0, 1000.0), (1.0, 3.0), repeat=False)
    assert once.warp(np.array([1000.0, 4000.0, 7000.0])).tolist() == pytest.approx(
        [1000.0, 2000.0, 3000.0])  # the last phase goes on
    assert p.exposure_ms(100.0, 4000.0) == pytest.approx([900.0 + 1000.0, 500.0, 1500.0])


@pytest.mark.parametrize(("durations", "factors", "repeat", "field"), [
    ((1000.0,), (-1.0,), True, "phases[0].factor"),
    ((0.0,), (1.0,), True, "phases[0].duration_ms"),
    ((1.0, 1.0), (1.0, 0.0), False, "last phase"),
    ((1.0, 1.0), (0.0, 0.0), True, "every factor is 0"),
])
def test_a_profile_that_gives_no_rate_is_refused_by_name(
        durations: tuple[float, ...], factors: tuple[float, ...], repeat: bool, field: str) -> None:
    with pytest.raises(ProfileError, match=field.replace("[", r"\[").replace("]", r"\]")):
        RateProfile(durations, factors, repeat)


def test_the_scenario_field_is_checked_with_a_one_line_error() -> None:
    with pytest.raises(ScenarioError, match="workload.profile") as err:
        _scenario({"phases": [{"duration_ms": 10, "factor": 0}]})
    assert "\n" not in str(err.value)
    with pytest.raises(ScenarioError, match="duration_ms"):
        _scenario({"phases": [{"duration_ms": -5, "factor": 1}]})


def test_each_phase_gets_its_rate_and_the_other_streams_are_unchanged() -> None:
    sc = _scenario()
    lam = sc.workload.lambda_hp + sc.workload.lambda_lp
    span = 3000.0 * 40
    got = list(arrivals(sc.workload, seed=3, until_ms=span))
    phase = RateProfile((1000.0, 500.0, 1500.0), (0.5, 0.0, 2.0)).phases_at(
        np.array([a.t_ms for a in got]))
    for i, rate in enumerate((0.5 * lam * 1000 * 40, 0.0, 2.0 * lam * 1500 * 40)):
        n = int((phase == i).sum())
        if rate == 0:
            assert n == 0
        else:  # Poisson counts: inside the central 99.9 %
            assert poisson.ppf(0.0005, rate) <= n <= poisson.ppf(0.9995, rate), (i, n, rate)
    # common random numbers: the k-th arrival's class, client and size are the
    # stationary stream's k-th
    flat = list(itertools.islice(arrivals(sc.workload.model_copy(update={"profile": None}),
                                          seed=3, until_ms=math.inf), 500))
    assert [(a.cls, a.client, a.size) for a in got[:500]] == [
        (a.cls, a.client, a.size) for a in flat[:500]]
    hp = sum(a.cls.value == "hp" for a in got)
    assert binomtest(hp, len(got), sc.workload.lambda_hp / lam).pvalue > 1e-3
    assert sc.expected_requests(3000.0) == pytest.approx(lam * (500 + 3000))


def test_no_stationary_prediction_and_live_limits_read_the_busiest_phase() -> None:
    sc = _scenario()
    with pytest.raises(OutsideModel, match="workload.profile"):
        exact_prediction(sc)
    ok = _scenario({"phases": [{"duration_ms": 100, "factor": 1.0}]}, time_scale=0.5)
    check_live_limits(ok)  # 1.6 requests per real ms: within the live limit
    with pytest.raises(ScenarioError, match="busiest phase"):
        check_live_limits(_scenario({"phases": [{"duration_ms": 100, "factor": 1.0},
                                                {"duration_ms": 100, "factor": 40.0}]},
                                    time_scale=0.5))


def test_phase_comparison_mixes_the_phases_by_their_requests(tmp_path: Path) -> None:
    sc = _scenario({"phases": [{"duration_ms": 5000, "factor": 0.5},
                               {"duration_ms": 5000, "factor": 1.5}]}, duration_ms=100_000)
    assert phase_scenario(sc, 1).workload.lambda_lp == pytest.approx(0.75)
    assert phase_scenario(sc, 1).workload.profile is None
    run_simulation(sc, tmp_path / "sim")
    from fogsdn.core.trace import read_trace

    fields, text = compare_phases(sc, read_trace(tmp_path / "sim" / "trace.csv"))
    assert "phase 1 (factor 1.5" in text and "overall" in text
    p0, p1 = (exact_prediction(phase_scenario(sc, i)).to_dict() for i in (0, 1))
    for cls in ("hp", "lp"):
        # arrivals per phase 1:3, answered ones weighted by (1 - blocking)
        a0, a1 = 1.0 * (1 - p0[cls]["blocking"]), 3.0 * (1 - p1[cls]["blocking"])
        w = (a0 * p0[cls]["W"] + a1 * p1[cls]["W"]) / (a0 + a1)
        assert fields["predicted"][cls]["W"] == pytest.approx(w, rel=1e-3)
        # the simulated phases agree with their own stationary model (long phases)
        for ph in fields["phases"]:
            c = ph["comparison"][cls]["W"]
            assert abs(c["rel_gap"]) < 0.1, (ph["phase"], cls, c)
    busy = fields["phases"][1]["comparison"]["lp"]["W"]["measured"]
    quiet = fields["phases"][0]["comparison"]["lp"]["W"]["measured"]
    assert busy > 2 * quiet
