"""Emergency stop to torque off on the emulated real arm: how long after the key is every servo limp?

LeRobot's `SO101Follower` on the re-locking bus (what `harness run --robot so101` drives) over the
project's STS3215 emulator on a pseudo-terminal. A control thread runs the 30 Hz loop the engine
runs (read positions, write the start pose back, paced by `MonotonicClock`) through a
`GuardedRobot`; a second thread presses the stop at a random instant of the loop, as the TUI's key
does. Measured: from the press until the emulator has switched torque off on the last of the six
servos (the emulator timestamps the Torque_Enable write it served), and until `emergency_stop`
returns. Torque is switched back on and the loop restarted between presses.

Run: .venv/bin/python benchmarks/estop_bench.py [--presses 60]
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.app.parts import make_real_robot  # noqa: E402
from harness.bus import packets as p  # noqa: E402
from harness.emulator.pty_port import PtyBus  # noqa: E402
from harness.emulator.scenario import build_chain, default_scenario  # noqa: E402
from harness.emulator.servos import ServoChain  # noqa: E402
from harness.errors import EmergencyStopped  # noqa: E402
from harness.models.protocol import JOINT_NAMES, load_protocol  # noqa: E402
from harness.run.clock import MonotonicClock  # noqa: E402
from harness.run.safety import GuardedRobot  # noqa: E402

PERIOD = 1 / 30


class TorqueClock(ServoChain):
    """The emulated arm, noting when the last servo's torque went off."""

    def __init__(self, servos) -> None:
        super().__init__(servos, None)
        self.all_off_at: float | None = None

    def handle(self, packet: p.Packet, baud: int) -> bytes:
        reply = super().handle(packet, baud)
        if self.all_off_at is None and not any(s.torque_enabled for s in self.servos):
            self.all_off_at = time.perf_counter()
        return reply


def loop(guard: GuardedRobot, pose: dict[str, float], clock: MonotonicClock, stop: threading.Event) -> None:
    action = {f"{n}.pos": pose[n] for n in JOINT_NAMES}
    while not stop.is_set():
        t0 = clock.now()
        try:
            guard.get_observation()
            guard.send_action(action)
        except EmergencyStopped:
            return
        clock.sleep(t0 + PERIOD - clock.now())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    protocol = load_protocol(REPO / "tests" / "data" / "small.yaml")
    chain = TorqueClock(build_chain(default_scenario()).servos)
    to_off, to_return = [], []
    with PtyBus(chain) as bus:
        guarded = make_real_robot({"port": bus.port, "robot_id": "emulated_follower", "cameras": {}}, protocol)
        follower = guarded.robot
        try:
            for _ in range(args.presses):
                follower.bus.enable_torque()
                chain.all_off_at = None
                guard = GuardedRobot(follower, release=follower.release_torque)
                stop = threading.Event()
                control = threading.Thread(target=loop, args=(guard, protocol.start_pose, MonotonicClock(), stop))
                control.start()
                time.sleep(0.2 + rng.random() * PERIOD * 3)   # a random instant of the loop
                pressed = time.perf_counter()
                guard.emergency_stop()
                returned = time.perf_counter()
                stop.set()
                control.join()
                assert chain.all_off_at is not None, "torque still on after emergency_stop returned"
                to_off.append(1000 * (chain.all_off_at - pressed))
                to_return.append(1000 * (returned - pressed))
        finally:
            follower.disconnect()
    print(f"| emergency stop on the emulated arm ({args.presses} presses) | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|")
    for name, values in (("press -> last servo's torque off", to_off), ("press -> emergency_stop returns", to_return)):
        v = np.array(values)
        print(f"| {name} | {np.percentile(v, 50):.1f} | {np.percentile(v, 99):.1f} | {v.max():.1f} |")
    print(f"(one control period is {1000 * PERIOD:.1f} ms)")


if __name__ == "__main__":
    main()
