"""Hostile policy files against the loader and the checker (issue 40): generated modules
whose import, constructor, `routes` and `decide` raise any exception (messages with line
breaks, a `__str__` that raises), call `sys.exit`, return non-nodes, wrong types or NaN
weights, loop, sleep past the time limit or print. The checker either accepts the policy
or says why in one line naming the file (exit 1 with FAIL lines, or 2 when it cannot be
loaded); it never lets a traceback out and never hangs (seeded, bounded: hypothesis)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fogsdn.policies.check import main as check_main
from fogsdn.policies.watchdog import LIMIT_ENV

LIMIT_S = 0.5  # FOGSDN_POLICY_TIME_LIMIT_S while these run: a loop costs under a second

HEAD = '''import sys, time
from dataclasses import dataclass
from typing import ClassVar
from fogsdn.core.scenario import Role, TaskClass
from fogsdn.policies.base import ClusterView, Policy, RouteTable

class Odd(Exception):
    def __str__(self) -> str:
        raise RuntimeError("a __str__ that raises")

_calls = [0]

def _count() -> int:
    _calls[0] += 1
    return _calls[0]
'''

BODY = '''
@dataclass
class Hostile(Policy):
    name: ClassVar[str] = "hostile"
    proactive: ClassVar[bool] = {proactive}

    def __post_init__(self) -> None:
{build}
    def routes(self, view: ClusterView) -> RouteTable:
{routes}
        fn = view.up(Role.FN)[0].name
        return {table}
{decide}'''

DECIDE = '''
    def decide(self, view, request, rng):
{act}
        return {node}
'''

# what a hook does (a line or two of Python, indented by `_indent`)
ACTS = st.sampled_from([
    "pass",
    "print('noise from the policy')",
    "raise ValueError({msg})",
    "raise KeyError({msg})",
    "raise ZeroDivisionError({msg})",
    "raise RecursionError({msg})",
    "raise StopIteration({msg})",
    "raise Odd()",
    "raise BaseExceptionGroup('many', [GeneratorExit({msg})])",
    "raise GeneratorExit({msg})",
    "sys.exit({msg})",
    "sys.exit(3)",
    "sys.exit()",
    "while True:\n    pass",
    "time.sleep(30)",
])
MESSAGES = st.sampled_from(["'plain'", "'two\\nlines'", "''", "'\\r\\n\\n'", "None", "42"])
# when a hook acts: always, or only from its n-th call on (a fault the first asks miss)
WHEN = st.sampled_from(["", "if _count() > 3:\n", "if _count() > 40:\n", "if _count() > 900:\n"])
TABLES = st.sampled_from([
    "{TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}",
    "None", "42", "'fn'", "[]", "{}", "{TaskClass.HP: {}, TaskClass.LP: {}}",
    "{TaskClass.HP: {fn: float('nan')}, TaskClass.LP: {fn: 1.0}}",
    "{TaskClass.HP: {fn: float('inf')}, TaskClass.LP: {fn: 1.0}}",
    "{TaskClass.HP: {fn: -1.0}, TaskClass.LP: {fn: 1.0}}",
    "{TaskClass.HP: {fn: True}, TaskClass.LP: {fn: '1'}}",
    "{TaskClass.HP: {'nowhere': 1.0}, TaskClass.LP: {fn: 1.0}}",
    "{TaskClass.HP: {fn: 0.0}, TaskClass.LP: {fn: 1.0}}",
    "{'hp': {fn: 1.0}, 'lp': {fn: 1.0}}",
    "{TaskClass.HP: [fn], TaskClass.LP: {fn: 1.0}}",
])
NODES = st.sampled_from(["fn", "view.up(Role.FN)[0].name", "None", "42", "'nowhere'",
                         "float('nan')", "b'fn'", "view.nodes[0]", "['fn']"])


def _indent(code: str, depth: int) -> str:
    return "\n".join(" " * depth + line for line in code.splitlines()) + "\n"


@st.composite
def hook(draw: st.DrawFn) -> str:
    """One hook's code: an act, maybe only from some call on."""
    act = draw(ACTS).format(msg=draw(MESSAGES))
    when = draw(WHEN)
    return when + _indent(act, 4) if when else act


@st.composite
def policy_source(draw: st.DrawFn) -> str:
    at_import = draw(hook())
    per_request = draw(st.booleans())
    decide = DECIDE.format(act=_indent(draw(hook()), 8), node=draw(NODES)) if per_request else ""
    body = BODY.format(proactive=not per_request, build=_indent(draw(hook()), 8),
                       routes=_indent(draw(hook()), 8), table=draw(TABLES), decide=decide)
    return HEAD + at_import + "\n" + body


def _one_line_naming(text: str, path: Path) -> None:
    assert text.count("\n") == 1 and str(path) in text, text


def _verdict(out: str, err: str, code: int, path: Path) -> None:
    """What a user must be able to rely on from the checker's output."""
    assert "Traceback" not in out + err, out + err
    assert code in (0, 1, 2), (code, out, err)
    if code == 2:  # not loadable: one line on stderr naming the file
        _one_line_naming(err.split("noise from the policy\n")[-1], path)
        return
    report = [ln for ln in out.splitlines() if ln != "noise from the policy"]
    assert report[0] == ("FAIL: policy 'hostile'" if code else "ok: policy 'hostile'"), out
    for line in report:
        if "raised" in line or "did not return" in line:  # the user's code failed here
            assert str(path) in line, line


def _check(tmp: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp / f"p_{hashlib.sha1(text.encode()).hexdigest()[:12]}.py"
    path.write_text(text)
    capsys.readouterr()
    t0 = time.monotonic()
    code = check_main([str(path), "--views", "30"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    _verdict(out, err, code, path)
    # every stuck call is cut at the limit (plus a timer tick), and there are few of them
    assert took < 10 * LIMIT_S + 5, (took, text)
    return code, out, err


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LIMIT_ENV, str(LIMIT_S))


@seed(40)
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=policy_source())
def test_a_hostile_policy_is_accepted_or_named_in_one_line(
        text: str, tmp_path_factory: pytest.TempPathFactory, limit: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    tmp = tmp_path_factory.mktemp("hostile", numbered=True)
    assert ROOT not in tmp.parents
    _check(tmp, text, capsys)


# -- what the generated policies found, each kept by a plain test ---------------------------
def _source(build: str = "pass", routes: str = "pass", decide: str | None = None) -> str:
    body = BODY.format(
        proactive=decide is None, build=_indent(build, 8), routes=_indent(routes, 8),
        table="{TaskClass.HP: {fn: 1.0}, TaskClass.LP: {fn: 1.0}}",
        decide="" if decide is None else DECIDE.format(act=_indent(decide, 8),
                                                       node="view.up(Role.FN)[0].name"))
    return HEAD + "\n" + body


@pytest.mark.parametrize(("routes", "cause"), [
    # GeneratorExit is no Exception: it ended the checker with a traceback
    ("raise GeneratorExit('gone')", "routes raised GeneratorExit: gone (line 2"),
    # a message's line break broke the one line
    ("raise ValueError('two\\nlines')", "routes raised ValueError: two / lines (line 2"),
    # a __str__ that raises ended the checker with a traceback while it wrote the line
    ("raise Odd()", "routes raised Odd: (its message cannot be shown: RuntimeError)"),
])
def test_any_exception_from_routes_is_one_line(tmp_path: Path, routes: str, cause: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _check(tmp_path, _source(routes=routes), capsys)
    assert code == 1 and cause in out, out


def test_a_constructor_that_loops_is_stopped_and_named(
        tmp_path: Path, limit: None, capsys: pytest.CaptureFixture[str]) -> None:
    """The policy was built outside the time limit: a loop in __post_init__ hung the
    checker (and the simulator) for ever."""
    code, _, err = _check(tmp_path, _source(build="while True:\n    pass"), capsys)
    assert code == 2 and f"building it did not return within {LIMIT_S:g} s" in err, err


def test_decide_looping_when_asked_again_is_stopped(
        tmp_path: Path, limit: None, capsys: pytest.CaptureFixture[str]) -> None:
    """The checker's second `decide` (the reproducibility check) ran unwatched: a policy
    that looped there hung it for ever."""
    code, out, _ = _check(tmp_path, _source(decide="if _count() > 1:\n    while True:\n"
                                                   "        pass"), capsys)
    assert code == 1 and "decide raised PolicyTimeout" in out, out


def test_decide_failing_only_after_many_calls_fails_the_check(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fault met only by the timing calls was skipped: the checker said ok."""
    code, out, _ = _check(tmp_path, _source(decide="if _count() > 900:\n    raise "
                                                   "KeyError('late')"), capsys)
    assert code == 1 and "decide raised KeyError: 'late'" in out, out


def test_the_watchdog_puts_a_callers_timer_back() -> None:
    """`make_policy` now arms the watchdog; it used to cancel the deadline a caller had
    set (the runner's timing of `decide`), which then never fired."""
    import signal

    from fogsdn.policies.watchdog import watchdog

    fired: list[int] = []
    was = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with watchdog():
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 0.3
        time.sleep(0.5)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, was)
