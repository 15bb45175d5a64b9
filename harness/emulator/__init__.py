"""The emulated desk: STS3215 servos byte for byte on a serial port, the arm they drive in the simulator, a
person's hands on it, and the process `harness rehearse` runs it in (docs/emulator.md).

It sits above `bus` (whose framing it answers in) and `sim` (whose world its `--sim` servos move); nothing below
`app` imports it, so a real arm's bus never loads MuJoCo.
"""
