"""The main command's error paths: one clear line, non-zero exit, nothing else run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_broken_scenario_gets_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "scenarios" / "default.yaml").read_text()
                   .replace("capacity: 20", "capacity: -3"))
    r = _run("--engine", "simulate", "--scenario", str(bad), "--out", str(tmp_path / "o"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nodes.0.capacity" in lines[0], r.stderr
    assert not (tmp_path / "o").exists()


def test_unknown_policy_and_bad_duration(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import run_testbed

    rc, _, err = call_main(run_testbed.main, ["--engine", "simulate", "--policy", "roundrobin",
                                              "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "unknown policy 'roundrobin'" in err
    rc, _, err = call_main(run_testbed.main, ["--engine", "simulate", "--duration", "-5",
                                              "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "--duration" in err
    assert not (tmp_path / "o").exists()


def test_simulate_writes_the_results_directory(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    r = _run("--engine", "simulate", "--requests", "2000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    for name in ("trace.csv", "availability.csv", "summary.json", "scenario.yaml"):
        assert (out / name).exists(), name
    assert "measured vs exact" in r.stdout


def test_duration_is_seconds_of_live_load_in_every_cli(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """`--duration 1` at the default time scale (5 real ms per model ms) is 200 model ms,
    in `python -m fogsdn.sim` as in run_testbed.py; `--model-ms` states model time directly.
    (`python -m fogsdn.sim` runs as a process in test_sim_engine.)"""
    import json

    from fogsdn.sim.__main__ import main as sim_main

    for flag, value, want in (("--duration", "1", 200.0), ("--model-ms", "150", 150.0)):
        out = tmp_path / flag.strip("-")
        rc, _, err = call_main(sim_main, [flag, value, "--no-trace", "--out", str(out)], capsys)
        assert rc == 0, err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["stop"]["duration_ms"] == want


def test_every_installed_command_names_a_function_that_exists() -> None:
    """`pip install .` writes one launcher per [project.scripts] entry; one that names a
    missing function installs fine and fails only when a user runs it."""
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    missing = []
    for name, target in scripts.items():
        module, _, func = target.partition(":")
        if not callable(getattr(importlib.import_module(module), func, None)):
            missing.append(f"{name} = {target}")
    assert scripts and missing == []


def test_the_set_up_parses_its_arguments_before_anything_is_installed() -> None:
    """`sudo python scripts/run_testbed.py` on a fresh machine parses its arguments, then
    sets up the environment: nothing it imports before that may need a package outside
    the standard library (a fresh machine once failed with "No module named
    'networkx'"). The child refuses every import that is neither the standard library
    nor the project's own."""
    code = (
        "import sys, importlib.abc\n"
        "own = {'runner', 'controller', 'fogsdn', 'bootstrap', 'scripts'}\n"
        "class Fresh(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        top = name.partition('.')[0]\n"
        "        if top in sys.stdlib_module_names or top in own:\n"
        "            return None\n"
        "        raise ModuleNotFoundError(f'No module named {name!r} (not installed yet)')\n"
        "sys.meta_path.insert(0, Fresh())\n"
        f"sys.path[:0] = [{str(ROOT / 'scripts')!r}, {str(ROOT)!r}]\n"
        "from fogsdn.cli.run_command import parse_args\n"
        "a = parse_args(['--view', '--duration', '5'])\n"
        "import bootstrap\n"
        "print(a.engine, a.view, a.rt_sample)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["emulate", "8080", "16"]


def test_a_run_that_measures_nothing_is_an_error_not_a_table_of_nan(tmp_path: Path) -> None:
    """`--requests 50` at 0.8 requests per model ms ends inside the 100 ms warm-up."""
    r = _run("--engine", "simulate", "--requests", "50", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "inside warmup_ms (100)" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
    # just past the expected end of the warm-up: it runs, and whatever it measured is said
    r = _run("--engine", "simulate", "--requests", "90", "--out", str(tmp_path / "p"))
    measured = "no request was measured" not in r.stderr
    assert r.returncode == (0 if measured else 2), r.stderr


@pytest.mark.parametrize("script", ["run_testbed.py", "predict.py", "sweep.py"])
@pytest.mark.parametrize(("content", "cause"), [
    (b"\x00\x01\x02binary\xff", "not a text file (UTF-8)"),
    (("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(), "nested too deeply to read"),
    (("name: x\nnodes: " + "[" * 900 + "]" * 900 + "\n").encode(), "nested too deeply"),
])
def test_an_unreadable_scenario_file_is_one_line_from_every_command(
        tmp_path: Path, script: str, content: bytes, cause: str) -> None:
    """Every program's YAML comes through one reader (fogsdn.core.scenario_yaml)."""
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    args = ["--scenario", str(bad)] + ([] if script == "predict.py" else
                                       ["--out", str(tmp_path / "o")])
    if script == "run_testbed.py":
        args += ["--engine", "simulate"]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and cause in r.stderr, r.stderr[-2000:]
    assert str(bad) in r.stderr and not (tmp_path / "o").exists()


def test_a_missing_extra_is_one_line_when_set_up_was_skipped() -> None:
    """A script run with the venv's own python skips set-up's install: a module its
    extra brings is then named in one line (train_agent.py without torch), not an
    ImportError's traceback."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
            "import bootstrap\n"
            "bootstrap.require('json', 'rl')\n"  # there: nothing happens
            "bootstrap.require('fogsdn_no_such_module', 'rl')\n"
            "print('not reached')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "not reached" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "fogsdn_no_such_module is not installed" in lines[0]
    assert "'rl' extra" in lines[0] and "Traceback" not in r.stderr
