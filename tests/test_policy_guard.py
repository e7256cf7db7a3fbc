"""The live controller's guard around a policy (fogsdn.controller.policy_guard): a failing call
is reported once and the safe answer stands in; a working policy passes through."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import networkx as nx
from conftest import scenario_dict

from fogsdn.controller.policy_guard import GuardedPolicy
from fogsdn.core.scenario import TaskClass, parse_scenario
from fogsdn.policies import ClusterView, Policy, Request, RouteTable, initial_view

VIEW = initial_view(parse_scenario(scenario_dict()))  # fn and ofn1, both up
SAFE = {TaskClass.HP: {"fn": 1.0}, TaskClass.LP: {"fn": 1.0}}


@dataclass
class ToOfn(Policy):
    name: ClassVar[str] = "to_ofn"

    def routes(self, view: ClusterView) -> RouteTable:
        return {TaskClass.HP: {"ofn1": 1.0}, TaskClass.LP: {"ofn1": 1.0}}

    def paths(self, graph: Any) -> dict[tuple[str, str], list[str]]:
        return {("c1", "ofn1"): ["s1", "s2"]}


@dataclass
class Broken(Policy):
    name: ClassVar[str] = "broken"
    answer: object = None  # what routes and decide return; None: they raise

    def routes(self, view: ClusterView) -> RouteTable:
        if self.answer is None:
            raise RuntimeError("no table today")
        return self.answer  # type: ignore[return-value]

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if self.answer is None:
            raise IndexError("no node today")
        return str(self.answer)

    def paths(self, graph: Any) -> dict[tuple[str, str], tuple[str, ...]]:
        raise KeyError("no paths today")


def _guard(policy: Policy) -> tuple[GuardedPolicy, list[tuple[str, str]]]:
    heard: list[tuple[str, str]] = []
    return GuardedPolicy(policy, random.Random(1), lambda c, e: heard.append((c, e))), heard


def test_a_working_policy_passes_through_unreported() -> None:
    guard, heard = _guard(ToOfn())
    assert guard.routes(VIEW) == {TaskClass.HP: {"ofn1": 1.0}, TaskClass.LP: {"ofn1": 1.0}}
    assert guard.decide(VIEW, Request(TaskClass.LP, "c1")) == "ofn1"
    assert guard.paths(nx.Graph()) == {("c1", "ofn1"): ("s1", "s2")}  # made tuples
    assert heard == []


def test_a_raising_policy_falls_back_to_the_fns_and_is_reported_per_call() -> None:
    guard, heard = _guard(Broken())
    assert guard.routes(VIEW) == SAFE
    assert guard.decide(VIEW, Request(TaskClass.HP, "c1")) == "fn"
    assert guard.paths(nx.Graph()) == {}
    assert [c for c, _ in heard] == ["routes", "decide", "paths"]
    assert "policy 'broken': routes raised RuntimeError: no table today" in heard[0][1]
    assert "decide raised IndexError: no node today" in heard[1][1]
    assert "paths raised KeyError" in heard[2][1]


def test_a_bad_table_or_an_unknown_node_is_a_failure_too() -> None:
    guard, heard = _guard(Broken(answer={TaskClass.HP: {"ghost": 1.0}}))
    assert guard.routes(VIEW) == SAFE
    assert heard == [("routes", "policy 'broken': routes: class hp: unknown node 'ghost'")]
    guard, heard = _guard(Broken(answer="ghost"))
    assert guard.decide(VIEW, Request(TaskClass.LP, "c1")) == "fn"
    assert heard[0][0] == "decide" and "chose 'ghost', not a node of the cluster" in heard[0][1]


@dataclass
class Loops(Policy):
    """Its `decide` loops for ever after `good` answers (a user's bug)."""

    name: ClassVar[str] = "loops"
    good: int = 1

    def routes(self, view: ClusterView) -> RouteTable:
        return SAFE

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        if self.good > 0:
            self.good -= 1
            return "ofn1"
        while True:
            pass


def test_a_looping_decide_on_the_controllers_thread_is_stopped_and_not_asked_again(
) -> None:
    """On a thread that is not the main one (as the controller's event thread), a call
    past the limit is stopped, said once naming the call, and the safe answer stands in
    from then on without asking the policy again."""
    from fogsdn.policies.watchdog import ThreadWatchdog

    heard: list[tuple[str, str]] = []
    dog = ThreadWatchdog(limit=0.5)
    guard = GuardedPolicy(Loops(), random.Random(1), lambda c, e: heard.append((c, e)), dog)
    answers: list[str] = []

    def controller_thread() -> None:
        for _ in range(4):
            answers.append(guard.decide(VIEW, Request(TaskClass.LP, "c1")))

    t = threading.Thread(target=controller_thread)
    began = time.monotonic()
    t.start()
    t.join(20)
    assert not t.is_alive(), "the loop was not stopped"
    assert answers == ["ofn1", "fn", "fn", "fn"]
    assert time.monotonic() - began < 5  # one limit, not one per call
    assert dog.timed_out == ["decide"]
    [(call, line)] = heard
    assert call == "decide" and "did not return within 0.5 s" in line
    assert "not asked again" in line and "FOGSDN_POLICY_TIME_LIMIT_S" in line
