"""The timebase: the one conversion between model and real time."""

from __future__ import annotations

import math

import pytest
from conftest import scenario_dict

from fogsdn.core.timebase import Timebase, TimebaseError


def test_model_and_real_time_convert_both_ways() -> None:
    tb = Timebase(5.0)
    assert tb.real_ms(2.0) == 10.0
    assert tb.real_s(200.0) == pytest.approx(1.0)
    assert tb.model_ms(1.0) == pytest.approx(200.0)
    assert tb.model_ms_of_real_ms(10.0) == pytest.approx(2.0)
    assert tb.model_ms(tb.real_s(123.4)) == pytest.approx(123.4)
    assert tb.real_rate_per_s(tb.model_rate_per_ms(40.0)) == pytest.approx(40.0)
    assert tb.real_s_per_model_ms == pytest.approx(0.005)


def test_an_instant_is_model_time_since_the_epoch_and_nan_before_a_start() -> None:
    assert math.isnan(Timebase(2.0).model_ms_at(10.0))
    assert Timebase(2.0).started(10.0).model_ms_at(10.5) == pytest.approx(250.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, True, "5"])
def test_a_time_scale_that_cannot_stretch_time_is_refused(bad: object) -> None:
    with pytest.raises(TimebaseError, match="time_scale"):
        Timebase(bad)  # type: ignore[arg-type]


def test_a_scenario_hands_out_its_timebase() -> None:
    from fogsdn.core.scenario import parse_scenario
    sc = parse_scenario(scenario_dict(time_scale=24))
    assert sc.timebase == Timebase(24.0)
    assert sc.timebase.model_ms(sc.timebase.real_s(sc.duration_ms)) == pytest.approx(
        sc.duration_ms)
