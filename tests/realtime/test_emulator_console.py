"""The `harness emulate-bus` console says what it does: a hand's motion answers when it starts and prints a
`done:` line when it has finished, `status` shows one under way, and a command that would do nothing is one
`error:` line, never a silent `ok`. The console runs as it does at the desk, on a served bus whose thread moves
the hand, with its input and output in the test's hands."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import pytest

from harness.bus import packets as p
from harness.emulator.scenario import SO101_NAMES, console, default_scenario, open_rig

# wall-timed, and passes beside the parallel pass's load (tests/realtime/conftest.py)
pytestmark = pytest.mark.shares_cores


class Screen:
    """What the console prints, line by line, with a deadline on each wait."""

    def __init__(self) -> None:
        self.text = ""
        self._cond = threading.Condition()
        self._seen = 0

    def write(self, text: str) -> int:
        with self._cond:
            self.text += text
            self._cond.notify_all()
        return len(text)

    def flush(self) -> None:
        return None

    def after(self, text: str, timeout_s: float = 20.0) -> str:
        """The line holding the next `text` after the last one found (whole lines only)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                at = self.text.find(text, self._seen)
                end = self.text.find("\n", at) if at >= 0 else -1
                if end >= 0:
                    self._seen = end + 1
                    return self.text[self.text.rfind("\n", 0, at) + 1:end]
                left = deadline - time.monotonic()
                assert left > 0, f"never printed {text!r}; printed:\n{self.text}"
                self._cond.wait(left)

    def answer(self, text: str) -> list[str]:
        """Every whole line printed since the last one found, once `text` has been printed (an answer's end)."""
        start = self._seen
        self.after(text)
        return self.text[start:self._seen].splitlines()


@pytest.fixture()
def desk() -> Iterator[tuple[object, queue.Queue, Screen]]:
    """A served emulated arm (no simulator: the hand moves the shafts) with its console running."""
    with open_rig(default_scenario()) as rig:
        typed: queue.Queue[str | None] = queue.Queue()
        screen = Screen()

        def lines() -> Iterator[str]:
            while (line := typed.get()) is not None:
                yield line + "\n"

        thread = threading.Thread(target=console, args=(rig.chain, rig.lock, rig.port, lines()),
                                  kwargs={"out": screen}, daemon=True)
        thread.start()
        screen.after("quit")                              # the help text ends the greeting
        yield rig, typed, screen
        typed.put("quit")
        thread.join(timeout=10)
        assert not thread.is_alive()


def _type(desk, line: str, until: str) -> list[str]:
    _, typed, screen = desk
    typed.put(line)
    return screen.answer(until)


def _joint_deg(rig, name: str) -> float:
    with rig.lock:
        return (rig.chain.servo(name).position - 2048) * 360 / 4096


def test_move_says_it_started_then_prints_a_line_when_the_hand_is_done(desk) -> None:
    rig, _, screen = desk
    started = _type(desk, "move elbow_flex 30", "under way")
    assert started == ["move elbow_flex to +30.0 deg: under way (about 0 s); a `done:` line follows when the hand "
                       "has finished"]
    done = screen.after("done:")
    assert done.startswith("done: move elbow_flex to +30.0 deg (")
    assert _joint_deg(rig, "elbow_flex") == pytest.approx(30.0, abs=0.5)   # printed once it was true
    status = _type(desk, "status", "hand:")
    assert status[-1] == "  hand: still, holding elbow_flex +30.0 deg"


def test_status_shows_a_sweep_under_way_and_release_says_what_it_stopped(desk) -> None:
    _, _, screen = desk
    started = _type(desk, "sweep 20 gripper wrist_flex", "under way")  # about 30 s at 20 deg/s
    assert started[0].startswith("sweep of gripper, wrist_flex at 20 deg/s: under way (about ")
    status = _type(desk, "status", "hand:")
    assert len(status) == len(SO101_NAMES) + 1
    assert status[-1].startswith("  hand: moving gripper to -7.0 deg (sweep of gripper, wrist_flex at 20 deg/s), "
                                 "5 more motions queued; about "), status[-1]
    released = _type(desk, "release", "released")
    assert released == ["released every joint; stopped before done: sweep of gripper, wrist_flex at 20 deg/s"]
    assert _type(desk, "status", "hand:")[-1] == "  hand: still, holding nothing"
    typed_after = _type(desk, "health", "wrist_flex")        # nothing finished: no done line came
    assert "\ndone:" not in screen.text, typed_after


@pytest.mark.slow
def test_a_sweep_reports_done_once_every_joint_went_through_its_range(desk) -> None:
    rig, _, screen = desk
    seen = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(_joint_deg(rig, "gripper"))
            time.sleep(0.01)   # behaviour: an observer sampling the joint at 100 Hz, not a wait

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _type(desk, "sweep 360 gripper", "under way")
    done = screen.after("done: sweep of gripper at 360 deg/s", timeout_s=30)
    stop.set()
    watcher.join()
    assert min(seen) < -5.0 and max(seen) > 95.0, (min(seen), max(seen))   # both ends before `done`
    assert _joint_deg(rig, "gripper") == pytest.approx(45.0, abs=0.5), done    # and back at the middle


@pytest.mark.parametrize(("line", "error"), [
    ("unplug", "error: usage: unplug NAME..."),
    ("plug", "error: usage: plug NAME..."),
    ("only", "error: usage: only NAME... (to unplug every servo, `unplug` them by name)"),
    ("unplug wrist", "error: no servo named 'wrist' (servos: shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, "
                     "wrist_roll, gripper)"),
    ("plug gripper", "error: gripper is already plugged in"),
    ("release", "error: the hand holds nothing: nothing to let go"),
    ("release gripper", "error: the hand holds none of gripper: nothing to let go"),
    ("move elbow 10", "error: no joint named 'elbow' (joints: shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, "
                      "wrist_roll, gripper)"),
    ("move elbow_flex", "error: usage: move NAME DEG"),
    ("sweep 0", "error: DEG_PER_S must be above 0, got 0"),
    ("frobnicate", "error: no command 'frobnicate'"),
])
def test_a_command_that_would_do_nothing_is_an_error_line(desk, line: str, error: str) -> None:
    rig, _, _ = desk
    with rig.lock:
        before = ([s.current_id for s in rig.chain.servos], set(rig.chain.connected))
    answer = _type(desk, line, "error:")
    assert answer[0] == error
    with rig.lock:
        assert ([s.current_id for s in rig.chain.servos], set(rig.chain.connected)) == before


def test_unplug_twice_is_an_error_the_second_time(desk) -> None:
    rig, _, _ = desk
    status = _type(desk, "unplug gripper", "hand:")
    assert [line.split()[-1] for line in status[:-1]] == ["plugged"] * 5 + ["unplugged"]
    assert _type(desk, "unplug gripper", "error:") == ["error: gripper is already unplugged"]
    status = _type(desk, "plug gripper wrist_roll", "hand:")   # one of them was out: it is plugged back
    assert "gripper" in rig.chain.connected and status[-2].endswith(" plugged")


def test_a_hand_cannot_move_a_joint_whose_servo_holds_it(desk) -> None:
    rig, _, _ = desk
    with rig.lock:
        rig.chain.servo("elbow_flex").ram[p.ADDR_TORQUE_ENABLE] = 1
    assert _type(desk, "move elbow_flex 30", "error:")[0].startswith(
        "error: torque is on for elbow_flex: the servo holds it and a hand cannot move it")
    assert _type(desk, "sweep", "error:")[0].startswith("error: torque is on for elbow_flex")
    assert not rig.chain.hand.busy
