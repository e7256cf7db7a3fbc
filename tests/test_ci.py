"""Honest CI: an emulation test that cannot run fails under CI=true and skips elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

# any emulation test does; this one imports little, so the two pytest runs start fast
LIVE_TEST = "tests/test_probe.py::test_probe_across_namespaces"


def _pytest_without_ovs(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(Path(sys.executable).parent)  # no ovs-vsctl: Open vSwitch is absent
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           LIVE_TEST], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


def test_ci_fails_when_the_emulation_tests_cannot_run_and_elsewhere_they_skip() -> None:
    r = _pytest_without_ovs("true")
    assert r.returncode == 1, r.stdout
    assert "CI: emulation tests need" in r.stdout and "1 error" in r.stdout
    # a developer's machine without OVS: a skip that says why
    r = _pytest_without_ovs(None)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout


SKIPS_SAMPLE = "tests/data/ci_skips_sample.py"


def _pytest_sample(ci: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", SKIPS_SAMPLE, *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)


def test_under_ci_every_skip_fails_unless_the_test_is_allowed_to() -> None:
    r = _pytest_sample("true", "-rA")
    assert r.returncode == 1, r.stdout
    for name in ("test_skips_in_its_body", "test_imports_a_package_that_is_absent"):
        assert f"FAILED {SKIPS_SAMPLE}::{name} - CI: skipped without" in r.stdout, r.stdout
    assert f"ERROR {SKIPS_SAMPLE}::test_skipped_by_a_marker - CI: skipped without" in r.stdout
    assert "2 failed, 1 passed, 1 skipped, 1 xfailed, 1 error" in r.stdout, r.stdout
    # elsewhere each skip says why and the run passes
    r = _pytest_sample("false")
    assert r.returncode == 0 and "1 passed, 4 skipped, 1 xfailed" in r.stdout, r.stdout


def test_a_stage_reports_what_ran_and_fails_when_nothing_did(tmp_path: Path) -> None:
    from run_tests import StageCounts, stage_counts, stage_verdict

    report = tmp_path / "stage.xml"
    r = _pytest_sample("false", f"--junitxml={report}")
    assert r.returncode == 0, r.stdout
    counts = stage_counts(report)
    assert counts == StageCounts(ran=1, skipped=5)  # the xfail counts as not having run
    assert stage_verdict(0, counts) == (True, "passed (1 ran, 5 skipped)")
    # everything skipped: pytest says 0, the stage fails
    r = _pytest_sample("false", "-k", "not test_runs", f"--junitxml={report}")
    assert r.returncode == 0, r.stdout
    assert stage_counts(report) == StageCounts(ran=0, skipped=5)
    assert stage_verdict(0, stage_counts(report)) == (
        False, "FAILED (no test ran; 0 ran, 5 skipped)")
    assert stage_verdict(5, StageCounts(0, 0))[0] is False  # nothing collected
    assert stage_verdict(0, stage_counts(tmp_path / "absent.xml")) == (
        False, "FAILED (no test ran; no report)")
    assert stage_verdict(1, StageCounts(3, 0)) == (False, "FAILED (exit 1; 3 ran, 0 skipped)")
