"""The same env over the live testbed (issue 9), registered as nondeterministic
(docs/learning.md, "The live env"). `runner` starts the run (default:
`fogsdn.live.queueing_run.run_emulation`); tests give a fake one.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from fogsdn.agents.env import RoutingEnvBase
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.scenario import PolicySpec, Scenario
from fogsdn.policies.observe import Obs
from fogsdn.policies.rl import goal

Runner = Callable[[Scenario, Path, threading.Event], Any]


def emulate(scenario: Scenario, out: Path, stop: threading.Event) -> Any:
    from fogsdn.live.queueing_run import run_emulation

    return run_emulation(scenario, out, stop, show_progress=False)


class LiveRoutingEnv(RoutingEnvBase):
    """Route weights per epoch over a live run (see the module doc)."""

    def __init__(self, scenario: Scenario, *, epoch_requests: int = 50, epochs: int = 20,
                 rt_weight: float | None = None, folder: Path | None = None,
                 step_timeout_s: float = 60.0, runner: Runner = emulate) -> None:
        super().__init__(scenario, epoch_requests, epochs, rt_weight)
        self.folder = folder or Path(tempfile.mkdtemp(prefix="fogsdn-live-env-"))
        self.step_timeout_s = step_timeout_s
        self.runner = runner
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._epoch = 0
        self._steps = 0
        self._runs = 0
        self.error: BaseException | None = None

    def live_scenario(self) -> Scenario:
        """The scenario the run uses: the exchange policy, long enough for the episode."""
        rate = self.scenario.workload.lambda_hp + self.scenario.workload.lambda_lp
        duration = self.scenario.warmup_ms + 2.0 * self.epoch_requests * (self.epochs + 2) / rate
        return self.scenario.model_copy(update={
            "duration_ms": duration,
            "policy": PolicySpec(name="rl_live", module="fogsdn.agents.live_policy", params={
                "exchange": str(self.folder), "epoch_requests": self.epoch_requests})})

    def _run(self, scenario: Scenario, out: Path) -> None:
        try:
            self.runner(scenario, out, self._stop)
        except BaseException as err:  # reported by the next step
            self.error = err

    def _wait(self) -> tuple[Obs, dict[str, float]]:
        deadline = time.monotonic() + self.step_timeout_s
        while time.monotonic() < deadline:
            try:
                got = json.loads((self.folder / "obs.json").read_text())
                if int(got["epoch"]) > self._epoch:
                    self._epoch = int(got["epoch"])
                    return np.asarray(got["obs"], dtype=np.float32), got["estimate"]
            except (OSError, ValueError, KeyError):
                pass
            if self.error is not None or (self._thread is not None and not self._thread.is_alive()):
                raise RuntimeError(f"the live run ended before epoch {self._epoch + 1}: "
                                   f"{self.error or 'no error'}")
            time.sleep(0.02)
        raise TimeoutError(f"no observation for epoch {self._epoch + 1} within "
                           f"{self.step_timeout_s} s")

    def _put(self, weights: npt.NDArray[np.float64]) -> None:
        write_json_atomic(self.folder / "action.json", {"weights": [float(w) for w in weights]})

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        self.close()
        self._stop = threading.Event()
        self.error, self._epoch, self._steps = None, 0, 0
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "obs.json").unlink(missing_ok=True)
        write_json_atomic(self.folder / "layout.json", self.layout.to_json())
        self._put(np.ones(len(self.layout.nodes)))
        sc = self.live_scenario()
        if seed is not None:
            sc = sc.model_copy(update={"seed": seed})
        self._runs += 1
        out = self.folder / f"run{self._runs}"
        self._thread = threading.Thread(target=self._run, args=(sc, out), daemon=True)
        self._thread.start()
        obs, _ = self._wait()
        return obs, {"run": str(out)}

    def step(self, action: npt.NDArray[np.float32]
             ) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if self._thread is None:
            raise RuntimeError("call reset() before step()")
        self._put(np.clip(np.asarray(action, dtype=np.float64).reshape(-1), 0.0, 1.0))
        obs, estimate = self._wait()
        self._steps += 1
        g = goal(self.rt_weight, float(estimate["response_ms"]), float(estimate["power_w"]),
                 self.layout)
        reward = 1.0 / g if g > 0 else 0.0
        return obs, reward, False, self._steps >= self.epochs, dict(estimate)

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=120)
            self._thread = None


def register_envs() -> None:
    """Both envs under gymnasium ids (idempotent)."""
    if "fogsdn/SimRouting-v0" not in gym.registry:
        gym.register(id="fogsdn/SimRouting-v0", entry_point="fogsdn.agents.env:SimRoutingEnv")
    if "fogsdn/LiveRouting-v0" not in gym.registry:
        gym.register(id="fogsdn/LiveRouting-v0",
                     entry_point="fogsdn.agents.live_env:LiveRoutingEnv",
                     nondeterministic=True)


register_envs()
