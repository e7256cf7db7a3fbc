"""Tests that skip in each way a test can, run by tests/test_ci.py (not collected by a
plain run: the name does not start with test_)."""

from __future__ import annotations

import pytest


def test_runs() -> None:
    assert 1 + 1 == 2


def test_skips_in_its_body() -> None:
    pytest.skip("decided while running")


@pytest.mark.skipif(True, reason="decided before running")
def test_skipped_by_a_marker() -> None:
    raise AssertionError("never runs")


def test_imports_a_package_that_is_absent() -> None:
    pytest.importorskip("no_such_package_fogsdn")


@pytest.mark.allow_skip("the kernel decides, not the package list")
def test_allowed_to_skip() -> None:
    pytest.skip("environmental")


@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_to_fail() -> None:
    raise AssertionError("known")
