"""Scenario numbers are numbers: a non-finite value (`.inf`, `.nan`) or a boolean where
a number goes is a one-line error naming the field, in every model of the schema (one
base class), never a silent coercion or a hang further on. Property-based: generated
documents are either refused in one line or parse into a scenario whose numbers are
finite (hypothesis, seeded and bounded)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import scenario_dict
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fogsdn.core.scenario import Scenario, ScenarioError, parse_scenario

# (dotted field, where it sits in scenario_dict's document)
NUMBER_FIELDS = [
    ("duration_ms", ()), ("timeout_ms", ()), ("deadline_ms", ()), ("time_scale", ()),
    ("seed", ()), ("workload.lambda_hp", ("workload",)), ("workload.lambda_lp", ("workload",)),
    ("nodes.0.mu", ("nodes", 0)), ("nodes.0.capacity", ("nodes", 0)),
    ("churn.eta", ("churn",)), ("churn.xi", ("churn",)),
]


def _with(field: str, value: Any) -> dict[str, Any]:
    doc = scenario_dict()
    *path, last = field.split(".")
    node: Any = doc
    for part in path:
        node = node[int(part)] if part.isdigit() else node[part]
    node[last] = value
    return doc


@pytest.mark.parametrize("field", [f for f, _ in NUMBER_FIELDS])
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, True, False],
                         ids=["inf", "-inf", "nan", "true", "false"])
def test_a_non_finite_or_boolean_number_is_refused_naming_the_field(field: str,
                                                                   bad: Any) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_with(field, bad))
    line = str(err.value)
    assert "\n" not in line
    assert field.rsplit(".", 1)[-1] in line, line


def test_booleans_stay_welcome_where_the_field_is_a_boolean() -> None:
    doc = scenario_dict()
    assert parse_scenario(doc).model_dump() == parse_scenario(dict(doc)).model_dump()


def _finite_numbers(x: Any) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite_numbers(v) for v in x.values())
    if isinstance(x, list | tuple):
        return all(_finite_numbers(v) for v in x)
    return True


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.integers(min_value=-10**6, max_value=10**6))


@seed(20261204)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([f for f, _ in NUMBER_FIELDS]), numbers),
                min_size=1, max_size=4))
def test_generated_numbers_are_refused_in_one_line_or_parse_finite(
        changes: list[tuple[str, Any]]) -> None:
    doc = scenario_dict()
    for field, value in changes:
        doc = _with_doc(doc, field, value)
    try:
        sc = parse_scenario(doc)
    except ScenarioError as err:
        assert "\n" not in str(err)
        return
    assert isinstance(sc, Scenario)
    assert _finite_numbers(sc.model_dump())
    assert not any(isinstance(v, bool) for v in dict(changes).values())  # the last wins


def _with_doc(doc: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    *path, last = field.split(".")
    node: Any = doc
    for part in path:
        node = node[int(part)] if part.isdigit() else node[part]
    node[last] = value
    return doc


@pytest.mark.parametrize(("field", "value", "cause"), [
    ("nodes.0.mu", 1e-300, "greater than or equal to 1e-09"),
    ("nodes.0.mu", 1e300, "less than or equal to 1000000000"),
    ("workload.lambda_hp", 1e300, "less than or equal to 1000000000000"),
    ("churn.eta", 1e300, "less than or equal to 1000000"),
    ("churn.xi", 1e300, "less than or equal to 1000000"),
    ("timeout_ms", 1e300, "less than or equal to 1000000000000000"),
    ("deadline_ms", 1e300, "less than or equal to 1000000000000000"),
    ("duration_ms", 1e300, "less than or equal to 1000000000000"),
    # each bound alone, but together a mean service no run could drain (it hung the
    # simulator: its drain loop stepped churn for ever)
    ("nodes.0.mu", 1e-8, "model ms of mean service at fn; at most 1e+07"),
])
def test_an_absurd_magnitude_is_refused_naming_the_field(field: str, value: float,
                                                         cause: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_with(field, value))
    line = str(err.value)
    assert "\n" not in line and field in line and cause.replace("1e-09", "") in line, line
