"""LeRobot's private bus API, pinned: the calls `harness/bus/lerobot_private.py` relies on exist in the
installed LeRobot with the parameters it passes, and no other module of the package touches them.

A LeRobot upgrade that renames or reshapes one fails `test_each_private_call_the_adapter_relies_on`
with the call's name, not a session on an arm."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import lerobot
import pytest
from lerobot.motors import Motor, MotorNormMode
from lerobot.motors import motors_bus as motors_bus_module
from lerobot.motors.feetech import FeetechMotorsBus
from lerobot.motors.feetech import feetech as feetech_module
from lerobot.robots.so_follower import SO101Follower

from harness.bus.lerobot_private import PINNED, Pinned

PACKAGE = Path(__file__).resolve().parents[3] / "harness"
ADAPTER = PACKAGE / "bus" / "lerobot_private.py"
# Where LeRobot's bus and follower are subclassed or driven (harness/sim has LeRobot `Robot`s of its own,
# whose underscored names are their own).
BUS_USERS = ("bus", "robots", "app")
OWNERS = {"FeetechMotorsBus": FeetechMotorsBus, "motors_bus": motors_bus_module, "feetech": feetech_module}


@pytest.fixture(scope="module")
def stock_bus() -> FeetechMotorsBus:
    """A bus as LeRobot constructs it (the port is not opened): where its instance attributes are set."""
    return FeetechMotorsBus("/dev/harness-no-such-port", {"gripper": Motor(6, "sts3215", MotorNormMode.RANGE_0_100)})


@pytest.mark.parametrize("pin", PINNED, ids=[f"{p.owner}.{p.name}" for p in PINNED])
def test_each_private_call_the_adapter_relies_on(pin: Pinned, stock_bus: FeetechMotorsBus) -> None:
    where = f"LeRobot {lerobot.__version__}: {pin.owner}.{pin.name} ({pin.why})"
    fix = "; harness/bus/lerobot_private.py relies on it: adapt it there"
    if pin.params is None:
        assert hasattr(stock_bus, pin.name), f"{where} is gone{fix}"
        return
    owner = OWNERS[pin.owner]
    target = getattr(owner, pin.name, None)
    assert callable(target), f"{where} is gone{fix}"
    found = tuple(inspect.signature(target).parameters)
    missing = [name for name in pin.params if name not in found]
    assert not missing, f"{where} no longer takes {missing}: its parameters are now {found}{fix}"


def test_the_pins_catch_a_renamed_parameter(monkeypatch) -> None:
    """The check above is not vacuous: a `_write` whose parameter was renamed is reported by name."""
    def renamed(self, address, length, motor_id, value, *, num_retry=0, raise_on_error=True):
        return 0, 0

    monkeypatch.setattr(FeetechMotorsBus, "_write", renamed)
    pin = next(p for p in PINNED if p.name == "_write")
    with pytest.raises(AssertionError, match=r"FeetechMotorsBus\._write .*no longer takes \['addr'\]"):
        test_each_private_call_the_adapter_relies_on(pin, FeetechMotorsBus.__new__(FeetechMotorsBus))


def _lerobot_private_names() -> set[str]:
    """Underscored names of the LeRobot classes the package subclasses or drives."""
    names = set()
    for cls in (FeetechMotorsBus, SO101Follower):
        names |= {n for n in dir(cls) if n.startswith("_") and not n.startswith("__")}
    return names


def test_only_the_adapter_touches_lerobots_private_names() -> None:
    private = _lerobot_private_names()
    module_level = {p.name for p in PINNED if p.owner != "FeetechMotorsBus"}
    assert {"_read", "_write", "_connect", "_handshake"} <= private
    offences = []
    for path in sorted(p for folder in BUS_USERS for p in (PACKAGE / folder).rglob("*.py")):
        if path == ADAPTER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in private:
                name = node.attr
            elif isinstance(node, ast.FunctionDef) and node.name in private:
                name = node.name
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lerobot"):
                name = next((a.name for a in node.names if a.name in module_level or a.name.startswith("_")), None)
            if name is not None:
                offences.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
    assert not offences, "LeRobot private names outside harness/bus/lerobot_private.py:\n" + "\n".join(offences)
