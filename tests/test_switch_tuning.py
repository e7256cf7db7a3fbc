"""The switch's per-run settings (fogsdn.live.switch_tuning): what is read back and restored."""

from __future__ import annotations

import pytest

from fogsdn.live import switch_tuning
from fogsdn.live.switch_tuning import SwitchTuning, _other_config_value


def test_other_config_values_are_read_from_vsctl_output() -> None:
    text = '{dpdk-init="false", max-idle="2000", n-handler-threads=1}\n'
    assert _other_config_value(text, "max-idle") == "2000"
    assert _other_config_value(text, "n-handler-threads") == "1"
    assert _other_config_value("{}\n", "max-idle") == ""


@pytest.mark.parametrize("before", ["{}", '{max-idle="2000"}', '{max-idle="100"}'])
def test_max_idle_is_set_for_the_run_and_given_back(monkeypatch: pytest.MonkeyPatch,
                                                    before: str) -> None:
    calls: list[tuple[str, ...]] = []

    def vsctl(*args: str) -> str | None:
        calls.append(args)
        return before if args[0] == "get" else ""

    monkeypatch.setattr(switch_tuning, "_vsctl", vsctl)
    monkeypatch.setattr(switch_tuning, "ovs_pid", lambda: None)  # no switch process here
    t = SwitchTuning()
    t.apply(realtime=True)
    assert calls[-1] == ("set", "Open_vSwitch", ".", "other_config:max-idle=100")
    assert not t.realtime
    t.restore()
    # 100 is this module's own value: a killed run's leftover, so the default comes back
    want = (("remove", "Open_vSwitch", ".", "other_config", "max-idle")
            if before in ("{}", '{max-idle="100"}')
            else ("set", "Open_vSwitch", ".", "other_config:max-idle=2000"))
    assert calls[-1] == want
    n = len(calls)
    t.restore()  # twice: nothing more
    assert len(calls) == n


def test_a_switch_that_cannot_be_read_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(switch_tuning, "_vsctl", lambda *a: calls.append(a) or None)
    monkeypatch.setattr(switch_tuning, "ovs_pid", lambda: None)
    t = SwitchTuning()
    t.apply(realtime=False)
    assert [c[0] for c in calls] == ["get"] and t.notes
    t.restore()
    assert [c[0] for c in calls] == ["get"]
